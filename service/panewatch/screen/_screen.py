"""``Screen``: what a terminal of rows x columns shows after the bytes fed so far (pyte)."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from ..oob import OutOfBand
from ._filter import SequenceFilter
from ._pyte import PaneScreen, PaneStream

SYNC_OUTPUT_MODE = 2026 << 5

_CELL_DATA = attrgetter("data")


@dataclass(frozen=True)
class Cursor:
    row: int
    col: int
    hidden: bool


class Screen(SequenceFilter):
    """What a terminal of ``rows`` x ``cols`` shows after the bytes fed so far.

    ``feed`` never raises. ``lines()``/``text()`` are the visible rows only, never scrollback:
    an answered prompt that scrolled away must not read as blocked forever.
    """

    def __init__(self, rows: int = 32, cols: int = 120, reply: Callable[[bytes], None] | None = None) -> None:
        self.rows, self.cols = rows, cols
        self._reply_bytes = reply
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._screen = PaneScreen(cols, rows, self._reply)
        self._stream = PaneStream(self._screen)
        self._carry = ""
        self._in_string: str | None = None  # 'P', '_', '^', 'X' or ']' while inside a string
        self._osc_body = ""
        #: Bumped by every feed or resize: the sweep skips screens whose ``seq`` did not move.
        self.seq = 0
        self.title = ""
        self._errors = 0
        self._skip_csi = False  # inside a CSI dropped as garbage (longer than MAX_SEQUENCE)
        self.oob = OutOfBand()  # what the agent says out of band (OSC 7501, 9;4, 9/99/777)
        self.kitty_flags: list[int] = []  # kitty keyboard protocol flags stack (CSI > f u pushes)
        self._rows: list[str] | None = None  # lines() as of the last call; pyte's dirty rows are redone

    # -- output ----------------------------------------------------------------------------
    def lines(self) -> list[str]:
        """The visible rows, right-stripped (wide characters occupy their first cell).

        Only the rows pyte marked dirty since the last call are joined again: a row costs
        ~10 µs, and a spinner frame touches one of 32, so a classification after every frame
        stays cheap (the whole screen was ~0.35 ms, the largest cost of a 200-agent sweep).
        """
        screen = self._screen
        buf = screen.buffer
        if self._rows is None or len(self._rows) != self.rows or screen.all_dirty:
            self._rows = [""] * self.rows
            todo: Any = range(self.rows)
        else:
            todo = screen.dirty
        rows = self._rows
        for y in todo:
            if 0 <= y < self.rows:
                if y in buf:
                    row = buf[y]
                    # cells past the last one written are blanks that rstrip() would drop anyway,
                    # and each costs a Python-level __missing__ call: stop at the last written
                    end = min(max(row, default=-1) + 1, self.cols)
                    rows[y] = "".join(map(_CELL_DATA, map(row.__getitem__, range(end)))).rstrip()
                else:
                    rows[y] = ""
        screen.dirty.clear()
        screen.all_dirty = False
        return list(rows)

    def text(self) -> str:
        """The visible rows joined by newlines."""
        return "\n".join(self.lines())

    def styles(self) -> list[list[list[object]]]:
        """Colour runs per visible row, aligned with ``lines()``: ``[chars, fg, bg, flags]``.

        ``chars`` counts characters of the row's text; ``fg``/``bg`` are pyte's colour names or
        hex values (``"default"`` left out as ``""``); ``flags``: 1 bold, 2 italic, 4 underline,
        8 reverse, 16 strikethrough. For the dashboard only; classification never reads it.
        """
        buf = self._screen.buffer
        out: list[list[list[object]]] = []
        for y, line in enumerate(self.lines()):
            runs: list[list[object]] = []
            if y in buf and line:
                row = buf[y]
                remaining = len(line)
                for x in range(self.cols):
                    if remaining <= 0:
                        break
                    cell = row[x]
                    n = min(len(cell.data), remaining)
                    if n == 0:
                        continue
                    remaining -= n
                    fg = "" if cell.fg == "default" else cell.fg
                    bg = "" if cell.bg == "default" else cell.bg
                    flags = (
                        (1 if cell.bold else 0)
                        | (2 if cell.italics else 0)
                        | (4 if cell.underscore else 0)
                        | (8 if cell.reverse else 0)
                        | (16 if cell.strikethrough else 0)
                    )
                    if runs and runs[-1][1] == fg and runs[-1][2] == bg and runs[-1][3] == flags:
                        runs[-1][0] += n  # type: ignore[operator]
                    else:
                        runs.append([n, fg, bg, flags])
            if len(runs) == 1 and runs[0][1:] == ["", "", 0]:
                runs = []
            out.append(runs)
        return out

    @property
    def cursor(self) -> Cursor:
        c = self._screen.cursor
        # pyte's x == columns (a pending wrap) is shown on the last column, as Ghostty does
        return Cursor(row=min(max(c.y, 0), self.rows - 1), col=min(max(c.x, 0), self.cols - 1), hidden=c.hidden)

    @property
    def alternate(self) -> bool:
        """True while the program shows its alternate screen."""
        return self._screen.alternate

    @property
    def mid_frame(self) -> bool:
        """True between ``ESC[?2026h`` and ``ESC[?2026l``: a repaint is in progress."""
        return SYNC_OUTPUT_MODE in self._screen.mode

    def mode(self, number: int, private: bool = True) -> bool:
        """Whether a terminal mode is set (``mode(2004)`` is bracketed paste)."""
        return (number << 5 if private else number) in self._screen.mode

    def resize(self, rows: int, cols: int) -> None:
        """Change the size; content is kept top-left as xterm does."""
        self.seq += 1
        self.rows, self.cols = rows, cols
        self._rows = None
        self._screen.resize(lines=rows, columns=cols)
