"""Per-agent TOML manifests: ordered screen rules, and the store that keeps them fresh.

Rules are data so they can follow an agent's new wording without a release. The first rule
that matches wins; ``blocked`` rules are written above ``working`` ones (an agent keeps its
"esc to interrupt" footer under an open prompt); a screen no rule matches is ``idle``, never
``blocked``, because a false "needs you" costs more than a late one.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

State = Literal["blocked", "working", "idle"]
STATES: tuple[str, ...] = ("blocked", "working", "idle")

#: A line drawn as a horizontal rule (Claude's prompt box and dialog borders). The rule may end
#: in a label (Claude 2.1.332 writes the session's name there after a plan: ``──── lab-plan ─``).
HORIZONTAL_RULE = re.compile(r"^\s*[╭╰├┌└]?[─━═]{8,}(?:[^\S\n]+\S(?:[^\n]*\S)?[^\S\n]+[─━═]+)?[╮╯┤┐┘]?\s*$")

_REGION = re.compile(
    r"^(screen|title|cursor_line|after_last_rule|before_last_rule|prompt_box|above_prompt_box"
    r"|bottom:[1-9][0-9]*|top:[1-9][0-9]*)$"
)

REGIONS_HELP = (
    "screen, title, cursor_line, after_last_rule, before_last_rule, prompt_box, "
    "above_prompt_box, bottom:N, top:N"
)


class Rule(BaseModel):
    """One screen rule: regexes searched in a region of the visible screen."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    state: State
    why: str = Field(min_length=1)
    region: str = "screen"
    #: Keep only the last N non-empty lines of the region.
    last: int | None = Field(default=None, ge=1)
    any: list[str] = []
    all: list[str] = []
    not_: list[str] = Field(default=[], alias="not")
    ignore_case: bool = False

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str) -> str:
        if not _REGION.match(value):
            raise ValueError(f"unknown region {value!r}; known: {REGIONS_HELP}")
        return value

    @field_validator("any", "all", "not_")
    @classmethod
    def _valid_regexes(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {i + 1} {pattern!r} is not a valid regex: {exc}") from None
        return patterns

    @model_validator(mode="after")
    def _has_patterns(self) -> Rule:
        if not self.any and not self.all:
            raise ValueError("a rule needs at least one pattern in `any` or `all`")
        return self


class Manifest(BaseModel):
    """What Panewatch knows about one agent CLI."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str
    description: str = ""
    #: Take the rules of another manifest, after this file's own.
    extends: str | None = None
    #: Program names (``/proc/PID/comm`` or argv[0] basename) that identify this agent.
    processes: list[str] = []
    #: Launch command when a session names the agent but gives no command.
    command: list[str] = []
    #: Command that resumes the agent's conversation after its pane was lost (a killed tmux, a
    #: reboot); ``{agent_session_id}`` is the id the agent's hooks reported. Empty: not resumable.
    resume: list[str] = []
    #: Which hook integration the launcher may add (``claude``: ``--settings`` hooks).
    hooks: Literal["claude"] | None = None
    #: Keys that pick option ``{n}`` of a prompt (Claude's menus take the digit alone).
    option_keys: str = Field(default="{n}", pattern=r"\{n\}")
    rules: Annotated[list[Rule], Field(default=[])]

    @field_validator("resume")
    @classmethod
    def _resume_has_id(cls, value: list[str]) -> list[str]:
        if value and not any("{agent_session_id}" in part for part in value):
            raise ValueError("resume must contain {agent_session_id} (the conversation to resume)")
        return value

    @model_validator(mode="after")
    def _unique_rule_names(self) -> Manifest:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.name in seen:
                raise ValueError(f"rule name {rule.name!r} is used twice")
            seen.add(rule.name)
        return self


class ManifestError(Exception):
    """A manifest that was refused, with where and why."""

    def __init__(self, path: Path | str, reason: str, line: int | None = None, rule: int | None = None):
        self.path, self.reason, self.line, self.rule = Path(path), reason, line, rule
        where = f"{self.path}:{line}" if line else str(self.path)
        which = f" rule {rule}" if rule else ""
        super().__init__(f"{where}:{which} {reason}")

    def as_dict(self) -> dict[str, object]:
        return {"file": str(self.path), "line": self.line, "rule": self.rule, "reason": self.reason}


# --- regions ------------------------------------------------------------------------------


def _non_empty(lines: Iterable[str]) -> list[str]:
    return [line for line in lines if line.strip()]


def _rule_indexes(lines: Sequence[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if HORIZONTAL_RULE.match(line)]


def region_lines(region: str, lines: Sequence[str], title: str = "", cursor_row: int | None = None) -> list[str]:
    """The lines of the screen a region names (see ``REGIONS_HELP``)."""
    if region == "screen":
        return list(lines)
    if region == "title":
        return [title]
    if region == "cursor_line":
        return [lines[cursor_row]] if cursor_row is not None and 0 <= cursor_row < len(lines) else []
    if region.startswith("bottom:"):
        return _non_empty(lines)[-int(region[7:]):]
    if region.startswith("top:"):
        return _non_empty(lines)[: int(region[4:])]
    rules = _rule_indexes(lines)
    if region == "after_last_rule":
        return list(lines[rules[-1] + 1:]) if rules else []
    if region == "before_last_rule":
        return list(lines[: rules[-1]]) if rules else list(lines)
    if region == "prompt_box":
        return list(lines[rules[-2] + 1: rules[-1]]) if len(rules) >= 2 else []
    if region == "above_prompt_box":
        return list(lines[: rules[-2]]) if len(rules) >= 2 else []
    raise ValueError(f"unknown region {region!r}")


# --- compiled rules -----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """A classification of one screen: the state, and the rule (if any) that decided it."""

    state: str
    rule: str | None
    why: str
    evidence: str = ""


@dataclass(frozen=True)
class RuleTrace:
    """How one rule fared on one screen (for ``explain``)."""

    name: str
    state: str
    region: str
    matched: bool
    evidence: list[str]
    reason: str


NO_MATCH = "no rule matched: idle by default (never blocked)"


@dataclass
class CompiledRule:
    rule: Rule
    any: list[re.Pattern[str]]
    all: list[re.Pattern[str]]
    not_: list[re.Pattern[str]]

    @classmethod
    def build(cls, rule: Rule) -> CompiledRule:
        flags = re.MULTILINE | (re.IGNORECASE if rule.ignore_case else 0)
        comp = lambda ps: [re.compile(p, flags) for p in ps]  # noqa: E731
        return cls(rule, comp(rule.any), comp(rule.all), comp(rule.not_))

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

    @property
    def agent(self) -> str:
        return self.manifest.agent

    @classmethod
    def build(cls, manifest: Manifest, path: Path | None = None, mtime_ns: int = 0) -> CompiledManifest:
        return cls(manifest, [CompiledRule.build(r) for r in manifest.rules], path, mtime_ns)

    def _region_text(self, cache: dict, rule: Rule, lines: Sequence[str], title: str, cursor_row: int | None) -> str:
        key = (rule.region, rule.last)
        text = cache.get(key)
        if text is None:
            selected = region_lines(rule.region, lines, title, cursor_row)
            if rule.last:
                selected = _non_empty(selected)[-rule.last:]
            text = cache[key] = "\n".join(selected)
        return text

    def classify(self, lines: Sequence[str], title: str = "", cursor_row: int | None = None) -> Verdict:
        """First matching rule wins; no match means idle."""
        cache: dict = {}
        for compiled in self.rules:
            text = self._region_text(cache, compiled.rule, lines, title, cursor_row)
            matched, evidence, _ = compiled.match(text)
            if matched:
                rule = compiled.rule
                return Verdict(rule.state, rule.name, rule.why, evidence[-1] if evidence else "")
        return Verdict("idle", None, NO_MATCH)

    def explain(self, lines: Sequence[str], title: str = "", cursor_row: int | None = None) -> list[RuleTrace]:
        """Every rule in order, matched or not, with the text that matched."""
        cache: dict = {}
        traces = []
        for compiled in self.rules:
            rule = compiled.rule
            text = self._region_text(cache, rule, lines, title, cursor_row)
            matched, evidence, reason = compiled.match(text)
            if not text.strip():
                reason = f"region {rule.region} is empty" + ("" if matched else f"; {reason}")
            traces.append(RuleTrace(rule.name, rule.state, rule.region, matched, evidence, reason))
        return traces


# --- loading ------------------------------------------------------------------------------


_TOML_LINE = re.compile(r"at line (\d+)")


def _line_of_rule(source: str, index: int) -> int | None:
    """Line number of the ``index``-th (0-based) ``[[rules]]`` header."""
    seen = -1
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip() == "[[rules]]":
            seen += 1
            if seen == index:
                return number
    return None


def _line_of_key(source: str, key: str) -> int | None:
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, line in enumerate(source.splitlines(), 1):
        if line.strip().startswith("[["):
            return None
        if pattern.match(line):
            return number
    return None


def parse_manifest(path: Path, source: str | None = None) -> Manifest:
    """Read and validate one manifest file, or raise ``ManifestError`` saying where and why."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8") if source is None else source
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(path, f"cannot read: {exc}") from None
    try:
        data = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_LINE.search(str(exc))
        line = int(m.group(1)) if m else (len(source.splitlines()) if "end of document" in str(exc) else None)
        raise ManifestError(path, f"TOML syntax: {exc}", line=line) from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"]
        where = ".".join(str(p) for p in loc)
        reason = f"{where}: {err['msg']}" if where else err["msg"]
        if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
            index = loc[1]
            rules = data.get("rules") or []
            name = rules[index].get("name") if index < len(rules) and isinstance(rules[index], dict) else None
            detail = ".".join(str(p) for p in loc[2:])
            reason = f"({name or 'unnamed'}) {detail + ': ' if detail else ''}{err['msg']}"
            raise ManifestError(path, reason, line=_line_of_rule(source, index), rule=index + 1) from None
        line = _line_of_key(source, str(loc[0])) if loc else None
        raise ManifestError(path, reason, line=line) from None


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def bundled_manifest_dir() -> Path:
    """``manifests/`` shipped in the wheel, or the repository's when running from a checkout."""
    here = Path(__file__).resolve().parent
    packaged = here / "manifests"
    return packaged if packaged.is_dir() else here.parent.parent / "manifests"


