"""The runtime with real PTYs: states and their sources, guarded writes, foreground, exit, floods."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time

import pytest

from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.runtime import Conflict, Runtime, SessionError
from panewatch.session import SessionSpec

from scripted import claude_like, stubborn_prompt


async def wait_state(rt: Runtime, sid: str, state: str, timeout: float = 8.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        info = rt.get(sid).info()
        if info["state"] == state:
            return info
        if time.monotonic() > deadline:
            raise AssertionError(f"{sid} stayed {info['state']} ({info['source']} {info['rule']}), "
                                 f"wanted {state}:\n{rt.get(sid).screen.text()}")
        await asyncio.sleep(0.02)


def bash(script: str) -> list[str]:
    return ["bash", "--norc", "--noprofile", "-c", script]


async def test_states_sources_and_events_through_a_turn(runtime):
    events = runtime.events.subscribe()
    s = runtime.create(SessionSpec(agent="claude", command=bash(claude_like()), rows=12, cols=60))
    info = await wait_state(runtime, s.id, "blocked")
    assert (info["source"], info["rule"]) == ("screen", "permission_dialog")
    result = await runtime.answer(s.id, option=1)
    assert result.took and result.state == "working" and result.keys == "1"
    info = await wait_state(runtime, s.id, "idle")
    assert (info["source"], info["rule"]) == ("screen", "idle_prompt_box")
    seen = []
    while not events.queue.empty():
        ev = events.queue.get_nowait()
        if ev["type"] == "state" and ev["session"] == s.id:
            seen.append((ev["prev"], ev["state"]))
    assert ("working", "blocked") in seen and ("blocked", "working") in seen and seen[-1] == ("working", "idle")


async def test_send_is_refused_on_a_blocked_pane_even_between_sweeps():
    rt = Runtime(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=60_000)  # no sweep will run
    await rt.start()
    try:
        s = rt.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.1)), rows=12, cols=60))
        deadline = time.monotonic() + 5
        while b"Esc to cancel" not in s.raw and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert s.decision.state != "blocked"  # the last sweep's answer is stale...
        with pytest.raises(Conflict, match="blocked"):
            await rt.send(s.id, "rm -rf /")  # ...but send reclassifies the screen right now
        assert s.decision.state == "blocked"
        assert b"rm -rf" not in s.raw
    finally:
        await rt.stop()


async def test_answer_is_refused_when_not_blocked_and_reports_a_dropped_key(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash("stty -echo; printf ' ? for shortcuts'; sleep 30"),
                                   rows=8, cols=60))
    await wait_state(runtime, s.id, "idle")
    with pytest.raises(Conflict, match="not blocked"):
        await runtime.answer(s.id, option=1)
    with pytest.raises(SessionError):
        await runtime.answer(s.id)

    stuck = runtime.create(SessionSpec(agent="claude", command=bash(stubborn_prompt()), rows=12, cols=60))
    await wait_state(runtime, stuck.id, "blocked")
    result = await runtime.answer(stuck.id, keys="2", deadline=0.6)
    assert not result.took and result.state == "blocked"


async def test_send_types_into_an_idle_pane(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash(claude_like(work=0.1)), rows=12, cols=60))
    await wait_state(runtime, s.id, "blocked")
    await runtime.answer(s.id, option=2)
    await wait_state(runtime, s.id, "idle")
    await runtime.send(s.id, "next task")
    for _ in range(100):
        if "got next task" in s.screen.text():
            break
        await asyncio.sleep(0.02)
    assert "got next task" in s.screen.text()


async def test_exited_session_keeps_its_last_screen_and_exit_code(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash("printf 'last words\\r\\n'; exit 42"), rows=6, cols=40))
    info = await wait_state(runtime, s.id, "exited")
    assert info["exit_code"] == 42 and info["source"] == "exit"
    assert s.screen.lines()[0] == "last words"
    await asyncio.sleep(0.2)
    assert runtime.get(s.id).info()["state"] == "exited"
    await runtime.delete(s.id)
    with pytest.raises(SessionError):
        runtime.get(s.id)


async def test_a_command_that_cannot_start_gives_an_exited_session_with_the_error(runtime):
    s = runtime.create(SessionSpec(command=["/nonexistent/agent"], rows=6, cols=60))
    info = s.info()
    assert info["state"] == "exited" and "cannot start" in info["error"]
    assert "cannot start" in s.screen.text()
    with pytest.raises(SessionError, match="unknown agent"):
        runtime.create(SessionSpec(agent="nobody"))
    with pytest.raises(SessionError, match="give a command"):
        runtime.create(SessionSpec())


async def test_claude_started_by_hand_in_a_shell_gets_claude_rules_then_the_shell_is_back(runtime, tmp_path):
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/bash\n" + claude_like(prompt_after=0.2).replace("sleep 30", "exit 0") + "\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    s = runtime.create(SessionSpec(agent="shell", command=["bash", "--norc", "--noprofile", "-i"], cwd=str(tmp_path),
                                   rows=14, cols=60))
    info = await wait_state(runtime, s.id, "idle")
    assert info["foreground"] == "bash"
    runtime.get(s.id).proc.write(b"./claude\r")
    info = await wait_state(runtime, s.id, "blocked")
    assert info["foreground"] == "claude" and info["agent"] == "claude" and info["rule"] == "permission_dialog"
    await runtime.answer(s.id, option=1)
    await wait_state(runtime, s.id, "idle")
    runtime.get(s.id).proc.write(b"bye\r")
    deadline = time.monotonic() + 5
    while runtime.get(s.id).info()["source"] != "process" and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    info = runtime.get(s.id).info()
    assert (info["state"], info["source"], info["rule"], info["foreground"]) == ("idle", "process", "bash", "bash")


async def test_hook_report_decides_until_the_screen_changes(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=1.5)), rows=12, cols=60))
    await wait_state(runtime, s.id, "working")
    runtime.report(s.id, {"hook_event_name": "Stop"})  # contradicts a working screen
    info = s.info()
    assert (info["state"], info["source"], info["rule"]) == ("idle", "hook", "Stop")
    info = await wait_state(runtime, s.id, "blocked")  # the prompt on screen always wins
    assert info["source"] == "screen"
    runtime.report(s.id, {"hook_event_name": "Notification", "notification_type": "idle_prompt"})
    assert s.info()["state"] == "blocked"


async def test_report_for_a_prompt_not_drawn_yet_holds_until_the_screen_moves(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40))
    await wait_state(runtime, s.id, "idle")
    runtime.report(s.id, {"hook_event_name": "PermissionRequest", "tool_name": "Bash"})
    info = s.info()
    assert (info["state"], info["source"], info["rule"]) == ("blocked", "hook", "PermissionRequest")


async def test_stale_report_expires_without_any_output():
    rt = Runtime(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=50, report_freshness=0.3)
    await rt.start()
    try:
        s = rt.create(SessionSpec(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40))
        await wait_state(rt, s.id, "idle")
        rt.report(s.id, {"hook_event_name": "PreToolUse", "tool_name": "Bash"})
        assert s.info()["state"] == "working"
        info = await wait_state(rt, s.id, "idle", timeout=3)
        assert info["source"] == "screen"
    finally:
        await rt.stop()


async def test_claude_launch_gets_hooks_and_a_clean_environment(runtime, tmp_path, monkeypatch):
    out = tmp_path / "launch.json"
    fake = tmp_path / "claude"
    fake.write_text("#!/usr/bin/env python3\nimport json, os, sys\n"
                    f"json.dump({{'argv': sys.argv, 'env': dict(os.environ)}}, open({str(out)!r}, 'w'))\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("PANEWATCH_TOKEN", "the-api-token-must-not-leak")
    monkeypatch.setenv("PANEWATCH_CONFIG", "/server/only/config.toml")
    runtime.service_url = "http://127.0.0.1:9999"
    s = runtime.create(SessionSpec(agent="claude", env={"MY_VAR": "1"}))
    await wait_state(runtime, s.id, "exited")
    launch = json.loads(out.read_text())
    argv, env = launch["argv"], launch["env"]
    assert argv[1:4] == ["--permission-mode", "default", "--settings"]
    assert set(json.loads(argv[4])["hooks"]) >= {"UserPromptSubmit", "PreToolUse", "PermissionRequest",
                                                   "Notification", "Stop"}
    assert env["PANEWATCH_SESSION"] == s.id and "PANEWATCH_REPORT_TOKEN" not in env  # readable by other panes
    assert env["PANEWATCH_URL"] == "http://127.0.0.1:9999" and env["MY_VAR"] == "1"
    assert env["TERM"] == "xterm-256color"
    assert "PANEWATCH_TOKEN" not in env and "PANEWATCH_CONFIG" not in env  # no server setting reaches agents

    s2 = runtime.create(SessionSpec(agent="claude", hooks=False))
    await wait_state(runtime, s2.id, "exited")
    assert "--settings" not in json.loads(out.read_text())["argv"]


async def test_unchanged_screens_are_not_reclassified(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40))
    await wait_state(runtime, s.id, "idle")
    await asyncio.sleep(0.2)
    before = runtime.classifications
    await asyncio.sleep(0.5)  # ten sweeps
    assert runtime.classifications == before


async def test_change_driven_mode_classifies_soon_and_caps_a_never_pausing_spinner():
    rt = Runtime(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=700, mode="change", settle_ms=30,
                 cap_ms=150)
    await rt.start()
    try:
        spinner = rt.create(SessionSpec(agent="claude", command=bash(
            "stty -echo; i=0; while :; do printf '\\r\\xe2\\x9c\\xbb Working %d (esc to interrupt)' $i; i=$((i+1)); "
            "sleep 0.01; done"), rows=6, cols=60))
        s = rt.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2)), rows=12, cols=60))
        await wait_state(rt, spinner.id, "working", timeout=2)
        await wait_state(rt, s.id, "blocked", timeout=3)
    finally:
        await rt.stop()


async def test_a_flooding_pane_does_not_stall_the_others(runtime):
    flood = runtime.create(SessionSpec(command=bash("head -c 30000000 /dev/urandom | base64"), rows=24, cols=80))
    s = runtime.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.3)), rows=12, cols=60))
    start = time.monotonic()
    await wait_state(runtime, s.id, "blocked", timeout=10)
    assert flood.info()["state"] != "exited" or flood.bytes_read > 0
    assert time.monotonic() - start < 10
    await runtime.delete(flood.id)


async def test_resize_reaches_the_child_and_the_screen(runtime):
    s = runtime.create(SessionSpec(command=bash("trap 'printf \"size %s\\r\\n\" \"$(stty size)\"' WINCH; "
                                                "while :; do sleep 0.05; done"), rows=10, cols=40))
    await asyncio.sleep(0.2)
    runtime.resize(s.id, 20, 100)
    for _ in range(100):
        if "size 20 100" in s.screen.text():
            break
        await asyncio.sleep(0.02)
    assert "size 20 100" in s.screen.text()
    assert (s.screen.rows, s.screen.cols) == (20, 100)
    with pytest.raises(SessionError):
        runtime.resize(s.id, 1, 5)


async def test_the_terminal_answers_cursor_position_queries(runtime):
    # a program that asks where the cursor is and waits for the answer, as crossterm TUIs do
    s = runtime.create(SessionSpec(command=bash(
        "stty -echo -icanon; printf 'abc\\x1b[6n'; IFS= read -rsd R reply; printf '\\r\\nreply=%q\\r\\n' \"$reply\"; "
        "sleep 30"), rows=6, cols=40))
    for _ in range(100):
        if "reply=" in s.screen.text():
            break
        await asyncio.sleep(0.02)
    assert "reply=$'\\E[1;4'" in s.screen.text()


async def test_launch_is_not_a_finished_turn_but_a_real_turn_end_is(runtime):
    notes = []
    runtime.notifier.subscribe(notes.append)
    s = runtime.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.8, work=0.3)),
                                   rows=12, cols=60))
    await wait_state(runtime, s.id, "working")
    await asyncio.sleep(0.3)
    assert [n.state for n in notes] == []  # starting -> first read is not "done"
    await wait_state(runtime, s.id, "blocked")
    await runtime.answer(s.id, option=1)
    await wait_state(runtime, s.id, "idle")
    assert [n.state for n in notes] == ["blocked", "idle"]


async def test_a_pane_idle_from_launch_never_says_done(runtime):
    notes = []
    runtime.notifier.subscribe(notes.append)
    s = runtime.create(SessionSpec(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40))
    info = await wait_state(runtime, s.id, "idle")
    assert info["source"] == "screen"
    await asyncio.sleep(0.2)
    assert notes == []


async def test_a_late_permission_notification_after_an_answer_does_not_reblock(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2, work=2.0)),
                                   rows=12, cols=60))
    await wait_state(runtime, s.id, "blocked")
    runtime.report(s.id, {"hook_event_name": "PermissionRequest", "tool_name": "Bash"})
    result = await runtime.answer(s.id, option=1)
    assert result.took
    runtime.report(s.id, {"hook_event_name": "PostToolUse", "tool_name": "Bash"})
    # the CLI's ~6 s reminder of the same prompt, arriving after the answer
    ignored = runtime.report(s.id, {"hook_event_name": "Notification", "notification_type": "permission_prompt"})
    assert ignored is None
    assert s.info()["state"] == "working"


async def test_a_permission_notification_counts_when_no_permission_request_came(runtime):
    s = runtime.create(SessionSpec(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40))
    await wait_state(runtime, s.id, "idle")
    report = runtime.report(s.id, {"hook_event_name": "Notification", "notification_type": "permission_prompt"})
    assert report is not None and s.info()["state"] == "blocked"


async def test_change_mode_reads_big_repaints_at_once_and_spinner_frames_at_the_sweep_pace():
    rt = Runtime(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=5000, mode="change", settle_ms=30,
                 cap_ms=150, change_bytes=256)
    await rt.start()
    try:
        spinner = rt.create(SessionSpec(agent="claude", command=bash(
            "stty -echo; i=0; while :; do printf '\\r\\xe2\\x9c\\xbb Working %d (esc to interrupt)' $i; i=$((i+1)); "
            "sleep 0.05; done"), rows=6, cols=60))
        await wait_state(rt, spinner.id, "working", timeout=8)
        before = rt.classifications
        await asyncio.sleep(2.0)  # ~40 frames of ~40 bytes
        assert rt.classifications - before <= 10  # not one read per frame
        # a dialog is a big repaint: read once output pauses, long before the 5 s sweep
        s = rt.create(SessionSpec(agent="claude", command=bash(claude_like(prompt_after=0.2)), rows=12, cols=60))
        await wait_state(rt, s.id, "blocked", timeout=3)
    finally:
        await rt.stop()
