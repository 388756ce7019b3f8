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
