"""The engine's rules on the in-memory host and a hand-moved clock: no bash, no sleeping.

The test plays the agent through the host's handle; time moves only with ``clock.advance``
(or, inside ``send``/``answer``, the clock's simulated waits).
"""

from __future__ import annotations

import asyncio

import pytest

from engine_support import TESTER, memory_rig
from panes_support import ERASE_PROMPT, IDLE, PROMPT, WORKING
from panewatch.engine import SessionSpec
from panewatch.engine._guard import ENTER_RETRY_S
from panewatch.engine.events import Created, Ping, Snapshot, StateChanged
from panewatch.errors import Conflict, InvalidRequest, NotReadingInput, UnknownSession
from panewatch.procs.procinfo import Program
from panewatch.states import State

pytestmark = pytest.mark.unit


@pytest.fixture
async def rig():
    async with memory_rig() as rig:
        yield rig


async def test_an_enter_the_agent_redrew_over_is_pressed_again_but_never_into_a_prompt(rig):
    sid, agent = await rig.create()
    agent.emit(IDLE)
    await rig.settle()
    enters = []

    def ink(data: bytes) -> None:  # an input box: the first Enter only redraws it, as Gemini's may
        if data == b"\r":
            enters.append(data)
            agent.emit(b"\r\x1b[2K> fix it" if len(enters) == 1 else b"\r\x1b[2K> \r\n")
        else:
            agent.emit(data)

    agent.emit(b"> ")
    agent.on_input = ink
    await rig.engine.send(sid, "fix it", actor=TESTER)
    assert agent.input == b"fix it\r\r"
    await rig.settle()
    assert len(enters) == 2 and (await rig.engine.get(sid)).state != "blocked"

    # the first Enter drew a permission dialog instead: re-read, blocked, no second Enter
    agent.on_input = lambda data: agent.emit(PROMPT) if data == b"\r" else agent.emit(data)
    agent.emit(b"\r\n> ")
    await rig.settle()
    before = len(agent.input)
    await rig.engine.send(sid, "go on", actor=TESTER)
    assert agent.input[before:] == b"go on\r"
    assert (await rig.engine.get(sid)).state == "blocked"


async def test_an_enter_that_took_returns_once_the_text_left_its_row_and_the_pane_went_quiet(rig):
    """/send no longer waits out the whole retry window after an Enter that took: once the typed
    text is off its row on a quiet screen, it returns, and presses nothing more."""
    sid, agent = await rig.create()
    agent.emit(IDLE)
    await rig.settle()
    agent.emit(b"\r\n> ")

    def box(data: bytes) -> None:  # echoes what is typed; Enter submits: the box emptied, a turn begins
        agent.emit(b"\r\x1b[2K> \r\n" + WORKING if data == b"\r" else data)

    agent.on_input = box
    start = rig.clock.time()
    await rig.engine.send(sid, "fix it", actor=TESTER)
    took = rig.clock.time() - start
    assert agent.input == b"fix it\r"
    assert took < ENTER_RETRY_S, f"/send took {took:.2f} s of its {ENTER_RETRY_S} s window"


async def test_a_turn_blocked_answered_idle_with_events(rig):
    events = []
    rig.engine.subscribe(events.append)
    sid, agent = await rig.create()
    assert (await rig.engine.get(sid)).state == "working"  # launched, not read yet
    agent.emit(WORKING)
    await rig.settle()
    assert ((await rig.engine.get(sid)).source, (await rig.engine.get(sid)).rule) == ("screen", "interrupt_footer")
    agent.emit(PROMPT)
    await rig.settle()
    info = await rig.engine.get(sid)
    assert (info.state, info.rule) == ("blocked", "permission_dialog")
    screen = await rig.engine.screen(sid)
    assert screen.prompt.kind == "options"
    assert [o.label for o in screen.prompt.options] == ["Yes", "No"]

    with pytest.raises(Conflict, match="blocked"):
        await rig.engine.send(sid, "hello", actor=TESTER)
    assert agent.input == b""
    agent.on_input = lambda data: agent.emit(ERASE_PROMPT + WORKING)
    result = await rig.engine.answer(sid, option=1, actor=TESTER)
    assert result.took and result.state == "working" and agent.input == b"1"
    agent.emit(IDLE)
    await rig.settle()
    assert (await rig.engine.get(sid)).state == "idle"
    assert (await rig.engine.screen(sid)).prompt is None
    states = [(e.prev, e.state) for e in events if isinstance(e, StateChanged)]
    assert states == [(None, "working"), ("working", "blocked"), ("blocked", "working"), ("working", "idle")]
    assert isinstance(events[0], Created)


