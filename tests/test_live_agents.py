"""The real Codex, Gemini and Aider CLIs through the whole service, driven only through the API.

Each CLI is launched by ``POST /api/sessions`` against its lab mock (real uvicorn on another
loopback port), in sweep mode at 32x120 and in change mode at 24x80. The mock's JSON-lines log
is the ground truth: the test asserts what the service said against what the model was doing.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_lab_support import lab_or_skip
from live import Live, live_server
from panewatch_lab.agent_labs import AgentLab
from panewatch_lab.agent_scenario import last_turn
from panewatch_lab.loopback import LoopbackServer

pytestmark = pytest.mark.live


#: What each agent's idle screen shows once it is ready, the rule that must say idle, and how
#: a confirmed /answer approves its command prompt.
AGENTS: dict[str, dict[str, Any]] = {
    "gemini": {
        "ready": "Type your message",
        "idle_rule": "input_box",
        "answer": {"keys": "\r"},
        "asked": "Allow execution of",
    },
    "codex": {
        "ready": "Ask Codex to do anything",
        "idle_rule": "composer",
        "answer": {"keys": "y"},
        "asked": "Would you like to run",
    },
    "aider": {"ready": "^diff>", "idle_rule": "input_prompt", "answer": {"keys": "y\r"}, "asked": "Run shell command?"},
}
#: (mode, rows, cols): the issue's "in sweep and change mode; at two sizes".
RUNS = [("sweep", 32, 120), ("change", 24, 80)]
#: Sends per agent in the soak. The ways an Enter got lost (a fast Enter after a paste turned into
#: a newline; an Enter before the CLI re-rendered the typed text) were measured at 1 in 10 and 4 in
#: 6 (notes/agents-lab.md): 60 sends catch a 1-in-10 loss with a chance of 99.8 %, in a third of
#: the 200-send soak's time (~85 s per agent, the suite's longest tests). Before moving a CLI's
#: pin, run the long soak: PANEWATCH_LIVE_SENDS=200.
SENDS = int(os.environ.get("PANEWATCH_LIVE_SENDS", "60"))


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "project").mkdir()
    yield tmp_path


class Decisions:
    """The session's (state, source, rule) polled every 20 ms, with the screen's rows each time."""

    def __init__(self, live: Live, sid: str) -> None:
        self.seen: list[tuple[float, str, str, str | None]] = []
        self._task = asyncio.ensure_future(self._poll(live, sid))

    async def _poll(self, live: Live, sid: str) -> None:
        while True:
            info = (await live.http.get(f"/api/sessions/{sid}")).json()
            decision = (info["state"], info["source"], info["rule"])
            if not self.seen or self.seen[-1][1:] != decision:
                self.seen.append((time.monotonic(), *decision))
            await asyncio.sleep(0.02)

    async def reached(self, state: str, sources: set[str], start: int, timeout: float) -> int:
        """The index of the first decision from ``start`` on that is ``state`` by one of ``sources``."""
        deadline = time.monotonic() + timeout
        while True:
            for i in range(start, len(self.seen)):
                if self.seen[i][1] == state and self.seen[i][2] in sources:
                    return i
            assert time.monotonic() < deadline, f"never {state} by {sorted(sources)}: {self.seen[start:]}"
            await asyncio.sleep(0.02)

    def states(self) -> list[str]:
        return [s for _, s, _, _ in self.seen]

    def close(self) -> None:
        if self._task.done():
            self._task.result()
        self._task.cancel()


async def rows(live: Live, sid: str) -> list[str]:
    return (await live.http.get(f"/api/sessions/{sid}/screen")).json()["rows"]


async def shows(live: Live, sid: str, text: str, timeout: float = 20) -> list[str]:
    import re

    test = re.compile(text, re.M).search if text.startswith("^") else (lambda t: text in t)
    deadline = time.monotonic() + timeout
    while True:
        screen = await rows(live, sid)
        if test("\n".join(screen)):
            return screen
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never showed:\n" + "\n".join(screen))
        await asyncio.sleep(0.05)


async def settled(live: Live, sid: str, quiet: float = 1.5, timeout: float = 15) -> None:
    """Wait until the agent wrote nothing for ``quiet`` s. Gemini 0.61.0 draws its input box,
    then finishes starting up: an Enter in the next 1–3 s (more under load) is sometimes
    ignored by the CLI itself (measured: first sends right after the box appeared were lost
    in 4 of 6 launches, none after it went quiet)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        read = (await live.http.get(f"/api/sessions/{sid}")).json()["bytes_read"]
        if read != last:
            last, since = read, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        await asyncio.sleep(0.05)


async def state_is(live: Live, sid: str, state: str, timeout: float) -> dict[str, Any]:
    return await live.wait_state(sid, state, timeout)


