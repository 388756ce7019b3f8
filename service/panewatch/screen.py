"""The emulated screen of one pane: pyte, plus the fixes real agent output needs.

Classification reads what a user would *see*, so this module turns raw PTY bytes into the
visible rows of a terminal. pyte 0.8.2 does most of the work; this wrapper contains its
measured defects (see the research notes) so that nothing an agent prints is lost:

* a CSI with extra parameters (``CSI 1;2 G``) raised ``TypeError`` out of ``feed()``;
* a zero-width character (VS16, ZWJ) dropped the rest of a text run;
* DCS/APC/PM/SOS strings, ``CSI <``/``CSI =``/``CSI >`` sequences and colon SGR were drawn as text;
* OSC codes other than 0/1/2 were misread (``OSC 22`` became a title);
* there was no alternate screen, and ``CSI 3 J`` erased the visible screen;
* queries (cursor position, device attributes, modes, colours) went unanswered.

The service *is* the terminal its agents talk to, so queries are answered through ``reply``
the way xterm answers them, whether or not a browser is watching.

Pane output is untrusted: every sequence costs bounded work and leaves the cursor on the
screen. Combining marks per cell, REP counts, escape-sequence lengths and the shared cell
cache are capped; erases touch rows, not cells; a handler that raises loses only its own
sequence, never the rest of the chunk (see ``tests/test_screen_hostile.py``).
"""

from __future__ import annotations

import codecs
import inspect
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any

import pyte
from pyte import charsets
from pyte import modes as pyte_modes
from pyte.screens import StaticDefaultDict
from wcwidth import wcwidth

from .oob import CODES as OOB_CODES
from .oob import OutOfBand

ESC = "\x1b"
LAT1_MAP = charsets.LAT1_MAP
#: C0 controls that reach ``draw`` (pyte's parser keeps only BEL, BS, HT, LF, VT, FF, CR, SO, SI).
_ASCII_CONTROLS = dict.fromkeys([*range(0x20), 0x7F])

#: Answers to device-attribute queries, as xterm (patch 388, VT420 level) gives them.
DA1_REPLY = "\x1b[?64;1;2;6;9;15;18;21;22c"
DA2_REPLY = "\x1b[>41;388;0c"
XTVERSION_REPLY = "\x1bP>|XTerm(388)\x1b\\"
#: ``CSI ? 996 n`` asks for the colour scheme (contour's, also kitty's and Ghostty's); the answer
#: ``CSI ? 997 ; 1 n`` says dark (2 would be light), matching the black background of OSC 11.
COLOUR_SCHEME_QUERY = 996
COLOUR_SCHEME_REPLY = "\x1b[?997;1n"
#: Default colours reported for OSC 10/11/12 queries (light grey on black, like xterm -rv).
OSC_COLOURS = {"10": "rgb:d0d0/d0d0/d0d0", "11": "rgb:0000/0000/0000", "12": "rgb:d0d0/d0d0/d0d0"}

ALT_SCREEN_MODES = {47 << 5, 1047 << 5, 1049 << 5}
#: DECCOLM (3) would switch pyte to 80/132 columns behind the wrapper's back (xterm ignores
#: it too unless allowed); DECSCNM (5) rewrites every cell for five bytes. Both are ignored.
_IGNORED_PRIVATE_MODES = frozenset({3, 5})
SYNC_OUTPUT_MODE = 2026 << 5

_CELL_DATA = attrgetter("data")

#: Longest OSC body kept (titles); longer bodies (OSC 52 clipboard, images) are skipped.
OSC_KEEP = 4096
#: Combining marks kept on one cell (xterm keeps 2 by default, at most 10); more are dropped:
#: 'a' + 40k x U+0301 otherwise re-normalised an ever longer string per mark (13 s).
MAX_COMBINING = 8
#: Parameter bytes a CSI may carry; a longer one is garbage, dropped up to its final byte
#: (16 MiB of digits after ``ESC [`` were carried and rescanned on every feed).
MAX_SEQUENCE = 2048
#: Shared (attributes, character) cells of the fast draw path kept per screen; a flood of
#: distinct code points and colours otherwise grew it without end (260 MB for 4.4 MB).
CELL_CACHE = 4096
#: Cells REP (``CSI n b``) may draw per byte fed, on top of a burst of REP_BURST cells (or two
#: screenfuls if smaller): sixteen ``CSI 9999 b`` cost 16 screenfuls of drawing for 7 bytes
#: each. A TUI's ruler (``─ CSI 119 b``) spends ~15 cells per byte for a line, well within.
REP_CELLS_PER_BYTE = 4
REP_BURST = 16384

