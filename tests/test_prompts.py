"""The prompt's kind and options, read on the server: the dashboard shows exactly these."""

from __future__ import annotations

import pytest

from panewatch.fixtures import default_root, find_folders, load_folder
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.panes.prompts import numbered_options, read_prompt
from panewatch.screen import Screen

pytestmark = pytest.mark.unit

RULE = "─" * 40
STORE = ManifestStore.from_dirs(bundled_manifest_dir())
BLOCKED = [
    f
    for folder in find_folders(default_root())
    for f in load_folder(folder)
    if f.truth.state == "blocked" and f.agent == "claude"
]


def test_a_menu_after_a_stray_numbered_line_is_read_whole():
    lines = [
        " 1. an agent reply mentioning options",
        RULE,
        " Bash command",
        "   rm -rf build",
        " Do you want to proceed?",
        " ❯ 1. Yes",
        "   2. Yes, and don't ask again for rm commands in /work",
        "   3. No",
        "",
        " Esc to cancel · Tab to amend",
    ]
    assert numbered_options(lines) == [
        {"option": 1, "label": "Yes", "selected": True},
        {"option": 2, "label": "Yes, and don't ask again for rm commands in /work", "selected": False},
        {"option": 3, "label": "No", "selected": False},
    ]


def test_menus_without_a_rule_and_inside_boxes_are_read_too():
    assert [o["label"] for o in numbered_options(["Pick one:", "  1) red", "› 2) blue"])] == ["red", "blue"]
    boxed = ["╭" + "─" * 30 + "╮", "│ ❯ 1. Allow           │", "│   2. Deny            │", "╰" + "─" * 30 + "╯"]
    assert [o["label"] for o in numbered_options(boxed)] == ["Allow", "Deny"]
    assert numbered_options(["2. not a menu", "3. either"]) == []


@pytest.mark.parametrize(
    ("lines", "kind"),
    [
        (["Overwrite file.txt? (y/n) "], "yes_no"),
        (["Proceed? [Y/n]"], "yes_no"),
        (["[sudo] password for ann: "], "password"),
        (["Enter passphrase for key '/root/.ssh/id_ed25519': "], "password"),
        (["What should the branch be called?", "> "], "text"),
    ],
)
def test_other_prompt_kinds(lines, kind):
    prompt = read_prompt(lines, cursor_row=len(lines) - 1)
    assert prompt.kind == kind
    if kind == "yes_no":
        assert [o["keys"] for o in prompt.options] == ["y\r", "n\r"]


@pytest.mark.skipif(not BLOCKED, reason="no blocked Claude fixtures under fixtures/")
@pytest.mark.parametrize("fixture", BLOCKED, ids=[f.name for f in BLOCKED])
def test_every_blocked_claude_capture_gives_its_numbered_options(fixture):
    screen = Screen(fixture.truth.rows, fixture.truth.cols)
    screen.feed(fixture.read())
    manifest = STORE.get("claude")
    assert manifest is not None
    lines = screen.lines()
    verdict = manifest.classify(lines, screen.title, screen.cursor.row)
    assert verdict.state == "blocked"
    prompt = read_prompt(lines, title=screen.title, cursor_row=screen.cursor.row, manifest=manifest, rule=verdict.rule)
    assert prompt.kind == "options", "\n".join(lines)
    assert len(prompt.options) >= 2 and sum(o["selected"] for o in prompt.options) == 1
    numbers = [o.get("option") for o in prompt.options]
    if None in numbers:  # a menu without numbers: arrows to the option, then Enter
        assert all(o["keys"].endswith("\r") for o in prompt.options)
        assert next(o for o in prompt.options if o["selected"])["keys"] == "\r"
    else:
        assert numbers == list(range(1, len(numbers) + 1))


GEMINI_CONFIRMATIONS = [
    f
    for folder in find_folders(default_root())
    for f in load_folder(folder)
    if f.agent == "gemini" and f.truth.kind in ("bash", "bash-option-2", "write")
]


@pytest.mark.parametrize("fixture", GEMINI_CONFIRMATIONS, ids=[f.name for f in GEMINI_CONFIRMATIONS])
def test_every_gemini_confirmation_box_gives_its_options_allow_once_selected(fixture):
    """Gemini marks the selected row with a dot inside its box ("│ ● 1. Allow once │"): the
    approval policy answers by these options, so each box must read whole."""
    screen = Screen(fixture.truth.rows, fixture.truth.cols)
    screen.feed(fixture.read())
    manifest = STORE.get("gemini")
    assert manifest is not None
    lines = screen.lines()
    prompt = read_prompt(lines, cursor_row=screen.cursor.row, manifest=manifest, rule="tool_confirmation")
    assert prompt.kind == "options", "\n".join(lines)
    labels = [o["label"] for o in prompt.options]
    assert labels[0] == "Allow once" and sum(o["selected"] for o in prompt.options) == 1, prompt.options
    assert prompt.options[1]["selected"] == (fixture.truth.kind == "bash-option-2")
    assert labels[-1].startswith("No") and [o["option"] for o in prompt.options] == list(range(1, len(labels) + 1))


def test_a_menu_without_numbers_is_answered_with_arrows():
    lines = [
        RULE,
        " Is this a project you trust?",
        "",
        " ❯ No, exit",
        "   Yes, I trust this folder",
        "",
        " Enter to confirm · Esc to cancel",
    ]
    assert numbered_options(lines) == []
    assert read_prompt(lines).options == [
        {"label": "No, exit", "selected": True, "keys": "\r"},
        {"label": "Yes, I trust this folder", "selected": False, "keys": "\x1b[B\r"},
    ]