@pytest.mark.parametrize("mode", ["change", "sweep"])
async def test_a_synchronized_frame_is_read_whole_though_its_writer_stalls_halfway(mode):
    """Between ``ESC[?2026h`` and ``ESC[?2026l`` the agent is drawing one frame; a writer
    descheduled halfway (a loaded machine) left half a dialog on screen, which reads idle: the
    working footer pushed out of the bottom rows. Neither mode reads it, until the frame stalls
    for a whole second."""
    async with memory_rig(mode=mode) as rig:
        events: list[StateChanged] = []
        rig.engine.subscribe(lambda e: events.append(e) if isinstance(e, StateChanged) else None)
        _, agent = await rig.create()
        agent.emit(WORKING)
        await rig.settle(0.8)
        half = PROMPT.index(b" \xe2\x9d\xaf")  # up to the question, before the options
        agent.emit(b"\x1b[?2026h" + PROMPT[:half])
        for _ in range(4):  # 0.8 s: past the change read's settle and a sweep, under a second
            await rig.settle(0.2)
        assert [e.state for e in events] == ["working"]
        agent.emit(PROMPT[half:] + b"\x1b[?2026l")
        await rig.settle(0.8)
        assert [(e.prev, e.state) for e in events] == [(None, "working"), ("working", "blocked")]

        # a frame that never ends is read once it has stalled for a second
        agent.emit(b"\x1b[2J\x1b[H\x1b[?2026h" + IDLE)
        for _ in range(6):
            await rig.settle(0.2)
        assert [e.state for e in events][-1] == "idle"


async def test_an_answer_that_comes_while_the_prompt_is_being_redrawn_waits_for_the_redraw(rig):
    """A TUI repaints by clearing, then drawing: an answer read between the two saw no prompt
    and was refused (Continue CLI, under load). It is judged once the pane is quiet."""
    sid, agent = await rig.create()
    agent.emit(WORKING)
    await rig.settle()
    agent.emit(PROMPT)
    await rig.settle(1.0)
    assert (await rig.engine.get(sid)).state == "blocked"
    agent.emit(b"\x1b[2J\x1b[H")  # a repaint begins: the screen is blank...
    await asyncio.sleep(0)
    rig.clock.call_at(rig.clock.time() + 0.1, lambda: agent.emit(PROMPT))  # ...and is drawn 0.1 s later
    agent.on_input = lambda data: agent.emit(ERASE_PROMPT + WORKING)
    result = await rig.engine.answer(sid, option=1, actor=TESTER)
    assert result.took and agent.input == b"1"

    # a pane that is quiet and not blocked is still refused at once, and nothing is typed
    agent.emit(b"\x1b[2J\x1b[H")
    agent.emit(IDLE)
    await rig.settle(1.0)
    with pytest.raises(Conflict, match="not blocked"):
        await rig.engine.answer(sid, option=1, actor=TESTER)
    assert agent.input == b"1"


