"""The real Claude Code CLI through the whole service: launched by ``POST /api/sessions``,
watched on ``/ws/state``, answered with ``/answer``, and reporting through its own hooks.

The CLI talks only to the lab's mock API (real uvicorn on another loopback port). The
service adds ``--settings`` hooks because argv[0]'s basename is ``claude``; those hooks
``curl`` the service's ``/report``, so ``source == "hook"`` here is the real CLI speaking.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from claude_support import API_KEY, CLAUDE, NEEDS_CLAUDE
from live import Live, live_server
from panewatch_lab.claude_env import prepare_home
from panewatch_lab.mock_server import MockServer
from panewatch_lab.scenario import Pacing, load_scenario

pytestmark = [pytest.mark.live, NEEDS_CLAUDE]

#: The think step, shortened: long enough to be seen working, short enough for a fast test.
THINK_TTFT = 2.5


@pytest.fixture
def mock() -> Iterator[MockServer]:
    scenario = load_scenario("basic")
    think = next(s for s in scenario.steps if s.id == "think")
    think.pacing = Pacing(ttft=THINK_TTFT, chunk_chars=24, chunk_delay=0.02)
    with MockServer(scenario) as server:
        yield server


@pytest.fixture
async def live() -> AsyncIterator[Live]:
    async with live_server(socket=True) as server:  # the real CLI and a real WebSocket client
        yield server


class Events:
    """Every /ws/state event, recorded in the background so a test can look back at them."""

    def __init__(self, ws: Any) -> None:
        self.ws, self.seen = ws, []
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            self.seen.append(json.loads(message))

    def states(self, sid: str) -> list[dict[str, Any]]:
        return [e for e in self.seen if e.get("type") == "state" and e.get("session") == sid]

    async def wait(self, test: Callable[[dict[str, Any]], bool], timeout: float, after: int = 0) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            found = next((e for e in self.seen[after:] if test(e)), None)
            if found is not None:
                return found
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no such event in {timeout}s; saw {self.seen[after:]}")
            await asyncio.sleep(0.02)

    async def state(self, sid: str, state: str, timeout: float, after: int = 0) -> dict[str, Any]:
        """The first event (from index ``after`` on) saying session ``sid`` is in ``state``."""
        return await self.wait(lambda e: e.get("session") == sid and e.get("state") == state, timeout, after)

    def close(self) -> None:
        self._task.cancel()


class Decisions:
    """The session's decision (state, source, rule) polled every 20 ms: a hook's report is the
    source only while it is fresh and newer than the screen's last change, which can be brief."""

    def __init__(self, live: Live, sid: str) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        self._task = asyncio.ensure_future(self._poll(live, sid))

    async def _poll(self, live: Live, sid: str) -> None:
        while True:
            info = (await live.http.get(f"/api/sessions/{sid}")).json()
            decision = (info["state"], info["source"], info["rule"])
            if not self.seen or self.seen[-1] != decision:
                self.seen.append(decision)
            await asyncio.sleep(0.02)

    def close(self) -> None:
        if self._task.done():
            self._task.result()  # a poll that failed must fail the test, not shorten the record
        self._task.cancel()


async def launch(live: Live, mock: MockServer, tmp_path: Path) -> str:
    """The pinned CLI as a service session, once its empty prompt is on screen."""
    project = tmp_path / "project"
    env = prepare_home(tmp_path / "home", project, API_KEY, mock.url)
    s = await live.create(
        agent="claude", command=[CLAUDE, "--permission-mode", "default"], cwd=str(project), env=env, rows=32, cols=120
    )
    assert s["command"][-2] == "--settings" and "UserPromptSubmit" in s["command"][-1], "hooks were added"
    await screen_shows(live, s["id"], "? for shortcuts", 30)
    return s["id"]


@asynccontextmanager
async def launched(live: Live, mock: MockServer, tmp_path: Path) -> AsyncIterator[tuple[Events, str]]:
    """The pinned CLI launched as a service session, every ``/ws/state`` event recorded from
    before its launch."""
    async with live.ws("/ws/state") as ws:
        events = Events(ws)
        try:
            yield events, await launch(live, mock, tmp_path)
        finally:
            events.close()


async def send(live: Live, sid: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /send``, which must be accepted; its answer."""
    r = await live.http.post(f"/api/sessions/{sid}/send", json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def screen_shows(live: Live, sid: str, text: str, timeout: float = 15) -> list[str]:
    """The screen's rows once one of them contains ``text`` (or matches it, if it is a regex
    starting with ``^``)."""
    test = re.compile(text).search if text.startswith("^") else (lambda row: text in row)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = (await live.http.get(f"/api/sessions/{sid}/screen")).json()["rows"]
        if any(test(row) for row in rows):
            return rows
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{text!r} never showed:\n" + "\n".join(rows))
        await asyncio.sleep(0.05)


async def explain(live: Live, sid: str) -> dict[str, Any]:
    return (await live.http.get(f"/api/sessions/{sid}/explain")).json()


async def reported(live: Live, sid: str, events: set[str], timeout: float = 15) -> dict[str, Any]:
    """The explanation once the CLI's latest hook report is one of ``events``: each hook is a curl
    of its own, so under load the dialog can be on screen before its hook has come in."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        info = await explain(live, sid)
        if (info["signals"].get("report") or {}).get("event") in events:
            return info
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no hook report among {sorted(events)}: {info['signals']}")
        await asyncio.sleep(0.05)


