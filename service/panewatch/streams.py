"""Per-session async streams for clients: screen frames and raw output bytes.

Neither ever holds up the host or the feed: a screen stream is woken by a flag and always
sends the latest screen; an output stream buffers a bounded number of bytes and, once a
client falls that far behind, drops them for a repaint of the screen as it is now.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .events import Deleted, Event, Output
from .manifest import ManifestStore
from .session import Session
from .views import screen_view

if TYPE_CHECKING:
    from .panes import Panes


def _frame(view: dict[str, Any], last: dict[str, Any] | None) -> dict[str, Any] | None:
    """A full frame, or the rows (and styles) that changed since ``last``; None: nothing did."""
    if last is None or len(last["rows"]) != len(view["rows"]):
        return {"type": "screen", "full": True, **view}
    rows, old_rows = view["rows"], last["rows"]
    diff = {str(i): row for i, (old, row) in enumerate(zip(old_rows, rows, strict=True)) if old != row}
    frame = {
        "type": "screen",
        "full": False,
        "changed": diff,
        **{k: v for k, v in view.items() if k not in ("rows", "styles")},
    }
    moved = diff or any(view[k] != last[k] for k in ("cursor", "state", "rule", "title", "size", "prompt"))
    if "styles" in view and "styles" in last:
        changed_styles = {
            str(i): st
            for i, (old, st) in enumerate(zip(last["styles"], view["styles"], strict=False))
            if old != st or str(i) in diff
        }
        frame["changed_styles"] = changed_styles
        moved = moved or bool(changed_styles)
    return frame if moved else None


async def screen_frames(
    panes: Panes, session: Session, store: ManifestStore, *, interval: float, styles: bool
) -> AsyncIterator[dict[str, Any]]:
    """Frames of one session's screen until it is deleted."""
    changed = panes.watch(session.id)
    try:
        last: dict[str, Any] | None = None
        while session.id in panes.sessions:
            view = screen_view(session, store, styles=styles)
            frame = _frame(view, last)
            last = view
            if frame is not None:
                yield frame
            await asyncio.sleep(interval)  # at most one frame per interval, always the latest
            await changed.wait()
            changed.clear()
    finally:
        panes.unwatch(session.id, changed)


_COLOURS = {"black": 0, "red": 1, "green": 2, "brown": 3, "yellow": 3, "blue": 4, "magenta": 5, "cyan": 6, "white": 7}
_FLAGS = ((1, "1"), (2, "3"), (4, "4"), (8, "7"), (16, "9"))


def _colour(value: object, base: int) -> str | None:
    """SGR parameters for a colour of ``ScreenLike.styles`` (a name or hex); None: default."""
    name = str(value or "")
    if name in _COLOURS:
        return str(base + _COLOURS[name])
    if name.startswith("bright") and name[6:] in _COLOURS:
        return str(base + 60 + _COLOURS[name[6:]])
    if len(name) == 6:
        try:
            r, g, b = (int(name[i : i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            return None
        return f"{base + 8};2;{r};{g};{b}"
    return None


def _styled(line: str, runs: list[list[object]]) -> str:
    out, at = [], 0
    for chars, fg, bg, flags in runs:
        params = ["0", *(code for bit, code in _FLAGS if int(flags) & bit)]  # type: ignore[call-overload]
        params += [c for c in (_colour(fg, 30), _colour(bg, 40)) if c]
        end = at + int(chars)  # type: ignore[call-overload]
        out.append(f"\x1b[{';'.join(params)}m{line[at:end]}")
        at = end
    return "".join(out) + "\x1b[0m" + line[at:]


def repaint(session: Session) -> bytes:
    """Bytes that draw the screen as it is now, colours included, on a blank terminal."""
    screen = session.pane.screen
    lines = screen.lines()
    styles = screen.styles()
    body = "\r\n".join(_styled(line, runs).rstrip() for line, runs in zip(lines, styles, strict=False))
    cursor = screen.cursor
    return (
        f"\x1b[0m\x1b[H\x1b[2J{body}\x1b[{cursor.row + 1};{cursor.col + 1}H"
        + ("\x1b[?25l" if cursor.hidden else "\x1b[?25h")
    ).encode()


async def output_stream(panes: Panes, session: Session, *, limit: int) -> AsyncIterator[bytes]:
    """A repaint, then the session's output as it arrives, until the session is deleted."""
    buffer = bytearray()
    state = {"behind": False, "gone": False}
    ready = asyncio.Event()

    def listen(event: Event) -> None:
        if not isinstance(event, (Output, Deleted)) or event.session != session.id:
            return
        if isinstance(event, Deleted):
            state["gone"] = True
        elif len(buffer) + len(event.data) > limit:
            buffer.clear()
            state["behind"] = True
        else:
            buffer.extend(event.data)
        ready.set()

    stop = panes.engine.hub.listen(listen)
    try:
        session.pane.feed_all()
        yield repaint(session)
        while not state["gone"]:
            await ready.wait()
            ready.clear()
            if state["behind"]:
                state["behind"] = False
                session.pane.feed_all()
                yield repaint(session)
            elif buffer:
                chunk = bytes(buffer)
                buffer.clear()
                yield chunk
    finally:
        stop()