async def test_send_waits_for_the_echo_presses_enter_and_pastes_only_several_lines(rig):
    sid, agent = await rig.create()
    agent.emit(IDLE)
    await rig.settle()
    agent.on_input = lambda data: agent.emit(data.replace(b"\r", b"\r\n"))  # echoes, as a terminal does
    await rig.engine.send(sid, "fix it", actor=TESTER)
    assert agent.input == b"fix it\r"
    agent.on_input = None  # silent now: an Enter it ignored is pressed once more
    await rig.engine.send(sid, "again", actor=TESTER)
    assert agent.input == b"fix it\ragain\r\r"
    agent.emit(b"\x1b[?2004h")  # the agent turned on bracketed paste
    await rig.settle()
    await rig.engine.send(sid, "one line", enter=False, actor=TESTER)
    assert agent.input.endswith(b"\r\rone line")  # one line is typed
    await rig.engine.send(sid, "two\nlines", enter=False, actor=TESTER)
    assert agent.input.endswith(b"\x1b[200~two\nlines\x1b[201~")


async def test_an_agent_that_stops_reading_is_not_reading_input(rig):
    sid, _ = await rig.create(command="idle")
    with pytest.raises(NotReadingInput, match="not reading its input") as refused:
        for _ in range(20):
            await rig.engine.send(sid, "x" * 100_000, enter=False, actor=TESTER)
    assert refused.value.decision.state == "idle"  # a blank screen: no rule matched


async def test_exit_keeps_the_screen_and_the_code_and_loss_is_its_own_state(rig):
    sid, agent = await rig.create()
    agent.emit("last words\r\n")
    agent.exit(3)
    info = await rig.engine.get(sid)
    assert (info.state, info.source, info.rule, info.exit_code) == ("exited", "exit", "3", 3)
    assert (await rig.engine.screen(sid)).rows[0] == "last words"
    await rig.settle(1.0)  # ten sweeps later: still exited, the last screen kept
    assert (await rig.engine.get(sid)).state == "exited" and (await rig.engine.screen(sid)).rows[0] == "last words"
    with pytest.raises(Conflict, match="exited"):
        await rig.engine.send(sid, "anyone?", actor=TESTER)
    lost_sid, lost = await rig.create()
    lost.exit(None, "the tmux server went away")
    assert (await rig.engine.get(lost_sid)).state == "lost"
    await rig.engine.delete(sid, actor=TESTER)
    with pytest.raises(UnknownSession):
        await rig.engine.get(sid)


async def test_a_program_that_cannot_start_is_an_exited_session_saying_why(rig):
    info = await rig.engine.create(SessionSpec(command=["no-such-agent"]), actor=TESTER)
    assert info.state == "exited" and info.exit_code == 127 and "cannot start" in info.error
    assert "cannot start" in "\n".join((await rig.engine.screen(info.id)).rows)  # the pane says it too
    with pytest.raises(InvalidRequest, match="rows must be"):
        await rig.engine.create(SessionSpec(command=["agent"], rows=1), actor=TESTER)
    with pytest.raises(InvalidRequest, match="unknown agent"):
        await rig.engine.create(SessionSpec(agent="nobody"), actor=TESTER)
    with pytest.raises(InvalidRequest, match="give a command"):
        await rig.engine.create(SessionSpec(), actor=TESTER)


async def test_a_launch_that_breaks_unexpectedly_leaves_no_session(rig, monkeypatch):
    """Only a SpawnError makes an exited session; anything else from the host is all or nothing:
    no session without a process, the error raised to the caller."""

    def broken(spec, sink):
        raise OSError("no more ptys")

    monkeypatch.setattr(rig.host, "spawn", broken)
    with pytest.raises(OSError, match="no more ptys"):
        await rig.engine.create(SessionSpec(command=["agent"]), actor=TESTER)
    assert await rig.engine.list() == [] and len(rig.engine) == 0 and (await rig.engine.stats()).sessions == 0
    monkeypatch.undo()
    sid, _ = await rig.create()  # the engine goes on
    assert [s.id for s in await rig.engine.list()] == [sid]


async def test_an_argv_or_env_the_os_cannot_take_is_refused_before_any_session(rig):
    for spec in (
        SessionSpec(command=["agent", "a\x00b"]),
        SessionSpec(command=["agent", "\ud800"]),
        SessionSpec(command=["agent"], env={"A=B": "1"}),
        SessionSpec(command=["agent"], cwd="/tmp\x00"),
    ):
        with pytest.raises(InvalidRequest, match=r"NUL|encode|bad name"):
            await rig.engine.create(spec, actor=TESTER)
    assert rig.host.handles == {} and await rig.engine.list() == []


