"""The engine on real PTYs, through its façade: what only real processes show — guarded writes racing
a real screen, hook reports against it, the launch's environment, change mode's pacing, floods,
terminal queries. The rules themselves are proven on the memory host (test_engine_memory.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import stat
import time
from pathlib import Path

import pytest

from engine_support import TESTER, Tap, bash, fast, wait_state, wait_text
from panewatch.access.validation import clean_report
from panewatch.engine import Engine, SessionInfo, SessionSpec
from panewatch.engine.events import StateChanged
from panewatch.errors import Conflict, InvalidRequest
from panewatch.hosts.pty import PtyHost
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.sandbox import Policy, Sandbox
from scripted import claude_like, stubborn_prompt

pytestmark = pytest.mark.integration


async def idle_claude(engine: Engine) -> str:
    """A pane read with Claude's rules that only ever shows the idle footer, once it reads idle."""
    sid = (
        await engine.create(
            SessionSpec(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40),
            actor=TESTER,
        )
    ).id
    await wait_state(engine, sid, "idle")
    return sid


async def spinning_claude(engine: Engine, every: float) -> SessionInfo:
    """A pane read with Claude's rules whose spinner line is redrawn every ``every`` s, forever."""
    return await engine.create(
        SessionSpec(
            agent="claude",
            command=bash(
                "stty -echo; i=0; while :; do printf '\\r\\xe2\\x9c\\xbb Working %d (esc to interrupt)' $i; "
                f"i=$((i+1)); sleep {every}; done"
            ),
            rows=6,
            cols=60,
        ),
        actor=TESTER,
    )


async def test_send_is_refused_on_a_blocked_pane_even_between_sweeps():
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), options=fast(sweep_ms=60_000))  # no sweep will run
    await eng.start()
    tap = Tap(eng)
    try:
        sid = (
            await eng.create(
                SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.1)), rows=12, cols=60), actor=TESTER
            )
        ).id
        deadline = time.monotonic() + 5
        while b"Esc to cancel" not in tap.raw(sid) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert (await eng.get(sid)).state != "blocked"  # the last sweep's answer is stale...
        with pytest.raises(Conflict, match="blocked") as refused:
            await eng.send(sid, "rm -rf /", actor=TESTER)  # ...but send reclassifies the screen right now
        assert refused.value.decision.state == "blocked" and refused.value.decision.rule == "permission_dialog"
        assert (await eng.get(sid)).state == "blocked"
        await asyncio.sleep(0.2)
        assert b"rm -rf" not in tap.raw(sid)
    finally:
        await eng.stop()


async def test_answer_is_refused_when_not_blocked_and_reports_a_dropped_key(engine):
    s = await engine.create(
        SessionSpec(agent="claude", command=bash("stty -echo; printf ' ? for shortcuts'; sleep 30"), rows=8, cols=60),
        actor=TESTER,
    )
    await wait_state(engine, s.id, "idle")
    with pytest.raises(Conflict, match="not blocked"):
        await engine.answer(s.id, option=1, actor=TESTER)
    with pytest.raises(InvalidRequest):
        await engine.answer(s.id, actor=TESTER)

    stuck = await engine.create(
        SessionSpec(agent="claude", command=bash(stubborn_prompt()), rows=12, cols=60), actor=TESTER
    )
    await wait_state(engine, stuck.id, "blocked")
    result = await engine.answer(stuck.id, keys="2", deadline=0.6, actor=TESTER)
    assert not result.took and result.state == "blocked"


async def test_send_types_into_an_idle_pane(engine):
    s = await engine.create(
        SessionSpec(agent="claude", command=bash(claude_like(work=0.1)), rows=12, cols=60), actor=TESTER
    )
    await wait_state(engine, s.id, "blocked")
    await engine.answer(s.id, option=2, actor=TESTER)
    await wait_state(engine, s.id, "idle")
    await engine.send(s.id, "next task", actor=TESTER)
    await wait_text(engine, s.id, "got next task")


