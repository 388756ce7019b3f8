"""The fake agent in a real PTY: its side file tells the truth, and its screens look like Claude's."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from panewatch_lab import fake_agent
from panewatch_lab.pty_session import PtySession

WORDING = tomllib.loads(fake_agent.WORDING.read_text())
ROWS, COLS = 30, 100
#: Dialog headers as written: the second word is placed by CSI n G, like every other.
PROMPT_HEADER = re.compile(rb"(Bash|Create|Edit)\x1b\[\d+G(command|file)")


def plan(
    seed: int, n: int, speed: float, prompt_prob: float = 1.0, question_prob: float = 0.3
) -> list[fake_agent.Turn]:
    rng = random.Random(seed)
    return [fake_agent.plan_turn(rng, WORDING, speed, prompt_prob, question_prob) for _ in range(n)]


def seed_where(predicate: Any, speed: float, prompt_prob: float = 1.0) -> int:
    """The first seed whose first turn satisfies ``predicate`` (the plan is deterministic)."""
    return next(s for s in range(500) if predicate(plan(s, 1, speed, prompt_prob)[0]))


class Agent:
    def __init__(self, session: PtySession, state_file: Path) -> None:
        self.s, self.state_file = session, state_file

    def states(self) -> list[dict[str, Any]]:
        if not self.state_file.exists():
            return []
        return [json.loads(line) for line in self.state_file.read_text().splitlines()]

    def wait_state(self, state: str, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``state`` has been entered ``count`` times in total."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(1 for r in self.states() if r["state"] == state) >= count:
                return
            time.sleep(0.01)
        raise AssertionError(f"never reached {state!r} x{count}: {[r['state'] for r in self.states()]}")


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    sessions: list[PtySession] = []

    def _start(seed: int, speed: float = 20.0, prompt_prob: float = 1.0, question_prob: float = 0.3) -> Agent:
        state_file = tmp_path / f"state-{seed}-{len(sessions)}.jsonl"
        argv = [
            sys.executable,
            "-m",
            "panewatch_lab.fake_agent",
            "--seed",
            str(seed),
            "--speed",
            str(speed),
            "--prompt-prob",
            str(prompt_prob),
            "--question-prob",
            str(question_prob),
            "--state-file",
            str(state_file),
        ]
        session = PtySession(argv, cwd=str(tmp_path), rows=ROWS, cols=COLS).start()
        sessions.append(session)
        agent = Agent(session, state_file)
        agent.wait_state("idle")
        assert session.wait_for("? for shortcuts", 5)
        return agent

    yield _start
    for session in sessions:
        session.close()


def squash(text: str) -> str:
    """Text without whitespace, so a sentence matches however the screen wrapped it."""
    return re.sub(r"\s+", "", text)


def prompt_bytes(raw: bytes) -> bytes:
    """The bytes of the last permission dialog drawn in ``raw``: header through footer."""
    headers = list(PROMPT_HEADER.finditer(raw))
    assert headers, "no dialog header in output"
    start = headers[-1].start()
    end = raw.find(b"amend", start)
    assert end > start
    return raw[start : end + len(b"amend")]


@pytest.mark.integration
def test_idle_screen_process_name_and_read_blocking(start: Any) -> None:
    agent = start(seed=1)
    lines = agent.s.text().split("\n")
    rule = "─" * COLS
    footer = next(i for i, line in enumerate(lines) if "? for shortcuts" in line)
    assert lines[footer - 3] == rule and lines[footer - 2] == "❯" and lines[footer - 1] == rule
    assert Path(f"/proc/{agent.s.pid}/comm").read_text().strip() == "fake-agent"
    # idle means blocked in read(2) on the terminal, not sleeping between frames
    deadline = time.monotonic() + 3
    while Path(f"/proc/{agent.s.pid}/syscall").read_text().split()[0] != "0":
        assert time.monotonic() < deadline, "agent is not blocked in read()"
        time.sleep(0.01)
    assert agent.states()[0]["state"] == "idle"


@pytest.mark.integration
def test_states_in_the_side_file_follow_the_seeded_plan(start: Any) -> None:
    seed, speed, turns = 5, 20.0, 3
    expected_plan = plan(seed, turns, speed, question_prob=0.5)
    assert sum(st.asks for t in expected_plan for st in t.steps) >= 2, "pick a seed with prompts"
    agent = start(seed=seed, speed=speed, question_prob=0.5)
    expected = ["idle"]
    blocked = 0
    for n, turn in enumerate(expected_plan):
        agent.s.send(f"task number {n}\r")
        expected.append("working")
        for step in turn.steps:
            if step.asks:
                blocked += 1
                agent.wait_state("blocked", blocked)
                assert agent.s.wait_for("Do you want to", 5)
                agent.s.send("1\r")
                expected += ["blocked", "working"]
        agent.wait_state("idle", n + 2)  # the first idle came before any turn
        expected.append("idle")
        # the side file is written right after the screen; let the reader catch up
        reply = squash(turn.reply)
        assert agent.s.wait_for(lambda t, reply=reply: reply in squash(t) and "? for shortcuts" in t, 2)
        text = agent.s.text()
        assert f"❯ task number {n}" in text and "Do you want to" not in text
        # earlier turns' questions may still be on screen (the seed's point): look at this turn only
        this_turn = text[text.rindex(f"❯ task number {n}") :]
        asked = squash("Would you like me to add a regression test?") in squash(this_turn)
        assert asked == turn.asks_follow_up
    records = agent.states()
    assert [r["state"] for r in records] == expected
    assert [r["mono"] for r in records] == sorted(r["mono"] for r in records)
    assert all(abs(r["wall"] - time.time()) < 60 for r in records)


@pytest.mark.integration
def test_prompt_has_no_line_feeds_and_places_words_with_cha(start: Any) -> None:
    speed = 20.0
    seed = seed_where(lambda t: t.steps[0].asks and t.steps[0].tool["name"] == "Bash", speed)
    agent = start(seed=seed, speed=speed)
    mark = agent.s.mark()
    agent.s.send("go\r")
    agent.wait_state("blocked")
    assert agent.s.wait_for("Esc to cancel · Tab to amend", 5)
    raw = prompt_bytes(agent.s.output(mark))
    assert b"\n" not in raw
    assert re.search(rb"Do\x1b\[\d+Gyou\x1b\[\d+Gwant\x1b\[\d+Gto\x1b\[\d+Gproceed\?", raw)
    assert b"\r\x1b[1B" in raw  # rows are stepped with CR + cursor down
    text = agent.s.text()
    tool = plan(seed, 1, speed)[0].steps[0].tool
    for expected in ("Bash command", tool["command"], "Do you want to proceed?", "❯ 1. Yes", "4. No"):
        assert expected in text


@pytest.mark.integration
def test_answering_erases_the_prompt_ink_style(start: Any) -> None:
    speed = 20.0
    seed = seed_where(lambda t: t.steps[0].asks, speed)
    agent = start(seed=seed, speed=speed)
    agent.s.send("go\r")
    agent.wait_state("blocked")
    assert agent.s.wait_for("Do you want to", 5)
    rows_before = sum(1 for line in agent.s.text().split("\n") if line)
    mark = agent.s.mark()
    agent.s.send("\r")  # Enter takes the highlighted option, "Yes"
    agent.wait_state("working", 2)
    assert agent.s.wait_for(lambda t: "Do you want to" not in t, 2)
    after = agent.s.output(mark)
    assert re.match(rb"\r\x1b\[\d+A\x1b\[J", after), after[:40]
    up = int(re.match(rb"\r\x1b\[(\d+)A", after).group(1))
    assert up >= 9 and rows_before > up


@pytest.mark.integration
def test_declining_ends_the_turn_and_goes_idle(start: Any) -> None:
    speed = 20.0
    seed = seed_where(lambda t: t.steps[0].asks and len(t.steps) > 1, speed)
    agent = start(seed=seed, speed=speed)
    agent.s.send("go\r")
    agent.wait_state("blocked")
    options = len(WORDING["prompts"][plan(seed, 1, speed)[0].steps[0].tool["name"]]["options"])
    agent.s.send(f"{options}\r")  # the last option is always "No"
    agent.wait_state("idle", 2)
    assert [r["state"] for r in agent.states()] == ["idle", "working", "blocked", "idle"]
    assert agent.s.wait_for("Interrupted · What should Claude do instead?", 2)


@pytest.mark.integration
def test_keys_typed_before_the_prompt_are_dropped(start: Any) -> None:
    speed = 4.0  # thinks for at least 125 ms before the first tool call
    seed = seed_where(lambda t: t.steps[0].asks, speed)
    agent = start(seed=seed, speed=speed)
    agent.s.send("go\r")
    agent.wait_state("working")
    agent.s.send("1\r")  # typed ahead, while the agent is still thinking
    agent.wait_state("blocked")
    time.sleep(0.2)
    assert agent.states()[-1]["state"] == "blocked"
    agent.s.send("1\r")
    agent.wait_state("working", 2)


@pytest.mark.integration
def test_spinner_is_redrawn_in_place_at_ten_hertz(start: Any) -> None:
    speed = 1.0
    seed = seed_where(lambda t: 0.8 <= t.think_seconds <= 1.5, speed)
    think = plan(seed, 1, speed)[0].think_seconds
    agent = start(seed=seed, speed=speed)
    mark = agent.s.mark()
    agent.s.send("go\r")
    agent.wait_state("working")
    time.sleep(think * 0.8)
    # spinner rows only: the footer under the input box says "esc to interrupt" too
    frames = [f for f in agent.s.output(mark).split(b"\r") if b"tokens \xc2\xb7 esc to interrupt" in f]
    assert b"\n" not in b"".join(frames)
    rate = len(frames) / (think * 0.8)
    assert 6 <= rate <= 13, rate
    sizes = sorted(len(f) for f in frames)
    assert 50 <= sizes[len(sizes) // 2] <= 75, sizes


@pytest.mark.integration
def test_same_seed_same_plan_from_the_command_line() -> None:
    def run(seed: int) -> str:
        argv = [sys.executable, "-m", "panewatch_lab.fake_agent", "--seed", str(seed), "--plan", "5"]
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30)
        return out.stdout

    first, again, other = run(11), run(11), run(12)
    assert first == again and first != other
    turns = [json.loads(line) for line in first.splitlines()]
    assert len(turns) == 5 and all(1 <= len(t["steps"]) <= 3 for t in turns)


@pytest.mark.unit
def test_place_words_wraps_and_never_writes_spaces_between_words() -> None:
    rows = fake_agent.place_words("Yes, and always allow access to /tmp/x from this project", 7, 30)
    assert len(rows) == 3
    assert all(" " not in row for row in rows)
    assert rows[0].startswith("Yes,\x1b[12Gand")