async def test_reports_and_the_repeated_permission_notification(rig):
    sid, agent = await rig.create()
    agent.emit(IDLE)
    await rig.settle()
    report = rig.engine.report(sid, {"hook_event_name": "PermissionRequest", "tool_name": "Bash"})
    assert report is not None and (await rig.engine.get(sid)).state == "blocked"
    rig.engine.report(sid, {"hook_event_name": "PostToolUse", "tool_name": "Bash"})
    rig.clock.advance(6)
    assert rig.engine.report(sid, {"hook_event_name": "Notification", "notification_type": "permission_prompt"}) is None
    assert (await rig.engine.get(sid)).state == "working"
    rig.clock.advance(61)
    await rig.settle()
    assert (await rig.engine.get(sid)).state == "idle"  # the report went stale; the screen decides
    assert rig.engine.report(sid, {"state": "blocked", "detail": "a script asks"}).event == "report"
    with pytest.raises(InvalidRequest):
        rig.engine.report(sid, {"state": "waiting"})


async def test_the_shell_coming_back_after_a_hand_started_agent(rig):
    sid, shell = await rig.create(agent="shell")
    rig.programs.update({shell.pid: Program(shell.pid, "bash", "bash"), 555: Program(555, "claude", "claude")})
    shell.emit("$ claude\r\n")
    await rig.settle(2.5)  # the same group's program is re-read every 2 s
    assert (await rig.engine.get(sid)).foreground == "bash"
    shell.fg_pgid = 555
    shell.emit(PROMPT)
    await rig.settle()
    info = await rig.engine.get(sid)
    assert (info.state, info.agent, info.foreground) == ("blocked", "claude", "claude")
    shell.fg_pgid = shell.pid
    shell.emit(b"\x1b[2J\x1b[H" + WORKING)
    await rig.settle()
    info = await rig.engine.get(sid)
    assert (info.state, info.source, info.rule) == ("idle", "process", "bash")


async def test_event_stream_starts_with_a_snapshot_and_resyncs_a_lagging_consumer(rig):
    stream = await rig.engine.events(size=3, heartbeat=0.01)
    try:
        first = await anext(stream)
        assert isinstance(first, Snapshot) and first.sessions == []
        await rig.create()
        assert isinstance(await anext(stream), Created)
        for _ in range(3):
            await rig.create()  # 6 events into a mailbox of 3: this consumer fell behind
        again = await anext(stream)
        assert isinstance(again, Snapshot) and len(again.sessions) == 4 and stream.resyncs == 1
        assert isinstance(await anext(stream), Ping)  # nothing new: a heartbeat, not a hang
    finally:
        stream.close()


async def test_screen_frames_full_then_changed_rows(rig):
    sid, agent = await rig.create(agent=None)
    frames = await rig.engine.screens(sid, interval=0)
    first = await anext(frames)
    assert first.full is True and len(first.rows) == 12
    agent.emit("hello\r\n")
    rig.clock.tick()  # the feed
    frame = await asyncio.wait_for(anext(frames), 1)
    assert frame.full is False and frame.changed == {"0": "hello"}
    await frames.aclose()


async def test_keys_typed_by_hand_reach_the_agent_unguarded_but_logged(rig, caplog):
    sid, agent = await rig.create()
    agent.emit(PROMPT)
    await rig.settle()
    assert (await rig.engine.get(sid)).state == "blocked"
    with caplog.at_level("INFO", logger="panewatch.engine"):
        await rig.engine.write_keys(sid, b"\x1b", actor=TESTER)
        await rig.settle(1.0)  # typing is logged per burst, a second after its first key
    assert agent.input == b"\x1b"
    assert any(
        "typed 1 bytes by hand in 1 writes" in r.getMessage() and "while blocked" in r.getMessage()
        for r in caplog.records
    )


