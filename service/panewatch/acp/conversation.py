"""An ACP session's conversation as Panewatch keeps it: messages, tool calls, the plan and the
pending permission — bounded, JSON for the dashboard and plain text for screen clients.

An ACP agent has no screen, so this record *is* what the user reads: ``session/update``
notifications are folded in (message chunks appended, tool calls updated by id, the plan
replaced whole, as the protocol says it is sent), and ``render`` draws it as lines of text
for ``/screen``, the terminal view and anything else that only shows a screen.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from .protocol import text_of

#: Most entries kept (older ones are dropped from the front, with a count).
MAX_ENTRIES = 400
#: Most characters of one message kept (the rest is cut, with a mark).
MAX_TEXT = 32 * 1024
MAX_TOOL_TEXT = 2000

_FENCE = re.compile(r"\A```[\w-]*\n(.*?)\n?```\s*\Z", re.S)


def _unfenced(text: str) -> str:
    """A tool's output without the Markdown code fence agents wrap it in (shown as text)."""
    m = _FENCE.match(text)
    return m.group(1) if m else text


STATUS_MARK = {"pending": "…", "in_progress": "▶", "completed": "✓", "failed": "✗"}
PLAN_MARK = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


@dataclass
class Entry:
    n: int
    kind: str  # user | agent | thought | tool | note
    text: str = ""
    tool_call_id: str | None = None
    title: str | None = None
    tool_kind: str | None = None
    status: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"n": self.n, "kind": self.kind, "text": self.text}
        if self.kind == "tool":
            d.update(tool_call_id=self.tool_call_id, title=self.title, tool_kind=self.tool_kind, status=self.status)
        return d


@dataclass
class PendingPermission:
    """A ``session/request_permission`` the user has not answered yet."""

    key: str  # our id for it, stable while it is pending ("p1", "p2"...)
    tool_call_id: str
    title: str
    tool_kind: str
    options: list[dict[str, str]]  # {"option_id", "name", "kind"}
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "request": self.key,
            "tool_call_id": self.tool_call_id,
            "title": self.title,
            "tool_kind": self.tool_kind,
            "options": self.options,
            "detail": self.detail,
        }

    def summary(self) -> str:
        names = ", ".join(f"{o['name']} [{o['option_id']}]" for o in self.options)
        return f"{self.title} ({self.tool_kind}) — options: {names}"


