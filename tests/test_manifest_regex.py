"""Manifest regexes run in bounded time: catastrophic shapes are refused at load, the rest run
on RE2 with Python's meaning, and a rule past its time budget is reported.

Issue #13: ``(a+)+$`` was accepted and on a screen of 30 ``a`` and a ``!`` froze the service
~50 s. The RE2 translation is checked against Python's ``re`` on every bundled pattern, on
the real fixture screens and on generated text, so the bundled manifests keep their meaning.
"""

from __future__ import annotations

import functools
import logging
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture_support import CAPTURES_GROUP, every_fixture, replayed
from panewatch.backends import available
from panewatch.manifest import (
    CompiledManifest,
    ManifestError,
    ManifestStore,
    _matching,
    _regex,
    backtracking_hazard,
    bundled_manifest_dir,
    compile_rule_pattern,
    parse_manifest,
)

# one worker for the module and the others that read the captures: they share the replays, made
# once per capture and backend (capture_support.py)
pytestmark = [pytest.mark.unit, pytest.mark.xdist_group(CAPTURES_GROUP)]

HAS_RE2 = _regex._re2 is not None
STORE = ManifestStore.from_dirs(bundled_manifest_dir())
FLAGS = re.MULTILINE
BUNDLED = sorted(
    {
        (cr.rule.name, p.pattern, cr.rule.ignore_case)
        for agent in STORE.agents()
        for cr in STORE.get(agent).rules
        for p in (*cr.any, *cr.all, *cr.not_)
    }
)

CATASTROPHIC = [
    r"(a+)+$",
    r"(a*)*b",
    r"(\w+\s?)+$",
    r"(x+x+)+y",
    r"(.*a){12}",
    r"^(\d+)*$",
    r"(a|aa)+$",
    r"(a|a)*$",
    r"(?:[^\S\n]+\S+)+:",
    r"(ab|a)*c",
    r"(a)\1",
]