async def test_resize_reaches_the_host_and_the_screen(rig):
    sid, agent = await rig.create(agent=None, command="size")
    await rig.settle()
    await rig.engine.resize(sid, 20, 100, actor=TESTER)
    await rig.settle()
    assert (agent.rows, agent.cols) == (20, 100)
    rows = (await rig.engine.screen(sid)).rows
    assert rows[:2] == ["size 12 60", "size 20 100"] and len(rows) == 20
    assert (await rig.engine.screen(sid)).size.model_dump() == {"rows": 20, "cols": 100}
    with pytest.raises(InvalidRequest):
        await rig.engine.resize(sid, 1, 5, actor=TESTER)


async def test_stats_count_what_happened(rig):
    sid, agent = await rig.create()
    agent.emit(PROMPT)
    await rig.settle(0.5)
    stats = await rig.engine.stats()
    assert stats.sessions_by_state["blocked"] == 1 and stats.bytes_read == len(PROMPT)
    assert stats.bytes_emulated == len(PROMPT) and stats.sweeps >= 4 and stats.screen_errors == 0
    await rig.engine.delete(sid, actor=TESTER)
    assert (await rig.engine.stats()).bytes_read == len(PROMPT)  # counters never go down


async def test_a_pane_left_by_a_previous_server_is_adopted_under_its_old_id(rig):
    rig.host.detached["memory:7"] = PROMPT
    info = await rig.engine.adopt(
        "memory",
        "memory:7",
        SessionSpec(agent="claude", rows=12, cols=60),
        sid="0a0b0c0d",
        argv=["claude"],
        report_token="kept-token",
        actor=TESTER,
    )
    assert info is not None and info.id == "0a0b0c0d" and info.host == "memory"
    await rig.settle()
    assert (await rig.engine.get("0a0b0c0d")).state == "blocked"
    assert rig.engine.report_token("0a0b0c0d") == "kept-token"
    gone = await rig.engine.adopt(
        "memory", "memory:8", SessionSpec(agent="claude"), sid="0e0f0a0b", argv=["claude"], actor=TESTER
    )
    assert gone is None and "0e0f0a0b" not in rig.engine
    with pytest.raises(InvalidRequest, match="unknown host"):
        await rig.engine.create(SessionSpec(command=["agent"], host="tmux"), actor=TESTER)


async def test_an_idle_pane_costs_no_foreground_sampling_per_sweep(rig):
    sid, agent = await rig.create()
    asked: list[int] = []
    real = agent.foreground_pgid
    agent.foreground_pgid = lambda: (asked.append(1), real())[1]
    agent.emit(IDLE)
    for _ in range(25):  # within FG_REREAD_S of its output the program is looked up once more
        await rig.settle()
    assert asked and (await rig.engine.get(sid)).state == "idle"
    before, classified = len(asked), (await rig.engine.stats()).classifications
    for _ in range(50):  # 50 sweeps with no output: no sampling, no reading
        await rig.settle()
    assert len(asked) == before and (await rig.engine.stats()).classifications == classified
    agent.emit(WORKING)  # output again: sampled and read again
    await rig.settle()
    assert len(asked) > before and (await rig.engine.get(sid)).state == "working"


async def test_a_host_that_knows_the_state_says_it_directly(rig):
    sid, agent = await rig.create(agent=None)
    agent.status(State.blocked, "asks to run a tool", "session/request_permission")
    info = await rig.engine.get(sid)
    assert (info.state, info.source, info.rule) == ("blocked", "host", "session/request_permission")
    assert info.why == "asks to run a tool"  # the event is its own field, not cut out of the why
    await rig.settle(1.0)  # sweeps read the (empty) screen: the host's exact state holds
    assert (await rig.engine.get(sid)).state == "blocked"
    agent.status(State.working, "running the tool", "session/update")
    assert ((await rig.engine.get(sid)).state, (await rig.engine.get(sid)).rule) == ("working", "session/update")
