"""Manifests: validation with file/line/reason, rule order, regions, reloads that keep the good one."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from panewatch.manifest import (
    HORIZONTAL_RULE,
    CompiledManifest,
    ManifestError,
    ManifestStore,
    bundled_manifest_dir,
    parse_manifest,
    region_lines,
)

pytestmark = pytest.mark.unit

HEADER = 'agent = "demo"\nversion = "1"\n'


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def compiled(body: str, tmp_path: Path) -> CompiledManifest:
    path = write(tmp_path, "demo.toml", HEADER + textwrap.dedent(body))
    return CompiledManifest.build(parse_manifest(path), path)


TWO_RULES = """
[[rules]]
name = "prompt"
state = "blocked"
why = "a prompt"
any = ['Do you want']

[[rules]]
name = "busy"
state = "working"
why = "interruptible"
any = ['esc to interrupt']
"""


def test_first_matching_rule_wins_and_blocked_sits_above_working(tmp_path):
    m = compiled(TWO_RULES, tmp_path)
    verdict = m.classify(["Do you want to proceed?", "", "esc to interrupt"])
    assert (verdict.state, verdict.rule, verdict.evidence) == ("blocked", "prompt", "Do you want")
    assert m.classify(["thinking", "esc to interrupt"]).rule == "busy"


def test_no_match_is_idle_never_blocked(tmp_path):
    m = compiled(TWO_RULES, tmp_path)
    verdict = m.classify(["Would you like me to add a test?", "> "])
    assert verdict.state == "idle" and verdict.rule is None


def test_all_any_and_not_combine(tmp_path):
    m = compiled(
        """
        [[rules]]
        name = "menu"
        state = "blocked"
        why = "selected row plus footer, unless it is a transcript"
        all = ['❯ 1\\.']
        any = ['Esc to cancel', 'Enter to select']
        not = ['showing detailed transcript']
    """,
        tmp_path,
    )
    assert m.classify(["❯ 1. Yes", "Esc to cancel"]).state == "blocked"
    assert m.classify(["❯ 1. Yes"]).state == "idle"  # all without any
    assert m.classify(["Esc to cancel"]).state == "idle"  # any without all
    assert m.classify(["❯ 1. Yes", "Enter to select", "showing detailed transcript"]).state == "idle"


def test_ignore_case_flag(tmp_path):
    m = compiled(
        """
        [[rules]]
        name = "x"
        state = "working"
        why = "w"
        any = ['ESC TO INTERRUPT']
        ignore_case = true
    """,
        tmp_path,
    )
    assert m.classify(["esc to interrupt"]).state == "working"


SCREEN = [
    "⏺ Here is my answer.",
    "  Do you want to proceed?",
    "  ❯ 1. Yes",
    "",
    "✻ Pondering… (3s · ↓ 12 tokens)",
    "─" * 40,
    "❯ typed text",
    "─" * 40,
    "  ? for shortcuts",
]


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ("after_last_rule", ["  ? for shortcuts"]),
        ("prompt_box", ["❯ typed text"]),
        ("before_last_rule", SCREEN[:7]),
        ("above_prompt_box", SCREEN[:5]),
        ("bottom:2", ["─" * 40, "  ? for shortcuts"]),
        ("top:2", SCREEN[:2]),
        ("screen", SCREEN),
    ],
)
def test_regions(region, expected):
    assert region_lines(region, SCREEN) == expected


def test_title_and_cursor_line_regions():
    assert region_lines("title", SCREEN, title="✳ Claude") == ["✳ Claude"]
    assert region_lines("cursor_line", SCREEN, cursor_row=6) == ["❯ typed text"]
    assert region_lines("cursor_line", SCREEN, cursor_row=None) == []
    assert region_lines("prompt_box", ["no rules here"]) == []


def test_horizontal_rule_shapes():
    assert HORIZONTAL_RULE.match("─" * 120)
    assert HORIZONTAL_RULE.match("  ╭" + "─" * 30 + "╮")
    assert not HORIZONTAL_RULE.match("── a heading ──")
    assert not HORIZONTAL_RULE.match("-----")


def test_prose_above_the_prompt_box_is_not_a_dialog(tmp_path):
    m = compiled(
        """
        [[rules]]
        name = "dialog"
        state = "blocked"
        why = "live dialog below the last rule"
        region = "after_last_rule"
        all = ['❯\\s*1\\.']
        any = ['Esc to cancel']

        [[rules]]
        name = "spinner"
        state = "working"
        why = "spinner above the box"
        region = "above_prompt_box"
        last = 1
        any = ['…\\s*\\(\\d+s']
    """,
        tmp_path,
    )
    verdict = m.classify(SCREEN)
    assert verdict.state == "working" and verdict.rule == "spinner"
    dialog = [
        *SCREEN[:5],
        "─" * 40,
        " Do you want to proceed?",
        " ❯ 1. Yes",
        "   2. No",
        " Esc to cancel · Tab to amend",
    ]
    assert m.classify(dialog).rule == "dialog"


def test_explain_lists_every_rule_with_evidence(tmp_path):
    m = compiled(TWO_RULES, tmp_path)
    traces = m.explain(["thinking", "esc to interrupt"])
    assert [(t.name, t.matched) for t in traces] == [("prompt", False), ("busy", True)]
    assert traces[1].evidence == ["esc to interrupt"]
    assert "no `any` pattern" in traces[0].reason


# --- refusing broken manifests -------------------------------------------------------------


def refused(tmp_path: Path, body: str) -> ManifestError:
    path = write(tmp_path, "broken.toml", body)
    with pytest.raises(ManifestError) as info:
        parse_manifest(path)
    assert info.value.path == path
    assert str(path) in str(info.value)
    return info.value


def test_toml_syntax_error_names_the_line(tmp_path):
    err = refused(tmp_path, HEADER + "\n[[rules]]\nname = 'x' trailing\nstate = 'idle'\n")
    assert err.line == 5
    assert "TOML syntax" in err.reason
    err = refused(tmp_path, HEADER + "\n[[rules]]\nname = 'x\n")
    assert err.line == 5


def test_bad_regex_names_rule_and_line(tmp_path):
    body = HEADER + TWO_RULES.replace("'esc to interrupt'", "'esc to (interrupt'")
    err = refused(tmp_path, body)
    assert err.rule == 2
    # the line of the pattern itself, inside the second rule
    assert err.line == body.splitlines().index("any = ['esc to (interrupt']") + 1
    assert "(busy)" in err.reason and "not a valid regex" in err.reason


@pytest.mark.parametrize(
    ("line", "bad_line", "rule", "reason"),
    [
        pytest.param('state = "working"', 'state = "waiting"', 2, "state", id="unknown-state"),
        pytest.param(
            'why = "a prompt"', 'why = "a prompt"\nregion = "middle"', 1, "unknown region 'middle'", id="unknown-region"
        ),
    ],
)
def test_a_bad_rule_field_is_refused_naming_the_rule(tmp_path, line, bad_line, rule, reason):
    err = refused(tmp_path, HEADER + TWO_RULES.replace(line, bad_line))
    assert err.rule == rule and reason in err.reason


def test_rule_without_patterns_and_duplicate_names_and_unknown_keys(tmp_path):
    err = refused(tmp_path, HEADER + '[[rules]]\nname = "x"\nstate = "idle"\nwhy = "w"\n')
    assert "at least one pattern" in err.reason
    err = refused(tmp_path, HEADER + TWO_RULES.replace('name = "busy"', 'name = "prompt"'))
    assert "used twice" in err.reason
    err = refused(tmp_path, HEADER + 'colour = "red"\n' + TWO_RULES)
    assert err.line == 3 and "colour" in err.reason


# --- the store: reloads, overrides, extends ------------------------------------------------


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_failed_reload_keeps_the_previous_good_manifest(tmp_path):
    path = write(tmp_path, "demo.toml", HEADER + TWO_RULES)
    store = ManifestStore.from_dirs(tmp_path)
    assert store.get("demo").classify(["esc to interrupt"]).state == "working"

    path.write_text(HEADER + TWO_RULES.replace("'esc to interrupt'", "'(('"), encoding="utf-8")
    bump_mtime(path)
    errors = store.reload_if_changed()
    assert len(errors) == 1 and errors[0].rule == 2
    assert path in store.errors
    assert store.get("demo").classify(["esc to interrupt"]).state == "working"  # still in force
    assert store.reload_if_changed() == []  # the same broken file is not re-reported

    path.write_text(HEADER + TWO_RULES.replace("'esc to interrupt'", "'spinning'"), encoding="utf-8")
    bump_mtime(path)
    assert store.reload_if_changed() == []
    assert store.errors == {}
    assert store.get("demo").classify(["esc to interrupt"]).state == "idle"
    assert store.get("demo").classify(["spinning"]).state == "working"


def test_a_broken_first_version_leaves_the_agent_unknown_but_others_load(tmp_path):
    write(tmp_path, "demo.toml", HEADER + "[[rules]]\n")
    write(tmp_path, "other.toml", 'agent = "other"\nversion = "1"\n' + TWO_RULES)
    store = ManifestStore.from_dirs(tmp_path)
    assert store.get("demo") is None and store.get("other") is not None
    assert len(store.errors) == 1


def test_later_folder_overrides_and_process_lookup(tmp_path):
    base, user = tmp_path / "base", tmp_path / "user"
    base.mkdir(), user.mkdir()
    write(base, "demo.toml", HEADER + 'processes = ["demo-cli"]\n' + TWO_RULES)
    write(user, "demo.toml", HEADER + 'processes = ["demo-cli"]\n' + TWO_RULES.replace("Do you want", "Proceed\\?"))
    store = ManifestStore.from_dirs(base, user)
    assert store.get("demo").classify(["Proceed?"]).state == "blocked"
    assert store.for_process("/usr/local/bin/demo-cli").agent == "demo"
    assert store.for_process("bash") is None


def test_extends_takes_the_base_rules_after_its_own(tmp_path):
    write(tmp_path, "demo.toml", HEADER + TWO_RULES)
    write(
        tmp_path,
        "child.toml",
        'agent = "child"\nversion = "1"\nextends = "demo"\n'
        '[[rules]]\nname = "own"\nstate = "idle"\nwhy = "w"\nany = ["Do you want"]\n',
    )
    store = ManifestStore.from_dirs(tmp_path)
    child = store.get("child")
    assert [r.rule.name for r in child.rules] == ["own", "prompt", "busy"]
    assert child.classify(["Do you want"]).rule == "own"
    assert child.classify(["esc to interrupt"]).rule == "busy"


def test_extends_unknown_agent_is_an_error(tmp_path):
    write(tmp_path, "child.toml", 'agent = "child"\nversion = "1"\nextends = "nobody"\n' + TWO_RULES)
    store = ManifestStore.from_dirs(tmp_path)
    assert store.get("child") is None


def test_bundled_manifests_all_load():
    store = ManifestStore.from_dirs(bundled_manifest_dir())
    assert store.errors == {}
    assert {"claude", "codex", "gemini", "aider", "shell"} <= set(store.agents())
    assert "fake" not in store.agents(), "the lab's fake agent ships with the lab, not the runtime"
    for agent in store.agents():
        states = [r.rule.state for r in store.get(agent).rules]
        # blocked rules come before any working rule
        if "working" in states and "blocked" in states:
            assert max(i for i, s in enumerate(states) if s == "blocked") < states.index("working"), agent
    assert store.for_process("claude").agent == "claude"
    assert store.for_process("bash").agent == "shell"


def test_a_rules_verdict_is_remembered_by_its_region_text_and_the_memo_is_bounded():
    from panewatch import manifest as m

    source = (
        'agent = "t"\nversion = "1"\n[[rules]]\nname = "ask"\nstate = "blocked"\nregion = "bottom:2"\n'
        "any = ['Proceed\\?']\nwhy = \"a question\"\n"
    )
    compiled = m.CompiledManifest.build(m.parse_manifest(Path("t.toml"), source))
    rule = compiled.rules[0]
    calls: list[str] = []
    real = rule.match
    rule.match = lambda text: (calls.append(text), real(text))[1]
    screen = ["spinner 1", "", "Proceed?", "> yes"]
    assert compiled.classify(screen).state == "blocked"
    assert compiled.classify(["spinner 2", "", "Proceed?", "> yes"]).state == "blocked"
    assert len(calls) == 1  # the spinner row is outside the region: its text is the same, no search
    assert compiled.classify(["x", "", "done", "> "]).state == "idle"
    assert len(calls) == 2
    for i in range(m.MEMO_SIZE + 5):
        compiled.classify([f"distinct {i}"])
    assert len(rule.memo) <= m.MEMO_SIZE
