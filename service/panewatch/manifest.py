"""Per-agent TOML manifests: ordered screen rules, and the store that keeps them fresh.

Rules are data so they can follow an agent's new wording without a release. The first rule
that matches wins; ``blocked`` rules are written above ``working`` ones (an agent keeps its
"esc to interrupt" footer under an open prompt); a screen no rule matches is ``idle``, never
``blocked``, because a false "needs you" costs more than a late one.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
import tomllib
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from re import _constants as _c  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .procs.resume import ResumeSpec
from .states import RULE_STATES, State

#: A line drawn as a horizontal rule (Claude's prompt box and dialog borders). The rule may end
#: in a label (Claude 2.1.332 writes the session's name there after a plan: ``──── lab-plan ─``).
HORIZONTAL_RULE = re.compile(r"^\s*[╭╰├┌└]?[─━═]{8,}(?:[^\S\n]+\S(?:[^\n]*\S)?[^\S\n]+[─━═]+)?[╮╯┤┐┘]?\s*$")

_REGION = re.compile(
    r"^(screen|title|cursor_line|after_last_rule|before_last_rule|prompt_box|above_prompt_box"
    r"|bottom:[1-9][0-9]*|top:[1-9][0-9]*)$"
)

REGIONS_HELP = (
    "screen, title, cursor_line, after_last_rule, before_last_rule, prompt_box, above_prompt_box, bottom:N, top:N"
)


# --- bounded-time regexes -----------------------------------------------------------------
#
# A rule's regex runs on every classification of every pane, on the event loop. Python's
# ``re`` backtracks: ``(a+)+$`` on 30 ``a`` and a ``!`` froze the service ~50 s. So a pattern
# is (1) refused at load if it has the shapes that backtrack exponentially, and (2) run on
# RE2 (google-re2, linear time) whenever RE2 can express it. Python's ``\s``, ``\w``, ``\d``
# are Unicode-aware where RE2's are ASCII, so patterns are translated from Python's own parse
# tree with those classes spelled out as code-point ranges: the same matches, the same
# evidence. Lookarounds and ``\b`` have no RE2 form; such patterns stay on ``re`` (they
# passed the load check) and every rule's time is measured and reported past its budget.

#: A rule whose patterns take longer than this on one screen is reported (logged, kept in
#: ``CompiledManifest.slow_rules``).
RULE_BUDGET_MS = 10.0

try:  # google-re2 is a dependency; without its wheel the load check alone protects
    import re2 as _re2
except ImportError:  # pragma: no cover - depends on the platform's wheels
    _re2 = None

log = logging.getLogger("panewatch.manifest")

_REPEATS = {_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)}
_MAXCP = 0x10FFFF


@cache
def _category_ranges(category: str) -> tuple[tuple[int, int], ...]:
    r"""Code-point ranges of Python's Unicode ``\s``/``\w``/``\d`` (or a negation), found by
    ``re`` itself over every code point: RE2 gets exactly the set Python would match."""
    base = category.replace("NOT_", "")
    if base != category:
        return tuple(_complement(_category_ranges(base)))
    escape = {"CATEGORY_SPACE": r"\s", "CATEGORY_DIGIT": r"\d", "CATEGORY_WORD": r"\w"}.get(base)
    if escape is None:
        raise _Untranslatable(category)
    return tuple((m.start(), m.end() - 1) for m in re.finditer(f"[{escape}]+", _all_code_points()))


@lru_cache(maxsize=1)
def _all_code_points() -> str:
    return (
        array("I", range(_MAXCP + 1))
        .tobytes()
        .decode("utf-32-le" if sys.byteorder == "little" else "utf-32-be", "surrogatepass")
    )


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _complement(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out, nxt = [], 0
    for lo, hi in _merge(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAXCP:
        out.append((nxt, _MAXCP))
    return out


def _class_ranges(items: list[tuple[Any, Any]]) -> list[tuple[int, int]]:
    """The code points a parsed ``[...]`` (or ``\\s`` etc.) matches, case-sensitively."""
    negate = False
    ranges: list[tuple[int, int]] = []
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            ranges.append((av, av))
        elif op is _c.RANGE:
            ranges.append(av)
        elif op is _c.CATEGORY:
            ranges.extend(_category_ranges(str(av)))
        else:
            raise _Untranslatable(f"class item {op}")
    return _complement(ranges) if negate else _merge(ranges)


class _Untranslatable(Exception):
    """A construct RE2 has no equivalent for (lookaround, ``\\b``, backreference ...)."""


def _cp(cp: int) -> str:
    ch = chr(cp)
    return ch if ch.isascii() and ch.isalnum() else f"\\x{{{cp:x}}}"


def _re2_class(ranges: list[tuple[int, int]]) -> str:
    parts = []
    for lo, hi in ranges:
        # RE2 works on UTF-8 and has no surrogates; a screen never holds them either
        for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
            if a <= b:
                parts.append(_cp(a) if a == b else f"{_cp(a)}-{_cp(b)}")
    return f"[{''.join(parts)}]" if parts else "[^\\x00-\\x{10ffff}]"


def _re2_flags(add: int, remove: int) -> str:
    letters = {_c.SRE_FLAG_IGNORECASE: "i", _c.SRE_FLAG_MULTILINE: "m", _c.SRE_FLAG_DOTALL: "s"}
    if (add | remove) & ~(_c.SRE_FLAG_IGNORECASE | _c.SRE_FLAG_MULTILINE | _c.SRE_FLAG_DOTALL | _c.SRE_FLAG_UNICODE):
        raise _Untranslatable(f"flags {add | remove}")
    on = "".join(v for k, v in letters.items() if add & k)
    off = "".join(v for k, v in letters.items() if remove & k)
    return on + (f"-{off}" if off else "")


def _to_re2(nodes: Any) -> str:
    """RE2 syntax for a ``re._parser`` tree, with Python's meaning."""
    out = []
    for op, av in nodes:
        if op is _c.LITERAL:
            out.append(_cp(av))
        elif op is _c.NOT_LITERAL:
            out.append(_re2_class(_complement([(av, av)])))
        elif op is _c.ANY:
            out.append(".")
        elif op is _c.IN:
            out.append(_re2_class(_class_ranges(av)))
        elif op is _c.BRANCH:
            out.append("(?:" + "|".join(_to_re2(alt) for alt in av[1]) + ")")
        elif op is _c.SUBPATTERN:
            gid, add, remove, body = av
            flags = _re2_flags(add, remove)
            head = "(?:" if gid is None else "("
            inner = _to_re2(body)
            out.append(f"(?{flags}:{head}{inner}))" if flags else f"{head}{inner})")
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            lo, hi, body = av
            if lo > 1000 or (hi is not _c.MAXREPEAT and hi > 1000):
                raise _Untranslatable("repeat count above RE2's 1000")
            count = {(0, _c.MAXREPEAT): "*", (1, _c.MAXREPEAT): "+", (0, 1): "?"}.get((lo, hi))
            if count is None:
                count = f"{{{lo},}}" if hi == _c.MAXREPEAT else f"{{{lo},{hi}}}"
            out.append(f"(?:{_to_re2(body)}){count}{'?' if op is _c.MIN_REPEAT else ''}")
        elif op is _c.AT and av in _AT_RE2:
            out.append(_AT_RE2[av])
        else:  # lookaround, \b, backreference, atomic group, possessive repeat
            raise _Untranslatable(str(op))
    return "".join(out)


