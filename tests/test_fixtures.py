"""Every bundled fixture folder, classified as Panewatch classifies a live pane.

The captures are real Claude Code screens whose labels were checked by ``panewatch lab
capture`` on the screen and in the mock API's log; here the manifests must agree with every
label, and the byte-tail detector they replace must be shown to miss what they catch.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from capture_support import CAPTURES_GROUP, replayed
from panewatch.fixtures import Fixture, find_folders, load_folder
from panewatch.manifest import (
    CompiledManifest,
    ManifestStore,
    bundled_manifest_dir,
    region_lines,
)
from panewatch.tail import strip_tail

# the captures' replays are shared with the other modules that read them (capture_support.py)
pytestmark = [pytest.mark.unit, pytest.mark.xdist_group(CAPTURES_GROUP)]

ROOT = Path(__file__).resolve().parent.parent / "fixtures"
FOLDERS = find_folders(ROOT)
FIXTURES: list[Fixture] = [fx for folder in FOLDERS for fx in load_folder(folder)]
STORE = ManifestStore.from_dirs(bundled_manifest_dir())

#: The seed's eleven kinds (by state) and the hard cases: each must exist at two sizes or more.
REQUIRED_KINDS = {
    "blocked": {"bash", "edit", "plan", "question", "write"},
    "idle": {"fresh", "after-answer", "auto", "after-edit", "after-question", "prose", "interrupted"},
    "working": {"thinking", "tool", "typed"},
}
#: Drawn before the full-screen UI starts, with plain line feeds.
STARTUP_DIALOGS = {"trust", "api-key"}


def manifest_for(fx: Fixture) -> CompiledManifest:
    manifest = STORE.get(fx.agent)
    assert manifest is not None, f"no manifest for agent {fx.agent!r} ({fx.path})"
    return manifest


def test_there_are_claude_fixtures() -> None:
    assert any(fx.agent == "claude" for fx in FIXTURES), f"no claude fixture folder under {ROOT}"


def test_every_raw_file_is_listed_and_every_listed_file_exists() -> None:
    for folder in FOLDERS:
        listed = {fx.truth.file for fx in load_folder(folder)}
        on_disk = {p.name for p in folder.glob("*.raw")}
        assert listed == on_disk, f"{folder}: unlisted {sorted(on_disk - listed)}, missing {sorted(listed - on_disk)}"


@pytest.mark.parametrize("fx", FIXTURES, ids=lambda fx: f"{fx.agent}-{fx.agent_version}/{fx.name}")
def test_screen_classification_matches_the_truth(fx: Fixture) -> None:
    screen = replayed(fx)
    manifest = manifest_for(fx)
    verdict = manifest.classify(screen.lines(), screen.title, screen.cursor.row)
    assert verdict.state == fx.truth.state, (
        f"{fx.name} ({fx.truth.note}): {verdict.state} by {verdict.rule}, truth {fx.truth.state}\n"
        + "\n".join(f"│{line}" for line in screen.lines())
    )


def test_the_byte_tail_misses_the_prompts_the_screen_sees() -> None:
    """The seed's point: the stripped last 8 KB never shows Claude's dialogs (words are placed
    with CSI n G, rows with cursor moves, and there is no newline at all)."""
    blocked = [fx for fx in FIXTURES if fx.agent == "claude" and fx.truth.state == "blocked"]
    assert blocked
    for fx in blocked:
        tail = manifest_for(fx).classify(strip_tail(fx.read()))
        assert tail.state != "blocked", f"{fx.name}: the byte tail saw the prompt ({tail.rule})"
        if fx.truth.kind not in STARTUP_DIALOGS:
            assert b"\n" not in fx.read(), f"{fx.name}: in a session Claude 2.1.332 writes no line feed at all"


def test_required_kinds_at_two_sizes_or_more() -> None:
    for folder in FOLDERS:
        fixtures = load_folder(folder)
        if fixtures[0].agent != "claude":
            continue
        sizes: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)
        for fx in fixtures:
            sizes[(fx.truth.state, fx.truth.kind)].add((fx.truth.rows, fx.truth.cols))
        for state, kinds in REQUIRED_KINDS.items():
            for kind in kinds:
                assert len(sizes[(state, kind)]) >= 2, f"{folder}: {state} {kind} at {sorted(sizes[(state, kind)])}"


def _claude(state: str, kinds: set[str] | None = None) -> list[Fixture]:
    return [
        fx
        for fx in FIXTURES
        if fx.agent == "claude" and fx.truth.state == state and (kinds is None or fx.truth.kind in kinds)
    ]


def _matched(fx: Fixture) -> dict[str, bool]:
    screen = replayed(fx)
    return {t.name: t.matched for t in manifest_for(fx).explain(screen.lines(), screen.title, screen.cursor.row)}


def test_dialogs_are_read_below_the_last_rule_only() -> None:
    """Structure, not phrases: every blocked verdict comes from the region below the last rule,
    and no blocked rule fires on an idle screen whose reply quotes a dialog."""
    manifest = STORE.get("claude")
    assert manifest is not None
    blocked_rules = [r for r in manifest.manifest.rules if r.state == "blocked"]
    assert blocked_rules and all(r.region == "after_last_rule" for r in blocked_rules)
    for fx in _claude("idle", {"prose"}):
        text = "\n".join(replayed(fx).lines())
        assert "Do you want to proceed?" in text and "❯ 1. Yes" in text, "the prose fixture must quote a dialog"
        fired = [name for name, hit in _matched(fx).items() if hit and name in {r.name for r in blocked_rules}]
        assert fired == [], f"{fx.name}: {fired}"


def test_the_spinner_line_alone_tells_work() -> None:
    """Every working capture shows a live spinner line above the input box, so work is seen even
    when typed text takes "esc to interrupt" out of the footer; idle screens (with the
    completion line "✻ Baked for 9s · done …") never match it."""
    for fx in _claude("working"):
        assert _matched(fx)["spinner_line"], fx.name
    for fx in _claude("idle"):
        assert not _matched(fx)["spinner_line"], fx.name


def test_a_labelled_rule_still_bounds_the_input_box() -> None:
    """After a plan, Claude writes a name into the box's top rule (``──── lab-plan ─``); the
    input box must still be found there, or the spinner rule would look at the wrong lines."""
    after_plan = _claude("idle", {"after-plan"})
    assert after_plan
    for fx in after_plan:
        lines = replayed(fx).lines()
        assert any(re.search(r"─ \S+ ─$", line) for line in lines), f"{fx.name}: no labelled rule on screen"
        assert [line for line in region_lines("prompt_box", lines) if line.strip()] == ["❯"], fx.name


@pytest.mark.parametrize("fx", FIXTURES, ids=lambda fx: f"{fx.agent}-{fx.agent_version}/{fx.name}")
def test_every_agents_capture_gives_the_same_result_on_both_backends(fx: Fixture) -> None:
    """The default backend is Ghostty where it installs and pyte elsewhere: a manifest must not
    answer differently on the two, for any agent's captures (same verdict, same rule, same
    evidence, from the same rows)."""
    from panewatch.backends import BackendUnavailable, screen_class

    try:
        screen_class("ghostty")
    except BackendUnavailable as exc:
        pytest.skip(f"the ghostty backend is not installed here: {exc}")
    pyte = replayed(fx)
    ghostty = replayed(fx, "ghostty")
    manifest = manifest_for(fx)
    verdicts = [manifest.classify(s.lines(), s.title, s.cursor.row) for s in (pyte, ghostty)]
    assert verdicts[0] == verdicts[1], f"{fx.name}: pyte {verdicts[0]}, ghostty {verdicts[1]}"
    assert pyte.lines() == ghostty.lines()