def _manifest(pattern: str) -> str:
    return textwrap.dedent(f"""\
        agent = "demo"
        version = "1"

        [[rules]]
        name = "prompt"
        state = "blocked"
        why = "a prompt"
        any = ['Do you want']

        [[rules]]
        name = "evil"
        state = "working"
        why = "slow"
        region = "screen"
        any = ['{pattern}']
        """)


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_refused_with_file_line_and_rule(tmp_path, pattern):
    path = tmp_path / "demo.toml"
    path.write_text(_manifest(pattern), encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        parse_manifest(path)
    err = info.value
    assert err.path == path and err.rule == 2
    assert err.line == 15, err  # the `any = [...]` line of rule 2
    assert "(evil)" in err.reason and "refused" in err.reason
    assert ("exponentially" in err.reason) or ("backreference" in err.reason)


def test_a_refused_reload_keeps_the_previous_manifest(tmp_path):
    path = tmp_path / "demo.toml"
    path.write_text(_manifest("esc to interrupt"), encoding="utf-8")
    store = ManifestStore.from_dirs(tmp_path)
    before = store.get("demo")
    path.write_text(_manifest("(a+)+$"), encoding="utf-8")
    import os

    os.utime(path, ns=(1, before.mtime_ns + 10_000_000))
    errors = store.reload_if_changed()
    assert [e.line for e in errors] == [15]
    assert store.get("demo") is before
    assert store.get("demo").classify(["a" * 30 + "!"]).state == "idle"


@pytest.mark.parametrize("pattern", [p for _, p, _ in BUNDLED])
def test_every_bundled_pattern_passes_the_load_check(pattern):
    assert backtracking_hazard(pattern) is None


def test_safe_shapes_are_accepted():
    for pattern in [
        r"^(\w+ )?(ask|code)?> ?$",
        r"(?:[^\S\n]+\([^\n]*\))?",
        r"(?:foo|bar)+",
        r"(ab){3,}",
        r"[yY]/[nN]",
        r"Esc to cancel(?=[^\S\n]*(?:·[^\n]*)?$)",
    ]:
        assert backtracking_hazard(pattern) is None, pattern


@pytest.mark.skipif(not HAS_RE2, reason="google-re2 has no wheel for this platform")
def test_bundled_patterns_run_on_re2_except_lookarounds():
    on_re = [
        p
        for _, p, ic in BUNDLED
        if getattr(compile_rule_pattern(p, FLAGS | (re.I if ic else 0)), "engine", "re") == "re"
    ]
    # lookarounds, and \b (RE2's is ASCII-only, Python's Unicode-aware: a word boundary next to
    # "é" would differ), fall back to Python's engine, under the load-time ReDoS check
    assert all("(?=" in p or "(?!" in p or "(?<" in p or "\\b" in p for p in on_re), on_re
    assert len(on_re) < len(BUNDLED) / 4


@pytest.mark.skipif(not HAS_RE2, reason="google-re2 has no wheel for this platform")
@pytest.mark.parametrize("category", ["\\s", "\\S", "\\w", "\\W", "\\d", "\\D"])
def test_re2_classes_match_pythons_on_every_code_point(category):
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    ours = compile_rule_pattern(f"[{category}]+", 0)
    assert ours.engine == "re2"
    spans_re2 = [m.span() for m in ours._compiled.finditer(text)]
    spans_re = [m.span() for m in re.finditer(f"[{category}]+", text)]
    assert spans_re2 == spans_re


@functools.cache
def _compiled(pattern: str, flags: int):
    """Both engines' compiled pattern, made once per pattern (the texts are what varies)."""
    return compile_rule_pattern(pattern, flags), re.compile(pattern, flags)


def _agree(pattern: str, flags: int, text: str) -> None:
    ours, theirs = _compiled(pattern, flags)
    a, b = ours.search(text), theirs.search(text)
    assert (a is None) == (b is None), (pattern, text)
    if a is not None:
        assert a.group(0) == b.group(0) and a.start() == b.start(), (pattern, text)


FIXTURES = list(every_fixture())


@functools.cache
def fixture_texts() -> list[str]:
    """Every capture's screen as text (made once, when a test first needs it, not at collection)."""
    return [replayed(fx, "pyte").text() for fx in FIXTURES]


@pytest.mark.parametrize("backend", available())
def test_every_fixture_classifies_as_labelled_on_both_engines_and_backends(backend):
    """The 66 captures keep their labels with rules on RE2, on each screen backend."""
    wrong = []
    for fx in FIXTURES:
        s = replayed(fx, backend)
        verdict = STORE.get(fx.agent).classify(s.lines(), s.title, s.cursor.row)
        if verdict.state != fx.truth.state:
            wrong.append((fx.name, fx.truth.state, verdict.state, verdict.rule))
    assert len(FIXTURES) >= 60
    assert wrong == []


@pytest.mark.skipif(not HAS_RE2, reason="google-re2 has no wheel for this platform")
@pytest.mark.parametrize("name,pattern,ignore_case", BUNDLED)
def test_re2_agrees_with_re_on_every_fixture_screen(name, pattern, ignore_case):
    flags = FLAGS | (re.I if ignore_case else 0)
    for text in fixture_texts():
        _agree(pattern, flags, text)


_ALPHABET = st.sampled_from(
    [
        *list("aAyYnN ❯›•◦…·─│>:?()[]/\n\t\xa0\u2003\u3000é1٣_-."),
        "Password",
        "password",
        "Esc to cancel",
        "esc to interrupt",
        "1. ",
        "(Y)es/(N)o",
        "[y/N]",
        "Do you want to proceed?",
        "Working (",
        "ask> ",
    ]
)


@pytest.mark.skipif(not HAS_RE2, reason="google-re2 has no wheel for this platform")
@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=60).map("".join))
def test_re2_agrees_with_re_on_generated_screens(text):
    for _, pattern, ignore_case in BUNDLED:
        _agree(pattern, FLAGS | (re.I if ignore_case else 0), text)


def test_a_rule_past_its_budget_is_reported(tmp_path, monkeypatch, caplog):
    path = tmp_path / "demo.toml"
    path.write_text(_manifest("esc to interrupt"), encoding="utf-8")
    cm = CompiledManifest.build(parse_manifest(path), path)
    monkeypatch.setattr(_matching, "RULE_BUDGET_MS", -1.0)  # every rule is "slow" now
    with caplog.at_level(logging.WARNING, logger="panewatch.manifest"):
        verdict = cm.classify(["nothing here"])
    assert verdict.state == "idle"
    assert set(cm.slow_rules) == {"prompt", "evil"}
    assert any("rule evil took" in r.getMessage() for r in caplog.records)


def test_the_freeze_of_issue_13_cannot_be_loaded(tmp_path):
    """The pattern that froze the service ~50 s is refused, so it never meets the screen."""
    path = Path(tmp_path) / "demo.toml"
    path.write_text(_manifest("(a+)+$"), encoding="utf-8")
    with pytest.raises(ManifestError):
        parse_manifest(path)