@dataclass
class ManifestStore:
    """All agents' manifests from one or more folders; later folders override earlier ones.

    ``reload_if_changed`` re-reads files whose mtime moved. A file that fails keeps the last
    good version of that agent in force and its error is kept in ``errors`` for the API.
    """

    dirs: list[Path]
    _raw: dict[Path, tuple[int, Manifest]] = field(default_factory=dict)
    errors: dict[Path, ManifestError] = field(default_factory=dict)
    _by_agent: dict[str, CompiledManifest] = field(default_factory=dict)
    _by_process: dict[str, str] = field(default_factory=dict)
    generation: int = 0

    @classmethod
    def from_dirs(cls, *dirs: Path | str | None) -> ManifestStore:
        store = cls([Path(d) for d in dirs if d])
        store.reload_if_changed()
        return store

    def _files(self) -> list[Path]:
        files: list[Path] = []
        for d in self.dirs:
            if d.is_dir():
                files.extend(sorted(d.glob("*.toml")))
            elif d.is_file():
                files.append(d)
        return files

    def reload_if_changed(self) -> list[ManifestError]:
        """Re-read changed files; return the errors found in this pass (previous good kept)."""
        files = self._files()
        new_errors: list[ManifestError] = []
        changed = False
        for path in files:
            mtime = _mtime(path)
            known = self._raw.get(path)
            previous_error = self.errors.get(path)
            if known and known[0] == mtime and not previous_error:
                continue
            if previous_error and getattr(previous_error, "mtime_ns", None) == mtime:
                continue
            try:
                manifest = parse_manifest(path)
            except ManifestError as exc:
                exc.mtime_ns = mtime  # type: ignore[attr-defined]
                self.errors[path] = exc
                new_errors.append(exc)
                continue
            self.errors.pop(path, None)
            self._raw[path] = (mtime, manifest)
            changed = True
        gone = [p for p in self._raw if p not in files]
        for path in gone:
            del self._raw[path]
            changed = True
        for path in [p for p in self.errors if p not in files]:
            del self.errors[path]
        if changed or not self._by_agent:
            new_errors.extend(self._rebuild())
        return new_errors

    def _rebuild(self) -> list[ManifestError]:
        plain: dict[str, tuple[Path, int, Manifest]] = {}
        for path in self._files():  # folder order: later overrides earlier
            if path in self._raw:
                mtime, manifest = self._raw[path]
                plain[manifest.agent] = (path, mtime, manifest)
        errors: list[ManifestError] = []
        by_agent: dict[str, CompiledManifest] = {}
        for agent, (path, mtime, manifest) in plain.items():
            try:
                resolved = self._resolve(manifest, plain, set())
            except ManifestError as exc:
                errors.append(exc)
                if agent in self._by_agent:
                    by_agent[agent] = self._by_agent[agent]
                continue
            by_agent[agent] = CompiledManifest.build(resolved, path, mtime)
        self._by_agent = by_agent
        self._by_process = {p: agent for agent, cm in by_agent.items() for p in cm.manifest.processes}
        self.generation += 1
        return errors

    def _resolve(self, manifest: Manifest, plain: dict, seen: set[str]) -> Manifest:
        if manifest.extends is None:
            return manifest
        if manifest.extends in seen or manifest.extends == manifest.agent:
            raise ManifestError(plain[manifest.agent][0], f"extends: cycle through {manifest.extends!r}")
        if manifest.extends not in plain:
            raise ManifestError(plain[manifest.agent][0], f"extends: no manifest for agent {manifest.extends!r}")
        base = self._resolve(plain[manifest.extends][2], plain, seen | {manifest.agent})
        names = {r.name for r in manifest.rules}
        return manifest.model_copy(update={
            "rules": manifest.rules + [r for r in base.rules if r.name not in names],
            "extends": None,
        })

    def get(self, agent: str) -> CompiledManifest | None:
        return self._by_agent.get(agent)

    def for_process(self, program: str | None) -> CompiledManifest | None:
        """The manifest whose ``processes`` name this program (basename, any case of path)."""
        if not program:
            return None
        agent = self._by_process.get(os.path.basename(program))
        return self._by_agent.get(agent) if agent else None

    def agents(self) -> list[str]:
        return sorted(self._by_agent)
