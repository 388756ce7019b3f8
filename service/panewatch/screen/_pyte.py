"""The pane's pyte screen: tolerant CSI handlers (extra parameters ignored, a raising handler
loses only its own sequence), an alternate screen, answered queries, O(1) scrolling and
row-wise erases, the cursor kept on the screen."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pyte
from pyte import modes as pyte_modes
from pyte.screens import StaticDefaultDict

from ._draw import DrawingScreen
from ._rows import Rows

#: Answers to device-attribute queries, as xterm (patch 388, VT420 level) gives them.
DA1_REPLY = "\x1b[?64;1;2;6;9;15;18;21;22c"
#: ``CSI ? 996 n`` asks for the colour scheme (contour's, also kitty's and Ghostty's); the answer
#: ``CSI ? 997 ; 1 n`` says dark (2 would be light), matching the black background of OSC 11.
COLOUR_SCHEME_QUERY = 996
COLOUR_SCHEME_REPLY = "\x1b[?997;1n"

ALT_SCREEN_MODES = {47 << 5, 1047 << 5, 1049 << 5}
#: DECCOLM (3) would switch pyte to 80/132 columns behind the wrapper's back (xterm ignores
#: it too unless allowed); DECSCNM (5) rewrites every cell for five bytes. Both are ignored.
_IGNORED_PRIVATE_MODES = frozenset({3, 5})

#: Cells REP (``CSI n b``) may draw per byte fed, on top of a burst of REP_BURST cells (or two
#: screenfuls if smaller): sixteen ``CSI 9999 b`` cost 16 screenfuls of drawing for 7 bytes
#: each. A TUI's ruler (``─ CSI 119 b``) spends ~15 cells per byte for a line, well within.
REP_CELLS_PER_BYTE = 4
REP_BURST = 16384
#: SGR results a screen remembers (``select_graphic_rendition``); past it the memo starts again.
SGR_CACHE = 1024


def _kept(modes: tuple[int, ...], private: bool) -> tuple[int, ...]:
    """The modes pyte is to act on: private ones it misreads (``_IGNORED_PRIVATE_MODES``) dropped."""
    return tuple(m for m in modes if m not in _IGNORED_PRIVATE_MODES) if private else modes


class PaneScreen(DrawingScreen):
    """pyte's screen with tolerant CSI handlers, an alternate screen and answered queries."""

    def __init__(self, columns: int, lines: int, reply: Callable[[str], None]) -> None:
        self._reply = reply
        self._saved_main: tuple[Any, ...] | None = None
        self._cells: dict[Any, dict[str, Any]] = {}  # (attributes) -> character -> shared cell
        self._cached = 0  # cells in ``_cells``, bounded by CELL_CACHE
        self._sgr: dict[tuple[Any, tuple[int, ...]], Any] = {}  # (attributes, SGR) -> attributes after
        self.errors = 0  # handler exceptions contained (each lost one sequence)
        self._last_char = " "
        #: Cells REP may still draw; refilled per byte fed (``allow``), capped at two screenfuls.
        self.rep_allowance = 0
        super().__init__(columns, lines)
        self.rep_allowance = self.rep_cap

    def reset(self) -> None:
        super().reset()
        # pyte types ``buffer`` as a dict; ``_row_buffer`` is the same object typed as what it is,
        # for the calls a dict lacks (``scroll``, ``default_factory``).
        self._row_buffer = Rows(lambda: StaticDefaultDict(self.default_char))
        self.buffer = self._row_buffer  # type: ignore[assignment]  # Rows does the dict calls pyte makes
        self.all_dirty = True

    def index(self) -> None:
        """IND / line feed: at the bottom margin the content scrolls (O(1) for a full screen)."""
        top, bottom = self._region()
        if self.cursor.y == bottom:
            if top == 0 and bottom == self.lines - 1:
                self._row_buffer.scroll(1, self.lines)
            else:
                self._shift_rows(top, bottom, 1)
            self.all_dirty = True
        else:
            self.cursor_down()

    def reverse_index(self) -> None:
        top, bottom = self._region()
        if self.cursor.y == top:
            if top == 0 and bottom == self.lines - 1:
                self._row_buffer.scroll(-1, self.lines)
            else:
                self._shift_rows(top, bottom, -1)
            self.all_dirty = True
        else:
            self.cursor_up()

    def select_graphic_rendition(self, *attrs: int) -> None:
        """pyte's SGR, remembered: its result depends only on the attributes before and the
        parameters, and agents repeat the same few colour changes thousands of times (pyte builds
        a new attribute tuple for each). Bounded like the cell cache: cleared when full."""
        key = (self.cursor.attrs, attrs)
        after = self._sgr.get(key)
        if after is None:
            super().select_graphic_rendition(*attrs)
            if len(self._sgr) >= SGR_CACHE:
                self._sgr.clear()
            self._sgr[key] = self.cursor.attrs
        else:
            self.cursor.attrs = after

    def allow(self, nbytes: int) -> None:
        """Credit REP with the bytes about to be fed: its work stays proportional to input."""
        self.rep_allowance = min(self.rep_allowance + nbytes * REP_CELLS_PER_BYTE, self.rep_cap)

    @property
    def rep_cap(self) -> int:
        return min(2 * self.columns * self.lines, REP_BURST)

    def clamp_cursor(self) -> None:
        """Put the cursor back on the screen (``x == columns`` is pyte's pending wrap)."""
        c = self.cursor
        if not 0 <= c.y < self.lines:
            c.y = min(max(c.y, 0), self.lines - 1)
        if not 0 <= c.x <= self.columns:
            c.x = min(max(c.x, 0), self.columns)

    # -- queries -------------------------------------------------------------------------
    def write_process_input(self, data: str) -> None:
        self._reply(data)

    def report_device_attributes(self, mode: int = 0, *_: int, **kwargs: Any) -> None:
        if mode == 0 and not kwargs.get("private"):
            self._reply(DA1_REPLY)

    def report_device_status(self, mode: int = 0, *_: int, **kwargs: Any) -> None:
        """DSR. The private ``CSI ? 996 n`` (colour-scheme query, Copilot CLI sends it at start)
        is answered "dark", as the OSC 11 answer's black background says; other private DSRs
        are read as their plain form (pyte's), and unknown ones ignored: never the rest of the chunk."""
        if kwargs.get("private") and mode == COLOUR_SCHEME_QUERY:
            self._reply(COLOUR_SCHEME_REPLY)
        else:
            super().report_device_status(mode)

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        if how not in (0, 1, 2):  # pyte indexes a 3-tuple with it
            return
        y, x = self.cursor.y, min(self.cursor.x, self.columns)  # x == columns: pending wrap, as pyte
        self.dirty.add(y)
        attrs = self.cursor.attrs
        if how == 2:
            self.buffer[y] = StaticDefaultDict(attrs)  # one row object, not a cell per column
            return
        interval = range(x, self.columns) if how == 0 else range(min(x + 1, self.columns))
        row = self.buffer[y]
        if attrs == row.default:
            for col in [c for c in row if c in interval]:
                del row[col]
        else:
            row.update(dict.fromkeys(interval, attrs))

    def erase_characters(self, count: int | None = None) -> None:
        x = min(self.cursor.x, self.columns)
        self.dirty.add(self.cursor.y)
        self.buffer[self.cursor.y].update(
            dict.fromkeys(range(x, min(x + (count or 1), self.columns)), self.cursor.attrs)
        )

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        if how not in (0, 1, 2):
            return  # ED 3 erases only the scrollback (which a pane does not keep); others mean nothing
        attrs = self.cursor.attrs
        self.all_dirty = True
        if how == 2:  # every row blank in the erase attributes: one clear, rows made on demand
            self.buffer.clear()
            self._row_buffer.default_factory = (
                (lambda: StaticDefaultDict(self.default_char))
                if attrs == self.default_char
                else (lambda: StaticDefaultDict(attrs))
            )
            return
        lo, hi = (self.cursor.y + 1, self.lines) if how == 0 else (0, self.cursor.y)
        if attrs == self.default_char:  # only rows ever written exist: drop those
            for y in [y for y in self.buffer if lo <= y < hi]:
                del self.buffer[y]
        else:  # a fresh row per line: an erase costs rows, not cells
            for y in range(lo, hi):
                self.buffer[y] = StaticDefaultDict(attrs)
        self.erase_in_line(how)

    def alignment_display(self) -> None:
        """DECALN (``ESC # 8``, a screen test pattern): ignored, as it costs a write per cell
        for three bytes and no program a pane runs uses it."""

    # -- scrolling -----------------------------------------------------------------------
    def _shift_rows(self, top: int, bottom: int, count: int) -> None:
        """Move rows ``top..bottom`` up by ``count`` (down if negative), blanks coming in:
        one pass over the rows whatever the count, not a full scroll per line."""
        buf = self.buffer
        self.all_dirty = True
        if top == 0 and bottom == self.lines - 1:
            self._row_buffer.scroll(count, self.lines)
            return
        rows = {y: buf.pop(y) for y in [y for y in buf if top <= y <= bottom]}
        for y, row in rows.items():
            to = y - count
            if top <= to <= bottom:
                buf[to] = row

    def _region(self) -> tuple[int, int]:
        if self.margins:
            return self.margins.top, min(self.margins.bottom, self.lines - 1)
        return 0, self.lines - 1

    def scroll_up(self, count: int = 1, *_: int) -> None:
        """SU (``CSI n S``): content moves up inside the margins."""
        top, bottom = self._region()
        self._shift_rows(top, bottom, max(1, min(count or 1, self.lines)))

    def scroll_down(self, count: int = 1, *_: int) -> None:
        """SD (``CSI n T``): content moves down inside the margins."""
        top, bottom = self._region()
        self._shift_rows(top, bottom, -max(1, min(count or 1, self.lines)))

    def insert_lines(self, count: int | None = None) -> None:
        top, bottom = self._region()
        if top <= self.cursor.y <= bottom:
            self._shift_rows(self.cursor.y, bottom, -max(1, min(count or 1, self.lines)))
            self.carriage_return()

    def delete_lines(self, count: int | None = None) -> None:
        top, bottom = self._region()
        if top <= self.cursor.y <= bottom:
            self._shift_rows(self.cursor.y, bottom, max(1, min(count or 1, self.lines)))
            self.carriage_return()

    def insert_characters(self, count: int | None = None) -> None:
        self._shift_cells(-max(1, min(count or 1, self.columns)))

    def delete_characters(self, count: int | None = None) -> None:
        self._shift_cells(max(1, min(count or 1, self.columns)))

    def _shift_cells(self, count: int) -> None:
        """ICH (negative) / DCH: cells right of the cursor move, blanks come in; one pass over
        the row's written cells (pyte walked every column per call)."""
        y, x = self.cursor.y, min(self.cursor.x, self.columns)
        self.dirty.add(y)
        row = self.buffer[y]
        moved = {c: row.pop(c) for c in [c for c in row if c >= x]}
        for c, cell in moved.items():
            to = c - count
            if x <= to < self.columns:
                row[to] = cell

    def cursor_to_line(self, line: int | None = None) -> None:
        """VPA: pyte asserted on origin mode without margins (``CSI ?6h CSI 10d``)."""
        self.cursor.y = (line or 1) - 1
        if pyte_modes.DECOM in self.mode and self.margins is not None:
            self.cursor.y += self.margins.top
        self.ensure_vbounds()

    def set_margins(self, top: int | None = None, bottom: int | None = None) -> None:
        if (top is not None and top > self.lines) or (bottom is not None and bottom > self.lines):
            bottom = min(bottom or self.lines, self.lines)  # xterm clamps the bottom to the screen
            top = min(top or 1, self.lines)
        super().set_margins(top, bottom)

    # -- size ----------------------------------------------------------------------------
    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        """Change the size as xterm does: rows below the cursor go first when shrinking, then
        rows above it scroll off, so the cursor's row (a prompt) stays on screen."""
        lines, columns = lines or self.lines, columns or self.columns
        if lines == self.lines and columns == self.columns:
            return
        if lines < self.lines:
            drop = max(0, self.cursor.y - (lines - 1))
            if drop:
                self._row_buffer.scroll(drop, self.lines)
                self.cursor.y -= drop
            for y in [y for y in self.buffer if y >= lines]:
                del self.buffer[y]
        if columns < self.columns:
            for row in self.buffer.values():
                for x in [x for x in row if x >= columns]:
                    del row[x]
        self.lines, self.columns = lines, columns
        self.all_dirty = True
        self.set_margins()
        self.savepoints.clear()  # saved positions may lie outside the new size
        self.rep_allowance = min(self.rep_allowance, self.rep_cap)
        self.clamp_cursor()

    # -- alternate screen ----------------------------------------------------------------
    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        private = kwargs.get("private", False)
        modes = _kept(modes, private)
        if not modes:
            return
        wanted = {m << 5 for m in modes} if private else set()
        if wanted & ALT_SCREEN_MODES and self._saved_main is None:
            if 1049 << 5 in wanted:
                self.save_cursor()
            self._saved_main = (
                {y: dict(row) for y, row in self.buffer.items()},
                (self.cursor.x, self.cursor.y, self.cursor.attrs),
                self.margins,
            )
            super().set_mode(*modes, **kwargs)
            self.erase_in_display(2)
            return
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        private = kwargs.get("private", False)
        modes = _kept(modes, private)
        if not modes:
            return
        wanted = {m << 5 for m in modes} if private else set()
        super().reset_mode(*modes, **kwargs)
        if wanted & ALT_SCREEN_MODES and self._saved_main is not None:
            rows, (x, y, attrs), margins = self._saved_main
            self._saved_main = None
            self.buffer.clear()
            for row_y, row in rows.items():
                if row_y < self.lines:
                    line = self.buffer[row_y]
                    for col, char in row.items():
                        if col < self.columns:
                            line[col] = char
            self.cursor.x, self.cursor.y, self.cursor.attrs = min(x, self.columns - 1), min(y, self.lines - 1), attrs
            self.margins = margins
            if 1049 << 5 in wanted:
                self.restore_cursor()
            self.all_dirty = True

    @property
    def alternate(self) -> bool:
        return self._saved_main is not None


