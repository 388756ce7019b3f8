"""What a blocked agent asks: the question, the tool, and what it is about (a command, a path, a
URL), decided on the server so every client and notification shows the same words.

From the best source there is: the agent's own structured request (a ``PermissionRequest`` hook
payload's ``tool_name`` and ``tool_input``; an ACP ``session/request_permission``), else the
prompt's lines as the matched rule's manifest reads them (``[rules.request]``). A screen reading
never overrides a fresh structured request: when the two name different subjects the request
says so (``disagrees``). Every text is pane or agent text: cleaned and bounded as such, since it
goes to browsers, notifications and lock screens.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..manifest import CompiledManifest, RequestRead, TextRead, region_lines
from ..sinks.notify import clean
from ..states import RequestSource

__all__ = [
    "Request",
    "from_acp",
    "from_permission",
    "from_screen",
    "from_tool",
    "merged",
    "same_subject",
    "screen_request",
]

QUESTION_MAX = 200
TOOL_MAX = 64
SUBJECT_MAX = 1000
SUBJECT_LINES = 12
DETAIL_MAX = 300

#: ``tool_input`` keys that name what a tool acts on, and what kind of thing each is.
SUBJECT_KEYS: tuple[tuple[str, str], ...] = (
    ("command", "command"),
    ("cmd", "command"),
    ("file_path", "path"),
    ("notebook_path", "path"),
    ("path", "path"),
    ("url", "url"),
)
DETAIL_KEYS = ("description", "reason", "justification", "prompt")


@dataclass(frozen=True)
class Request:
    """What a blocked pane asks (``request`` in the API, beside ``prompt.options``)."""

    question: str
    source: RequestSource
    tool: str | None = None
    subject: str | None = None
    subject_kind: str | None = None  # "command" | "path" | "url"
    detail: str | None = None
    disagrees: str | None = None  # the screen reads another subject than the structured request

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "tool": self.tool,
            "subject": self.subject,
            "subject_kind": self.subject_kind,
            "detail": self.detail,
            "source": self.source,
            "disagrees": self.disagrees,
        }


def _line(text: str, limit: int) -> str:
    return clean(text, limit)


def _block(lines: Sequence[str], limit: int = SUBJECT_MAX) -> str:
    """Lines cleaned one by one and kept as lines (a multi-line command stays one), bounded."""
    kept = [c for c in (clean(line, limit) for line in lines[:SUBJECT_LINES]) if c]
    out = "\n".join(kept)
    return out if len(out) <= limit else out[: limit - 1] + "\u2026"


def _subject_text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return _block(value.splitlines())
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return _block([shlex.join(value)])  # an argv (Codex's exec command)
    return None


def from_tool(
    tool: str | None,
    tool_input: Mapping[str, Any] | None,
    source: RequestSource,
    *,
    question: str = "",
    detail: str = "",
) -> Request:
    """A request from a tool's name and its input (a hook payload's, an ACP tool call's)."""
    subject = kind = None
    inputs = tool_input or {}
    for key, what in SUBJECT_KEYS:
        found = _subject_text(inputs.get(key))
        if found:
            subject, kind = found, what
            break
    if not detail:
        detail = next((v for k in DETAIL_KEYS if isinstance(v := inputs.get(k), str) and v.strip()), "")
    name = _line(tool, TOOL_MAX) if tool else None
    asked = _line(question, QUESTION_MAX) if question else f"Allow {name or 'a tool'}?"
    return Request(asked, source, name or None, subject, kind, _line(detail, DETAIL_MAX) or None)


def from_permission(payload: Mapping[str, Any]) -> Request:
    """A ``PermissionRequest`` hook payload (Claude Code, Codex: the same shape)."""
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    return from_tool(
        tool if isinstance(tool, str) else None,
        tool_input if isinstance(tool_input, Mapping) else None,
        RequestSource.hook,
    )


#: ACP tool kinds whose one detail line is a command, a path or a URL.
ACP_SUBJECT_KINDS = {
    "execute": "command",
    "edit": "path",
    "read": "path",
    "delete": "path",
    "move": "path",
    "fetch": "url",
}


