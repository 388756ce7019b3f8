"""A screen read model as terminal bytes (the one repaint the terminal channel sends), and
another node's pane watched as a read-only terminal channel from its screen frames."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ._sessions import AnySession, TerminalSession
from .models import ScreenFrame, ScreenView

#: What goes to a page's terminal: output bytes, or a JSON message.
Message = bytes | dict[str, Any]

REMOTE_READ_ONLY = (
    "this session runs on another node: answer its prompt with the buttons, or type on that node's dashboard"
)

# --- the screen as bytes -------------------------------------------------------------------

#: private modes a terminal must share with the pane for keys to be encoded as the agent expects
#: (cursor keys, bracketed paste, mouse reports)
MODES = (1, 2004, 1000, 1002, 1003, 1006)
_NAMED = {"black": 0, "red": 1, "green": 2, "brown": 3, "yellow": 3, "blue": 4, "magenta": 5, "cyan": 6, "white": 7}
_RGB = re.compile(r"[0-9a-fA-F]{6}")


def modes_of(session: AnySession) -> tuple[dict[int, bool], bool]:
    """The input modes the session's screen has set, and whether it shows its alternate screen."""
    if not isinstance(session, TerminalSession):
        return {}, False
    screen = session.pane.screen
    return {m: screen.mode(m) for m in MODES}, screen.alternate


def _colour(name: str, base: int) -> str | None:
    if not name:
        return None
    if _RGB.fullmatch(name):
        r, g, b = (int(name[i : i + 2], 16) for i in (0, 2, 4))
        return f"{base + 8};2;{r};{g};{b}"
    bright = name.startswith("bright")
    n = _NAMED.get(name[6:] if bright else name)
    if n is None:
        return None
    return str((base + 60 if bright else base) + n)


def _sgr(fg: str, bg: str, flags: int) -> str:
    parts = ["0"]
    for bit, code in ((1, "1"), (2, "3"), (4, "4"), (8, "7"), (16, "9")):
        if flags & bit:
            parts.append(code)
    for c in (_colour(fg, 30), _colour(bg, 40)):
        if c:
            parts.append(c)
    return "\x1b[" + ";".join(parts) + "m"


def repaint(view: ScreenView, modes: Mapping[int, bool] | None = None, alternate: bool = False) -> bytes:
    """Bytes that draw a screen read model on a terminal of its size: text with its colours,
    the cursor where it is (shown or hidden), on the pane's buffer (main or alternate), with the
    input modes that change how keys are encoded. Erasing the display keeps the scrollback."""
    modes = modes or {}
    out = ["\x1b[?1049h" if alternate else "\x1b[?1049l", "\x1b[0m\x1b[H\x1b[2J"]
    styles = view.styles or []
    for y, line in enumerate(view.rows):
        if not line:
            continue
        out.append(f"\x1b[{y + 1};1H")
        at = 0
        for n, fg, bg, flags in styles[y] if y < len(styles) else []:
            out.append(_sgr(str(fg), str(bg), int(flags)) + line[at : at + int(n)])
            at += int(n)
        if at < len(line):
            out.append("\x1b[0m" + line[at:])
        out.append("\x1b[0m")
    for mode in MODES:
        out.append(f"\x1b[?{mode}{'h' if modes.get(mode, False) else 'l'}")
    cursor = view.cursor
    out.append(f"\x1b[?25{'l' if cursor.hidden else 'h'}\x1b[{cursor.row + 1};{cursor.col + 1}H")
    return "".join(out).encode("utf-8", "replace")


# --- another node's pane ------------------------------------------------------------------------


def apply_frame(view: ScreenView | None, frame: ScreenFrame) -> ScreenView:
    """A screen frame (full, or the rows and styles that changed) applied to the view kept."""
    head = {k: getattr(frame, k) for k in ("cursor", "size", "state", "rule", "source", "title", "prompt", "request")}
    if frame.full or view is None:
        return ScreenView(rows=list(frame.rows or []), styles=frame.styles, **head)
    rows, styles = list(view.rows), list(view.styles) if view.styles is not None else None
    for i, row in (frame.changed or {}).items():
        if int(i) < len(rows):
            rows[int(i)] = row
    for i, style in (frame.changed_styles or {}).items():
        if styles is not None and int(i) < len(styles):
            styles[int(i)] = style
    return ScreenView(rows=rows, styles=styles, **head)


class Watched:
    """Another node's pane, watched from here: its screen frames (which flow over the cluster
    only while watched) drawn as repaints; no history and no typing (answers go through the
    guarded ``answer``, which the owning node checks; type on that node's own dashboard)."""

    def __init__(self, frames: AsyncIterator[ScreenFrame]) -> None:
        self.frames = frames

    async def messages(self) -> AsyncIterator[Message]:
        view: ScreenView | None = None
        sent_size: tuple[int, int] | None = None
        async for frame in self.frames:
            view = apply_frame(view, frame)
            size = (view.size.rows, view.size.cols)
            if size != sent_size:
                kind = "hello" if sent_size is None else "size"
                yield {"type": kind, "rows": size[0], "cols": size[1], "history_bytes": 0}
            yield repaint(view)
            if sent_size is None:  # as a local terminal does once its first screen is out
                yield {"type": "ready"}
            sent_size = size
            state = view.model_dump(mode="json", include={"state", "rule", "source", "title", "prompt", "request"})
            yield {"type": "state", **state, "rows": size[0], "cols": size[1]}

    async def input(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        return {"type": "error", "detail": REMOTE_READ_ONLY}

    def close(self) -> None:
        """Nothing is kept for a watched pane (its frames stop with the socket's task)."""


def watch_terminal(frames: AsyncIterator[ScreenFrame]) -> Watched:
    """A terminal channel on another node's pane, from its screen frames (the cluster's)."""
    return Watched(frames)
