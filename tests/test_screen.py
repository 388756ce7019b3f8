"""The emulated screen: what a user would see, whatever bytes an agent writes."""

from __future__ import annotations

import unicodedata

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wcwidth import wcwidth

from panewatch import backends
from panewatch.screen import DA1_REPLY, DA2_REPLY, Screen

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True, params=backends.available())
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on every installed backend: ``Screen`` below is that backend's class."""
    monkeypatch.setitem(globals(), "Screen", backends.screen_class(request.param))
    return request.param


# The seed's bytes: Claude Code 2.1.303 placing each word with CSI n G, rows started with
# CR + cursor-down, and not one LF.
SEED_PROMPT = (
    b"\r\x1b[1C\x1b[1B\x1b[39mDo\x1b[5Gyou\x1b[9Gwant\x1b[14Gto\x1b[17Gproceed?"
    b"\r\x1b[1C\x1b[1B\x1b[38;2;177;185;249m\xe2\x9d\xaf\x1b[4G\x1b[38;2;153;153;153m1. "
    b"\x1b[38;2;177;185;249mYes"
    b"\r\x1b[3C\x1b[1B\x1b[38;2;153;153;153m2. \x1b[39mYes,\x1b[12Gand\x1b[16Galways\x1b[23Gallow ..."
)


def screen_after(data: bytes, rows: int = 8, cols: int = 60, reply=None) -> Screen:
    screen = Screen(rows, cols, reply=reply)
    screen.feed(data)
    return screen


def test_seed_words_placed_by_cha_come_out_with_real_spaces():
    lines = screen_after(SEED_PROMPT).lines()
    assert b"\n" not in SEED_PROMPT
    assert lines[1] == " Do you want to proceed?"
    assert lines[2] == " ❯ 1. Yes"
    assert lines[3] == "   2. Yes, and always allow ..."


def test_seed_bytes_fed_one_at_a_time_give_the_same_screen():
    whole = screen_after(SEED_PROMPT).lines()
    screen = Screen(8, 60)
    for i in range(len(SEED_PROMPT)):
        screen.feed(SEED_PROMPT[i : i + 1])
    assert screen.lines() == whole


def test_utf8_split_across_chunks_is_not_garbled():
    data = "❯ café ✻ 日本".encode()
    for cut in range(1, len(data)):
        screen = Screen(3, 30)
        screen.feed(data[:cut])
        screen.feed(data[cut:])
        assert screen.lines()[0].replace(" ", "").startswith("❯café✻日")


def test_ink_erase_with_cursor_up_and_erase_below_forgets_the_prompt():
    idle = b"\x1b[2J\x1b[Hreply text\r\n"
    prompt = b"Do you want to proceed?\r\n\xe2\x9d\xaf 1. Yes\r\n  2. No\r\nEsc to cancel"
    screen = screen_after(idle + prompt)
    assert "Do you want to proceed?" in screen.text()
    screen.feed(b"\r\x1b[3A\x1b[J> next")
    text = screen.text()
    assert "proceed" not in text and "Esc to cancel" not in text
    assert screen.lines()[:2] == ["reply text", "> next"]


def test_text_is_visible_rows_only_never_scrollback():
    screen = Screen(4, 20)
    screen.feed(b"Do you want to proceed?\r\n" + b"".join(b"line %d\r\n" % i for i in range(10)))
    assert "proceed" not in screen.text()
    assert len(screen.lines()) == 4


def test_resize_changes_the_grid_and_keeps_content():
    screen = screen_after(b"hello\r\nworld", rows=5, cols=20)
    seq = screen.seq
    screen.resize(10, 40)
    assert (screen.rows, screen.cols) == (10, 40)
    assert len(screen.lines()) == 10
    assert screen.lines()[:2] == ["hello", "world"]
    assert screen.seq > seq
    screen.feed(b"\x1b[1;35HX")
    assert screen.lines()[0][34] == "X"


def test_csi_with_extra_parameters_does_not_lose_the_rest_of_the_chunk():
    # bare pyte raises TypeError here and drops everything after it
    with pytest.raises(TypeError):
        bare = pyte.Screen(20, 3)
        pyte.Stream(bare).feed("ab\x1b[1;2Gcd")
    screen = screen_after(b"ab\x1b[1;2Gcd\x1b[2;3Aef\x1b[5;5dgh\x1b[?1;2ctail")
    assert "cdef" in screen.lines()[0]
    assert "tail" in screen.text()
    assert screen.errors == 0


@pytest.mark.parametrize("glyph", ["\u2714\ufe0f", "\U0001f468\u200d\U0001f469", "x\u200by", "a\u0085b"])
def test_zero_width_characters_do_not_drop_the_rest_of_the_line(glyph):
    screen = screen_after(f"start {glyph} rest of the line".encode())
    assert screen.lines()[0].endswith("rest of the line")


