"""Compiled rules: a manifest's regexes compiled, classifying screens (first match wins, a
screen no rule matches is idle) with a memo per rule and a time budget per search."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..states import State
from ._regex import compile_rule_pattern
from ._regions import non_empty, region_lines, rule_indexes
from ._schema import Manifest, Rule

#: A rule whose patterns take longer than this on one screen is reported (logged, kept in
#: ``CompiledManifest.slow_rules``).
RULE_BUDGET_MS = 10.0

log = logging.getLogger("panewatch.manifest")


@dataclass(frozen=True)
class Verdict:
    """A classification of one screen: the state, and the rule (if any) that decided it."""

    state: State
    rule: str | None
    why: str
    evidence: str = ""


@dataclass(frozen=True)
class RuleTrace:
    """How one rule fared on one screen (for ``explain``)."""

    name: str
    state: State
    region: str
    matched: bool
    evidence: list[str]
    reason: str


NO_MATCH = "no rule matched: idle by default (never blocked)"

#: Region texts remembered per rule with their outcome. A spinner frame changes the screen but
#: usually not the text a rule reads, so the same text is not searched again; panes showing the
#: same screen (many agents of one kind) share the memo through their manifest. Bounded: the
#: memo is cleared when full, so a flood of distinct texts costs at most one search each.
MEMO_SIZE = 256

#: One classification's memo, so rules sharing a region cut it once: the region's text under
#: ``(region, last)``, and the horizontal-rule line indexes under ``"rules"``.
_RegionCache = dict[tuple[str, int | None] | str, Any]


@dataclass
class CompiledRule:
    rule: Rule
    any: list[Any]  # re.Pattern, or _Re2Pattern (the same ``pattern``/``search``)
    all: list[Any]
    not_: list[Any]
    memo: dict[str, tuple[bool, list[str], str]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, rule: Rule) -> CompiledRule:
        flags = re.MULTILINE | (re.IGNORECASE if rule.ignore_case else 0)

        def comp(patterns: list[str]) -> list[Any]:
            return [compile_rule_pattern(p, flags) for p in patterns]

        return cls(rule, comp(rule.any), comp(rule.all), comp(rule.not_))

    @property
    def engines(self) -> set[str]:
        """``re2`` and/or ``re``: which engine runs this rule's patterns."""
        return {getattr(p, "engine", "re") for p in (*self.any, *self.all, *self.not_)}

    def match_memo(self, text: str) -> tuple[tuple[bool, list[str], str], bool]:
        """``match(text)``, from the memo when this exact text was searched before; and whether
        it was searched now (only a real search says anything about the rule's cost)."""
        found = self.memo.get(text)
        if found is not None:
            return found, False
        if len(self.memo) >= MEMO_SIZE:
            self.memo.clear()
        found = self.memo[text] = self.match(text)
        return found, True

    def match(self, text: str) -> tuple[bool, list[str], str]:
        """(matched, evidence, reason) for the region's text."""
        evidence: list[str] = []
        for pattern in self.all:
            m = pattern.search(text)
            if m is None:
                return False, evidence, f"`all` pattern {pattern.pattern!r} not found"
            evidence.append(m.group(0))
        if self.any:
            for pattern in self.any:
                m = pattern.search(text)
                if m is not None:
                    evidence.append(m.group(0))
                    break
            else:
                return False, evidence, "no `any` pattern found"
        for pattern in self.not_:
            m = pattern.search(text)
            if m is not None:
                return False, evidence, f"`not` pattern {pattern.pattern!r} found: {m.group(0)!r}"
        return True, evidence, "matched"


@dataclass
class CompiledManifest:
    """A validated manifest with its regexes compiled, ready to classify screens."""

    manifest: Manifest
    rules: list[CompiledRule]
    path: Path | None = None
    mtime_ns: int = 0
    #: rule name -> slowest time (ms) it took on one screen, for rules past RULE_BUDGET_MS
    slow_rules: dict[str, float] = field(default_factory=dict)

    @property
    def agent(self) -> str:
        return self.manifest.agent

    @classmethod
    def build(cls, manifest: Manifest, path: Path | None = None, mtime_ns: int = 0) -> CompiledManifest:
        return cls(manifest, [CompiledRule.build(r) for r in manifest.rules], path, mtime_ns)

    def _region_text(
        self, cache: _RegionCache, rule: Rule, lines: Sequence[str], title: str, cursor_row: int | None
    ) -> str:
        key = (rule.region, rule.last)
        text = cache.get(key)
        if text is None:
            rules = None
            if rule.region.endswith(("rule", "prompt_box")):  # one scan per classification
                rules = cache.get("rules")
                if rules is None:
                    rules = cache["rules"] = rule_indexes(lines)
            selected = region_lines(rule.region, lines, title, cursor_row, rules)
            if rule.last:
                selected = non_empty(selected)[-rule.last :]
            text = cache[key] = "\n".join(selected)
        return text

    def classify(self, lines: Sequence[str], title: str = "", cursor_row: int | None = None) -> Verdict:
        """First matching rule wins; no match means idle."""
        cache: _RegionCache = {}
        for compiled in self.rules:
            text = self._region_text(cache, compiled.rule, lines, title, cursor_row)
            found = compiled.memo.get(text)
            if found is None:  # timed only when searched (reading the CPU clock is not free)
                started = time.thread_time()  # CPU time: a busy machine is not the rule's cost
                found, _ = compiled.match_memo(text)
                took = (time.thread_time() - started) * 1000
                if took > RULE_BUDGET_MS:
                    self._over_budget(compiled.rule, took, len(text))
            matched, evidence, _ = found
            if matched:
                rule = compiled.rule
                return Verdict(rule.state, rule.name, rule.why, evidence[-1] if evidence else "")
        return Verdict(State.idle, None, NO_MATCH)

    def _over_budget(self, rule: Rule, took: float, chars: int) -> None:
        """Report a rule past its time budget (once per new worst), so it can be fixed."""
        if took > self.slow_rules.get(rule.name, 0.0) * 1.5:
            log.warning(
                "manifest %s rule %s took %.1f ms on a %d-character region (budget %.0f ms)",
                self.path or self.agent,
                rule.name,
                took,
                chars,
                RULE_BUDGET_MS,
            )
        self.slow_rules[rule.name] = max(took, self.slow_rules.get(rule.name, 0.0))

    def explain(self, lines: Sequence[str], title: str = "", cursor_row: int | None = None) -> list[RuleTrace]:
        """Every rule in order, matched or not, with the text that matched."""
        cache: _RegionCache = {}
        traces = []
        for compiled in self.rules:
            rule = compiled.rule
            text = self._region_text(cache, rule, lines, title, cursor_row)
            matched, evidence, reason = compiled.match(text)
            if not text.strip():
                reason = f"region {rule.region} is empty" + ("" if matched else f"; {reason}")
            traces.append(RuleTrace(rule.name, rule.state, rule.region, matched, evidence, reason))
        return traces