# The sequences the wrapper takes out of the stream before pyte sees it. Plain CSIs
# (``ESC [ ? digits ; final``) are left to pyte; everything below pyte gets wrong.
_SPECIAL = re.compile(
    rf"""
    \x1b\[ (?P<csi_long>[\x20-\x3f]{{{MAX_SEQUENCE},}}) [\x40-\x7e]?
  | (?P<kitty_query>\x1b\[\?u)
  | \x1b\[ (?P<csi_prefix>[<=>]) (?P<csi_p_params>[0-9;:]*) (?P<csi_p_inter>[\x20-\x2f]*) (?P<csi_p_final>[\x40-\x7e])
  | \x1b\[ (?P<csi_q>\?)? (?P<csi_i_params>[0-9;:]*) (?P<csi_i_inter>[\x20-\x2f]+) (?P<csi_i_final>[\x40-\x7e])
  | \x1b\[ (?P<sgr_params>[0-9;]*:[0-9;:]*) m
  | \x1b\[ (?P<csi_x_params>[0-9;]*) (?P<csi_x_final>[STbstu])
  | \x1b\] (?P<osc>[^\x07\x1b]*) (?:\x07|\x1b\\)
  | \x1b (?P<str_intro>[P_^X])
  | \x1b\] (?P<osc_open>)
    """,
    re.VERBOSE,
)

#: An escape sequence cut off at the end of a chunk; it is held back until the next feed
#: (up to ``MAX_SEQUENCE``, past which it is dropped as garbage).
_INCOMPLETE = re.compile(r"\x1b(?:\[[\x30-\x3f]*[\x20-\x2f]*)?\Z")
#: The rest of a CSI being dropped as garbage: parameter/intermediate bytes, then its final.
_CSI_REST = re.compile(r"[\x20-\x3f]*[\x40-\x7e]?")
#: C1 controls as UTF-8 code points: xterm ignores them in UTF-8 mode; pyte would start an
#: unbounded CSI (U+009B) or OSC (U+009D) on them.
_C1 = re.compile("[\x80-\x9f]")

#: End of a DCS/APC/PM/SOS/OSC string.
_STRING_END = re.compile(r"\x07|\x1b\\")


@lru_cache(maxsize=4096)
def _breaks_pyte(ch: str) -> bool:
    """True for a code point that makes pyte's ``draw`` abandon the rest of a run."""
    return wcwidth(ch) <= 0 and not unicodedata.combining(ch)


@lru_cache(maxsize=4096)
def _mark(ch: str) -> bool:
    """A combining mark: pyte joins it to the previous cell."""
    return wcwidth(ch) == 0 and unicodedata.combining(ch) != 0


