"""The fixed order of signals, table-driven: screen-blocked, fresh report, shell back, screen."""

from __future__ import annotations

import json

import pytest

from panewatch.integrations.claude import (
    CLAUDE_HOOK_EVENTS,
    REPORT_COMMAND,
    UnknownPayload,
    claude_settings,
    state_from_payload,
)
from panewatch.manifest import Verdict
from panewatch.panes.signals import Report, combine

pytestmark = pytest.mark.unit

BLOCKED = Verdict("blocked", "permission_dialog", "dialog")
WORKING = Verdict("working", "interrupt_footer", "footer")
IDLE = Verdict("idle", "idle_prompt_box", "prompt")
NOTHING = Verdict("idle", None, "no rule matched")

NOW = 100.0


def report(state: str, age: float, event: str = "Stop") -> Report:
    return Report(state, event, NOW - age)


CASES = [
    # name, screen, report, screen_changed_at, shell_back, expected (state, source, rule)
    (
        "screen blocked beats a fresh idle report",
        BLOCKED,
        report("idle", 1),
        0.0,
        None,
        ("blocked", "screen", "permission_dialog"),
    ),
    (
        "screen blocked beats the shell being back",
        BLOCKED,
        None,
        0.0,
        "bash",
        ("blocked", "screen", "permission_dialog"),
    ),
    (
        "fresh report beats working screen rules",
        WORKING,
        report("idle", 1, "Stop"),
        50.0,
        None,
        ("idle", "hook", "Stop"),
    ),
    (
        "fresh blocked report beats an idle screen (prompt not drawn yet)",
        IDLE,
        report("blocked", 0.2, "PermissionRequest"),
        50.0,
        None,
        ("blocked", "hook", "PermissionRequest"),
    ),
    (
        "fresh report beats the shell being back",
        IDLE,
        report("working", 1, "PreToolUse"),
        50.0,
        "bash",
        ("working", "hook", "PreToolUse"),
    ),
    (
        "a hook that never arrives: the screen decides",
        WORKING,
        None,
        50.0,
        None,
        ("working", "screen", "interrupt_footer"),
    ),
    (
        "stale report (older than freshness) loses to the screen",
        IDLE,
        report("working", 61, "PreToolUse"),
        0.0,
        None,
        ("idle", "screen", "idle_prompt_box"),
    ),
    (
        "report older than the screen's last change loses (Esc: no Stop hook)",
        IDLE,
        report("working", 5, "PreToolUse"),
        NOW - 2,
        None,
        ("idle", "screen", "idle_prompt_box"),
    ),
    (
        "report contradicting an unchanged screen holds while fresh",
        WORKING,
        report("idle", 5, "Stop"),
        NOW - 30,
        None,
        ("idle", "hook", "Stop"),
    ),
    ("shell back beats other screen rules", WORKING, None, 0.0, "bash", ("idle", "process", "bash")),
    (
        "stale report and shell back: shell back",
        WORKING,
        report("working", 120, "PreToolUse"),
        0.0,
        "zsh",
        ("idle", "process", "zsh"),
    ),
    ("no rule matched: idle, never blocked", NOTHING, None, 0.0, None, ("idle", "screen", None)),
]


@pytest.mark.parametrize(
    ("screen", "rep", "changed", "shell", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_combination_order(screen, rep, changed, shell, expected):
    d = combine(screen, report=rep, now=NOW, freshness=60.0, screen_changed_at=changed, shell_back=shell)
    assert (d.state, d.source, d.decided_by) == expected


def test_exit_beats_everything():
    d = combine(BLOCKED, report=report("working", 1), now=NOW, exit_code=3, exited=True)
    assert (d.state, d.source, d.decided_by, d.exit_code) == ("exited", "exit", "3", 3)


HOOK_CASES = [
    ({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}, "working"),
    ({"hook_event_name": "PreToolUse", "tool_name": "Bash"}, "working"),
    ({"hook_event_name": "PostToolUse", "tool_name": "Bash"}, "working"),
    ({"hook_event_name": "PermissionRequest", "tool_name": "Bash"}, "blocked"),
    ({"hook_event_name": "Notification", "notification_type": "permission_prompt"}, "blocked"),
    ({"hook_event_name": "Notification", "notification_type": "elicitation_dialog"}, "blocked"),
    ({"hook_event_name": "Notification", "notification_type": "idle_prompt"}, "idle"),
    ({"hook_event_name": "Notification", "notification_type": "auth_success"}, "idle"),
    ({"hook_event_name": "Stop"}, "idle"),
    ({"hook_event_name": "StopFailure", "error": "rate_limit"}, "idle"),
    ({"hook_event_name": "SessionEnd", "reason": "other"}, "idle"),
    ({"hook_event_name": "Stop", "agent_id": "sub-1"}, None),
    ({"hook_event_name": "SubagentStop"}, None),
    ({"hook_event_name": "FutureEvent"}, None),
    ({"state": "blocked"}, "blocked"),
    ({"state": "idle", "detail": "done"}, "idle"),
]


@pytest.mark.parametrize(("payload", "state"), HOOK_CASES, ids=[str(c[0]) for c in HOOK_CASES])
def test_hook_events_map_to_states(payload, state):
    assert state_from_payload(payload)[0] == state


@pytest.mark.parametrize("payload", [{}, {"state": "waiting"}, {"hook_event_name": ""}, {"foo": 1}])
def test_malformed_payloads_are_refused(payload):
    with pytest.raises(UnknownPayload):
        state_from_payload(payload)


def test_claude_settings_adds_a_reporting_hook_per_event():
    settings = json.loads(claude_settings())
    assert set(settings) == {"hooks"}
    assert set(settings["hooks"]) == set(CLAUDE_HOOK_EVENTS)
    for entries in settings["hooks"].values():
        (entry,) = entries
        (hook,) = entry["hooks"]
        assert hook["type"] == "command" and hook["command"] == REPORT_COMMAND
    # a service that is down must never break the agent
    assert REPORT_COMMAND.rstrip().endswith("|| true")
    # the pane is named by the kernel on the report socket: no token that another pane could read
    assert "-m 2" in REPORT_COMMAND and '--unix-socket "$PANEWATCH_REPORT_SOCKET"' in REPORT_COMMAND
    assert "TOKEN" not in REPORT_COMMAND


def test_agents_do_not_inherit_ci_markers_but_a_session_may_set_them() -> None:
    """A pane is an interactive terminal: TUIs that see CI=true (Gemini CLI) stop being one."""
    from panewatch.engine._launch import agent_env

    base = {
        "CI": "true",
        "CONTINUOUS_INTEGRATION": "1",
        "CI_JOB_ID": "7",
        "CIRCLE": "x",
        "PATH": "/bin",
        "PANEWATCH_TOKEN": "secret",
    }
    env = agent_env(base, {"PANEWATCH_SESSION": "s1"})
    assert "CI" not in env and "CONTINUOUS_INTEGRATION" not in env and "CI_JOB_ID" not in env
    assert env["CIRCLE"] == "x" and env["PATH"] == "/bin" and "PANEWATCH_TOKEN" not in env
    assert agent_env(base, {"CI": "1"})["CI"] == "1"  # asked for by the session itself
