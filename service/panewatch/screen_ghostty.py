"""The emulated screen on libghostty-vt (``pyghostty``): the same interface as ``screen.Screen``.

Why a second backend: pyte emulates at 1–2 MB/s, so one pane that dumps a large file keeps
the event loop busy for seconds of CPU per 10 MB, and a few dozen chatty agents cost a
visible share of a core. Ghostty's parser is native code (~100× faster here) and already
does what ``screen.py`` has to patch into pyte: an alternate screen, zero-width characters,
DCS/APC/colon-SGR handling, scrolling, REP, and answers to terminal queries.

What this wrapper adds is only what the service's contract needs: xterm's identity in the
device-attribute, XTVERSION and size answers (so agents see the same terminal whichever
backend runs), xterm's default colours for OSC 10/11/12, visible rows padded to the full
height, and a ``feed`` that never raises. The package is optional (``pip install
panewatch[fast]``); ``backends.py`` decides which class a session gets.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

import pyghostty
from pyghostty import ffi, lib
from pyghostty._ffi import union_fn
from pyghostty.core import init_sized
from pyte.graphics import FG_AIXTERM, FG_ANSI, FG_BG_256
from wcwidth import wcwidth

from .oob import OscTap, OutOfBand
from .screen import MAX_COMBINING, REP_BURST, REP_CELLS_PER_BYTE, Cursor, drop_zero_width

#: xterm (patch 388, VT420 level), the identity ``screen.py`` answers with too.
_DA1_LEVEL, _DA1_FEATURES = 64, (1, 2, 6, 9, 15, 18, 21, 22)
_DA2 = (41, 388, 0)
_XTVERSION = b"XTerm(388)"
_COLOURS = (
    (lib.GHOSTTY_TERMINAL_OPT_COLOR_FOREGROUND, (0xD0, 0xD0, 0xD0)),
    (lib.GHOSTTY_TERMINAL_OPT_COLOR_BACKGROUND, (0, 0, 0)),
    (lib.GHOSTTY_TERMINAL_OPT_COLOR_CURSOR, (0xD0, 0xD0, 0xD0)),
)
#: pyte's names for palette colours 0-15, so that both backends describe colours alike.
_ANSI_NAMES = [FG_ANSI[30 + i] for i in range(8)] + [FG_AIXTERM[90 + i] for i in range(8)]
#: Pixel size of a cell reported by ``CSI 14 t``: the same 8x16 ``screen.py`` reports.
_CELL_W, _CELL_H = 8, 16

# Callbacks shared by every terminal: cffi keeps a callback alive only while referenced, and
# these depend on nothing but the terminal, which the size callback asks for itself.
_XTVERSION_BUF = ffi.new("char[]", _XTVERSION)


@ffi.callback("GhosttyTerminalDeviceAttributesFn")  # type: ignore[untyped-decorator]  # cffi has no types
def _device_attributes(_term: Any, _userdata: Any, out: Any) -> bool:
    out.primary.conformance_level = _DA1_LEVEL
    for i, feature in enumerate(_DA1_FEATURES):
        out.primary.features[i] = feature
    out.primary.num_features = len(_DA1_FEATURES)
    out.secondary.device_type, out.secondary.firmware_version, out.secondary.rom_cartridge = _DA2
    out.tertiary.unit_id = 0
    return True


@ffi.callback("GhosttyTerminalXtversionFn")  # type: ignore[untyped-decorator]  # cffi has no types
def _xtversion(_term: Any, _userdata: Any) -> Any:
    return (ffi.cast("uint8_t*", _XTVERSION_BUF), len(_XTVERSION))


@ffi.callback("GhosttyTerminalColorSchemeFn")  # type: ignore[untyped-decorator]  # cffi has no types
def _colour_scheme(_term: Any, _userdata: Any, out: Any) -> bool:
    """``CSI ? 996 n`` is answered "dark" (``CSI ? 997 ; 1 n``), as ``screen.py`` answers it."""
    out[0] = lib.GHOSTTY_COLOR_SCHEME_DARK
    return True


@ffi.callback("GhosttyTerminalSizeFn")  # type: ignore[untyped-decorator]  # cffi has no types
def _size(term: Any, _userdata: Any, out: Any) -> bool:
    value = ffi.new("uint16_t*")
    if lib.ghostty_terminal_get(term, lib.GHOSTTY_TERMINAL_DATA_ROWS, value):
        return False
    out.rows = value[0]
    if lib.ghostty_terminal_get(term, lib.GHOSTTY_TERMINAL_DATA_COLS, value):
        return False
    out.columns = value[0]
    out.cell_width, out.cell_height = _CELL_W, _CELL_H
    return True


def _colour(colour: Any) -> str:
    """A ``GhosttyStyleColor`` as pyte names it ("" = the default colour)."""
    if colour.tag == lib.GHOSTTY_STYLE_COLOR_PALETTE:
        n: int = colour.value.palette
        return _ANSI_NAMES[n] if n < 16 else FG_BG_256[n]
    if colour.tag == lib.GHOSTTY_STYLE_COLOR_RGB:
        rgb = colour.value.rgb
        return f"{rgb.r:02x}{rgb.g:02x}{rgb.b:02x}"
    return ""


def _mark_runs() -> re.Pattern[str]:
    """Runs of more than ``MAX_COMBINING`` combining marks (canonical combining class > 0)."""
    ranges: list[str] = []
    start = prev = -2
    for cp in [*range(0x300, 0x20000), -1]:
        if cp >= 0 and unicodedata.combining(chr(cp)):
            if cp != prev + 1:
                start = cp
            prev = cp
            continue
        if (start >= 0 and prev == cp - 1) or (cp == -1 and start >= 0):
            ranges.append(f"{re.escape(chr(start))}-{re.escape(chr(prev))}")
            start = -2
    return re.compile(f"[{''.join(ranges)}]{{{MAX_COMBINING + 1},}}")


#: Sequences whose cost grows with a count, rewritten before Ghostty sees them: REP (``CSI n
#: b``) draws every repetition (a 7-byte ``CSI 9999 b`` cost 9999 cells), so it gets the same
#: allowance ``screen.Screen`` gives it; SU/SD/IL/DL scroll line by line (``CSI 9999 S`` on a
#: 500-row pane cost ~3 s per 16 KiB), so their counts are clamped to the rows; and DECALN
#: (``ESC # 8``, 3 bytes filling every cell) is dropped, as the pyte wrapper ignores it.
_COUNTED = re.compile(rb"\x1b\[([0-9]+)((?:;[0-9]*)*)([bSTLM])|\x1b#8")
#: DECSTBM: once a pane sets scroll margins, a big SU/SD is no longer a plain screen clear.
_DECSTBM = re.compile(rb"\x1b\[[0-9;]*r")

#: Ghostty bounds a grapheme itself, but far above what a terminal shows: rows are trimmed to
#: the same ``MAX_COMBINING`` marks per cell as ``screen.Screen`` keeps.
_MARK_RUN = _mark_runs()


def _cap_marks(row: str) -> str:
    return _MARK_RUN.sub(lambda m: m.group()[:MAX_COMBINING], row)


def _clean(row: str) -> str:
    """A row as the pyte backend gives it: marks capped, zero-width characters (VS16 in
    Continue's "⚠️", ZWJ) left out, so that rules read the same text on both backends."""
    row = row.rstrip()
    return row if row.isascii() else drop_zero_width(_cap_marks(row))


class GhosttyScreen:
    """What a terminal of ``rows`` x ``cols`` shows after the bytes fed so far (libghostty-vt).

    ``feed`` never raises. ``lines()``/``text()`` are the visible rows only (no scrollback is
    kept at all): an answered prompt that scrolled away must not read as blocked forever.
    """

    backend = "ghostty"

    def __init__(self, rows: int = 32, cols: int = 120, reply: Callable[[bytes], None] | None = None) -> None:
        self.rows, self.cols = rows, cols
        self._reply_bytes = reply
        self._term = pyghostty.Terminal(cols=cols, rows=rows, scrollback=0)
        self._t = self._term._t[0]
        for option, rgb in _COLOURS:
            lib.ghostty_terminal_set(self._t, option, ffi.new("GhosttyColorRgb*", dict(zip("rgb", rgb, strict=True))))
        lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_DEVICE_ATTRIBUTES, _device_attributes)
        lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_XTVERSION, _xtversion)
        lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_SIZE, _size)
        lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_COLOR_SCHEME, _colour_scheme)
        self._term.on_reply(self._reply)
        self._u16 = ffi.new("uint16_t*")
        self._flag = ffi.new("bool*")
        self._title = ffi.new("GhosttyString*")
        self._lines: list[str] | None = None
        self._lines_seq = -1
        self._raw_rows: list[str] = []  # the rows as Ghostty gave them at the last lines()
        # what lines() hands to the formatter, made once: building them per call cost ~3/4 of it
        self._grid_ref = union_fn(
            "ghostty_terminal_grid_ref", "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyGridRef*)"
        )
        self._point = ffi.new("GhosttyPointS*")
        self._point.tag = lib.GHOSTTY_POINT_TAG_ACTIVE
        self._selection = init_sized("GhosttySelection")
        self._format = init_sized("GhosttyTerminalSelectionFormatOptions")
        self._format.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        self._format.unwrap, self._format.trim = False, True
        self._format.selection = self._selection
        self._text_buf = ffi.new("uint8_t[]", 16 * 1024)
        self._text_len = ffi.new("size_t*")
        #: Bumped by every feed or resize: the sweep skips screens whose ``seq`` did not move.
        self.seq = 0
        self.errors = 0
        self._rep_allowance = min(2 * rows * cols, REP_BURST)
        #: Lines SU/SD/IL/DL may move, refilled one per byte fed: Ghostty moves a line at a time.
        self._line_allowance = 2 * rows
        self._margins_seen = False
        #: What the agent says out of band (OSC 7501, 9;4, 9/99/777), as ``Screen.oob``.
        self.oob = OutOfBand()
        self._tap = OscTap(self.oob)

    # -- input -----------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Feed raw PTY bytes (UTF-8 and sequences split across chunks are Ghostty's to join)."""
        if not data:
            return
        self.seq += 1
        cap = min(2 * self.rows * self.cols, REP_BURST)
        self._rep_allowance = min(self._rep_allowance + len(data) * REP_CELLS_PER_BYTE, cap)
        self._line_allowance = min(self._line_allowance + len(data), 2 * self.rows)
        if b"\x1b" in data or self._tap.pending:
            self._tap.feed(data)
        if b"\x1b" in data:
            if not self._margins_seen and b"r" in data and _DECSTBM.search(data):
                self._margins_seen = True
            data = _COUNTED.sub(self._clamp_count, data)
        try:
            self._term.feed(data)
        except Exception:  # an exception from the reply sink surfaces here
            self.errors += 1

    def _clamp_count(self, m: re.Match[bytes]) -> bytes:
        final = m[3]
        if final is None:  # DECALN
            return b""
        digits = m[1]
        count = max(int(digits) if len(digits) < 10 else 1 << 32, 1)
        if final == b"b":
            n = min(count, self.rows * self.cols, self._rep_allowance)
            self._rep_allowance -= n
            return b"\x1b[%db" % n if n else b""
        n = min(count, self.rows)
        if final in b"ST" and n >= self.rows and not self._margins_seen:
            return b"\x1b[2J"  # scrolling a margin-less screen by its height clears it
        n = min(n, max(1, self._line_allowance))
        self._line_allowance = max(0, self._line_allowance - n)
        return b"\x1b[%d%s" % (n, final)

    def feed_text(self, text: str) -> None:
        """Feed already-decoded text (transcript replays)."""
        self.feed(text.encode())

    def _reply(self, data: bytes) -> None:
        if self._reply_bytes is not None:
            try:
                self._reply_bytes(data)
            except Exception:
                self.errors += 1

    # -- output ----------------------------------------------------------------------------
    def lines(self) -> list[str]:
        """The visible rows, right-stripped; cached until the next feed or resize."""
        if self._lines is None or self._lines_seq != self.seq:
            raw = self._visible_text().split("\n")[: self.rows]
            # a repaint changes a few rows: the others are taken as they were last time
            prev_raw, prev = self._raw_rows, self._lines or []
            rows = [prev[i] if i < len(prev_raw) and row == prev_raw[i] else _clean(row) for i, row in enumerate(raw)]
            rows.extend([""] * (self.rows - len(rows)))
            self._raw_rows, self._lines, self._lines_seq = raw, rows, self.seq
        return list(self._lines)

    def _visible_text(self) -> str:
        """The active screen as plain text (trailing blanks trimmed), as ``Terminal.text()``."""
        for x, y, ref in ((0, 0, "start"), (self.cols - 1, self.rows - 1, "end")):
            self._point.value.x, self._point.value.y = x, y
            if self._grid_ref(self._t, self._point[0], ffi.addressof(self._selection, ref)):
                fallback: str = self._term.text()
                return fallback
        while True:
            res = lib.ghostty_terminal_selection_format_buf(
                self._t, self._format[0], self._text_buf, len(self._text_buf), self._text_len
            )
            if res != lib.GHOSTTY_OUT_OF_SPACE:
                break
            self._text_buf = ffi.new("uint8_t[]", max(self._text_len[0], 2 * len(self._text_buf)))
        if res:
            fallback = self._term.text()
            return fallback
        text: bytes = ffi.buffer(self._text_buf, self._text_len[0])[:]
        return text.decode("utf-8", "replace")

    def text(self) -> str:
        """The visible rows joined by newlines."""
        return "\n".join(self.lines())

    def styles(self) -> list[list[list[object]]]:
        """Colour runs per visible row, aligned with ``lines()``, in ``Screen.styles()``'s terms
        (pyte's colour names for the 16 ANSI colours, hex otherwise). For the dashboard only:
        one native style lookup per drawn character, never on the classification path."""
        grid_ref = union_fn(
            "ghostty_terminal_grid_ref", "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyGridRef*)"
        )
        point = ffi.new("GhosttyPointS*")
        point.tag = lib.GHOSTTY_POINT_TAG_ACTIVE
        ref = init_sized("GhosttyGridRef")
        style = init_sized("GhosttyStyle")
        out: list[list[list[object]]] = []
        for y, line in enumerate(self.lines()):
            runs: list[list[object]] = []
            point.value.x, point.value.y = 0, y
            if line and not grid_ref(self._t, point[0], ref):
                x = 0
                for ch in line:
                    width = wcwidth(ch)
                    if width == 0 and runs:  # a combining mark: part of the previous cell
                        runs[-1][0] += 1  # type: ignore[operator]
                        continue
                    ref.x = min(x, self.cols - 1)
                    lib.ghostty_grid_ref_style(ref, style)
                    key = (
                        _colour(style.fg_color),
                        _colour(style.bg_color),
                        (1 if style.bold else 0)
                        | (2 if style.italic else 0)
                        | (4 if style.underline else 0)
                        | (8 if style.inverse else 0)
                        | (16 if style.strikethrough else 0),
                    )
                    if runs and (runs[-1][1], runs[-1][2], runs[-1][3]) == key:
                        runs[-1][0] += 1  # type: ignore[operator]
                    else:
                        runs.append([1, *key])
                    x += max(1, width)
            if len(runs) == 1 and runs[0][1:] == ["", "", 0]:
                runs = []
            out.append(runs)
        return out

    def _get_u16(self, key: int) -> int:
        lib.ghostty_terminal_get(self._t, key, self._u16)
        return int(self._u16[0])

    def _get_flag(self, key: int) -> bool:
        lib.ghostty_terminal_get(self._t, key, self._flag)
        return bool(self._flag[0])

    @property
    def cursor(self) -> Cursor:
        return Cursor(
            row=self._get_u16(lib.GHOSTTY_TERMINAL_DATA_CURSOR_Y),
            col=self._get_u16(lib.GHOSTTY_TERMINAL_DATA_CURSOR_X),
            hidden=not self._get_flag(lib.GHOSTTY_TERMINAL_DATA_CURSOR_VISIBLE),
        )

    @property
    def title(self) -> str:
        if lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_TITLE, self._title) or not self._title.len:
            return ""
        title: bytes = ffi.buffer(self._title.ptr, self._title.len)[:]
        return title.decode("utf-8", "replace")

    @property
    def alternate(self) -> bool:
        """True while the program shows its alternate screen."""
        value = ffi.new("int*")
        lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_ACTIVE_SCREEN, value)
        return bool(value[0] == lib.GHOSTTY_TERMINAL_SCREEN_ALTERNATE)

    @property
    def mid_frame(self) -> bool:
        """True between ``ESC[?2026h`` and ``ESC[?2026l``: a repaint is in progress."""
        return bool(self._term.mode(2026))

    def mode(self, number: int, private: bool = True) -> bool:
        """Whether a terminal mode is set (``mode(2004)`` is bracketed paste)."""
        try:
            return bool(self._term.mode(number, ansi=not private))
        except pyghostty.GhosttyError:  # a mode Ghostty does not know is not set
            return False

    def resize(self, rows: int, cols: int) -> None:
        """Change the size (Ghostty reflows soft-wrapped rows, as it does on screen)."""
        self.seq += 1
        self.rows, self.cols = rows, cols
        self._rep_allowance = min(self._rep_allowance, 2 * rows * cols, REP_BURST)
        self._line_allowance = min(self._line_allowance, 2 * rows)
        self._term.resize(cols, rows, _CELL_W, _CELL_H)
