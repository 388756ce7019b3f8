"""What a blocked agent asks (``request``): read off real captured dialogs by the manifests, taken
from hook payloads, merged with the structured one winning, cleaned and bounded. (Carried by
``/screen``, ``/explain``, the record and ``state`` events on real PTYs: tests/test_engine.py.)"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from pydantic import ValidationError

from capture_support import CAPTURES_GROUP, Replay, replay
from panewatch.access.validation import clean_report
from panewatch.manifest import Manifest, ManifestStore, bundled_manifest_dir
from panewatch.panes.asks import Request, from_acp, from_permission, merged, screen_request
from panewatch.screen import Screen

# the captures' replays are shared with the other modules that read them (capture_support.py)
pytestmark = [pytest.mark.unit, pytest.mark.xdist_group(CAPTURES_GROUP)]

STORE = ManifestStore.from_dirs(bundled_manifest_dir())
FIXTURES = Path(__file__).parent.parent / "fixtures"

#: capture → (agent, rule, question, tool, subject kind, subject)
DIALOGS = {
    "claude/2.1.332/blocked-bash": (
        "claude",
        "permission_dialog",
        "Do you want to proceed?",
        "Bash",
        "command",
        "touch x.txt",
    ),
    "claude/2.1.332/blocked-bash-option-2": (
        "claude",
        "permission_dialog",
        "Do you want to proceed?",
        "Bash",
        "command",
        "touch x.txt",
    ),
    "claude/2.1.332/blocked-edit": (
        "claude",
        "permission_dialog",
        "Do you want to make this edit to edit-me.txt?",
        "Edit",
        "path",
        "edit-me.txt",
    ),
    "claude/2.1.332/blocked-write": (
        "claude",
        "permission_dialog",
        "Do you want to create notes.txt?",
        "Write",
        "path",
        "notes.txt",
    ),
    "claude/2.1.332/blocked-question": ("claude", "question_dialog", "Which fruit should I use?", None, None, None),
    "codex/0.171.0/blocked-bash": (
        "codex",
        "approval_modal",
        "Would you like to run the following command?",
        "Bash",
        "command",
        "touch x.txt",
    ),
    "gemini/0.61.0/blocked-bash": (
        "gemini",
        "tool_confirmation",
        "Allow execution of [Shell]?",
        "Shell",
        "command",
        "touch x.txt",
    ),
    "gemini/0.61.0/blocked-bash-option-2": (
        "gemini",
        "tool_confirmation",
        "Allow execution of [Shell]?",
        "Shell",
        "command",
        "touch x.txt",
    ),
    "gemini/0.61.0/blocked-write": (
        "gemini",
        "tool_confirmation",
        "Apply this change?",
        "WriteFile",
        "path",
        "notes.txt",
    ),
    "cline/3.0.65/blocked-bash": (
        "cline",
        "permission_box",
        "Approve tool call?",
        "run_commands",
        "command",
        "touch x.txt",
    ),
    "cline/3.0.65/blocked-write": ("cline", "permission_box", "Approve tool call?", "editor", "path", "notes.txt"),
    "qwen/0.24.4/blocked-bash": (
        "qwen",
        "confirmation",
        "Allow execution of: 'touch'?",
        "Shell",
        "command",
        "touch x.txt",
    ),
    "qwen/0.24.4/blocked-write": ("qwen", "confirmation", "Apply this change?", "WriteFile", "path", "notes.txt"),
}


def read_capture(name: str, size: str) -> Replay:
    rows, cols = (int(n) for n in size.split("x"))
    return replay(FIXTURES / f"{name}-{size}.raw", rows, cols)


@pytest.mark.parametrize("size", ["24x80", "32x120", "50x160"])
@pytest.mark.parametrize("name", list(DIALOGS))
def test_the_manifests_read_what_a_real_dialog_asks(name: str, size: str) -> None:
    agent, rule, question, tool, kind, subject = DIALOGS[name]
    screen = read_capture(name, size)
    manifest = STORE.get(agent)
    verdict = manifest.classify(screen.lines(), screen.title, screen.cursor.row)
    assert verdict.rule == rule
    req = screen_request(manifest, verdict.rule, screen.lines(), screen.title, screen.cursor.row)
    assert req is not None
    assert (req.question, req.tool, req.subject_kind, req.subject, req.source) == (
        question,
        tool,
        kind,
        subject,
        "screen",
    )


def test_a_shell_prompt_is_its_own_question() -> None:
    screen = Screen(6, 60)
    screen.feed(b"$ ./migrate\r\nDrop old tables? [y/N] ")
    manifest = STORE.get("shell")
    verdict = manifest.classify(screen.lines(), screen.title, screen.cursor.row)
    req = screen_request(manifest, verdict.rule, screen.lines(), screen.title, screen.cursor.row)
    assert (verdict.rule, req.question if req else None) == ("yes_no_prompt", "Drop old tables? [y/N]")


def test_a_permission_hook_names_the_tool_and_its_subject() -> None:
    claude = clean_report(
        {
            "hook_event_name": "PermissionRequest",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build/ && make release", "description": "Clean release build"},
        }
    )
    req = from_permission(claude)
    assert (req.tool, req.subject_kind, req.subject, req.detail, req.source) == (
        "Bash",
        "command",
        "rm -rf build/ && make release",
        "Clean release build",
        "hook",
    )
    edit = from_permission({"tool_name": "Edit", "tool_input": {"file_path": "/src/app.py", "old_string": "x"}})
    assert (edit.subject_kind, edit.subject) == ("path", "/src/app.py")
    argv = from_permission({"tool_name": "exec", "tool_input": {"command": ["bash", "-lc", "touch x.txt"]}})
    assert argv.subject == shlex.join(["bash", "-lc", "touch x.txt"])
    assert from_permission({"tool_name": "Bash"}).subject is None  # no input: the tool alone


def test_a_hook_payloads_tool_input_is_kept_flat_cleaned_and_bounded() -> None:
    kept = clean_report(
        {
            "tool_input": {
                "command": "echo \x1b[31mred\x07 " + "x" * 5000,
                "nested": {"deep": "dropped"},
                "argv": ["a", "b"],
                "many": ["x"] * 65,
            }
        }
    )["tool_input"]
    assert set(kept) == {"command", "argv"}
    assert "\x1b" not in kept["command"] and "\x07" not in kept["command"] and len(kept["command"]) == 2000
    req = from_permission({"tool_name": "Bash\u202e", "tool_input": {"command": "a\u200bb\nc\x1b[2J"}})
    assert (req.tool, req.subject) == ("Bash", "ab\nc[2J")  # format and control characters gone, lines kept
    long = from_permission({"tool_name": "Bash", "tool_input": {"command": "y" * 5000}})
    assert long.subject is not None and len(long.subject) == 1000 and long.subject.endswith("\u2026")


def test_the_structured_request_wins_and_a_disagreeing_screen_is_said() -> None:
    hook = from_permission({"tool_name": "Bash", "tool_input": {"command": "touch x.txt"}})
    screen = Request("Do you want to proceed?", "screen", "Bash", "touch  x.txt", "command")
    agreed = merged(hook, screen)
    assert (agreed.source, agreed.question, agreed.subject, agreed.disagrees) == (
        "hook",
        "Do you want to proceed?",
        "touch x.txt",
        None,
    )
    other = Request("Do you want to proceed?", "screen", "Bash", "rm -rf /", "command")
    disagreed = merged(hook, other)
    assert (disagreed.source, disagreed.subject) == ("hook", "touch x.txt")
    assert disagreed.disagrees == "the screen reads command 'rm -rf /'"
    assert merged(None, screen) is screen and merged(hook, None) is hook
    bare = Request("Tool Confirm Shell Command requires execution", "hook")  # a ToolPermission without details
    shown = merged(bare, screen)
    assert (shown.source, shown.question, shown.tool, shown.subject) == (
        "screen",  # what is shown is the screen's reading: never a structured request for the policy
        "Do you want to proceed?",
        "Bash",
        "touch  x.txt",
    )


def test_an_acp_permission_is_its_tool_calls_title_and_input() -> None:
    req = from_acp("Run touch x.txt", "execute", "touch x.txt")
    assert (req.question, req.tool, req.subject_kind, req.subject, req.source) == (
        "Run touch x.txt",
        "execute",
        "command",
        "touch x.txt",
        "acp",
    )


def test_a_manifest_request_is_refused_where_it_cannot_hold() -> None:
    base = {"agent": "x", "version": "1", "rules": []}
    rule = {"name": "r", "state": "blocked", "why": "w", "any": ["x"]}
    Manifest.model_validate({**base, "rules": [{**rule, "request": {"question": [{"line": "(.*)"}]}}]})
    for bad in (
        {**rule, "state": "working", "request": {"question": [{"line": "x"}]}},  # not a prompt
        {**rule, "request": {"question": [{"line": "x", "after": "y"}]}},  # two ways at once
        {**rule, "request": {"question": [{"line": "x", "until": "y"}]}},  # until without after
        {**rule, "request": {"subjects": [{"kind": "file", "line": "x"}]}},  # no such kind
        {**rule, "request": {"question": [{"line": "(a+)+$"}]}},  # a backtracking hazard
        {**rule, "request": {"region": "middle", "question": [{"line": "x"}]}},
    ):
        with pytest.raises(ValidationError):
            Manifest.model_validate({**base, "rules": [bad]})
