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

The parts: ``_filter`` (the sequence pre-filter, bytes in), ``_pyte`` (the patched pyte screen
and stream), ``_draw`` (its text drawing), ``_rows`` (its row buffer), ``_widths`` (character
widths), ``_screen`` (``Screen``, the rows out).
"""

from ._draw import CELL_CACHE, MAX_COMBINING
from ._filter import DA2_REPLY, MAX_SEQUENCE, OSC_COLOURS, OSC_KEEP, XTVERSION_REPLY
from ._pyte import DA1_REPLY, REP_BURST, REP_CELLS_PER_BYTE
from ._screen import Cursor, Screen
from ._widths import drop_zero_width

__all__ = [
    "CELL_CACHE",
    "DA1_REPLY",
    "DA2_REPLY",
    "MAX_COMBINING",
    "MAX_SEQUENCE",
    "OSC_COLOURS",
    "OSC_KEEP",
    "REP_BURST",
    "REP_CELLS_PER_BYTE",
    "XTVERSION_REPLY",
    "Cursor",
    "Screen",
    "drop_zero_width",
]