async def test_a_command_the_os_cannot_exec_is_refused_before_it_starts(engine):
    """E2BIG would come from execve after the 201 (the tmux host: from inside the pane); said first."""
    with pytest.raises(InvalidRequest, match="at most 131071"):
        await engine.create(SessionSpec(command=["true", "x" * 200_000]), actor=TESTER)
    with pytest.raises(InvalidRequest, match="the OS takes at most"):
        await engine.create(SessionSpec(command=["true", *["y" * 100_000] * 30]), actor=TESTER)
    assert len(engine) == 0


@pytest.fixture
async def contained_engine(tmp_path):
    """The engine on the pty host with each agent in its sandbox (skipped, saying why, where
    bubblewrap cannot make one)."""
    state = tmp_path / "state"
    state.mkdir()
    host = PtyHost(sandbox=Sandbox(Policy(state)))
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), options=fast(), host=host)
    await eng.start()
    if not host.sandbox.active:  # type: ignore[union-attr]
        await eng.stop()
        pytest.skip(f"bubblewrap cannot make a sandbox here: {host.sandbox.lost}")  # type: ignore[union-attr]
    yield eng
    await eng.stop()


async def test_in_a_sandbox_the_shell_back_signal_still_works(contained_engine, tmp_path):
    """bwrap sits between the host and the shell: the launched process the engine compares with the
    terminal's foreground is the shell inside, found once it runs (``PaneHandle.agent_pid``)."""
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/bash\n" + claude_like(prompt_after=0.2).replace("sleep 30", "exit 0") + "\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    sid = (
        await contained_engine.create(
            SessionSpec(
                agent="shell", command=["bash", "--norc", "--noprofile", "-i"], cwd=str(tmp_path), rows=14, cols=60
            ),
            actor=TESTER,
        )
    ).id
    await wait_text(contained_engine, sid, "bash-")  # its prompt: the shell holds the terminal
    info = await wait_state(contained_engine, sid, "idle")
    assert info.foreground == "bash"
    await contained_engine.write_keys(sid, b"./claude\r", actor=TESTER)
    info = await wait_state(contained_engine, sid, "blocked")
    assert info.foreground == "claude" and info.agent == "claude" and info.rule == "permission_dialog"
    await contained_engine.answer(sid, option=1, actor=TESTER)
    await wait_state(contained_engine, sid, "idle")
    await contained_engine.write_keys(sid, b"bye\r", actor=TESTER)
    deadline = time.monotonic() + 5
    while (await contained_engine.get(sid)).source != "process" and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    info = await contained_engine.get(sid)
    assert (info.state, info.source, info.rule, info.foreground) == ("idle", "process", "bash", "bash")
    # the shell that holds the terminal is the agent inside the sandbox, not the launched bwrap
    assert info.pid is not None and info.foreground_pid is not None and info.foreground_pid != info.pid


async def test_a_shell_running_sleep_reads_working_then_idle_when_it_ends(engine, tmp_path):
    await _sleep_in_a_shell(engine, tmp_path)


async def test_in_a_sandbox_a_shell_running_sleep_reads_working_too(contained_engine, tmp_path):
    await _sleep_in_a_shell(contained_engine, tmp_path)


async def _sleep_in_a_shell(engine: Engine, tmp_path) -> None:
    spec = SessionSpec(
        agent="shell", command=["bash", "--norc", "--noprofile", "-i"], cwd=str(tmp_path), rows=10, cols=60
    )
    # a server started with `&` from a script ignores SIGINT: its panes must not inherit that
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sid = (await engine.create(spec, actor=TESTER)).id
    finally:
        signal.signal(signal.SIGINT, before)
    await wait_text(engine, sid, "bash-")
    await wait_state(engine, sid, "idle")
    await engine.write_keys(sid, b"sleep 100\r", actor=TESTER)  # prints nothing after the echo of its Enter
    info = await wait_state(engine, sid, "working")
    assert (info.source, info.rule, info.foreground) == ("process", "sleep", "sleep")
    await engine.write_keys(sid, b"\x03", actor=TESTER)  # Ctrl-C ends it; the shell prints its prompt again
    info = await wait_state(engine, sid, "idle")
    assert (info.source, info.foreground) == ("screen", "bash")