def _bmp_classes() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Regexes over the Basic Multilingual Plane by wcwidth: all one-cell, all one- or
    two-cell, and runs of two-cell characters (marks and zero-width excluded).

    Built once (~0.2 s at import): per-character checks through an LRU cache thrashed on a
    flood of distinct characters (CJK at 0.5 MB/s, mostly in cache misses)."""
    narrow: list[tuple[int, int]] = []
    wide: list[tuple[int, int]] = []
    for cp in range(0xA0, 0x10000):
        ch = chr(cp)
        width = wcwidth(ch)
        if width == 0 or 0xD800 <= cp <= 0xDFFF or unicodedata.combining(ch):
            continue
        ranges = narrow if width == 1 else wide if width == 2 else None
        if ranges is None:
            continue
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))

    def cls(ranges: list[tuple[int, int]]) -> str:
        return "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)

    one = "\\x20-\\x7e" + cls(narrow)
    return (re.compile(f"[{one}]*\\Z"), re.compile(f"[{one}{cls(wide)}]*\\Z"), re.compile(f"[{cls(wide)}]+"))


_ALL_NARROW, _ALL_CELLS, _WIDE_RUN = _bmp_classes()


def _with_data(attrs: Any, ch: str) -> Any:
    """``attrs._replace(data=ch)`` at a fifth of the cost (a flood of distinct characters
    makes one cell per character)."""
    return tuple.__new__(type(attrs), (ch, *attrs[1:]))


@lru_cache(maxsize=4096)
def _cell_width(ch: str) -> int:
    """Cells a character takes when drawn on its own (0 for a combining mark, -1 unprintable)."""
    return 0 if _mark(ch) else wcwidth(ch)


@lru_cache(maxsize=4096)
def _narrow(ch: str) -> bool:
    """One cell wide and not combining: drawn exactly like an ASCII letter."""
    return wcwidth(ch) == 1 and not unicodedata.combining(ch)


def _drop_zero_width(data: str) -> str:
    """Remove VS16, ZWJ, C1 controls and the like, which pyte cannot draw without losing text."""
    bad = [ch for ch in set(data) if not ch.isascii() and _breaks_pyte(ch)]
    if not bad:
        return data
    return data.translate(dict.fromkeys(map(ord, bad)))


def _colon_sgr(params: str) -> str:
    """Rewrite colon sub-parameters (``38:2::r:g:b``, ``4:3``) into what pyte understands."""
    out: list[str] = []
    for part in params.split(";"):
        if ":" not in part:
            out.append(part)
            continue
        fields = part.split(":")
        head = fields[0]
        if head in ("38", "48") and len(fields) >= 3 and fields[1] == "2":
            rgb = [f for f in fields[2:] if f != ""][-3:]
            if len(rgb) == 3:
                out.append(";".join([head, "2", *rgb]))
        elif head in ("38", "48") and len(fields) >= 3 and fields[1] == "5":
            out.append(f"{head};5;{fields[2] or 0}")
        elif head == "58":
            continue  # underline colour: pyte has no slot for it
        else:
            out.append(head)  # e.g. 4:3 (curly underline) -> 4
    return ";".join(out)


class _Rows:
    """pyte's row buffer (row index -> row) with an offset, so that a scroll of the whole
    screen is one pop and an addition instead of renumbering every row: pyte's ``index``
    moved all rows per line feed, O(rows) per byte of a ``yes`` flood (500 rows: ~1 s per
    16 KiB). Missing rows are created by ``default_factory`` as in pyte's ``defaultdict``."""

    __slots__ = ("_off", "_rows", "default_factory")

    def __init__(self, default_factory: Callable[[], Any]) -> None:
        self._rows: dict[int, Any] = {}
        self._off = 0
        self.default_factory = default_factory

    def __getitem__(self, y: int) -> Any:
        key = y + self._off
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = self.default_factory()
        return row

    def __setitem__(self, y: int, row: Any) -> None:
        self._rows[y + self._off] = row

    def __delitem__(self, y: int) -> None:
        del self._rows[y + self._off]

    def __contains__(self, y: object) -> bool:
        return isinstance(y, int) and y + self._off in self._rows

    def __iter__(self) -> Any:
        off = self._off
        return iter([key - off for key in self._rows])

    def __len__(self) -> int:
        return len(self._rows)

    def pop(self, y: int, *default: Any) -> Any:
        return self._rows.pop(y + self._off, *default)

    def get(self, y: int, default: Any = None) -> Any:
        return self._rows.get(y + self._off, default)

    def keys(self) -> list[int]:
        return list(self)

    def values(self) -> Any:
        return self._rows.values()

    def items(self) -> list[tuple[int, Any]]:
        off = self._off
        return [(key - off, row) for key, row in self._rows.items()]

    def clear(self) -> None:
        self._rows.clear()
        self._off = 0

    def scroll(self, count: int, lines: int) -> None:
        """The whole screen's content moves up ``count`` rows (down if negative)."""
        if abs(count) >= lines:
            self.clear()
            return
        gone = range(count) if count > 0 else range(lines + count, lines)
        for y in gone:
            self._rows.pop(y + self._off, None)
        self._off += count