def from_acp(title: str, tool_kind: str, detail: str) -> Request:
    """An ACP ``session/request_permission``: its tool call's title, kind and the line that
    says what it would do (its ``rawInput`` command or file, read by the client)."""
    kind = ACP_SUBJECT_KINDS.get(tool_kind)
    subject = _block(detail.splitlines()) if detail.strip() else None
    return Request(
        _line(title, QUESTION_MAX) or "Allow this tool call?",
        RequestSource.acp,
        _line(tool_kind, TOOL_MAX) or None,
        subject,
        kind if subject else None,
    )


def _read(read: TextRead, lines: Sequence[str], tool: str | None) -> list[str]:
    """The lines ``read`` names in ``lines`` (empty: not there)."""
    if read.tool is not None and read.tool != tool:
        return []
    if read.line is not None:
        pattern = re.compile(read.line)
        for row in lines:
            m = pattern.search(row)
            if m:
                return [m.group(1) if pattern.groups and m.group(1) is not None else m.group(0)]
        return []
    assert read.after is not None  # the model takes exactly one of line and after
    start, until = re.compile(read.after), re.compile(read.until) if read.until else None
    for i, row in enumerate(lines):
        if not start.search(row):
            continue
        out: list[str] = []
        for following in lines[i + 1 :]:
            if until is not None and until.search(following):
                return out
            if following.strip():
                out.append(following.strip())
                if until is None or len(out) >= SUBJECT_LINES:
                    return out
        return out if until is None else []  # an `until` that never came: not this dialog
    return []


def from_screen(read: RequestRead, lines: Sequence[str]) -> Request | None:
    """The request the region's ``lines`` say, as ``read`` finds it (None: no question there)."""
    tool = next((t.name for t in read.tools if any(re.search(t.line, row) for row in lines)), None)
    question = next((" ".join(found) for q in read.question if (found := _read(q, lines, tool))), "")
    subject = kind = None
    for s in read.subjects:
        found = _read(s, lines, tool)
        if found:
            subject, kind = _block(found), s.kind
            break
    detail = next((" ".join(found) for d in read.detail if (found := _read(d, lines, tool))), "")
    question = _line(question, QUESTION_MAX)
    if not question and not subject:
        return None
    return Request(
        question or f"Allow {tool or 'this'}?",
        RequestSource.screen,
        tool,
        subject,
        kind,
        _line(detail, DETAIL_MAX) or None,
    )


def screen_request(
    manifest: CompiledManifest | None, rule: str | None, lines: Sequence[str], title: str, cursor_row: int | None
) -> Request | None:
    """The request the matched ``rule`` of ``manifest`` reads off the screen (None: it has no
    ``[rules.request]``, or nothing it names is there)."""
    if manifest is None or rule is None:
        return None
    found = next((c.rule for c in manifest.rules if c.rule.name == rule), None)
    if found is None or found.request is None:
        return None
    region = region_lines(found.request.region or found.region, lines, title, cursor_row)
    return from_screen(found.request, region)


def same_subject(a: str, b: str) -> bool:
    """Two readings of one subject: the screen wraps and pads what the payload has on one line."""
    return " ".join(a.split()) == " ".join(b.split())


def merged(structured: Request | None, screen: Request | None) -> Request | None:
    """The request to show: the structured one where there is one (with the screen's own
    question when the two agree), saying so when the screen reads another subject; the
    screen's own when the structured one names no subject and the screen does."""
    if structured is None:
        return screen
    if screen is None:
        return structured
    if structured.subject is None and screen.subject:
        # a report that only says *that* something is asked (Gemini's ToolPermission for an MCP
        # tool names no subject): what is shown is the screen's reading, and says so (``source``
        # "screen": the policy never takes it for a structured request)
        return Request(**{**screen.__dict__, "detail": screen.detail or structured.detail})
    if structured.subject and screen.subject and not same_subject(structured.subject, screen.subject):
        note = f"the screen reads {screen.subject_kind or 'subject'} {clean(screen.subject, 200)!r}"
        return Request(**{**structured.__dict__, "disagrees": note})
    return Request(
        **{
            **structured.__dict__,
            "question": screen.question or structured.question,
            "detail": structured.detail or screen.detail,
        }
    )