_AT_RE2 = {_c.AT_BEGINNING: "^", _c.AT_END: "$", _c.AT_BEGINNING_STRING: "\\A", _c.AT_END_STRING: "\\z"}


def _first(nodes: Any) -> list[tuple[int, int]] | None:
    """The code points a sequence can start with (None: it may match empty or anything)."""
    for op, av in nodes:
        if op is _c.LITERAL:
            return [(av, av)]
        if op is _c.IN:
            try:
                return _class_ranges(av)
            except _Untranslatable:
                return None
        if op is _c.NOT_LITERAL or op is _c.ANY:
            return [(0, _MAXCP)]
        if op is _c.SUBPATTERN:
            return _first(av[3])
        if op in _REPEATS:
            return _first(av[2]) if av[0] >= 1 else None
        if op is _c.AT:
            continue
        return None
    return None


def _overlap(a: list[tuple[int, int]] | None, b: list[tuple[int, int]] | None) -> bool:
    if a is None or b is None:
        return True
    return any(lo1 <= hi2 and lo2 <= hi1 for lo1, hi1 in a for lo2, hi2 in b)


def _varies(nodes: Any) -> bool:
    """Whether a sequence can match texts of different lengths (then repeating it backtracks)."""
    for op, av in nodes:
        if op in _REPEATS and av[0] != av[1]:
            return True
        if op is _c.BRANCH or (op is _c.SUBPATTERN and _varies(av[3])):
            return True
    return False


