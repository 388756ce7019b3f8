"""The real Claude Code CLI against the lab's mock API, in a real PTY: one task per dialog."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from claude_support import API_KEY, CLAUDE, NEEDS_CLAUDE, mock_api
from panewatch_lab.claude_env import claude_argv, prepare_home
from panewatch_lab.pty_session import PtySession

pytestmark = [pytest.mark.live, NEEDS_CLAUDE]

IDLE = "? for shortcuts"
#: Keys sent within ~150 ms of a dialog's first bytes are dropped by 2.1.332 (notes/lab.md).
DIALOG_SETTLE = 0.5


@dataclass
class Lab:
    session: PtySession
    project: Path
    log: Path

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def steps(self) -> list[str]:
        return [r["step"] for r in self.records() if r["event"] == "request" and r["path"] == "/v1/messages"]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    log = tmp_path / "mock.jsonl"
    with mock_api("basic", log) as url:
        project = tmp_path / "project"
        env = prepare_home(tmp_path / "home", project, API_KEY, url)
        assert CLAUDE is not None
        session = PtySession(claude_argv(CLAUDE), env=env, cwd=str(project), rows=40, cols=120).start()
        try:
            assert session.wait_for(IDLE, 30), f"CLI never reached its prompt:\n{session.text()}"
            yield Lab(session, project, log)
        finally:
            session.close()


def test_bash_permission_prompt_answered_then_idle(lab: Lab) -> None:
    s = lab.session
    mark = s.mark()
    s.send("task:bash\r")
    assert s.wait_for("Do you want to proceed?", 20), s.text()
    assert s.wait_for("Esc to cancel · Tab to amend", 5), s.text()
    text = s.text()
    for expected in ("Bash command", "touch x.txt", "❯ 1. Yes", "No"):
        assert expected in text
    assert IDLE not in text and not (lab.project / "x.txt").exists()
    prompt = s.output(mark)
    start = prompt.rfind(b"Bash command")
    assert start >= 0 and b"\n" not in prompt[start:], "the dialog is drawn with cursor moves only"
    assert b"\x1b[?2026h" in prompt, "synchronized output, since the screen answered DECRQM 2026"

    time.sleep(DIALOG_SETTLE)
    s.send("1")
    assert s.wait_for(lambda t: "Done: x.txt now exists." in t and IDLE in t, 20), s.text()
    assert "Do you want to proceed?" not in s.text()
    assert (lab.project / "x.txt").exists()
    assert lab.steps() == ["bash", "bash-done"]
    replies = [r for r in lab.records() if r["event"] == "reply"]
    assert [r["status"] for r in replies] == ["complete", "complete"]
    assert replies[1]["stop_reason"] == "end_turn"


@pytest.mark.parametrize(
    ("task", "dialog", "answer", "done", "steps"),
    [
        (
            "task:write",
            ["Create file", "Do you want to create notes.txt?"],
            "1",
            "Wrote notes.txt.",
            ["write", "write-done"],
        ),
        (
            "task:edit",
            ["Edit file", "Do you want to make this edit to edit-me.txt?"],
            "1",
            "Edited edit-me.txt.",
            ["edit-read", "edit", "edit-done"],
        ),
        (
            "task:ask",
            ["Which fruit should I use?", "Enter to select · ↑/↓ to navigate · Esc to cancel"],
            "1",
            "Thanks, noted your choice.",
            ["ask", "ask-done"],
        ),
        # "2. Yes, manually approve edits" keeps the session in default mode ("1" switches to auto)
        (
            "task:plan",
            ["Ready to code?", "Would you like to proceed?"],
            "2",
            "Plan approved; I would start now.",
            ["plan-enter", "plan-write", "plan", "plan-done"],
        ),
    ],
)
def test_other_dialogs_block_until_answered(
    lab: Lab, task: str, dialog: list[str], answer: str, done: str, steps: list[str]
) -> None:
    (lab.project / "edit-me.txt").write_text("hello world\n")
    s = lab.session
    s.send(task + "\r")
    assert s.wait_for(lambda t: all(d in t for d in dialog), 20), s.text()
    assert IDLE not in s.text()
    time.sleep(DIALOG_SETTLE)
    assert all(d in s.text() for d in dialog), "the dialog must stay until answered"
    s.send(answer)
    assert s.wait_for(lambda t: done in t and IDLE in t, 20), s.text()
    assert not any(d in s.text() for d in dialog[1:])
    assert [step for step in lab.steps() if not step.startswith("side")] == steps


def wait_steps(lab: Lab, n: int, timeout: float = 15.0) -> list[str]:
    """The mock's steps once there are ``n`` (or what there is when ``timeout`` runs out)."""
    deadline = time.monotonic() + timeout
    while len(steps := lab.steps()) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return steps


def test_text_and_enter_in_one_read_submits_once_the_cli_has_settled(lab: Lab) -> None:
    """What one write of text and CR does to 2.1.332 depends on when it comes: right after its
    prompt first appears it may take it for a paste and keep the CR as a newline (12 of 14 runs
    at load), once it has been quiet for a second it submits it (17 of 17; notes/lab.md). This
    test pins the settled behaviour, and the API's way, which holds either way: bracketed paste,
    then Enter on its own."""
    s = lab.session
    assert s.wait_quiet(1.0, 20), "the CLI kept drawing after its prompt"
    s.send("task:hello " + "x" * 19 + "\r")  # 30 characters + CR in one write
    assert wait_steps(lab, 1) == ["hello"], s.text()
    assert s.wait_for(lambda t: "Hello from the mock API" in t and IDLE in t, 10), s.text()
    assert s.wait_quiet(1.0, 20)
    s.send("\x1b[200~task:hello " + "x" * 19 + "\x1b[201~")
    time.sleep(0.08)
    s.send("\r")
    assert wait_steps(lab, 2) == ["hello", "hello"], s.text()