async def test_hook_report_decides_until_the_screen_changes(engine):
    sid = (
        await engine.create(
            SessionSpec(agent="claude", command=bash(claude_like(prompt_after=1.5)), rows=12, cols=60), actor=TESTER
        )
    ).id
    await wait_state(engine, sid, "working")
    engine.report(sid, {"hook_event_name": "Stop"})  # contradicts a working screen
    info = await engine.get(sid)
    assert (info.state, info.source, info.rule) == ("idle", "hook", "Stop")
    info = await wait_state(engine, sid, "blocked")  # the prompt on screen always wins
    assert info.source == "screen"
    engine.report(sid, {"hook_event_name": "Notification", "notification_type": "idle_prompt"})
    assert (await engine.get(sid)).state == "blocked"


async def test_report_for_a_prompt_not_drawn_yet_holds_until_the_screen_moves(engine):
    sid = await idle_claude(engine)
    engine.report(sid, {"hook_event_name": "PermissionRequest", "tool_name": "Bash"})
    info = await engine.get(sid)
    assert (info.state, info.source, info.rule) == ("blocked", "hook", "PermissionRequest")
    assert (await engine.explain(sid)).decision.event == "PermissionRequest"


async def test_stale_report_expires_without_any_output():
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), options=fast(sweep_ms=50, report_freshness=0.3))
    await eng.start()
    try:
        sid = await idle_claude(eng)
        eng.report(sid, {"hook_event_name": "PreToolUse", "tool_name": "Bash"})
        assert (await eng.get(sid)).state == "working"
        info = await wait_state(eng, sid, "idle", timeout=3)
        assert info.source == "screen"
    finally:
        await eng.stop()


async def test_claude_launch_gets_hooks_and_a_clean_environment(engine, tmp_path, monkeypatch):
    out = tmp_path / "launch.json"
    fake = tmp_path / "claude"
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump({{'argv': sys.argv, 'env': dict(os.environ)}}, open({str(out)!r}, 'w'))\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("PANEWATCH_TOKEN", "the-api-token-must-not-leak")
    monkeypatch.setenv("PANEWATCH_CONFIG", "/server/only/config.toml")
    await engine.reachable_at("http://127.0.0.1:9999", {"PANEWATCH_REPORT_SOCKET": "/run/pw/report.sock"})
    sid = (await engine.create(SessionSpec(agent="claude", env={"MY_VAR": "1"}), actor=TESTER)).id
    await wait_state(engine, sid, "exited")
    launch = json.loads(out.read_text())
    argv, env = launch["argv"], launch["env"]
    assert argv[1:4] == ["--permission-mode", "default", "--settings"]
    assert set(json.loads(argv[4])["hooks"]) >= {
        "UserPromptSubmit",
        "PreToolUse",
        "PermissionRequest",
        "Notification",
        "Stop",
    }
    assert env["PANEWATCH_SESSION"] == sid and "PANEWATCH_REPORT_TOKEN" not in env  # readable by other panes
    assert env["PANEWATCH_URL"] == "http://127.0.0.1:9999" and env["MY_VAR"] == "1"
    assert env["PANEWATCH_REPORT_SOCKET"] == "/run/pw/report.sock"  # the engine's agent_vars reach every agent
    assert env["TERM"] == "xterm-256color"
    assert "PANEWATCH_TOKEN" not in env and "PANEWATCH_CONFIG" not in env  # no server setting reaches agents

    s2 = await engine.create(SessionSpec(agent="claude", hooks=False), actor=TESTER)
    await wait_state(engine, s2.id, "exited")
    assert "--settings" not in json.loads(out.read_text())["argv"]