class _PaneScreen(pyte.Screen):
    """pyte's screen with tolerant CSI handlers, an alternate screen and answered queries."""

    def __init__(self, columns: int, lines: int, reply: Callable[[str], None]) -> None:
        self._reply = reply
        self._saved_main: tuple[Any, ...] | None = None
        self._cells: dict[Any, dict[str, Any]] = {}  # (attributes) -> character -> shared cell
        self._cached = 0  # cells in ``_cells``, bounded by CELL_CACHE
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
        self._row_buffer = _Rows(lambda: StaticDefaultDict(self.default_char))
        self.buffer = self._row_buffer  # type: ignore[assignment]  # _Rows does the dict calls pyte makes
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
        if _ALL_CELLS.match(data):  # the common case: nothing zero-width, nothing to measure
            self._last_char = data[-1]
            if self._plain_mode:
                if _ALL_NARROW.match(data):
                    self._draw_plain(data)
                else:
                    self._draw_runs(data)
            else:
                self._pyte_draw(data)
            return
        data = _drop_zero_width(data)
        if data:
            self._last_char = data[-1]
            if self._plain_mode:
                widths = set(map(_cell_width, set(data)))
                if widths == {1}:
                    self._draw_plain(data)
                    return
                if widths <= {1, 2}:
                    self._draw_cells(data)
                    return
            if any(_mark(ch) for ch in set(data)):
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
            if not _mark(data[i]):
                i += 1
                continue
            j = i + 1
            while j < n and _mark(data[j]):
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
        for m in _WIDE_RUN.finditer(data):
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
            if all_wide or _cell_width(ch) == 2:
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

    def repeat_last(self, count: int = 1, *_: int) -> None:
        """REP (``CSI n b``): xterm repeats the last graphic character (not a combining mark),
        within the REP allowance (see ``allow``); without autowrap or with insert mode, at
        most one row's worth changes anything visible."""
        ch = self._last_char
        if _mark(ch) or _breaks_pyte(ch):
            return
        n = min(count or 1, self.columns * self.lines, self.rep_allowance)
        if pyte_modes.DECAWM not in self.mode or pyte_modes.IRM in self.mode or not _narrow(ch):
            n = min(n, self.columns)
        if n > 0:
            self.rep_allowance -= n
            self.draw(ch * n)

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
        if private:
            modes = tuple(m for m in modes if m not in _IGNORED_PRIVATE_MODES)
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
        if private:
            modes = tuple(m for m in modes if m not in _IGNORED_PRIVATE_MODES)
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
    method = getattr(_PaneScreen, name)
    sig = inspect.signature(method)
    positional = [
        p
        for p in list(sig.parameters.values())[1:]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "private"
    ]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    takes_kwargs = "private" in sig.parameters or any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    limit = None if varargs else len(positional)

    def handler(self: _PaneScreen, *params: int, **kwargs: Any) -> None:
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
    method = getattr(_PaneScreen, name)

    def handler(self: _PaneScreen, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception:
            self.errors += 1
        self.clamp_cursor()

    handler.__name__ = name
    handler.__doc__ = method.__doc__
    return handler


class _PaneStream(pyte.Stream):
    """pyte's parser, with the CSI finals pyte lacks routed to the screen."""

    # Unannotated like pyte's own ``Stream.csi`` (an instance attribute to mypy, so ClassVar would
    # clash); never mutated: pyte reads it once per stream to build its dispatch table.
    csi = {**pyte.Stream.csi, "S": "scroll_up", "T": "scroll_down", "b": "repeat_last"}  # noqa: RUF012


for _name in set(_PaneStream.csi.values()):
    setattr(_PaneScreen, _name, _tolerant(_name))
for _name in (_PaneStream.events | {"reset"}) - set(_PaneStream.csi.values()) - {"debug"}:
    setattr(_PaneScreen, _name, _guarded(_name))


@dataclass(frozen=True)
class Cursor:
    row: int
    col: int
    hidden: bool


class Screen:
    """What a terminal of ``rows`` x ``cols`` shows after the bytes fed so far.

    ``feed`` never raises. ``lines()``/``text()`` are the visible rows only, never scrollback:
    an answered prompt that scrolled away must not read as blocked forever.
    """

    def __init__(self, rows: int = 32, cols: int = 120, reply: Callable[[bytes], None] | None = None) -> None:
        self.rows, self.cols = rows, cols
        self._reply_bytes = reply
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._screen = _PaneScreen(cols, rows, self._reply)
        self._stream = _PaneStream(self._screen)
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

    # -- input -----------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Feed raw PTY bytes. UTF-8 split across chunks is reassembled; nothing raises."""
        if not data:
            return
        self.seq += 1
        text = self._decoder.decode(data)
        self.feed_text(text)

    @property
    def errors(self) -> int:
        """Sequences lost to an exception (contained: the rest of the chunk was still fed)."""
        return self._errors + self._screen.errors

    def feed_text(self, text: str) -> None:
        """Feed already-decoded text (used by ``feed`` and by transcript replays)."""
        self._screen.allow(len(text))
        if _C1.search(text):
            text = _C1.sub("", text)
        if self._carry:
            text, self._carry = self._carry + text, ""
        if self._skip_csi:
            rest = _CSI_REST.match(text)
            assert rest is not None  # every part of the pattern is optional: it matches at any start
            end = rest.end()
            self._skip_csi = end == len(text) and not (end and "\x40" <= text[end - 1] <= "\x7e")
            text = text[end:]
        if self._in_string is not None:
            text = self._skip_string(text)
        if not text:
            return
        if ESC in text:
            tail = _INCOMPLETE.search(text)
            if tail:
                text, self._carry = text[: tail.start()], text[tail.start() :]
                if len(self._carry) > MAX_SEQUENCE:  # garbage: drop it, keep what follows it
                    self._carry, self._skip_csi = "", True
            self._process(text)
        else:
            self._pyte(text)

    def _pyte(self, text: str) -> None:
        if text:
            try:
                self._stream.feed(text)
            except Exception:  # pragma: no cover - a parser defect; handlers are guarded
                self._errors += 1
                self._screen.clamp_cursor()

    def _process(self, text: str) -> None:
        """Feed pyte in order, acting on the sequences it mishandles as they come.

        In order, so that a cursor-position query answers where the cursor is at that point.
        """
        pos = 0
        while True:
            m = _SPECIAL.search(text, pos)
            if m is None:
                self._pyte(text[pos:])
                return
            self._pyte(text[pos : m.start()])
            pos = m.end()
            kind = m.lastgroup
            if kind == "csi_long":
                continue  # garbage: dropped up to its final byte, the text after it is kept
            if kind == "kitty_query":  # kitty keyboard protocol: report the current flags
                self._reply(f"\x1b[?{self.kitty_flags[-1] if self.kitty_flags else 0}u")
            elif kind == "csi_p_final":
                self._private_csi(m["csi_prefix"], m["csi_p_params"], m["csi_p_inter"], m["csi_p_final"])
            elif kind == "csi_i_final":
                self._intermediate_csi(bool(m["csi_q"]), m["csi_i_params"], m["csi_i_inter"], m["csi_i_final"])
            elif kind == "sgr_params":
                self._pyte(f"\x1b[{_colon_sgr(m['sgr_params'])}m")
            elif kind == "csi_x_final":
                self._pyte(self._extra_csi(m["csi_x_params"], m["csi_x_final"]))
            elif kind == "osc":
                self._osc(m["osc"])
            else:  # the start of a DCS/APC/PM/SOS string, or of an OSC cut off by the chunk end
                self._in_string = m["str_intro"] or "]"
                self._osc_body = ""
                text, pos = self._skip_string(text[pos:]), 0
                if self._in_string is not None:
                    return

    def _skip_string(self, text: str) -> str:
        """Consume the body of a DCS/APC/PM/SOS/OSC string; return what follows it."""
        m = _STRING_END.search(text)
        if m is None:
            if text.endswith(ESC):  # maybe the first half of ESC \
                self._carry = ESC
                text = text[:-1]
            if self._in_string == "]" and len(self._osc_body) < OSC_KEEP:
                self._osc_body += text[: OSC_KEEP - len(self._osc_body)]
            return ""
        if self._in_string == "]":
            self._osc(self._osc_body + text[: m.start()])
        self._in_string = None
        self._osc_body = ""
        return text[m.end() :]

    def _private_csi(self, prefix: str, params: str, inter: str, final: str) -> None:
        if prefix == ">" and final == "c" and not inter and params in ("", "0"):
            self._reply(DA2_REPLY)
        elif prefix == ">" and final == "q" and not inter:
            self._reply(XTVERSION_REPLY)
        elif final == "u" and not inter:
            self._kitty_keyboard(prefix, params)
        # CSI < u, CSI = u, CSI > 4;2 m (XTMODKEYS), kitty keyboard pushes ...: no visible effect

    def _kitty_keyboard(self, prefix: str, params: str) -> None:
        """Keep the kitty keyboard flags stack (push ``>f``, pop ``<n``, set ``=f;m``) so that
        ``CSI ? u`` answers truthfully: Gemini CLI trusts pastes, and so keeps an Enter sent
        right after one, only when the terminal answers that query."""
        nums = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        if prefix == ">":
            self.kitty_flags = [*self.kitty_flags, nums[0] if nums else 0][-16:]
        elif prefix == "<":
            del self.kitty_flags[len(self.kitty_flags) - min(len(self.kitty_flags), nums[0] if nums else 1) :]
        elif prefix == "=":
            flags, how = [*nums, 0, 1][:2] if nums else (0, 1)
            current = self.kitty_flags[-1] if self.kitty_flags else 0
            new = flags if how == 1 else (current | flags if how == 2 else current & ~flags)
            self.kitty_flags = (self.kitty_flags[:-1] if self.kitty_flags else []) + [new]

    def _intermediate_csi(self, private: bool, params: str, inter: str, final: str) -> None:
        if inter == "$" and final == "p":  # DECRQM: report whether a mode is set
            try:
                mode = int(params.split(";")[0] or 0)
            except ValueError:
                return
            code = mode << 5 if private else mode
            known = private and mode in (1, 6, 7, 25, 47, 1000, 1002, 1004, 1006, 1047, 1049, 2004, 2026)
            state = (1 if code in self._screen.mode else 2) if known else 0
            self._reply(f"\x1b[{'?' if private else ''}{mode};{state}$y")
        # DECSCUSR (CSI n SP q), DECSTR (CSI ! p) ...: nothing to show

    def _extra_csi(self, params: str, final: str) -> str:
        """CSI finals pyte ignores or misreads: scrolling, REP, SCOSC/SCORC, XTWINOPS."""
        if final == "s" and not params:
            self._screen.save_cursor()
            return ""
        if final == "u" and not params:
            self._screen.restore_cursor()
            return ""
        if final == "t":
            first = params.split(";")[0]
            if first == "18":
                self._reply(f"\x1b[8;{self.rows};{self.cols}t")
            elif first == "14":
                self._reply(f"\x1b[4;{self.rows * 16};{self.cols * 8}t")
            return ""
        if final in "STb":
            return f"\x1b[{params.split(';')[0]}{final}"
        return ""

    def _osc(self, body: str) -> None:
        code, _, arg = body.partition(";")
        if code in ("0", "2"):
            self.title = arg
        elif code in OSC_COLOURS and arg == "?":
            self._reply(f"\x1b]{code};{OSC_COLOURS[code]}\x1b\\")
        elif code in OOB_CODES:  # status, progress, notifications: kept for the signals
            self.oob.feed(code, arg)
        # OSC 8 hyperlinks, OSC 9/777 notifications, OSC 52, OSC 133 ...: nothing to draw

    def _reply(self, data: str) -> None:
        if self._reply_bytes is not None:
            try:
                self._reply_bytes(data.encode())
            except Exception:
                self._errors += 1

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