#: Where Ghostty does what xterm does and the pyte wrapper chose otherwise.
GHOSTTY_LIKE_XTERM = {
    # the DCS ends at its inner ESC and the X is drawn (in bold); only tmux unwraps passthrough
    b"\x1bPtmux;\x1b\x1b[1mX\x1b\\": "BEFOREXAFTER",
    # leaving an alternate screen never entered still restores the saved cursor (home)
    b"\x1b[?1049l": "AFTERE",
}


@pytest.mark.parametrize(
    "seq",
    [
        b"\x1b[<u",  # kitty keyboard pop (Claude Code on exit)
        b"\x1b[=1;1u",
        b"\x1b[>1u",
        b"\x1b[>4;2m",  # XTMODKEYS, pyte reads it as SGR 4
        b"\x1bP+q544e\x1b\\",  # DCS
        b"\x1bPtmux;\x1b\x1b[1mX\x1b\\",
        b"\x1b_Ga=q;AAAA\x1b\\",  # APC (kitty graphics)
        b"\x1b^privacy\x1b\\",  # PM
        b"\x1b]8;;https://example.com\x1b\\",  # OSC 8 hyperlink
        b"\x1b]22;pointer\x07",  # OSC 22 must not become a title
        b"\x1b]52;c;aGVsbG8=\x07",
        b"\x1b[?2026h",
        b"\x1b[?2026l",
        b"\x1b[?2004h",  # bracketed paste
        b"\x1b[?1004h",  # focus events
        b"\x1b[200~",
        b"\x1b[2 q",  # cursor style
        b"\x1b[!p",  # soft reset
        b"\x1b[?1049l",
    ],
)
def test_unknown_or_invisible_sequences_draw_nothing(seq, backend):
    screen = screen_after(b"BEFORE" + seq + b"AFTER")
    expected = GHOSTTY_LIKE_XTERM.get(seq, "BEFOREAFTER") if backend == "ghostty" else "BEFOREAFTER"
    assert screen.lines()[0] == expected
    assert screen.title == ""


def test_dcs_split_across_chunks_is_swallowed():
    screen = Screen(3, 40)
    for part in (b"A\x1bP+q", b"544e", b"\x1b", b"\\B\x1b]2;ti", b"tle\x07C"):
        screen.feed(part)
    assert screen.lines()[0] == "ABC"
    assert screen.title == "title"


def test_colon_sgr_sets_colour_instead_of_printing(backend):
    screen = screen_after(b"\x1b[38:2::255:0:0mRED\x1b[4:3mCURLY\x1b[58:5:3mZ")
    assert screen.lines()[0] == "REDCURLYZ"
    if backend == "pyte":
        assert screen._screen.buffer[0][0].fg == "ff0000"
    else:
        assert screen._term.style(0, 0)["fg"] == ("rgb", (255, 0, 0))


def test_osc_title_is_kept():
    screen = screen_after(b"\x1b]0;\xe2\x9c\xb3 Claude Code\x07text")
    assert screen.title == "✳ Claude Code"
    assert screen.lines()[0] == "text"


def test_alternate_screen_is_restored_on_exit():
    screen = screen_after(b"MAIN-1\r\nMAIN-2\r\n\x1b[?1049h\x1b[H\x1b[2JALT-TUI")
    assert screen.alternate
    assert screen.lines()[0] == "ALT-TUI"
    assert "MAIN" not in screen.text()
    screen.feed(b"\x1b[?1049l")
    assert not screen.alternate
    assert screen.lines()[:2] == ["MAIN-1", "MAIN-2"]
    assert "ALT" not in screen.text()


def test_synchronized_output_is_tracked_as_mid_frame():
    screen = screen_after(b"\x1b[?2026hframe")
    assert screen.mid_frame
    screen.feed(b"\x1b[?2026l")
    assert not screen.mid_frame
    assert screen.lines()[0] == "frame"


def test_bracketed_paste_and_focus_modes_are_recorded():
    screen = screen_after(b"\x1b[?2004h\x1b[?1004h")
    assert screen.mode(2004) and screen.mode(1004)
    screen.feed(b"\x1b[?2004l")
    assert not screen.mode(2004)


def test_erase_scrollback_does_not_erase_the_screen():
    assert screen_after(b"A\x1b[3JB").lines()[0] == "AB"


def test_scroll_up_and_repeat():
    screen = screen_after(b"L0\r\nL1\r\nL2\r\nL3", rows=4, cols=10)
    screen.feed(b"\x1b[2S")
    assert screen.lines()[:2] == ["L2", "L3"]
    screen = screen_after(b"x\x1b[5b")
    assert screen.lines()[0] == "xxxxxx"