async def test_unchanged_screens_are_not_reclassified(engine):
    await idle_claude(engine)
    await asyncio.sleep(0.2)
    before = (await engine.stats()).classifications
    await asyncio.sleep(0.5)  # ten sweeps
    assert (await engine.stats()).sweeps >= 5 and (await engine.stats()).classifications == before


async def test_change_driven_mode_classifies_soon_and_caps_a_never_pausing_spinner():
    eng = Engine(
        ManifestStore.from_dirs(bundled_manifest_dir()),
        options=fast(sweep_ms=700, mode="change", settle_ms=30, cap_ms=150),
    )
    await eng.start()
    try:
        spinner = await spinning_claude(eng, every=0.01)
        s = await eng.create(
            SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2)), rows=12, cols=60), actor=TESTER
        )
        await wait_state(eng, spinner.id, "working", timeout=2)
        await wait_state(eng, s.id, "blocked", timeout=3)
    finally:
        await eng.stop()


async def test_a_flooding_pane_does_not_stall_the_others(engine):
    flood = await engine.create(
        SessionSpec(command=bash("head -c 30000000 /dev/urandom | base64"), rows=24, cols=80), actor=TESTER
    )
    s = await engine.create(
        SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.3)), rows=12, cols=60), actor=TESTER
    )
    start = time.monotonic()
    await wait_state(engine, s.id, "blocked", timeout=10)
    assert (await engine.get(flood.id)).bytes_read > 0
    assert time.monotonic() - start < 10
    await engine.delete(flood.id, actor=TESTER)


async def test_the_terminal_answers_cursor_position_queries(engine):
    # a program that asks where the cursor is and waits for the answer, as crossterm TUIs do
    sid = (
        await engine.create(
            SessionSpec(
                command=bash(
                    "stty -echo -icanon; printf 'abc\\x1b[6n'; IFS= read -rsd R reply; printf '\\r\\nreply=%q\\r\\n' \"$reply\"; "
                    "sleep 30"
                ),
                rows=6,
                cols=40,
            ),
            actor=TESTER,
        )
    ).id
    shown = await wait_text(engine, sid, "reply=")
    assert "reply=$'\\E[1;4'" in shown


async def test_launch_is_not_a_finished_turn_but_a_real_turn_end_is(engine):
    notes = []
    engine.notifier.subscribe(notes.append)
    sid = (
        await engine.create(
            SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.8, work=0.3)), rows=12, cols=60),
            actor=TESTER,
        )
    ).id
    await wait_state(engine, sid, "working")
    await asyncio.sleep(0.3)
    assert [n.state for n in notes] == []  # starting -> first read is not "done"
    await wait_state(engine, sid, "blocked")
    await engine.answer(sid, option=1, actor=TESTER)
    await wait_state(engine, sid, "idle")
    assert [n.state for n in notes] == ["blocked", "idle"]


async def test_a_pane_idle_from_launch_never_says_done(engine):
    notes = []
    engine.notifier.subscribe(notes.append)
    sid = await idle_claude(engine)
    assert (await engine.get(sid)).source == "screen"
    await asyncio.sleep(0.2)
    assert notes == []


async def test_a_late_permission_notification_after_an_answer_does_not_reblock(engine):
    sid = (
        await engine.create(
            SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2, work=2.0)), rows=12, cols=60),
            actor=TESTER,
        )
    ).id
    await wait_state(engine, sid, "blocked")
    engine.report(sid, {"hook_event_name": "PermissionRequest", "tool_name": "Bash"})
    result = await engine.answer(sid, option=1, actor=TESTER)
    assert result.took
    engine.report(sid, {"hook_event_name": "PostToolUse", "tool_name": "Bash"})
    # the CLI's ~6 s reminder of the same prompt, arriving after the answer
    ignored = engine.report(sid, {"hook_event_name": "Notification", "notification_type": "permission_prompt"})
    assert ignored is None
    assert (await engine.get(sid)).state == "working"