def main_steps(mock: MockServer) -> list[str]:
    return [
        r["step"]
        for r in mock.records()
        if r["event"] == "request" and r.get("path") == "/v1/messages" and r["conversation"]["kind"] == "main"
    ]


async def test_permission_prompt_blocks_send_refused_answer_accepted_hooks_report(
    live: Live, mock: MockServer, tmp_path: Path
) -> None:
    async with launched(live, mock, tmp_path) as (events, sid):
        decisions = Decisions(live, sid)
        # the API's send: bracketed paste (the CLI turned ?2004 on), 80 ms, then Enter
        sent = await send(live, sid, {"text": "task:bash"})
        assert sent["state_before"] == "idle", sent

        blocked = await events.state(sid, "blocked", 20)
        # the PermissionRequest hook usually beats the dialog's first frame; either way the
        # screen must then show the dialog itself
        assert (blocked["source"], blocked["rule"]) in {("hook", "PermissionRequest"), ("screen", "permission_dialog")}
        await screen_shows(live, sid, "Do you want to proceed?")
        # the CLI's own hook says so too (the screen's blocked holds over any report)
        info = await reported(live, sid, {"PermissionRequest", "Notification:permission_prompt"})
        assert info["decision"] == {
            **info["decision"],
            "state": "blocked",
            "source": "screen",
            "rule": "permission_dialog",
        }
        assert info["screen_verdict"]["rule"] == "permission_dialog" and info["agent"] == "claude"
        assert info["signals"]["report"]["state"] == "blocked"

        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "hello"})
        assert r.status_code == 409 and r.json()["state"] == "blocked"

        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})
        assert r.status_code == 200, r.text
        assert r.json()["took"] is True and r.json()["state"] != "blocked"

        mark = len(events.seen)
        await events.state(sid, "idle", 20, after=mark)
        await screen_shows(live, sid, "Done: x.txt now exists.")
        assert (tmp_path / "project" / "x.txt").exists()
        assert main_steps(mock) == ["bash", "bash-done"]

        final = await reported(live, sid, {"Stop"})  # the screen may read idle before the hook comes
        assert final["signals"]["report"]["state"] == "idle"
        decisions.close()
        from_hooks = {rule for _, source, rule in decisions.seen if source == "hook"}
        assert from_hooks & {"UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop"}, (
            decisions.seen
        )


async def test_plain_turn_goes_working_then_idle_by_hooks(live: Live, mock: MockServer, tmp_path: Path) -> None:
    async with launched(live, mock, tmp_path) as (events, sid):
        mark = len(events.seen)
        # longer than 20 characters: typed raw with its Enter in one read, the CLI would take it
        # for a paste and keep the Enter as a newline; the API pastes it bracketed, then Enter
        text = "task:think about the flaky tests, then answer"
        await send(live, sid, {"text": text})
        # the UserPromptSubmit hook and the spinner race; either may be the event's source
        await events.state(sid, "working", 10, after=mark)
        thinking = await explain(live, sid)
        deadline = asyncio.get_running_loop().time() + 10
        while thinking["signals"]["report"] is None:  # the hook's curl can lag the spinner on a busy machine
            assert asyncio.get_running_loop().time() < deadline, "the UserPromptSubmit hook never reported"
            await asyncio.sleep(0.05)
            thinking = await explain(live, sid)
        assert thinking["decision"]["state"] == "working"
        assert (thinking["signals"]["report"]["event"], thinking["signals"]["report"]["state"]) == (
            "UserPromptSubmit",
            "working",
        )
        idle = await events.state(sid, "idle", THINK_TTFT + 15, after=mark)
        assert idle["prev"] == "working"
        await screen_shows(live, sid, "The answer is 42.")
        tasks = [r["conversation"]["task"] for r in mock.records() if r["event"] == "request"]
        assert tasks == [text], "submitted once, whole, as typed"
        await screen_shows(live, sid, r"^✻ \S+ for \d+s")  # the completion line: no "…", not working
        final = await reported(live, sid, {"Stop"})  # the screen may read idle before the hook comes
        assert final["signals"]["report"]["state"] == "idle"


async def test_esc_interrupt_ends_idle_although_stop_never_fires(live: Live, mock: MockServer, tmp_path: Path) -> None:
    async with launched(live, mock, tmp_path) as (events, sid):
        mark = len(events.seen)
        await send(live, sid, {"text": "task:sleep"})
        await screen_shows(live, sid, "$ sleep 5")
        started = time.monotonic()
        await events.state(sid, "working", 10, after=mark)
        await asyncio.sleep(0.5)
        mark = len(events.seen)
        sent = await send(live, sid, {"text": "\x1b", "enter": False})
        assert sent["state_before"] == "working"
        idle = await events.state(sid, "idle", 4, after=mark)
        assert time.monotonic() - started < 5, "idle before `sleep 5` could have ended on its own"
        assert idle["source"] == "screen", idle
        await screen_shows(live, sid, "Interrupted · What should Claude do instead?")
        info = await explain(live, sid)
        assert info["signals"]["report"]["event"] != "Stop", info["signals"]
        assert info["decision"]["state"] == "idle"
        await asyncio.sleep(5.5 - (time.monotonic() - started))  # past the 5 s the tool would have taken
        assert main_steps(mock) == ["sleep"], "the tool never reported back: it was stopped"
        assert (await live.http.get(f"/api/sessions/{sid}")).json()["state"] == "idle"
