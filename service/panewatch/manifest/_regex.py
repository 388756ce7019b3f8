"""Bounded-time rule regexes: a pattern is refused at load when it has a shape that backtracks
exponentially, and runs on RE2 (linear time) whenever RE2 can express it, translated from
CPython's own parse tree (``re._parser``, private: the one module here that reads it)."""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable
from functools import cache, lru_cache
from re import _constants as _c  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

# A rule's regex runs on every classification of every pane, on the event loop. Python's
# ``re`` backtracks: ``(a+)+$`` on 30 ``a`` and a ``!`` froze the service ~50 s. So a pattern
# is (1) refused at load if it has the shapes that backtrack exponentially, and (2) run on
# RE2 (google-re2, linear time) whenever RE2 can express it. Python's ``\s``, ``\w``, ``\d``
# are Unicode-aware where RE2's are ASCII, so patterns are translated from Python's own parse
# tree with those classes spelled out as code-point ranges: the same matches, the same
# evidence. Lookarounds and ``\b`` have no RE2 form; such patterns stay on ``re`` (they
# passed the load check) and every rule's time is measured and reported past its budget
# (``_matching.RULE_BUDGET_MS``).

try:  # google-re2 is a dependency; without its wheel the load check alone protects
    import re2 as _re2
except ImportError:  # pragma: no cover - depends on the platform's wheels
    _re2 = None

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


def checked_pattern(pattern: str) -> str:
    """A valid regex without a backtracking hazard (every pattern a manifest gives)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r} is not a valid regex: {exc}") from None
    hazard = backtracking_hazard(pattern)
    if hazard:
        raise ValueError(f"{pattern!r} is refused: {hazard}")
    return pattern
