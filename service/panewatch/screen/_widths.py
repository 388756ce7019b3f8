"""Character widths as pyte's ``draw`` reads them (wcwidth), for the pyte backend and Ghostty's
pre-filter: what pyte cannot draw without losing text, combining marks, and the BMP classes the
fast draw paths test a whole run against at once."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from wcwidth import wcwidth


@lru_cache(maxsize=4096)
def breaks_pyte(ch: str) -> bool:
    """True for a code point that makes pyte's ``draw`` abandon the rest of a run."""
    return wcwidth(ch) <= 0 and not unicodedata.combining(ch)


@lru_cache(maxsize=4096)
def mark(ch: str) -> bool:
    """A combining mark: pyte joins it to the previous cell."""
    return wcwidth(ch) == 0 and unicodedata.combining(ch) != 0


def _bmp_classes() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Regexes over the Basic Multilingual Plane by wcwidth: all one-cell, all one- or
    two-cell, and runs of two-cell characters (marks and zero-width excluded).

    Built once (~0.2 s at import): per-character checks through an LRU cache thrashed on a
    flood of distinct characters (CJK at 0.5 MB/s, mostly in cache misses)."""
    narrow: list[tuple[int, int]] = []
    wide: list[tuple[int, int]] = []
    for cp in range(0xA0, 0x10000):
        ch = chr(cp)
        width = wcwidth(ch)
        if width == 0 or 0xD800 <= cp <= 0xDFFF or unicodedata.combining(ch):
            continue
        ranges = narrow if width == 1 else wide if width == 2 else None
        if ranges is None:
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))

    def cls(ranges: list[tuple[int, int]]) -> str:
        return "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)

    one = "\\x20-\\x7e" + cls(narrow)
    return (re.compile(f"[{one}]*\\Z"), re.compile(f"[{one}{cls(wide)}]*\\Z"), re.compile(f"[{cls(wide)}]+"))


ALL_NARROW, ALL_CELLS, WIDE_RUN = _bmp_classes()


@lru_cache(maxsize=4096)
def cell_width(ch: str) -> int:
    """Cells a character takes when drawn on its own (0 for a combining mark, -1 unprintable)."""
    return 0 if mark(ch) else wcwidth(ch)


@lru_cache(maxsize=4096)
def narrow(ch: str) -> bool:
    """One cell wide and not combining: drawn exactly like an ASCII letter."""
    return wcwidth(ch) == 1 and not unicodedata.combining(ch)


def drop_zero_width(data: str) -> str:
    """Remove VS16, ZWJ, C1 controls and the like, which pyte cannot draw without losing text."""
    bad = [ch for ch in set(data) if not ch.isascii() and breaks_pyte(ch)]
    if not bad:
        return data
    return data.translate(dict.fromkeys(map(ord, bad)))
