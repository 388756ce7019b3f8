"""Keys typed in the dashboard's terminal, on the memory host and a hand-moved clock: every byte
reaches the agent and is accounted for in one log line per burst (not one per key), the state a
key is checked against is as fresh as a classification but read again only when something moved,
and a resize is not an info line."""

from __future__ import annotations

import logging

import pytest

from engine_support import TESTER, memory_rig
from panes_support import PROMPT
from panewatch.clock import ManualClock
from panewatch.engine._keys import WINDOW_S, KeyTally
from panewatch.states import State

pytestmark = pytest.mark.unit


@pytest.fixture
async def rig():
    async with memory_rig() as rig:
        yield rig


def typed_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("typed ")]


BY = ", by user the test"


def test_a_burst_is_one_line_after_its_window(caplog):
    clock = ManualClock()
    bursts: list[tuple[str, int, int]] = []
    tally = KeyTally(clock, lambda sid, burst: bursts.append((sid, burst.nbytes, burst.writes)))
    with caplog.at_level(logging.INFO, logger="panewatch.engine"):
        for _ in range(100):
            tally.add("s1", b"x", State.idle, TESTER)
            clock.advance(0.005)
        tally.add("s2", b"abc", State.working, TESTER)
        assert typed_lines(caplog) == []  # nothing yet: the window is open
        clock.advance(WINDOW_S)
    lines = typed_lines(caplog)
    assert sorted(lines) == [
        "typed 100 bytes by hand in 100 writes over 1.0 s while idle" + BY,
        "typed 3 bytes by hand in 1 writes over 1.0 s while working" + BY,
    ]
    assert {r.session for r in caplog.records if r.getMessage().startswith("typed ")} == {"s1", "s2"}
    assert sorted(bursts) == [("s1", 100, 100), ("s2", 3, 1)]  # one Acted event per burst, too


def test_a_key_in_another_state_closes_the_burst_at_once(caplog):
    clock = ManualClock()
    tally = KeyTally(clock, lambda *burst: None)
    with caplog.at_level(logging.INFO, logger="panewatch.engine"):
        tally.add("s1", b"ab", State.idle, TESTER)
        tally.add("s1", b"c", State.idle, TESTER)
        tally.add("s1", b"y", State.blocked, TESTER)
        assert typed_lines(caplog) == ["typed 3 bytes by hand in 2 writes over 0.0 s while idle" + BY]
        tally.flush_all()
        clock.advance(WINDOW_S)  # the closed bursts' timers do not log them again
    assert typed_lines(caplog)[1:] == ["typed 1 bytes by hand in 1 writes over 0.0 s while blocked" + BY]


async def test_typed_keys_reach_the_agent_and_are_logged_per_burst(rig, caplog):
    sid, agent = await rig.create(agent=None)
    await rig.settle()
    channel = await rig.engine.terminal(sid, actor=TESTER)
    with caplog.at_level(logging.INFO):
        for ch in "hello world" * 20:
            assert await channel.input({"type": "input", "data": ch}) is None
        assert bytes(agent.input) == b"hello world" * 20
        assert typed_lines(caplog) == []  # 220 keys, no line each
        await rig.settle(WINDOW_S)
    assert typed_lines(caplog) == ["typed 220 bytes by hand in 220 writes over 1.0 s while idle" + BY]


async def test_a_burst_is_logged_before_its_session_is_deleted(rig, caplog):
    sid, _ = await rig.create(agent=None)
    with caplog.at_level(logging.INFO, logger="panewatch.engine"):
        await rig.engine.write_keys(sid, b"exit\r", actor=TESTER)
        await rig.engine.delete(sid, actor=TESTER)
    messages = [r.getMessage() for r in caplog.records]
    typed = messages.index("typed 5 bytes by hand in 1 writes over 0.0 s while working" + BY)
    assert typed < next(i for i, m in enumerate(messages) if m.startswith("deleted"))


async def test_the_state_a_key_meets_is_fresh_but_read_only_when_something_moved(rig):
    sid, agent = await rig.create()
    await rig.settle()
    channel = await rig.engine.terminal(sid, actor=TESTER)
    before = (await rig.engine.stats()).classifications
    for _ in range(50):
        assert await channel.input({"type": "input", "data": "x"}) is None
    assert (await rig.engine.stats()).classifications == before  # nothing moved: no reading per key
    agent.emit(PROMPT)  # the prompt's bytes arrive; no sweep or settle has read them yet
    await rig.settle(0)
    assert (await rig.engine.get(sid)).state != "blocked"
    held = await channel.input({"type": "input", "data": "y"})  # the key meets the prompt, read now
    assert held is not None and held["type"] == "held" and held["rule"]
    assert (await rig.engine.stats()).classifications == before + 1
    assert (await rig.engine.get(sid)).state == "blocked" and bytes(agent.input) == b"x" * 50


async def test_a_resize_from_the_page_is_not_an_info_line(rig, caplog):
    sid, agent = await rig.create(agent=None, command="size")
    await rig.settle()
    channel = await rig.engine.terminal(sid, actor=TESTER)
    with caplog.at_level(logging.DEBUG, logger="panewatch.terminal"):
        for cols in range(61, 81):
            assert await channel.input({"type": "resize", "rows": 12, "cols": cols}) is None
    await rig.settle()
    assert (agent.rows, agent.cols) == (12, 80)
    resized = [r for r in caplog.records if r.getMessage().startswith("resized to")]
    assert len(resized) == 20 and {r.levelno for r in resized} == {logging.DEBUG}
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]
