"""The engine's terminal channel (``EngineAPI.terminal``) on the memory host and a hand-moved
clock: what a page gets when it opens one (history, a repaint with the screen's modes, ready),
live output and state on the engine's clock, the held-keys rule, resizes told to every page, a
slow page resynchronised, a deleted session, and another node's pane watched read-only."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from engine_support import TESTER, memory_rig
from panes_support import PROMPT
from panewatch.engine import EngineOptions, ScreenFrame, watch_terminal
from panewatch.engine._repaint import REMOTE_READ_ONLY
from panewatch.engine._terminal import CLIENT_BACKLOG, META_INTERVAL_S
from panewatch.engine.models import Cursor, Size
from panewatch.errors import UnknownSession
from panewatch.screen import Screen
from panewatch.states import Source, State

pytestmark = pytest.mark.unit


@pytest.fixture
async def rig():
    async with memory_rig() as rig:
        yield rig


async def take(messages: AsyncIterator[bytes | dict], n: int = 1) -> list[bytes | dict]:
    """The next ``n`` messages (a guard against a hang, not a timed assert)."""
    return [await asyncio.wait_for(anext(messages), 10) for _ in range(n)]


async def opened(rig, sid: str) -> tuple[object, AsyncIterator[bytes | dict], list[bytes | dict]]:
    """A channel, its messages, and what it sends before live output (hello … ready, state)."""
    channel = await rig.engine.terminal(sid, actor=TESTER)
    messages = channel.messages()
    first: list[bytes | dict] = []
    while not (isinstance(last := (await take(messages))[0], dict) and last["type"] == "state"):
        first.append(last)
    return channel, messages, [*first, last]


async def test_a_page_gets_the_history_then_a_repaint_with_the_screens_modes_then_ready(rig):
    sid, agent = await rig.create(agent=None)
    output = b"".join(f"line {i}\r\n".encode() for i in range(30)) + b"\x1b[?2004h\x1b[?1h\x1b[?1049h\x1b[Hfull"
    agent.emit(output)
    await rig.settle()
    _, _, first = await opened(rig, sid)
    hello, history, painted, ready, state = first
    assert hello == {"type": "hello", "rows": 12, "cols": 60, "history_bytes": len(output)}
    assert history == output and ready == {"type": "ready"}
    copy = Screen(12, 60)
    copy.feed(b"junk the repaint erases\r\n" * 3)
    copy.feed(painted)
    assert copy.lines() == (await rig.engine.screen(sid)).rows and copy.lines()[0] == "full"
    assert copy.alternate and copy.mode(2004) and copy.mode(1) and not copy.mode(1000)
    assert state["type"] == "state" and state["state"] == "idle" and (state["rows"], state["cols"]) == (12, 60)


async def test_live_output_flows_and_the_state_follows_at_most_once_per_interval(rig):
    sid, agent = await rig.create()
    await rig.settle()
    _, messages, _ = await opened(rig, sid)
    agent.emit(b"more output\r\n")
    assert await take(messages) == [b"more output\r\n"]  # at once; the state waits for the interval
    agent.emit(PROMPT)
    await rig.settle(0)
    assert await take(messages) == [PROMPT]
    for _ in range(2):  # the scheduler reads the prompt once it settles; the next state is due
        await rig.settle(META_INTERVAL_S)
    (state,) = await take(messages)
    assert state["state"] == "blocked" and [o["label"] for o in state["prompt"]["options"]] == ["Yes", "No"]


async def test_keys_typed_right_after_a_prompt_are_held_until_the_user_says(rig):
    sid, agent = await rig.create()
    agent.emit(PROMPT)
    await rig.settle()
    channel = await rig.engine.terminal(sid, actor=TESTER)
    assert await channel.input({"type": "input", "data": "1"}) == {
        "type": "held",
        "bytes": 1,
        "rule": (await rig.engine.get(sid)).rule,
    }
    assert await channel.input({"type": "input", "data": "\r"}) == {"type": "held", "bytes": 2}
    assert bytes(agent.input) == b""
    assert await channel.input({"type": "release", "send": True}) == {"type": "released", "sent": True, "bytes": 2}
    assert bytes(agent.input) == b"1\r"
    await channel.input({"type": "input", "data": "2"})
    assert await channel.input({"type": "release"}) == {"type": "released", "sent": False, "bytes": 1}
    rig.clock.advance(EngineOptions().hold_keys_ms / 1000)  # the user has seen the prompt by now
    assert await channel.input({"type": "input", "data": "2"}) is None
    assert bytes(agent.input) == b"1\r2"


async def test_keys_still_held_when_the_page_goes_away_are_dropped_and_logged(rig, caplog):
    sid, agent = await rig.create()
    agent.emit(PROMPT)
    await rig.settle()
    channel = await rig.engine.terminal(sid, actor=TESTER)
    await channel.input({"type": "input", "data": "yes"})
    with caplog.at_level(logging.INFO, logger="panewatch.terminal"):
        channel.close()
    assert bytes(agent.input) == b""
    assert "dropped 3 held-back key bytes: the page went away" in [r.getMessage() for r in caplog.records]


async def test_bad_messages_are_answered_with_the_reason(rig):
    sid, _ = await rig.create(agent=None)
    channel = await rig.engine.terminal(sid, actor=TESTER)
    for message, why in [
        ({"type": "input", "data": ""}, "input: a non-empty string"),
        ({"type": "resize", "rows": "12"}, "resize: rows and cols are integers"),
        ({"type": "resize", "rows": 0, "cols": 10}, ""),
        ({"type": "paste"}, "unknown message type 'paste'"),
    ]:
        reply = await channel.input(message)
        assert reply is not None and reply["type"] == "error" and reply["detail"].startswith(why)


async def test_a_resize_from_one_page_is_told_to_the_others(rig):
    sid, agent = await rig.create(agent=None)
    await rig.settle()
    one, _, _ = await opened(rig, sid)
    _, other, _ = await opened(rig, sid)
    assert await one.input({"type": "resize", "rows": 20, "cols": 70}) is None
    assert await take(other) == [{"type": "size", "rows": 20, "cols": 70}]
    assert (agent.rows, agent.cols) == (20, 70)


async def test_a_slow_page_is_resynchronised_from_the_screen_not_queued(rig):
    sid, agent = await rig.create(agent=None)
    await rig.settle()
    _, messages, _ = await opened(rig, sid)
    line = b"x" * 1023 + b"\n"
    for _ in range(CLIENT_BACKLOG // len(line) + 2):  # never read by the page meanwhile
        agent.emit(line)
    agent.emit(b"\x1b[2J\x1b[Hthe end")
    await rig.settle(0)
    size, painted = await take(messages, 2)
    assert size == {"type": "size", "rows": 12, "cols": 60, "resync": True}
    copy = Screen(12, 60)
    copy.feed(painted)
    assert copy.lines()[0] == "the end"


async def test_a_deleted_session_ends_its_channels(rig):
    sid, _ = await rig.create(agent=None)
    await rig.settle()
    _, messages, _ = await opened(rig, sid)
    await rig.engine.delete(sid, actor=TESTER)
    with pytest.raises(UnknownSession, match="was deleted"):
        await take(messages)
    with pytest.raises(UnknownSession):
        await rig.engine.terminal(sid, actor=TESTER)


def frame(full: bool, **rows: str) -> ScreenFrame:
    head = {
        "cursor": Cursor(row=1, col=2, hidden=False),
        "size": Size(rows=3, cols=20),
        "state": State.blocked,
        "rule": "claude/permission",
        "source": Source.screen,
        "title": "t",
        "prompt": None,
        "request": None,
    }
    if full:
        return ScreenFrame(full=True, rows=["one", "two", "three"], styles=None, **head)
    return ScreenFrame(full=False, changed=rows, **head)


async def test_another_nodes_pane_is_watched_read_only_from_its_frames():
    async def frames() -> AsyncIterator[ScreenFrame]:
        yield frame(True)
        yield frame(False, **{"1": "TWO"})

    channel = watch_terminal(frames())
    hello, painted, ready, state, repainted, _ = [m async for m in channel.messages()]
    assert hello == {"type": "hello", "rows": 3, "cols": 20, "history_bytes": 0} and ready == {"type": "ready"}
    assert state == {
        "type": "state",
        "state": "blocked",
        "rule": "claude/permission",
        "source": "screen",
        "title": "t",
        "prompt": None,
        "request": None,
        "rows": 3,
        "cols": 20,
    }
    copy = Screen(3, 20)
    copy.feed(painted)
    assert copy.lines() == ["one", "two", "three"]
    copy.feed(repainted)
    assert copy.lines() == ["one", "TWO", "three"] and (copy.cursor.row, copy.cursor.col) == (1, 2)
    assert await channel.input({"type": "input", "data": "y"}) == {"type": "error", "detail": REMOTE_READ_ONLY}
