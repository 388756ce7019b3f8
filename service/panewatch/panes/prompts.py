"""What a blocked pane asks: the prompt's kind and options, read on the server from the rule
that matched, so every client (the dashboard, scripts) shows the same answerable choices.

Kinds: ``options`` (a numbered menu, wherever it sits on the screen: inside a box, below a
labelled rule, with or without a selection marker; or a menu without numbers around its
selected row, whose options carry the arrow keys that pick them), ``yes_no`` (``(y/n)``, ``[Y/n]``),
``password`` (a hidden-input question), ``text`` (anything else: the user reads the screen).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..manifest import CompiledManifest, region_lines

#: An option row: "❯ 1. Yes", "  2. Yes, and don't ask again…", "│ 3) No │", "› 1. Allow",
#: "│ ● 1. Allow once │" (Gemini CLI marks its selected row with a dot).
OPTION_ROW = re.compile(r"^\s*(?:│\s*)?([❯›>▶●])?\s*(\d{1,2})[.)]\s+(.*?)\s*(?:│\s*)?$")
#: The selected row of a menu without numbers: "❯ No, exit" (Claude's trust dialog).
MARKED_ROW = re.compile(r"^(\s*(?:│\s*)?)([❯›▶]) (\S.*?)\s*(?:│\s*)?$")
UP, DOWN, ENTER = "\x1b[A", "\x1b[B", "\r"
YES_NO = re.compile(r"\((?:y/n|yes/no)\)|\[(?:y/n|yes/no)\]", re.IGNORECASE)
PASSWORD = re.compile(r"(?:password|passphrase|pin)\b[^\n]*:\s*$", re.IGNORECASE)
#: A menu longer than this is not a prompt's menu.
MAX_OPTIONS = 20
MAX_LABEL = 200


@dataclass(frozen=True)
class Prompt:
    kind: str  # "options" | "yes_no" | "password" | "text"
    options: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "options": self.options}


def prompt_id(session: str, since: float, request: str | None) -> str:
    """The id of one prompt *instance*: its session, when the pane entered ``blocked`` (``since``)
    and what is asked (the rule that matched, or an ACP permission's request id). A notification
    carries it, and an answer given with it lands only on that same prompt: a prompt answered and
    then asked again gets a new ``since``, so an answer from a stale notification never reaches it."""
    text = f"{session}\0{since!r}\0{request or ''}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def numbered_options(lines: Sequence[str]) -> list[dict[str, Any]]:
    """The last numbered menu 1, 2, 3... in ``lines`` (a "1." starts a new one)."""
    options: list[dict[str, Any]] = []
    for row in lines:
        m = OPTION_ROW.match(row)
        if m is None:
            continue
        n, label = int(m.group(2)), m.group(3).strip()
        if n == 1:
            options = []
        elif n != len(options) + 1:
            continue
        if label and len(options) < MAX_OPTIONS:
            options.append({"option": n, "label": label[:MAX_LABEL], "selected": bool(m.group(1))})
    return options


def marked_options(lines: Sequence[str]) -> list[dict[str, Any]]:
    """A menu without numbers around its selected row: the rows above and below at the same
    indentation. Each option's ``keys`` move the selection there (arrows) and press Enter."""
    for index in range(len(lines) - 1, -1, -1):
        m = MARKED_ROW.match(lines[index])
        if m is None:
            continue
        indent = len(m.group(1)) + 2
        rows = [index]
        for step in (-1, 1):
            i = index + step
            while 0 <= i < len(lines) and len(rows) < MAX_OPTIONS:
                line = lines[i]
                if not line.strip() or len(line) - len(line.lstrip()) != indent or OPTION_ROW.match(line):
                    break
                rows.append(i)
                i += step
        rows.sort()
        if len(rows) < 2:
            return []
        chosen = rows.index(index)
        return [
            {
                "label": (m.group(3) if i == index else lines[i].strip())[:MAX_LABEL],
                "selected": i == index,
                "keys": (DOWN * (n - chosen) if n >= chosen else UP * (chosen - n)) + ENTER,
            }
            for n, i in enumerate(rows)
        ]
    return []


def read_prompt(
    lines: Sequence[str],
    *,
    title: str = "",
    cursor_row: int | None = None,
    manifest: CompiledManifest | None = None,
    rule: str | None = None,
) -> Prompt:
    """The prompt on a blocked screen. The matched rule's region is searched first (that is
    where the rule saw the prompt), then the whole visible screen."""
    region: list[str] = []
    if manifest is not None and rule is not None:
        found = next((c.rule for c in manifest.rules if c.rule.name == rule), None)
        if found is not None:
            region = region_lines(found.region, lines, title, cursor_row)
    for candidate in (region, list(lines)):
        options = numbered_options(candidate) or marked_options(candidate)
        if options:
            return Prompt("options", options)
    tail = [line for line in lines if line.strip()][-3:]
    if cursor_row is not None and 0 <= cursor_row < len(lines):
        tail.append(lines[cursor_row])
    text = "\n".join(tail)
    if YES_NO.search(text):
        return Prompt("yes_no", [{"keys": "y\r", "label": "Yes"}, {"keys": "n\r", "label": "No"}])
    if any(PASSWORD.search(line.rstrip()) for line in tail):
        return Prompt("password")
    return Prompt("text")
