"""Codex, Gemini and Aider captures: every kind a user meets, at three sizes, read right.

``test_fixtures.py`` classifies every fixture of every agent against its label; this file
holds what the non-Claude captures must additionally show: that the plan's kinds all exist,
that no capture reads ``blocked`` unless it is, and the very screens that broke the manifests
written from documentation (Gemini's spinner above the region the old working rule read).
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from capture_support import CAPTURES_GROUP, replayed
from panewatch.fixtures import Fixture, default_root, load_folder
from panewatch.manifest import ManifestStore, bundled_manifest_dir, region_lines

# the captures' replays are shared with the other modules that read them (capture_support.py)
pytestmark = [pytest.mark.unit, pytest.mark.xdist_group(CAPTURES_GROUP)]

STORE = ManifestStore.from_dirs(bundled_manifest_dir())
AGENTS = {
    "gemini": "0.61.0",
    "codex": "0.171.0",
    "aider": "0.86.2",
    "opencode": "1.18.33",
    "qwen": "0.24.4",
    "copilot": "1.0.102",
    "cline": "3.0.65",
    "gptme": "0.35.1",
    "continue": "1.5.47",
}
SIZES = {(32, 120), (24, 80), (50, 160)}
#: What every agent's plan captures, in every one of its turns.
WORKING = {"thinking", "streaming"}
IDLE = {"fresh", "typed-not-sent", "after-answer", "prose", "after-tool", "denied"}
#: Kinds each agent's plan captures (Aider has no approval of an edit in a box, no interrupt),
#: start-up dialogs included (a first start: untrusted folder, no sign-in, Aider's git questions).
REQUIRED = {
    "gemini": {
        "blocked": {"bash", "bash-option-2", "write", "trust-folder", "auth", "api-key"},
        "working": WORKING | {"tool", "typed"},
        "idle": IDLE | {"interrupted", "after-trust", "after-auth"},
    },
    "codex": {
        "blocked": {"bash", "bash-option-2", "trust-folder", "sign-in"},
        "working": WORKING | {"tool", "typed"},
        "idle": IDLE | {"interrupted", "after-trust"},
    },
    "aider": {
        "blocked": {"bash", "create-file", "create-git-repo", "gitignore"},
        "working": WORKING,
        "idle": IDLE | {"after-git-repo", "after-git-repo-default"},
    },
    # the tool-calling agents (lab: mock_tools): a shell command and a file write, Esc mid-think
    "opencode": {"blocked": {"bash", "write"}, "working": {"thinking", "tool"}, "idle": IDLE | {"interrupted"}},
    "qwen": {"blocked": {"bash", "write"}, "working": {"thinking", "tool"}, "idle": IDLE | {"interrupted"}},
    "copilot": {
        "blocked": {"bash", "write", "trust-folder"},
        "working": {"thinking", "tool"},
        "idle": IDLE | {"interrupted", "after-trust"},
    },
    "cline": {
        "blocked": {"bash", "write", "promo"},
        "working": {"thinking", "tool"},
        "idle": IDLE | {"interrupted", "after-promo"},
    },
    # Continue CLI: started with no config, it asks for an Anthropic API key
    "continue": {
        "blocked": {"bash", "write", "api-key"},
        "working": {"thinking", "tool"},
        "idle": IDLE | {"interrupted"},
    },
    # a line-mode CLI (PyPI): Ctrl+C mid-think; started with no conversation named, a picker
    "gptme": {
        "blocked": {"bash", "write", "picker"},
        "working": {"thinking", "tool"},
        "idle": IDLE | {"interrupted", "after-picker"},
    },
}

#: The start-up dialogs: a first start waits for the user's decision before anything else.
STARTUP = {"trust-folder", "auth", "api-key", "sign-in", "create-git-repo", "gitignore", "promo", "picker"}


def _fixtures(agent: str) -> list[Fixture]:
    folder = default_root() / agent / AGENTS[agent]
    if not (folder / "truth.toml").exists():
        return []
    return load_folder(folder)


def _verdict(fx: Fixture):
    manifest = STORE.get(fx.agent)
    assert manifest is not None
    screen = replayed(fx)
    return manifest.classify(screen.lines(), screen.title, screen.cursor.row)


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_kind_at_every_size(agent: str) -> None:
    fixtures = _fixtures(agent)
    assert fixtures, f"no captures in fixtures/{agent}/{AGENTS[agent]} (panewatch lab capture-agent --agent {agent})"
    sizes: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)
    for fx in fixtures:
        sizes[(fx.truth.state, fx.truth.kind)].add((fx.truth.rows, fx.truth.cols))
    missing = [
        f"{state}-{kind} at {sorted(SIZES - sizes[(state, kind)])}"
        for state, kinds in REQUIRED[agent].items()
        for kind in kinds
        if sizes[(state, kind)] != SIZES
    ]
    assert not missing, f"{agent}: missing captures: {missing}"


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_no_false_blocked_and_no_missed_prompt(agent: str) -> None:
    wrong = []
    for fx in _fixtures(agent):
        verdict = _verdict(fx)
        if (verdict.state == "blocked") != (fx.truth.state == "blocked"):
            wrong.append(f"{fx.name}: {verdict.state} by {verdict.rule}")
    assert not wrong, wrong


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_the_manifest_is_checked_against_this_version(agent: str) -> None:
    manifest = STORE.get(agent)
    assert manifest is not None
    assert AGENTS[agent] in manifest.manifest.description, "say in the manifest which captures checked it"
    assert manifest.manifest.startup_timeout > 0, "a blank screen at launch must not read idle"


def test_gemini_spinner_sits_above_the_region_the_old_rule_read() -> None:
    """The bug the documentation-built manifest had: the input box is always drawn and the
    spinner is further up than ``bottom:6``, so a working Gemini read idle. Every working
    capture shows the spinner outside the bottom six lines, and the spinner rule finds it."""
    working = [fx for fx in _fixtures("gemini") if fx.truth.state == "working" and fx.truth.kind != "tool"]
    assert working
    spinner = re.compile(r"\(esc to cancel, \d+s\)")
    for fx in working:
        lines = replayed(fx).lines()
        assert any(spinner.search(line) for line in lines), fx.name
        assert not any(spinner.search(line) for line in region_lines("bottom:6", lines)), fx.name
        assert any("Type your message" in line or re.match(r"^\s*> ", line) for line in lines), fx.name
        assert _verdict(fx).state == "working", fx.name


def test_gemini_titles_say_the_state_out_of_band() -> None:
    titles = {fx.truth.state: set() for fx in _fixtures("gemini")}
    for fx in _fixtures("gemini"):
        if fx.truth.kind not in STARTUP:
            titles[fx.truth.state].add(replayed(fx).title.split("(")[0].strip())
    assert titles, "no gemini captures"
    assert titles["blocked"] == {"✋  Action Required"}, titles
    assert all(t.startswith("◇  Ready") for t in titles["idle"]), titles


@pytest.mark.parametrize("agent", sorted(a for a in AGENTS if REQUIRED[a]["blocked"] & STARTUP))
def test_startup_dialogs_are_blocked_by_the_screen_alone(agent: str) -> None:
    """A first start's dialogs (untrusted folder, no sign-in, Aider's git questions) wait for
    the user, and no title says so (Gemini's reads "◇  Ready", Codex sets none): only a screen
    rule can tell. Each is captured at every size and read blocked by a start-up rule."""
    dialogs = [fx for fx in _fixtures(agent) if fx.truth.kind in STARTUP]
    assert dialogs, f"no start-up dialog captured for {agent}"
    for fx in dialogs:
        screen = replayed(fx)
        assert "Action Required" not in screen.title, (fx.name, screen.title)
        verdict = _verdict(fx)
        assert (fx.truth.state, verdict.state) == ("blocked", "blocked"), (fx.name, verdict)
        assert verdict.rule in {
            "trust_folder",
            "sign_in",
            "startup_dialog",
            "api_key_dialog",
            "confirm_prompt",
            "confirm_prompt_wrapped",
            "question_box",
            "promo_notice",
            "conversation_picker",
            "api_key_prompt",
        }


def test_codex_title_spins_while_working_and_asks_when_blocked() -> None:
    fixtures = _fixtures("codex")
    assert fixtures
    for fx in fixtures:
        title = replayed(fx).title
        if fx.truth.state == "blocked" and fx.truth.kind not in STARTUP:
            assert re.match(r"^\[ [!.] \] Action Required", title), (fx.name, title)
        elif fx.truth.state == "idle":
            assert not re.match(r"^[\u2801-\u28ff]\s", title), (fx.name, title)


def test_qwen_title_says_the_state_out_of_band() -> None:
    """Qwen Code's title: ✳︎ while a confirmation waits, ◐︎ while a turn runs (each glyph with
    U+FE0E, which Claude's idle ✳ has not), plain at idle; the manifest's title rules read it."""
    fixtures = _fixtures("qwen")
    assert fixtures
    for fx in fixtures:
        title = replayed(fx).title
        if fx.truth.state == "blocked":
            assert title.startswith("\u2733\ufe0e "), (fx.name, title)
        elif fx.truth.state == "working":
            assert title.startswith("\u25d0\ufe0e "), (fx.name, title)
        else:
            assert title.startswith("Qwen"), (fx.name, title)


def test_gptme_title_says_the_state_out_of_band() -> None:
    """gptme's title: ❓ while a tool waits for approval, 🤔 while the model is asked, ⌨️ at the
    prompt, and no glyph at all while an approved tool runs (the screen's rule decides then)."""
    fixtures = [fx for fx in _fixtures("gptme") if fx.truth.kind not in STARTUP]
    assert fixtures
    for fx in fixtures:
        title = replayed(fx).title
        if fx.truth.state == "blocked":
            assert title.startswith("gptme - \u2753 waiting for confirmation"), (fx.name, title)
        elif fx.truth.kind == "thinking":
            assert title.startswith("gptme - \U0001f914 generating"), (fx.name, title)
        elif fx.truth.kind == "tool":
            assert title == "gptme - lab-session" and _verdict(fx).rule == "tool_running", (fx.name, title)
        else:
            assert title.startswith("gptme - \u2328\ufe0f waiting for input"), (fx.name, title)
