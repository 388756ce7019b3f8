"""pyte's ``draw``, wrapped: control characters and what pyte cannot draw taken out first,
combining marks joined here (capped), and the fast paths for plain text on shared cells."""

from __future__ import annotations

import unicodedata
from typing import Any

import pyte
from pyte import charsets
from pyte import modes as pyte_modes

from ._widths import ALL_CELLS, ALL_NARROW, WIDE_RUN, breaks_pyte, cell_width, drop_zero_width, mark, narrow

LAT1_MAP = charsets.LAT1_MAP
#: C0 controls that reach ``draw`` (pyte's parser keeps only BEL, BS, HT, LF, VT, FF, CR, SO, SI).
_ASCII_CONTROLS = dict.fromkeys([*range(0x20), 0x7F])

#: Combining marks kept on one cell (xterm keeps 2 by default, at most 10); more are dropped:
#: 'a' + 40k x U+0301 otherwise re-normalised an ever longer string per mark (13 s).
MAX_COMBINING = 8
#: Shared (attributes, character) cells of the fast draw path kept per screen; a flood of
#: distinct code points and colours otherwise grew it without end (260 MB for 4.4 MB).
CELL_CACHE = 4096


def _with_data(attrs: Any, ch: str) -> Any:
    """``attrs._replace(data=ch)`` at a fifth of the cost (a flood of distinct characters
    makes one cell per character)."""
    return tuple.__new__(type(attrs), (ch, *attrs[1:]))


