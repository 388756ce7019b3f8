"""The engine on real PTYs, through its façade: states and their sources, guarded writes, foreground,
exit, floods."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time

import pytest

from engine_support import Tap, bash, screen_text, wait_state, wait_text
from panewatch.engine import Engine
from panewatch.errors import Conflict, InvalidRequest, NotReadingInput, UnknownSession
from panewatch.events import StateChanged
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.session import SessionSpec
from scripted import claude_like, stubborn_prompt


async def idle_claude(engine: Engine) -> str:
    """A pane read with Claude's rules that only ever shows the idle footer, once it reads idle."""
    sid = engine.create(
        SessionSpec(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40)
    )["id"]
    await wait_state(engine, sid, "idle")
    return sid


def spinning_claude(engine: Engine, every: float) -> dict:
    """A pane read with Claude's rules whose spinner line is redrawn every ``every`` s, forever."""
    return engine.create(
        SessionSpec(
            agent="claude",
            command=bash(
                "stty -echo; i=0; while :; do printf '\\r\\xe2\\x9c\\xbb Working %d (esc to interrupt)' $i; "
                f"i=$((i+1)); sleep {every}; done"
            ),
            rows=6,
            cols=60,
        )
    )


async def test_states_sources_and_events_through_a_turn(engine):
    tap = Tap(engine)
    s = engine.create(SessionSpec(agent="claude", command=bash(claude_like()), rows=12, cols=60))
    info = await wait_state(engine, s["id"], "blocked")
    assert (info["source"], info["rule"]) == ("screen", "permission_dialog")
    result = await engine.answer(s["id"], option=1)
    assert result.took and result.state == "working" and result.keys == "1"
    info = await wait_state(engine, s["id"], "idle")
    assert (info["source"], info["rule"]) == ("screen", "idle_prompt_box")
    seen = [(ev.prev, ev.state) for ev in tap.events if isinstance(ev, StateChanged) and ev.session == s["id"]]
    assert ("working", "blocked") in seen and ("blocked", "working") in seen and seen[-1] == ("working", "idle")


async def test_send_is_refused_on_a_blocked_pane_even_between_sweeps():
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=60_000)  # no sweep will run
    await eng.start()
    tap = Tap(eng)
    try:
        sid = eng.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.1)), rows=12, cols=60))[
            "id"
        ]
        deadline = time.monotonic() + 5
        while b"Esc to cancel" not in tap.raw(sid) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert eng.get(sid)["state"] != "blocked"  # the last sweep's answer is stale...
        with pytest.raises(Conflict, match="blocked") as refused:
            await eng.send(sid, "rm -rf /")  # ...but send reclassifies the screen right now
        assert refused.value.decision.state == "blocked" and refused.value.decision.rule == "permission_dialog"
        assert eng.get(sid)["state"] == "blocked"
        await asyncio.sleep(0.2)
        assert b"rm -rf" not in tap.raw(sid)
    finally:
        await eng.stop()


async def test_answer_is_refused_when_not_blocked_and_reports_a_dropped_key(engine):
    s = engine.create(
        SessionSpec(agent="claude", command=bash("stty -echo; printf ' ? for shortcuts'; sleep 30"), rows=8, cols=60)
    )
    await wait_state(engine, s["id"], "idle")
    with pytest.raises(Conflict, match="not blocked"):
        await engine.answer(s["id"], option=1)
    with pytest.raises(InvalidRequest):
        await engine.answer(s["id"])

    stuck = engine.create(SessionSpec(agent="claude", command=bash(stubborn_prompt()), rows=12, cols=60))
    await wait_state(engine, stuck["id"], "blocked")
    result = await engine.answer(stuck["id"], keys="2", deadline=0.6)
    assert not result.took and result.state == "blocked"


async def test_send_types_into_an_idle_pane(engine):
    s = engine.create(SessionSpec(agent="claude", command=bash(claude_like(work=0.1)), rows=12, cols=60))
    await wait_state(engine, s["id"], "blocked")
    await engine.answer(s["id"], option=2)
    await wait_state(engine, s["id"], "idle")
    await engine.send(s["id"], "next task")
    await wait_text(engine, s["id"], "got next task")