def backtracking_hazard(pattern: str) -> str | None:
    r"""Why ``pattern`` can take exponential time on Python's ``re`` (None: it cannot by these
    shapes). Refused: a variable-length repeat inside a repeated group (``(a+)+``,
    ``(a*b?)*``, ``(.*x){9}``), a repeated alternation whose branches can start alike or be
    empty (``(a|aa)*``, ``(\w|\d)+``), and backreferences (no linear-time engine runs them).
    Conservative: a few safe patterns are refused too, and can be written without nesting."""

    def walk(nodes: Any, repeated: bool) -> str | None:
        for op, av in nodes:
            if op in (_c.GROUPREF, getattr(_c, "GROUPREF_EXISTS", None)):
                return "a backreference cannot run in linear time"
            if op in _REPEATS:
                lo, hi, body = av
                many = hi == _c.MAXREPEAT or hi > 1
                if many and repeated and lo != hi:
                    return "a quantifier nested inside a quantified group (like (a+)+) backtracks exponentially"
                why = walk(body, repeated or many)
                if why:
                    return why
            elif op is _c.SUBPATTERN:
                why = walk(av[3], repeated)
                if why:
                    return why
            elif op is _c.BRANCH:
                if repeated:
                    firsts = [_first(alt) for alt in av[1]]
                    if any(_overlap(firsts[i], firsts[j]) for i in range(len(firsts)) for j in range(i)):
                        return (
                            "a quantified alternation whose branches can match alike (like (a|aa)*) "
                            "backtracks exponentially"
                        )
                for alt in av[1]:
                    why = walk(alt, repeated)
                    if why:
                        return why
            elif op in (_c.ASSERT, _c.ASSERT_NOT):
                why = walk(av[1], repeated)
                if why:
                    return why
            elif op is getattr(_c, "ATOMIC_GROUP", None):
                why = walk(av, repeated)
                if why:
                    return why
        return None

    return walk(_parser.parse(pattern), False)


class _Re2Pattern:
    """An RE2-compiled rule pattern that answers like ``re.Pattern`` where rules use it.

    RE2 runs on UTF-8 bytes: the region text is encoded once for all the patterns that
    search it (the wrapper's own ``str`` path re-encodes per call, twice the cost)."""

    engine = "re2"
    __slots__ = ("_compiled", "pattern")
    _last: tuple[str, bytes] = ("", b"")

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern, self._compiled = pattern, compiled

    def search(self, text: str) -> _Re2Match | None:
        last = _Re2Pattern._last
        if last[0] is not text:
            last = _Re2Pattern._last = (text, text.encode("utf-8", "surrogatepass"))
        m = self._compiled.search(last[1])
        return None if m is None else _Re2Match(last[1], m.start(), m.end())


class _Re2Match:
    """The part of ``re.Match`` rules read: the matched text and where it starts."""

    __slots__ = ("_data", "_end", "_start")

    def __init__(self, data: bytes, start: int, end: int) -> None:
        self._data, self._start, self._end = data, start, end

    def group(self, index: int = 0) -> str:
        if index:
            raise IndexError("only group 0 is kept")
        return self._data[self._start : self._end].decode("utf-8", "replace")

    def start(self) -> int:
        return len(self._data[: self._start].decode("utf-8", "replace"))


def compile_rule_pattern(pattern: str, flags: int) -> Any:
    """``pattern`` on RE2 with Python's meaning, or on ``re`` when RE2 cannot express it."""
    if _re2 is not None:
        try:
            tree = _parser.parse(pattern, flags)
            body = _to_re2(tree)
            head = _re2_flags(tree.state.flags & ~_c.SRE_FLAG_UNICODE, 0)
            options = _re2.Options()
            options.log_errors = False
            options.max_mem = 64 << 20  # the \w class is large; bounded all the same
            source = f"(?{head}){body}" if head else body
            return _Re2Pattern(pattern, _re2.compile(source.encode(), options))
        except (_Untranslatable, _re2.error):
            pass
    return re.compile(pattern, flags)


