"""Regions: the part of a screen a rule reads (``REGIONS_HELP``), found by its horizontal rules."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from ._regex import compile_rule_pattern

#: A line drawn as a horizontal rule (Claude's prompt box and dialog borders). The rule may end
#: in a label (Claude 2.1.332 writes the session's name there after a plan: ``──── lab-plan ─``).
HORIZONTAL_RULE = re.compile(r"^\s*[╭╰├┌└]?[─━═]{8,}(?:[^\S\n]+\S(?:[^\n]*\S)?[^\S\n]+[─━═]+)?[╮╯┤┐┘]?\s*$")

REGION = re.compile(
    r"^(screen|title|cursor_line|after_last_rule|before_last_rule|prompt_box|above_prompt_box"
    r"|bottom:[1-9][0-9]*|top:[1-9][0-9]*)$"
)

REGIONS_HELP = (
    "screen, title, cursor_line, after_last_rule, before_last_rule, prompt_box, above_prompt_box, bottom:N, top:N"
)


def non_empty(lines: Iterable[str]) -> list[str]:
    return [line for line in lines if line.strip()]


#: Rows already known to be (or not be) a horizontal rule. Most rows of a screen are the same
#: from one read to the next (and the same string objects, whose hash is kept), so a read
#: searches only the rows that changed; bounded, cleared when full.
_RULE_ROWS: dict[str, bool] = {}
_RULE_ROWS_MAX = 4096


def rule_indexes(lines: Sequence[str]) -> list[int]:
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
        return non_empty(lines)[-int(region[7:]) :]
    if region.startswith("top:"):
        return non_empty(lines)[: int(region[4:])]
    if rules is None:
        rules = rule_indexes(lines)
    if region == "after_last_rule":
        return list(lines[rules[-1] + 1 :]) if rules else []
    if region == "before_last_rule":
        return list(lines[: rules[-1]]) if rules else list(lines)
    if region == "prompt_box":
        return list(lines[rules[-2] + 1 : rules[-1]]) if len(rules) >= 2 else []
    if region == "above_prompt_box":
        return list(lines[: rules[-2]]) if len(rules) >= 2 else []
    raise ValueError(f"unknown region {region!r}")
