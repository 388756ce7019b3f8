"""The pyte wrapper against bare pyte: its fast paths must draw exactly what pyte draws."""

from __future__ import annotations

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from panewatch.screen import Screen

pytestmark = pytest.mark.unit

_PLAIN_PIECES = st.sampled_from(
    [
        "a",
        "b",
        "hello ",
        "x" * 37,
        "\r",
        "\n",
        "\r\n",
        "\b",
        "\t",
        "\x1b[31m",
        "\x1b[1;44m",
        "\x1b[0m",
        "\x1b[7m",
        "\x1b[2K",
        "\x1b[K",
        "\x1b[1K",
        "\x1b[J",
        "\x1b[2J",
        "\x1b[1J",
        "\x1b[H",
        "\x1b[3;5H",
        "\x1b[2A",
        "\x1b[3B",
        "\x1b[4C",
        "\x1b[2D",
        "\x1b[10G",
        "\x1b[4h",
        "\x1b[4l",
        "\x1b[?7l",
        "\x1b[?7h",
        "\x1b7",
        "\x1b8",
        "\x1b[2;4r",
        "\x1b[r",
        "\x1bD",
        "\x1bM",
        "\x1b[2P",
        "\x1b[3@",
        "\x1b[2X",
        "界",
        "界界界界界界界",
        "é",
        "ab界c",
        "한국어 ",
        "🙂",  # wide and non-ASCII narrow: the shared-cell paths
        # plain CSIs the wrapper dispatches itself (pyte's parser, bypassed): parameters as pyte
        # reads them, unknown finals, private modes, and a CSI right after a sequence that is
        # still open (``ESC (`` takes the next character as its charset: pyte must see it)
        "\x1b[38;2;255;0;10m",
        "\x1b[48;5;22m",
        "\x1b[m",
        "\x1b[;7H",
        "\x1b[99999;3H",
        "\x1b[1;;4m",
        "\x1b[5~",
        "\x1b[?25l",
        "\x1b[?25h",
        "\x1b(",
        "\x1b[31;1;4;7;22;27;39;49m",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PLAIN_PIECES, max_size=60).map("".join), st.integers(2, 8), st.integers(10, 50))
def test_pyte_wrapper_draws_what_bare_pyte_draws(text, rows, cols):
    """On input bare pyte handles correctly, the wrapper's fast paths give the very same cells.

    One deliberate difference: an erase gives *every* erased cell the current attributes (a
    row at a time, as xterm's background-colour erase), where pyte touches only the cells
    written before; so attributes are compared on drawn cells, characters on all."""
    bare = pyte.Screen(cols, rows)
    pyte.Stream(bare).feed(text)
    ours = Screen(rows, cols)
    ours.feed(text.encode())
    # pyte's own ``display`` raises on a wide character's stub once it is overwritten: join cells
    assert ours.lines() == ["".join(bare.buffer[y][x].data for x in range(cols)).rstrip() for y in range(rows)]
    for y in range(rows):
        for x in range(cols):
            mine, theirs = ours._screen.buffer[y][x], bare.buffer[y][x]
            assert (mine.data or " ") == (theirs.data or " "), (y, x)
            if (theirs.data or " ") != " ":
                assert (mine.fg, mine.bg, mine.bold, mine.reverse) == (
                    theirs.fg,
                    theirs.bg,
                    theirs.bold,
                    theirs.reverse,
                ), (y, x)
    # a pending wrap (pyte: x == cols) is reported on the last column, as Ghostty reports it
    assert (ours.cursor.row, ours.cursor.col) == (bare.cursor.y, min(bare.cursor.x, cols - 1))
    assert ours._screen.cursor.x == bare.cursor.x


def test_a_remembered_colour_change_starts_from_the_attributes_it_is_applied_to() -> None:
    """The wrapper remembers SGR results; the same SGR from other attributes must still give
    what pyte gives (red after bold stays bold; red after a reset does not)."""
    text = "\x1b[31mA\x1b[1mB\x1b[0mC\x1b[31mD\x1b[0m\x1b[1m\x1b[31mE\x1b[7m\x1b[31mF\x1b[0m\x1b[44m\x1b[31mG"
    bare = pyte.Screen(10, 1)
    pyte.Stream(bare).feed(text)
    ours = Screen(1, 10)
    ours.feed(text.encode())
    cells = [(c.data, c.fg, c.bg, c.bold, c.reverse) for c in (ours._screen.buffer[0][x] for x in range(7))]
    assert cells == [(c.data, c.fg, c.bg, c.bold, c.reverse) for c in (bare.buffer[0][x] for x in range(7))]
    assert cells[4] == ("E", "red", "default", True, False) and cells[5][4] and cells[6][2] == "blue"