def _checked_pattern(pattern: str) -> str:
    """A valid regex without a backtracking hazard (every pattern a manifest gives)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a valid regex: {exc}") from None
    hazard = backtracking_hazard(pattern)
    if hazard:
        raise ValueError(f"{pattern!r} is refused: {hazard}")
    return pattern


class TextRead(BaseModel):
    """Where a piece of a request stands in the rule's region: group 1 (or the whole match) of
    the first line matching ``line``; or the non-empty lines after the first line matching
    ``after``, up to a line matching ``until`` (without ``until``: one line). ``tool``: only
    when the tool read off the same screen is that one."""

    model_config = ConfigDict(extra="forbid")

    line: str | None = None
    after: str | None = None
    until: str | None = None
    tool: str | None = Field(default=None, max_length=64)

    @field_validator("line", "after", "until")
    @classmethod
    def _valid(cls, value: str | None) -> str | None:
        return None if value is None else _checked_pattern(value)

    @model_validator(mode="after")
    def _one_way(self) -> TextRead:
        if (self.line is None) == (self.after is None):
            raise ValueError("give exactly one of `line` and `after`")
        if self.until is not None and self.after is None:
            raise ValueError("`until` goes with `after`")
        return self


class SubjectRead(TextRead):
    """The thing a request is about, and what kind of thing it is."""

    kind: Literal["command", "path", "url"]


class ToolRead(BaseModel):
    """The tool a request names when a line of the region matches ``line``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64)
    line: str

    @field_validator("line")
    @classmethod
    def _valid(cls, value: str) -> str:
        return _checked_pattern(value)


class RequestRead(BaseModel):
    """How a blocked rule's screen says what is asked (the first read that finds text wins):
    the question, the tool, the subject (a command, path or URL) and a detail line. ``region``
    defaults to the rule's own."""

    model_config = ConfigDict(extra="forbid")

    region: str | None = None
    question: list[TextRead] = []
    tools: list[ToolRead] = []
    subjects: list[SubjectRead] = []
    detail: list[TextRead] = []
    #: The options the approval policy answers (searched in each option's label): the one that
    #: approves this request once, and the one that refuses it.
    approve_once: str | None = None
    refuse: str | None = None

    @field_validator("approve_once", "refuse")
    @classmethod
    def _valid_option(cls, value: str | None) -> str | None:
        return None if value is None else _checked_pattern(value)

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str | None) -> str | None:
        if value is not None and not _REGION.match(value):
            raise ValueError(f"unknown region {value!r}; known: {REGIONS_HELP}")
        return value


class Rule(BaseModel):
    """One screen rule: regexes searched in a region of the visible screen."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    state: State  # one of ``RULE_STATES``: exited and lost come from the process
    why: str = Field(min_length=1)
    region: str = "screen"
    #: Keep only the last N non-empty lines of the region.
    last: int | None = Field(default=None, ge=1)
    any: list[str] = []
    all: list[str] = []
    not_: list[str] = Field(default=[], alias="not")
    ignore_case: bool = False
    #: What a blocked rule's screen asks (``[rules.request]``): read for ``request`` in the API.
    request: RequestRead | None = None

    @field_validator("state")
    @classmethod
    def _rule_state(cls, value: State) -> State:
        if value not in RULE_STATES:
            raise ValueError(f"a rule gives blocked, working or idle, not {value} (that comes from the process)")
        return value

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
            hazard = backtracking_hazard(pattern)
            if hazard:
                raise ValueError(f"pattern {i + 1} {pattern!r} is refused: {hazard}")
        return patterns

    @model_validator(mode="after")
    def _has_patterns(self) -> Rule:
        if not self.any and not self.all:
            raise ValueError("a rule needs at least one pattern in `any` or `all`")
        if self.request is not None and self.state != "blocked":
            raise ValueError("only a blocked rule says what is asked (`request`)")
        return self


class Manifest(BaseModel):
    """What Panewatch knows about one agent CLI."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str
    description: str = ""
    #: Take the rules of another manifest, after this file's own.
    extends: str | None = None
    #: The agent's tool names in the approval policy's (Claude's): ``exec = "Bash"``.
    tools: dict[str, str] = {}
    #: Program names (``/proc/PID/comm`` or argv[0] basename) that identify this agent.
    processes: list[str] = []
    #: Launch command when a session names the agent but gives no command.
    command: list[str] = []
    #: How the agent's conversation is resumed after its pane was lost (a killed tmux, a reboot):
    #: a ``[resume]`` table (the arguments put into the launched command, and how its options
    #: read), or the older whole command as a list; ``{agent_session_id}`` is the id the agent's
    #: hooks reported. Empty: not resumable.
    resume: ResumeSpec | list[str] = []
    #: Which hook integration the launcher may add (``claude``: ``--settings``; ``codex``: ``-c``
    #: overrides; ``gemini``: an overlay settings folder; ``qwen``: a system-defaults file; ``cline``: an
    #: overlay ``CLINE_DIR``; ``opencode``: a plugin; ``copilot``:
    #: ``--plugin-dir``), and whose payloads the reports are.
    hooks: Literal["claude", "codex", "gemini", "qwen", "cline", "opencode", "copilot"] | None = None
    #: Keys that pick option ``{n}`` of a prompt (Claude's menus take the digit alone).
    option_keys: str = Field(default="{n}", pattern=r"\{n\}")
    #: Seconds after launch during which a screen no rule matches reads ``working`` (source
    #: ``start``), not ``idle``: the agent has not drawn anything this manifest knows yet.
    #: 0 turns it off (a blank screen is idle at once, as for a plain shell).
    startup_timeout: float = Field(default=0.0, ge=0, le=120)
    rules: Annotated[list[Rule], Field(default=[])]

    @field_validator("resume")
    @classmethod
    def _resume_has_id(cls, value: ResumeSpec | list[str]) -> ResumeSpec | list[str]:
        if isinstance(value, list) and value and not any("{agent_session_id}" in part for part in value):
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