@dataclass
class Conversation:
    entries: list[Entry] = field(default_factory=list)
    plan: list[dict[str, str]] = field(default_factory=list)
    permissions: list[PendingPermission] = field(default_factory=list)
    dropped: int = 0
    seq: int = 0  # bumped on every change (clients re-read when it moves)
    _n: int = 0
    _tools: dict[str, Entry] = field(default_factory=dict)

    # -- building ----------------------------------------------------------------------
    def _add(self, kind: str, text: str = "", **kw: Any) -> Entry:
        self._n += 1
        entry = Entry(self._n, kind, text[:MAX_TEXT], **kw)
        self.entries.append(entry)
        if len(self.entries) > MAX_ENTRIES:
            gone = self.entries[: len(self.entries) - MAX_ENTRIES]
            del self.entries[: len(gone)]
            self.dropped += len(gone)
            for old in gone:
                if old.tool_call_id and self._tools.get(old.tool_call_id) is old:
                    del self._tools[old.tool_call_id]
        self.seq += 1
        return entry

    def user(self, text: str) -> None:
        self._add("user", text)

    def note(self, text: str) -> None:
        """Something the client says (a turn's end, a refused request, an agent fault)."""
        self._add("note", text)

    def _chunk(self, kind: str, text: str) -> None:
        if not text:
            return
        last = self.entries[-1] if self.entries else None
        if last is not None and last.kind == kind:
            if len(last.text) < MAX_TEXT:
                room = MAX_TEXT - len(last.text)
                last.text += text[:room] if len(text) <= room else text[:room] + "…"
            self.seq += 1
        else:
            self._add(kind, text)

    def update(self, update: dict[str, Any]) -> bool:
        """Fold in one ``session/update``; False when its kind is not one we show."""
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self._chunk("agent", text_of(update.get("content")))
        elif kind == "agent_thought_chunk":
            self._chunk("thought", text_of(update.get("content")))
        elif kind == "user_message_chunk":
            self._chunk("user", text_of(update.get("content")))
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif kind == "plan":
            entries = update.get("entries")
            if not isinstance(entries, list):
                return False
            self.plan = [
                {
                    "content": str(e.get("content", ""))[:500],
                    "status": str(e.get("status", "pending")),
                    "priority": str(e.get("priority", "")),
                }
                for e in entries[:100]
                if isinstance(e, dict)
            ]
            self.seq += 1
        else:
            return False
        return True

    def _tool(self, update: dict[str, Any]) -> None:
        tcid = update.get("toolCallId")
        if not isinstance(tcid, str) or not tcid:
            return
        entry = self._tools.get(tcid)
        if entry is None:
            entry = self._add("tool", tool_call_id=tcid, title="tool call", status="pending")
            self._tools[tcid] = entry
        if isinstance(update.get("title"), str) and update["title"]:
            entry.title = update["title"][:500]
        if isinstance(update.get("kind"), str):
            entry.tool_kind = update["kind"][:64]
        if isinstance(update.get("status"), str):
            entry.status = update["status"][:64]
        content = update.get("content")
        if isinstance(content, list):
            texts = [_unfenced(t) for t in (text_of(c) for c in content) if t]
            if texts:
                entry.text = "\n".join(texts)[:MAX_TOOL_TEXT]
        self.seq += 1

    def ask(self, permission: PendingPermission) -> None:
        self.permissions.append(permission)
        self.seq += 1

    def resolve(self, key: str, outcome: str) -> PendingPermission | None:
        """Take a pending permission off the list and note how it ended."""
        for i, p in enumerate(self.permissions):
            if p.key == key:
                del self.permissions[i]
                self.note(f"permission for {p.title}: {outcome}")
                return p
        return None

    # -- views -------------------------------------------------------------------------
    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "dropped": self.dropped,
            "entries": [e.as_dict() for e in self.entries],
            "plan": self.plan,
            "permission": self.permissions[0].as_dict() if self.permissions else None,
            "permissions": [p.as_dict() for p in self.permissions],
        }

    def render(self, width: int = 100) -> list[str]:
        """The conversation as plain text lines, at most ``width`` characters each."""
        width = max(20, width)
        out: list[str] = []

        def para(prefix: str, text: str) -> None:
            lines = text.splitlines() or [""]
            first = True
            for raw in lines:
                wrapped = textwrap.wrap(raw, width - len(prefix), drop_whitespace=False, replace_whitespace=False) or [
                    ""
                ]
                for piece in wrapped:
                    out.append((prefix if first else " " * len(prefix)) + piece)
                    first = False

        if self.dropped:
            out.append(f"({self.dropped} earlier entries not kept)")
        for e in self.entries:
            if e.kind == "user":
                para("> ", e.text)
            elif e.kind == "agent":
                para("  ", e.text)
            elif e.kind == "thought":
                para("  (thinking) ", e.text)
            elif e.kind == "tool":
                mark = STATUS_MARK.get(e.status or "", "?")
                para(f"  {mark} ", f"{e.title} [{e.tool_kind or 'tool'}, {e.status}]")
                if e.text:
                    para("      ", e.text[:400])
            elif e.kind == "note":
                para("  -- ", e.text)
        if self.plan:
            out.append("  Plan:")
            for step in self.plan:
                para(f"    {PLAN_MARK.get(step['status'], '[?]')} ", step["content"])
        for ask in self.permissions:
            para("  ? ", f"Permission: {ask.title} ({ask.tool_kind})")
            for o in ask.options:
                para("      ", f"[{o['option_id']}] {o['name']} ({o['kind']})")
        return [line[:width] for line in out]
