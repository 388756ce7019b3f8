"""Private terminal queries an agent sends at start: answered or ignored, on both screen backends,
and never at the cost of the rest of the chunk.

Copilot CLI 1.0.102 sends ``CSI ? 996 n`` (the colour-scheme query) at start; stock pyte 0.8.2
raised ``TypeError`` on it and dropped everything after it in that read.
"""

from __future__ import annotations

import pytest

from panewatch.backends import available, make_screen

pytestmark = pytest.mark.unit

BACKENDS = [
    pytest.param(name, marks=[] if name in available() else pytest.mark.skip(reason=f"{name} backend not installed"))
    for name in ("pyte", "ghostty")
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_colour_scheme_query_is_answered_dark_and_the_chunk_is_kept(backend: str) -> None:
    replies: list[bytes] = []
    screen = make_screen(backend, 5, 40, reply=replies.append)
    screen.feed(b"before\x1b[?996nafter\x1b[5n end")
    assert screen.lines()[0] == "beforeafter end"
    assert replies == [b"\x1b[?997;1n", b"\x1b[0n"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("query", [b"\x1b[?15n", b"\x1b[?25n", b"\x1b[?26n", b"\x1b[?53n", b"\x1b[?1234567n"])
def test_other_private_status_queries_cost_nothing_after_them(backend: str, query: bytes) -> None:
    """Printer, UDK, keyboard, locator status...: whatever is answered, the text after the query
    is drawn, and a cursor-position query after it still answers where the cursor is."""
    replies: list[bytes] = []
    screen = make_screen(backend, 5, 40, reply=replies.append)
    screen.feed(b"ab" + query + b"cd\x1b[6n")
    assert screen.lines()[0] == "abcd"
    assert replies[-1] == b"\x1b[1;5R"