async def wait_turn(mock: LoopbackServer, state: str, requests: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        turn = last_turn(mock.records())
        if turn.requests >= requests and turn.state == state:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the mock never reached {state!r} (now {turn})")
        await asyncio.sleep(0.03)


@pytest.fixture
async def mock_and_live(request: pytest.FixtureRequest) -> AsyncIterator[tuple[LoopbackServer, Live]]:
    agent, mode = request.param[0], request.param[1]
    lab, _ = lab_or_skip(agent)
    with LoopbackServer(lab.mock(None)) as mock:
        async with live_server(mode=mode) as live:
            yield mock, live


async def launch(
    live: Live, lab: AgentLab, binary: str, work: Path, mock: LoopbackServer, rows_: int, cols: int
) -> str:
    env = lab.prepare(work / "home", work / "project", mock.url)
    s = await live.create(
        agent=lab.agent,
        command=lab.argv(binary, work / "project"),
        cwd=str(work / "project"),
        env=env,
        rows=rows_,
        cols=cols,
    )
    return s["id"]


PARAMS = [
    pytest.param((agent, mode), rows_, cols, id=f"{agent}-{mode}-{rows_}x{cols}")
    for agent in AGENTS
    for mode, rows_, cols in RUNS
]


@pytest.mark.parametrize(("mock_and_live", "rows_", "cols"), PARAMS, indirect=["mock_and_live"])
async def test_a_session_from_start_to_approval_to_idle(
    mock_and_live, rows_: int, cols: int, work: Path, request: pytest.FixtureRequest
) -> None:
    mock, live = mock_and_live
    agent = request.node.callspec.params["mock_and_live"][0]
    facts = AGENTS[agent]
    lab, binary = lab_or_skip(agent)
    sid = await launch(live, lab, binary, work, mock, rows_, cols)
    decisions = Decisions(live, sid)
    try:
        # start → idle only once the input box is drawn (by its rule, never by "nothing matched")
        await shows(live, sid, facts["ready"], 40)
        info = await state_is(live, sid, "idle", 10)
        assert (info["source"], info["rule"]) == ("screen", facts["idle_rule"]), info
        await asyncio.sleep(0.2)  # let the 20 ms poller record it too
        first_idle = next(i for i, d in enumerate(decisions.seen) if d[1] == "idle")
        assert decisions.seen[first_idle][3] == facts["idle_rule"], decisions.seen
        assert all(s != "idle" for s in decisions.states()[:first_idle])
        assert decisions.seen[0][1:3] == ("working", "start"), decisions.seen

        await settled(live, sid)
        # a slow turn reads working while the model has not answered yet
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:slow"})
        assert r.status_code == 200 and r.json()["state_before"] == "idle", r.text
        try:
            await wait_turn(mock, "waiting", 1, 10)
        except AssertionError:
            raise AssertionError("\n".join(await rows(live, sid))) from None
        await asyncio.sleep(1.0)
        assert last_turn(mock.records()).state == "waiting"
        info = (await live.http.get(f"/api/sessions/{sid}")).json()
        assert info["state"] == "working", info
        await wait_turn(mock, "done", 1, 30)
        await state_is(live, sid, "idle", 15)

        # an escalated command reads blocked; /send is refused; a confirmed /answer takes
        bash_from = len(decisions.seen)
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:bash"})
        assert r.status_code == 200
        await shows(live, sid, facts["asked"], 20)
        # the agent's own permission hook (Gemini's, Codex's) may say blocked first: the text is on
        # the screen before the next sweep reads it, and a hook that lands in between decides
        # until then. What must follow is the screen (or the out-of-band status) saying it too.
        confirmed = await decisions.reached("blocked", {"screen", "status"}, bash_from, 5)
        asked = next(i for i in range(bash_from, confirmed + 1) if decisions.seen[i][1] == "blocked")
        assert set(decisions.states()[asked : confirmed + 1]) == {"blocked"}, decisions.seen[bash_from:]
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "hello"})
        assert r.status_code == 409 and r.json()["state"] == "blocked", r.text
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={**facts["answer"], "confirm": True})
        assert r.status_code == 200 and r.json()["took"] is True, r.text
        deadline = time.monotonic() + 15
        while not (work / "project" / "x.txt").exists():
            assert time.monotonic() < deadline, "the approved command never ran"
            await asyncio.sleep(0.05)
        await state_is(live, sid, "idle", 20)

        # a plain question → idle again, submitted once and whole
        before = last_turn(mock.records()).requests
        mark = len(decisions.seen)
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:hello"})
        assert r.status_code == 200
        await wait_turn(mock, "done", before + 1, 15)
        await state_is(live, sid, "idle", 15)
        if agent == "codex":
            # a sub-second turn: its working phase is seen (the OSC 7501 status, or the screen)
            assert any(d[1] == "working" for d in decisions.seen[mark:]), decisions.seen[mark:]
        assert "blocked" not in decisions.states()[: first_idle + 1]
        falsely_blocked = [
            d
            for d in decisions.seen
            if d[1] == "blocked"
            and d[2] == "screen"
            and d[3]
            not in (
                "tool_confirmation",
                "action_required_title",
                "approval_modal",
                "approval_question",
                "confirm_prompt",
            )
        ]
        assert not falsely_blocked, decisions.seen
    finally:
        decisions.close()


@pytest.mark.parametrize("mock_and_live", [pytest.param((a, "sweep"), id=a) for a in AGENTS], indirect=True)
async def test_every_send_arrives_whole(mock_and_live, work: Path, request: pytest.FixtureRequest) -> None:
    """``PANEWATCH_LIVE_SENDS`` sends (60 by default) of text then Enter through /send: every
    one reaches the model once, whole (no Enter lost into a newline, none left in the box)."""
    mock, live = mock_and_live
    agent = request.node.callspec.params["mock_and_live"][0]
    lab, binary = lab_or_skip(agent)
    sid = await launch(live, lab, binary, work, mock, 32, 120)
    await shows(live, sid, AGENTS[agent]["ready"], 40)
    await state_is(live, sid, "idle", 10)
    await settled(live, sid)
    lost = []
    for i in range(SENDS):
        before = last_turn(mock.records()).requests
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": f"task:hello {i}"})
        assert r.status_code == 200, r.text
        try:
            await wait_turn(mock, "done", before + 1, 8)
        except AssertionError:
            lost.append(i)
            break
        await state_is(live, sid, "idle", 10)
    tasks = [r.get("task", "") for r in mock.records() if r["event"] == "request" and r.get("kind") == "main"]
    assert not lost, f"send {lost[0]} never reached the model:\n" + "\n".join(await rows(live, sid))
    assert [t.split("\n")[0].strip() for t in tasks] == [f"task:hello {i}" for i in range(SENDS)]