async def test_an_agent_that_stops_reading_its_input_gets_not_reading_input(engine):
    s = engine.create(SessionSpec(command=bash("stty raw -echo; printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40))
    await wait_text(engine, s["id"], "for shortcuts")
    with pytest.raises(NotReadingInput, match="not reading its input"):
        for _ in range(40):  # 4 MB into a pane whose agent never reads
            await engine.send(s["id"], "x" * 100_000, enter=False)
    assert engine.get(s["id"])["state"] != "exited"


async def test_exited_session_keeps_its_last_screen_and_exit_code(engine):
    s = engine.create(SessionSpec(agent="claude", command=bash("printf 'last words\\r\\n'; exit 42"), rows=6, cols=40))
    info = await wait_state(engine, s["id"], "exited")
    assert info["exit_code"] == 42 and info["source"] == "exit" and info["rule"] == "42"
    assert engine.screen(s["id"])["rows"][0] == "last words"
    await asyncio.sleep(0.2)
    assert engine.get(s["id"])["state"] == "exited"
    with pytest.raises(Conflict, match="exited"):
        await engine.send(s["id"], "anyone?")
    await engine.delete(s["id"])
    with pytest.raises(UnknownSession):
        engine.get(s["id"])


async def test_a_command_that_cannot_start_gives_an_exited_session_with_the_error(engine):
    info = engine.create(SessionSpec(command=["/nonexistent/agent"], rows=6, cols=60))
    assert info["state"] == "exited" and "cannot start" in info["error"]
    assert "cannot start" in screen_text(engine, info["id"])
    with pytest.raises(InvalidRequest, match="unknown agent"):
        engine.create(SessionSpec(agent="nobody"))
    with pytest.raises(InvalidRequest, match="give a command"):
        engine.create(SessionSpec())


async def test_claude_started_by_hand_in_a_shell_gets_claude_rules_then_the_shell_is_back(engine, tmp_path):
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/bash\n" + claude_like(prompt_after=0.2).replace("sleep 30", "exit 0") + "\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    sid = engine.create(
        SessionSpec(agent="shell", command=["bash", "--norc", "--noprofile", "-i"], cwd=str(tmp_path), rows=14, cols=60)
    )["id"]
    info = await wait_state(engine, sid, "idle")
    assert info["foreground"] == "bash"
    engine.write_keys(sid, b"./claude\r")
    info = await wait_state(engine, sid, "blocked")
    assert info["foreground"] == "claude" and info["agent"] == "claude" and info["rule"] == "permission_dialog"
    await engine.answer(sid, option=1)
    await wait_state(engine, sid, "idle")
    engine.write_keys(sid, b"bye\r")
    deadline = time.monotonic() + 5
    while engine.get(sid)["source"] != "process" and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    info = engine.get(sid)
    assert (info["state"], info["source"], info["rule"], info["foreground"]) == ("idle", "process", "bash", "bash")


async def test_hook_report_decides_until_the_screen_changes(engine):
    sid = engine.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=1.5)), rows=12, cols=60))[
        "id"
    ]
    await wait_state(engine, sid, "working")
    engine.report(sid, {"hook_event_name": "Stop"})  # contradicts a working screen
    info = engine.get(sid)
    assert (info["state"], info["source"], info["rule"]) == ("idle", "hook", "Stop")
    info = await wait_state(engine, sid, "blocked")  # the prompt on screen always wins
    assert info["source"] == "screen"
    engine.report(sid, {"hook_event_name": "Notification", "notification_type": "idle_prompt"})
    assert engine.get(sid)["state"] == "blocked"


async def test_report_for_a_prompt_not_drawn_yet_holds_until_the_screen_moves(engine):
    sid = await idle_claude(engine)
    engine.report(sid, {"hook_event_name": "PermissionRequest", "tool_name": "Bash"})
    info = engine.get(sid)
    assert (info["state"], info["source"], info["rule"]) == ("blocked", "hook", "PermissionRequest")
    assert engine.explain(sid)["decision"]["event"] == "PermissionRequest"


async def test_stale_report_expires_without_any_output():
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=50, report_freshness=0.3)
    await eng.start()
    try:
        sid = await idle_claude(eng)
        eng.report(sid, {"hook_event_name": "PreToolUse", "tool_name": "Bash"})
        assert eng.get(sid)["state"] == "working"
        info = await wait_state(eng, sid, "idle", timeout=3)
        assert info["source"] == "screen"
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
    engine.service_url = "http://127.0.0.1:9999"
    engine.agent_vars["PANEWATCH_REPORT_SOCKET"] = "/run/pw/report.sock"
    sid = engine.create(SessionSpec(agent="claude", env={"MY_VAR": "1"}))["id"]
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

    s2 = engine.create(SessionSpec(agent="claude", hooks=False))
    await wait_state(engine, s2["id"], "exited")
    assert "--settings" not in json.loads(out.read_text())["argv"]


async def test_unchanged_screens_are_not_reclassified(engine):
    await idle_claude(engine)
    await asyncio.sleep(0.2)
    before = engine.stats()["classifications"]
    await asyncio.sleep(0.5)  # ten sweeps
    assert engine.stats()["sweeps"] >= 5 and engine.stats()["classifications"] == before