def test_queries_are_answered_like_xterm_in_order(backend):
    replies: list[bytes] = []
    screen_after(
        b"ab\x1b[6n\x1b[c\x1b[>c\x1b[?2026$p\x1b]11;?\x07\x1b[18t\x1b[5n", rows=24, cols=80, reply=replies.append
    )
    assert replies == [
        b"\x1b[1;3R",
        DA1_REPLY.encode(),
        DA2_REPLY.encode(),
        b"\x1b[?2026;2$y",
        # Ghostty ends the answer as the query ended (BEL), as xterm does; the pyte wrapper uses ST
        b"\x1b]11;rgb:0000/0000/0000" + (b"\x1b\\" if backend == "pyte" else b"\x07"),
        b"\x1b[8;24;80t",
        b"\x1b[0n",
    ]


def test_cursor_position_reply_follows_text_fed_in_the_same_chunk():
    replies: list[bytes] = []
    screen_after(b"\x1b[5;10Hx\x1b[6n", reply=replies.append)
    assert replies == [b"\x1b[5;11R"]


def test_a_failing_reply_sink_does_not_break_the_screen():
    def broken(_: bytes) -> None:
        raise OSError("pty closed")

    screen = screen_after(b"\x1b[6nstill here", reply=broken)
    assert screen.lines()[0] == "still here"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=12), st.integers(2, 40), st.integers(10, 100))
def test_arbitrary_bytes_never_raise(chunks, rows, cols):
    screen = Screen(rows, cols, reply=lambda _: None)
    for chunk in chunks:
        screen.feed(chunk)
    lines = screen.lines()
    assert len(lines) == rows
    # one cell per character once combining and other zero-width marks are merged into their base
    assert all(sum(not unicodedata.combining(ch) and wcwidth(ch) != 0 for ch in line) <= cols for line in lines)


_ESCAPE_PIECES = st.sampled_from(
    [
        "\x1b[",
        "\x1b]",
        "\x1bP",
        "\x1b_",
        "\x1b\\",
        "\x07",
        "?",
        ";",
        ":",
        "<",
        "=",
        ">",
        "$",
        " ",
        "1",
        "2",
        "9",
        "2026",
        "1049",
        "h",
        "l",
        "m",
        "G",
        "A",
        "J",
        "K",
        "H",
        "u",
        "c",
        "n",
        "p",
        "q",
        "S",
        "T",
        "b",
        "t",
        "\r",
        "\n",
        "\b",
        "\t",
        "x",
        "❯",
        "\ufe0f",
        "\u200d",
        "日",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_ESCAPE_PIECES, max_size=40).map("".join), max_size=8), st.integers(2, 12), st.integers(10, 40)
)
def test_escape_soup_never_raises_and_text_after_it_survives(chunks, rows, cols):
    screen = Screen(rows, cols, reply=lambda _: None)
    for chunk in chunks:
        screen.feed(chunk.encode())
    assert screen.errors == 0
    # whatever came before, a clean reset and a plain line must show up
    screen.feed(b"\x1b\\\x07\x1b[0m\x1b[?1049l\x1b[r\x1b[H\x1b[2JSURVIVED")
    assert screen.lines()[0].startswith("SURVIVED")


def test_styles_give_colour_runs_aligned_with_the_text():
    screen = screen_after(b"\x1b[31mred\x1b[0m plain \x1b[1;7;48;2;0;0;255mbold\x1b[0m\r\n\xe6\x97\xa5\xe6\x9c\xac ok")
    styles = screen.styles()
    assert styles[0] == [[3, "red", "", 0], [7, "", "", 0], [4, "", "0000ff", 1 | 8]]
    assert sum(run[0] for run in styles[0]) == len(screen.lines()[0])
    assert styles[1] == []  # default colours only: nothing to say
    assert len(styles) == screen.rows


def _uncached_lines(screen) -> list[str]:
    """The visible rows rebuilt from scratch, bypassing whatever ``lines()`` keeps between calls."""
    if hasattr(screen, "_screen"):  # pyte: every cell of every row
        buf = screen._screen.buffer
        return [
            "".join(buf[y][x].data for x in range(screen.cols)).rstrip() if y in buf else "" for y in range(screen.rows)
        ]
    from panewatch.screen_ghostty import _clean  # each row as lines() cleans it, cache or not

    rows = [_clean(row) for row in screen._term.text().split("\n")[: screen.rows]]
    return rows + [""] * (screen.rows - len(rows))


_STEP = st.one_of(
    st.lists(_ESCAPE_PIECES, max_size=30).map(lambda parts: ("feed", "".join(parts))),
    st.tuples(st.just("resize"), st.tuples(st.integers(2, 12), st.integers(10, 40))),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_STEP, st.booleans()), max_size=12), st.integers(2, 12), st.integers(10, 40))
def test_lines_kept_between_calls_equal_lines_rebuilt_from_scratch(steps, rows, cols):
    screen = Screen(rows, cols, reply=lambda _: None)
    for (kind, arg), read in steps:
        if kind == "feed":
            screen.feed(arg.encode())
        else:
            screen.resize(*arg)
        if read:  # dirty rows pile up across feeds when nobody reads in between
            assert screen.lines() == _uncached_lines(screen)
    assert screen.lines() == _uncached_lines(screen)