def _tolerant(name: str) -> Callable[..., None]:
    """Wrap a pyte CSI handler so extra parameters and a stray ``private`` are ignored."""
    method = getattr(PaneScreen, name)
    sig = inspect.signature(method)
    positional = [
        p
        for p in list(sig.parameters.values())[1:]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "private"
    ]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    takes_kwargs = "private" in sig.parameters or any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    limit = None if varargs else len(positional)

    def handler(self: PaneScreen, *params: int, **kwargs: Any) -> None:
        if limit is not None:
            params = params[:limit]
        if not takes_kwargs:
            kwargs = {}
        try:
            method(self, *params, **kwargs)
        except Exception:  # one bad sequence is lost, never the rest of the chunk
            self.errors += 1
        self.clamp_cursor()

    handler.__name__ = name
    handler.__doc__ = method.__doc__
    return handler


def _guarded(name: str) -> Callable[..., None]:
    """Wrap a pyte event handler so that an exception costs only its own sequence (pyte's
    parser would drop the rest of the chunk) and the cursor stays on the screen."""
    method = getattr(PaneScreen, name)

    def handler(self: PaneScreen, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception:
            self.errors += 1
        self.clamp_cursor()

    handler.__name__ = name
    handler.__doc__ = method.__doc__
    return handler


class PaneStream(pyte.Stream):
    """pyte's parser, with the CSI finals pyte lacks routed to the screen."""

    # Unannotated like pyte's own ``Stream.csi`` (an instance attribute to mypy, so ClassVar would
    # clash); never mutated: pyte reads it once per stream to build its dispatch table.
    csi = {**pyte.Stream.csi, "S": "scroll_up", "T": "scroll_down", "b": "repeat_last"}  # noqa: RUF012

    @property
    def between_sequences(self) -> bool:
        """The parser is in its ground state (no sequence begun): a whole CSI may bypass it."""
        return bool(self._taking_plain_text)


for _name in set(PaneStream.csi.values()):
    setattr(PaneScreen, _name, _tolerant(_name))
for _name in (PaneStream.events | {"reset"}) - set(PaneStream.csi.values()) - {"debug"}:
    setattr(PaneScreen, _name, _guarded(_name))
