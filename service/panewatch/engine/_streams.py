"""Per-session streams for clients: screen frames and an ACP session's conversation, each woken
by a flag and always the latest.

A stream never holds up the host or the feed: a slow consumer skips frames (it is sent the
screen as it is when it asks again), it never queues them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ..manifest import ManifestStore
from . import _acp
from ._sessions import AcpSession, AnySession
from ._table import Sessions
from ._views import screen_view
from .models import ConversationView, ScreenFrame, ScreenView

#: What a frame that is not full repeats of the view besides the changed rows.
_MOVES = ("cursor", "state", "rule", "title", "size", "prompt", "request")


def frame_of(view: ScreenView, last: ScreenView | None) -> ScreenFrame | None:
    """A full frame, or the rows (and styles) that changed since ``last``; None: nothing did."""
    head = {k: getattr(view, k) for k in ("cursor", "size", "state", "rule", "source", "title", "prompt", "request")}
    if last is None or len(last.rows) != len(view.rows):
        return ScreenFrame(full=True, rows=view.rows, styles=view.styles, **head)
    diff = {str(i): row for i, (old, row) in enumerate(zip(last.rows, view.rows, strict=True)) if old != row}
    moved = bool(diff) or any(getattr(view, k) != getattr(last, k) for k in _MOVES)
    changed_styles = None
    if view.styles is not None and last.styles is not None:
        changed_styles = {
            str(i): st
            for i, (old, st) in enumerate(zip(last.styles, view.styles, strict=False))
            if old != st or str(i) in diff
        }
        moved = moved or bool(changed_styles)
    if not moved:
        return None
    return ScreenFrame(full=False, changed=diff, changed_styles=changed_styles, **head)


async def screen_frames(
    table: Sessions, session: AnySession, store: ManifestStore, *, interval: float, styles: bool
) -> AsyncIterator[ScreenFrame]:
    """Frames of one session's screen until it is deleted (a resume's new launch included)."""
    sid = session.id
    changed = table.watch(sid)
    try:
        last: ScreenView | None = None
        while (now := table.get(sid)) is not None:
            session = now
            view = screen_view(session, store, styles=styles)
            frame = frame_of(view, last)
            last = view
            if frame is not None:
                yield frame
            await asyncio.sleep(interval)  # at most one frame per interval, always the latest
            await changed.wait()
            changed.clear()
    finally:
        table.unwatch(sid, changed)


async def conversations(table: Sessions, session: AcpSession, *, interval: float) -> AsyncIterator[ConversationView]:
    """The conversation, then again whenever it (or the state) changed, at most once per
    ``interval``: always the latest, never a queue."""
    sid = session.id
    changed = table.watch(sid)
    try:
        last: tuple[Any, ...] | None = None
        while isinstance(now := table.get(sid), AcpSession):
            view = _acp.conversation(now)
            key = (view.seq, view.state, view.why)
            if key != last:
                last = key
                yield view
            await asyncio.sleep(interval)
            await changed.wait()  # the host wakes it on every change of the conversation
            changed.clear()
    finally:
        table.unwatch(sid, changed)