#: Rows already known to be (or not be) a horizontal rule. Most rows of a screen are the same
#: from one read to the next (and the same string objects, whose hash is kept), so a read
#: searches only the rows that changed; bounded, cleared when full.
_RULE_ROWS: dict[str, bool] = {}
_RULE_ROWS_MAX = 4096


def _rule_indexes(lines: Sequence[str]) -> list[int]:
    memo, out = _RULE_ROWS, []
    for i, line in enumerate(lines):
        found = memo.get(line)
        if found is None:
            if len(memo) >= _RULE_ROWS_MAX:
                memo.clear()
            found = memo[line] = _horizontal_rule().search(line) is not None
        if found:
            out.append(i)
    return out


@lru_cache(maxsize=1)
def _horizontal_rule() -> Any:
    """``HORIZONTAL_RULE`` on RE2: on ``re`` a 500-column line of rule and words backtracked
    quadratically (0.5 s for a 1000-row screen); ``^...$`` per line makes search a match."""
    return compile_rule_pattern(HORIZONTAL_RULE.pattern, 0)


def region_lines(
    region: str, lines: Sequence[str], title: str = "", cursor_row: int | None = None, rules: list[int] | None = None
) -> list[str]:
    """The lines of the screen a region names (see ``REGIONS_HELP``); ``rules`` are the
    horizontal rules' row indexes when the caller has them already."""
    if region == "screen":
        return list(lines)
    if region == "title":
        return [title]
    if region == "cursor_line":
        return [lines[cursor_row]] if cursor_row is not None and 0 <= cursor_row < len(lines) else []
    if region.startswith("bottom:"):
        return _non_empty(lines)[-int(region[7:]) :]
    if region.startswith("top:"):
        return _non_empty(lines)[: int(region[4:])]
    if rules is None:
        rules = _rule_indexes(lines)
    if region == "after_last_rule":
        return list(lines[rules[-1] + 1 :]) if rules else []
    if region == "before_last_rule":
        return list(lines[: rules[-1]]) if rules else list(lines)
    if region == "prompt_box":
        return list(lines[rules[-2] + 1 : rules[-1]]) if len(rules) >= 2 else []
    if region == "above_prompt_box":
        return list(lines[: rules[-2]]) if len(rules) >= 2 else []
    raise ValueError(f"unknown region {region!r}")


# --- compiled rules -----------------------------------------------------------------------


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
                    rules = cache["rules"] = _rule_indexes(lines)
            selected = region_lines(rule.region, lines, title, cursor_row, rules)
            if rule.last:
                selected = _non_empty(selected)[-rule.last :]
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


def _line_of_key(source: str, key: str, after: int = 0) -> int | None:
    """Line of ``key =`` at the top level, or inside the table whose header is line ``after``."""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, line in enumerate(source.splitlines(), 1):
        if number <= after:
            continue
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
            line = _line_of_rule(source, index)
            if line and len(loc) >= 3:
                line = _line_of_key(source, "not" if loc[2] == "not_" else str(loc[2]), after=line) or line
            raise ManifestError(path, reason, line=line, rule=index + 1) from None
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

    def _resolve(self, manifest: Manifest, plain: dict[str, tuple[Path, int, Manifest]], seen: set[str]) -> Manifest:
        if manifest.extends is None:
            return manifest
        if manifest.extends in seen or manifest.extends == manifest.agent:
            raise ManifestError(plain[manifest.agent][0], f"extends: cycle through {manifest.extends!r}")
        if manifest.extends not in plain:
            raise ManifestError(plain[manifest.agent][0], f"extends: no manifest for agent {manifest.extends!r}")
        base = self._resolve(plain[manifest.extends][2], plain, seen | {manifest.agent})
        names = {r.name for r in manifest.rules}
        return manifest.model_copy(
            update={
                "rules": manifest.rules + [r for r in base.rules if r.name not in names],
                "extends": None,
            }
        )

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