async def test_a_permission_notification_counts_when_no_permission_request_came(engine):
    sid = await idle_claude(engine)
    report = engine.report(sid, {"hook_event_name": "Notification", "notification_type": "permission_prompt"})
    assert report is not None and (await engine.get(sid)).state == "blocked"


async def test_change_mode_reads_big_repaints_at_once_and_spinner_frames_at_the_sweep_pace():
    eng = Engine(
        ManifestStore.from_dirs(bundled_manifest_dir()),
        options=fast(sweep_ms=5000, mode="change", settle_ms=30, cap_ms=150, change_bytes=256),
    )
    await eng.start()
    try:
        spinner = await spinning_claude(eng, every=0.05)
        await wait_state(eng, spinner.id, "working", timeout=8)
        before = (await eng.stats()).classifications
        await asyncio.sleep(2.0)  # ~40 frames of ~40 bytes
        assert (await eng.stats()).classifications - before <= 10  # not one read per frame
        # a dialog is a big repaint: read once output pauses, long before the 5 s sweep
        s = await eng.create(
            SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2)), rows=12, cols=60), actor=TESTER
        )
        await wait_state(eng, s.id, "blocked", timeout=3)
    finally:
        await eng.stop()


def _show_capture(name: str) -> list[str]:
    """A PTY command that draws a real captured dialog and waits."""
    path = Path(__file__).parent.parent / "fixtures" / f"{name}-32x120.raw"
    return bash(f"stty -echo; cat {shlex.quote(str(path))}; sleep 30")


async def test_a_blocked_pane_says_what_it_asks_in_every_view(engine) -> None:
    events: list[StateChanged] = []
    engine.subscribe(lambda e: events.append(e) if isinstance(e, StateChanged) else None)
    spec = SessionSpec(agent="claude", command=_show_capture("claude/2.1.332/blocked-bash"), rows=32, cols=120)
    sid = (await engine.create(spec, actor=TESTER)).id
    info = await wait_state(engine, sid, "blocked")
    assert info.request.subject == "touch x.txt" and info.request.source == "screen"
    blocked = [e for e in events if e.session == sid and e.state == "blocked"]
    assert blocked[-1].as_dict()["request"]["subject"] == "touch x.txt"
    screen = json.loads((await engine.screen(sid)).model_dump_json())
    assert screen["request"]["question"] == "Do you want to proceed?"

    # the agent's own hook arrives: it decides, the screen's question stays since they agree
    payload = {"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "touch x.txt"}}
    engine.report(sid, clean_report(payload))
    req = (await engine.screen(sid)).request
    assert (req.source, req.subject, req.question, req.disagrees) == (
        "hook",
        "touch x.txt",
        "Do you want to proceed?",
        None,
    )
    explained = await engine.explain(sid)
    assert explained.request == req and explained.signals.report.request.subject == "touch x.txt"

    # a hook that names another command than the screen shows: the hook's, and the difference said
    engine.report(sid, clean_report({**payload, "tool_input": {"command": "rm -rf build"}}))
    req = (await engine.get(sid)).request
    assert (req.subject, req.disagrees) == ("rm -rf build", "the screen reads command 'touch x.txt'")


async def test_a_session_that_is_not_blocked_asks_nothing(engine) -> None:
    spec = SessionSpec(agent="shell", command=bash("printf 'hello\\r\\n'; sleep 30"), rows=6, cols=40)
    sid = (await engine.create(spec, actor=TESTER)).id
    await wait_state(engine, sid, "idle")
    assert (await engine.get(sid)).request is None and (await engine.screen(sid)).request is None
