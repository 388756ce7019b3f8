"""The sequence pre-filter: what the wrapper takes out of the stream before pyte sees it (the
sequences pyte misreads or chokes on), in order, with a sequence cut by a chunk's end carried
to the next feed and garbage bounded (``MAX_SEQUENCE``, ``OSC_KEEP``)."""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable

from ..oob import CODES as OOB_CODES
from ..oob import OutOfBand
from ._pyte import PaneScreen, PaneStream

ESC = "\x1b"
#: Answers to the secondary device-attribute and version queries, as xterm (patch 388) gives them.
DA2_REPLY = "\x1b[>41;388;0c"
XTVERSION_REPLY = "\x1bP>|XTerm(388)\x1b\\"
#: Default colours reported for OSC 10/11/12 queries (light grey on black, like xterm -rv).
OSC_COLOURS = {"10": "rgb:d0d0/d0d0/d0d0", "11": "rgb:0000/0000/0000", "12": "rgb:d0d0/d0d0/d0d0"}

#: Longest OSC body kept (titles); longer bodies (OSC 52 clipboard, images) are skipped.
OSC_KEEP = 4096
#: Parameter bytes a CSI may carry; a longer one is garbage, dropped up to its final byte
#: (16 MiB of digits after ``ESC [`` were carried and rescanned on every feed).
MAX_SEQUENCE = 2048

# The sequences the wrapper takes out of the stream before pyte sees it: all but the last
# are what pyte gets wrong; the last, a plain CSI (``ESC [ ? digits ; final``), pyte reads
# right but one character at a time, so it is dispatched here as pyte would (``_csi``).
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
  | \x1b\[ (?P<csi_plain_q>\?)? (?P<csi_params>[0-9;]*) (?P<csi_final>[\x40-\x7e])
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


class SequenceFilter:
    """The input half of ``Screen``: bytes in, the sequences pyte mishandles acted on here, the
    rest fed to pyte in order (so a cursor-position query answers where the cursor is then)."""

    rows: int
    cols: int
    seq: int
    title: str
    oob: OutOfBand
    kitty_flags: list[int]
    _screen: PaneScreen
    _stream: PaneStream
    _decoder: codecs.IncrementalDecoder
    _reply_bytes: Callable[[bytes], None] | None
    _carry: str
    _in_string: str | None
    _osc_body: str
    _errors: int
    _skip_csi: bool

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
            elif kind == "csi_final":
                self._csi(m["csi_plain_q"], m["csi_params"], m["csi_final"], m.group())
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

    def _csi(self, private: str | None, params: str, final: str, raw: str) -> None:
        """A plain CSI, handled exactly as pyte's parser would (each parameter ``min(int, 9999)``,
        an empty one 0; an unknown final to ``debug``) in one call instead of a generator step per
        character: a truecolour SGR is ~17 of them, and SGRs are most of an agent's bytes
        (notes/pyte-fast-paths.md). Left to pyte when its parser is not between sequences."""
        if not self._stream.between_sequences:
            self._pyte(raw)
            return
        name = PaneStream.csi.get(final)
        handler = getattr(self._screen, name) if name is not None else self._screen.debug
        args = [min(int(p or 0), 9999) for p in params.split(";")]
        try:
            if private:
                handler(*args, private=True)
            else:
                handler(*args)
        except Exception:  # pragma: no cover - the screen's handlers are guarded (``_tolerant``)
            self._errors += 1
            self._screen.clamp_cursor()

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