@pytest.mark.slow
async def test_change_driven_mode_classifies_soon_and_caps_a_never_pausing_spinner():
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=700, mode="change", settle_ms=30, cap_ms=150)
    await eng.start()
    try:
        spinner = spinning_claude(eng, every=0.01)
        s = eng.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2)), rows=12, cols=60))
        await wait_state(eng, spinner["id"], "working", timeout=2)
        await wait_state(eng, s["id"], "blocked", timeout=3)
    finally:
        await eng.stop()


async def test_a_flooding_pane_does_not_stall_the_others(engine):
    flood = engine.create(SessionSpec(command=bash("head -c 30000000 /dev/urandom | base64"), rows=24, cols=80))
    s = engine.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.3)), rows=12, cols=60))
    start = time.monotonic()
    await wait_state(engine, s["id"], "blocked", timeout=10)
    assert engine.get(flood["id"])["bytes_read"] > 0
    assert time.monotonic() - start < 10
    await engine.delete(flood["id"])


async def test_resize_reaches_the_child_and_the_screen(engine):
    sid = engine.create(
        SessionSpec(
            command=bash('trap \'printf "size %s\\r\\n" "$(stty size)"\' WINCH; while :; do sleep 0.05; done'),
            rows=10,
            cols=40,
        )
    )["id"]
    await asyncio.sleep(0.2)
    engine.resize(sid, 20, 100)
    await wait_text(engine, sid, "size 20 100")
    assert engine.screen(sid)["size"] == {"rows": 20, "cols": 100}
    with pytest.raises(InvalidRequest):
        engine.resize(sid, 1, 5)


async def test_the_terminal_answers_cursor_position_queries(engine):
    # a program that asks where the cursor is and waits for the answer, as crossterm TUIs do
    sid = engine.create(
        SessionSpec(
            command=bash(
                "stty -echo -icanon; printf 'abc\\x1b[6n'; IFS= read -rsd R reply; printf '\\r\\nreply=%q\\r\\n' \"$reply\"; "
                "sleep 30"
            ),
            rows=6,
            cols=40,
        )
    )["id"]
    shown = await wait_text(engine, sid, "reply=")
    assert "reply=$'\\E[1;4'" in shown


async def test_launch_is_not_a_finished_turn_but_a_real_turn_end_is(engine):
    notes = []
    engine.notifier.subscribe(notes.append)
    sid = engine.create(
        SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.8, work=0.3)), rows=12, cols=60)
    )["id"]
    await wait_state(engine, sid, "working")
    await asyncio.sleep(0.3)
    assert [n.state for n in notes] == []  # starting -> first read is not "done"
    await wait_state(engine, sid, "blocked")
    await engine.answer(sid, option=1)
    await wait_state(engine, sid, "idle")
    assert [n.state for n in notes] == ["blocked", "idle"]


async def test_a_pane_idle_from_launch_never_says_done(engine):
    notes = []
    engine.notifier.subscribe(notes.append)
    sid = await idle_claude(engine)
    assert engine.get(sid)["source"] == "screen"
    await asyncio.sleep(0.2)
    assert notes == []


async def test_a_late_permission_notification_after_an_answer_does_not_reblock(engine):
    sid = engine.create(
        SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2, work=2.0)), rows=12, cols=60)
    )["id"]
    await wait_state(engine, sid, "blocked")
    engine.report(sid, {"hook_event_name": "PermissionRequest", "tool_name": "Bash"})
    result = await engine.answer(sid, option=1)
    assert result.took
    engine.report(sid, {"hook_event_name": "PostToolUse", "tool_name": "Bash"})
    # the CLI's ~6 s reminder of the same prompt, arriving after the answer
    ignored = engine.report(sid, {"hook_event_name": "Notification", "notification_type": "permission_prompt"})
    assert ignored is None
    assert engine.get(sid)["state"] == "working"


async def test_a_permission_notification_counts_when_no_permission_request_came(engine):
    sid = await idle_claude(engine)
    report = engine.report(sid, {"hook_event_name": "Notification", "notification_type": "permission_prompt"})
    assert report is not None and engine.get(sid)["state"] == "blocked"


@pytest.mark.slow
async def test_change_mode_reads_big_repaints_at_once_and_spinner_frames_at_the_sweep_pace():
    eng = Engine(
        ManifestStore.from_dirs(bundled_manifest_dir()),
        sweep_ms=5000,
        mode="change",
        settle_ms=30,
        cap_ms=150,
        change_bytes=256,
    )
    await eng.start()
    try:
        spinner = spinning_claude(eng, every=0.05)
        await wait_state(eng, spinner["id"], "working", timeout=8)
        before = eng.stats()["classifications"]
        await asyncio.sleep(2.0)  # ~40 frames of ~40 bytes
        assert eng.stats()["classifications"] - before <= 10  # not one read per frame
        # a dialog is a big repaint: read once output pauses, long before the 5 s sweep
        s = eng.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2)), rows=12, cols=60))
        await wait_state(eng, s["id"], "blocked", timeout=3)
    finally:
        await eng.stop()