class DrawingScreen(pyte.Screen):
    """The text half of the pane's pyte screen (``PaneScreen`` adds the rest)."""

    _cells: dict[Any, dict[str, Any]]
    _cached: int
    _last_char: str
    rep_allowance: int

    # -- text ----------------------------------------------------------------------------
    @property
    def _plain_mode(self) -> bool:
        """Latin-1 charset, autowrap on, insert mode off: the only modes the fast draws below
        implement; anything else goes through pyte's own ``draw``."""
        return (
            not self.charset
            and self.g0_charset is LAT1_MAP
            and pyte_modes.DECAWM in self.mode
            and pyte_modes.IRM not in self.mode
        )

    def draw(self, data: str) -> None:
        if data.isascii():
            if not data.isprintable():
                data = data.translate(_ASCII_CONTROLS)  # pyte would stop the run at one
            if data:
                self._last_char = data[-1]
                if self._plain_mode:
                    self._draw_plain(data)
                else:
                    self._pyte_draw(data)
            return
        if ALL_CELLS.match(data):  # the common case: nothing zero-width, nothing to measure
            self._last_char = data[-1]
            if self._plain_mode:
                if ALL_NARROW.match(data):
                    self._draw_plain(data)
                else:
                    self._draw_runs(data)
            else:
                self._pyte_draw(data)
            return
        data = drop_zero_width(data)
        if data:
            self._last_char = data[-1]
            if self._plain_mode:
                widths = set(map(cell_width, set(data)))
                if widths == {1}:
                    self._draw_plain(data)
                    return
                if widths <= {1, 2}:
                    self._draw_cells(data)
                    return
            if any(mark(ch) for ch in set(data)):
                self._draw_marked(data)
            else:
                self._pyte_draw(data)

    def _pyte_draw(self, data: str) -> None:
        """pyte's own ``draw``. With autowrap off, pyte steps a wide character back by its width
        from the last column, to x = -1 on a one-column screen: such a cell is dropped."""
        super().draw(data)
        if self.columns < 2:
            line = self.buffer[self.cursor.y]
            for x in [x for x in line if x < 0]:
                del line[x]

    def _draw_marked(self, data: str) -> None:
        """pyte's ``draw`` for text with combining marks, runs of marks joined here, capped."""
        start = i = 0
        n = len(data)
        while i < n:
            if not mark(data[i]):
                i += 1
                continue
            j = i + 1
            while j < n and mark(data[j]):
                j += 1
            if start < i:
                self.draw(data[start:i])  # no marks in it: the fast paths apply
            self._combine(data[i:j])
            start = i = j
        if start < n:
            self.draw(data[start:])

    def _combine(self, marks: str) -> None:
        """Join ``marks`` to the cell before the cursor, keeping at most MAX_COMBINING."""
        x, y = self.cursor.x, self.cursor.y
        if x:
            x -= 1
        elif y:
            x, y = self.columns - 1, y - 1  # a mark at the start of a row joins the row above
        else:
            return
        line = self.buffer[y]
        last = line[x]
        if last.data == "" and x:  # the stub after a wide character
            x -= 1
            last = line[x]
        room = MAX_COMBINING + 1 - len(last.data)
        if room <= 0:
            return
        line[x] = last._replace(data=unicodedata.normalize("NFC", last.data + marks[:room]))
        self.dirty.add(y)

    def _shared_cells(self, attrs: Any) -> dict[str, Any]:
        """The shared cells of ``attrs`` (character -> cell), within the CELL_CACHE bound."""
        cells = self._cells.get(attrs)
        if cells is None or self._cached > CELL_CACHE:
            if self._cached > CELL_CACHE or len(self._cells) > 256:
                self._cells.clear()
                self._cached = 0
            cells = self._cells[attrs] = {}
        return cells

    def _draw_runs(self, data: str) -> None:
        """Text of one- and two-cell characters: one-cell runs take ``_draw_plain``."""
        pos = 0
        for m in WIDE_RUN.finditer(data):
            if m.start() > pos:
                self._draw_plain(data[pos : m.start()])
            self._draw_cells(m.group(), all_wide=True)
            pos = m.end()
        if pos < len(data):
            self._draw_plain(data[pos:])

    def _draw_cells(self, data: str, all_wide: bool = False) -> None:
        """pyte's ``draw`` for one- and two-cell characters with autowrap on, with shared
        cells: pyte made two namedtuples per wide character (CJK text fed at ~0.5 MB/s)."""
        cursor = self.cursor
        attrs = cursor.attrs
        cells = self._shared_cells(attrs)
        cols = self.columns
        line = self.buffer[cursor.y]
        x = cursor.x
        for ch in data:
            if x >= cols:
                cursor.x = x
                self.dirty.add(cursor.y)
                self.carriage_return()
                self.linefeed()
                line = self.buffer[cursor.y]
                x = cursor.x
            cell = cells.get(ch)
            if cell is None:
                if self._cached > CELL_CACHE:
                    cells = self._shared_cells(attrs)
                cell = cells[ch] = _with_data(attrs, ch)
                self._cached += 1
            line[x] = cell
            if all_wide or cell_width(ch) == 2:
                if x + 1 < cols:
                    stub = cells.get("")
                    if stub is None:
                        stub = cells[""] = attrs._replace(data="")
                        self._cached += 1
                    line[x + 1] = stub
                x = min(x + 2, cols)
            else:
                x += 1
        cursor.x = x
        self.dirty.add(cursor.y)

    def _draw_plain(self, data: str) -> None:
        """pyte's ``draw`` for one-cell characters with autowrap on, without a namedtuple
        ``_replace`` per character: cells are shared per (attributes, character). Same result,
        about three times faster on the text agents print most."""
        cursor = self.cursor
        attrs = cursor.attrs
        cells = self._shared_cells(attrs)
        cols = self.columns
        i, n = 0, len(data)
        while i < n:
            if cursor.x >= cols:
                self.dirty.add(cursor.y)
                self.carriage_return()
                self.linefeed()
            x = cursor.x
            take = min(cols - x, n - i)
            chunk = data[i : i + take]
            new = set(chunk).difference(cells)
            if new:
                if self._cached > CELL_CACHE:
                    self._cells.clear()
                    self._cached = 0
                    cells = self._cells[attrs] = {}
                    new = set(chunk)
                self._cached += len(new)
                for ch in new:
                    cells[ch] = _with_data(attrs, ch)
            self.buffer[cursor.y].update(zip(range(x, x + take), map(cells.__getitem__, chunk), strict=True))
            cursor.x = x + take
            i += take
        self.dirty.add(cursor.y)

    def repeat_last(self, count: int = 1, *_: int) -> None:
        """REP (``CSI n b``): xterm repeats the last graphic character (not a combining mark),
        within the REP allowance (see ``allow``); without autowrap or with insert mode, at
        most one row's worth changes anything visible."""
        ch = self._last_char
        if mark(ch) or breaks_pyte(ch):
            return
        n = min(count or 1, self.columns * self.lines, self.rep_allowance)
        if pyte_modes.DECAWM not in self.mode or pyte_modes.IRM in self.mode or not narrow(ch):
            n = min(n, self.columns)
        if n > 0:
            self.rep_allowance -= n
            self.draw(ch * n)
