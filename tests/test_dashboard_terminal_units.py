"""The terminal channel's pure parts (the repaint with the modes the screen has set, the
history ring), the server's prompt on real captures as the dashboard offers it, and the check that
an answer made the program react (not just echo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from panewatch.engine._guard import prompt_reacted
from panewatch.engine._repaint import MODES, repaint
from panewatch.engine._terminal import History
from panewatch.engine.models import Cursor, ScreenView, Size
from panewatch.panes.prompts import read_prompt
from panewatch.screen import Screen
from panewatch.states import Source, State

pytestmark = pytest.mark.unit

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude" / "2.1.332"


def screen_of(path: Path, rows: int, cols: int) -> Screen:
    s = Screen(rows, cols)
    s.feed(path.read_bytes())
    return s


@pytest.mark.parametrize("size", ["24x80", "32x120", "50x160"])
def test_question_dialog_options_on_both_sides_of_its_inner_rule(size: str) -> None:
    rows, cols = map(int, size.split("x"))
    lines = screen_of(CAPTURES / f"blocked-question-{size}.raw", rows, cols).lines()
    prompt = read_prompt(lines)
    options = prompt.options
    assert prompt.kind == "options"
    assert [o["option"] for o in options] == [1, 2, 3, 4]
    assert options[0] == {"option": 1, "label": "Apple", "selected": True}
    assert options[3]["label"] == "Chat about this"


def test_permission_dialog_options_from_a_capture() -> None:
    lines = screen_of(CAPTURES / "blocked-bash-option-2-32x120.raw", 32, 120).lines()
    options = read_prompt(lines).options
    assert [o["option"] for o in options] == [1, 2, 3, 4]
    assert [o["selected"] for o in options] == [False, True, False, False]
    assert options[3]["label"] == "No"


def test_numbered_lines_above_a_menu_are_not_its_options() -> None:
    lines = [
        " 1. an agent reply mentioning options",
        " 2. and a second point",
        "─" * 40,
        " Do you want to proceed?",
        " ❯ 1. Yes",
        "   2. No",
        "",
        " Esc to cancel",
    ]
    assert [o["label"] for o in read_prompt(lines).options] == ["Yes", "No"]
    assert read_prompt(["nothing", "to see"]).kind == "text"
    assert read_prompt([" 2. a second without a first"]).kind == "text"


def view_of(screen: Screen) -> ScreenView:
    c = screen.cursor
    return ScreenView(
        rows=screen.lines(),
        styles=screen.styles(),
        cursor=Cursor(row=c.row, col=c.col, hidden=c.hidden),
        size=Size(rows=screen.rows, cols=screen.cols),
        state=State.idle,
        rule=None,
        source=Source.screen,
        title="",
        prompt=None,
        request=None,
    )


def modes(screen: Screen) -> dict[int, bool]:
    """The modes as the channel reads them from a session's screen."""
    return {m: screen.mode(m) for m in MODES}


def test_repaint_draws_the_same_screen_colours_cursor_and_modes() -> None:
    output = (
        b"plain \x1b[31mred\x1b[0m \x1b[1;48;2;0;0;255mbold-on-blue\x1b[0m\r\n\x1b[7minverse\x1b[0m\r\n"
        b"\x1b[38;5;208mcolour208\x1b[0m \xe5\xae\xbd wide\x1b[?20"
    )
    rest = b"04h\x1b[?1h\x1b[4;7H"  # a mode split between two reads
    src = Screen(10, 40)
    for chunk in (output, rest):
        src.feed(chunk)
    assert {m for m, on in modes(src).items() if on} == {2004, 1} and not src.alternate
    copy = Screen(10, 40)
    copy.feed(b"old junk that the repaint erases\r\n" * 3)
    copy.feed(repaint(view_of(src), modes(src), src.alternate))
    assert copy.lines() == src.lines()
    assert copy.styles() == src.styles()
    assert (copy.cursor.row, copy.cursor.col, copy.cursor.hidden) == (3, 6, False)
    assert copy.mode(2004) and copy.mode(1)


def test_repaint_of_a_full_screen_program_is_on_the_alternate_screen() -> None:
    src = Screen(5, 20)
    for chunk in (b"shell line\r\n", b"\x1b[?1049h\x1b[H\x1b[?1002h\x1b[?1006h\x1b[?25lfull screen"):
        src.feed(chunk)
    assert src.alternate
    copy = Screen(5, 20)
    copy.feed(repaint(view_of(src), modes(src), src.alternate))
    assert copy.alternate and copy.lines()[0] == "full screen" and copy.cursor.hidden
    assert copy.mode(1002) and copy.mode(1006) and not copy.mode(1000)  # mouse reports as the pane


def test_history_keeps_the_newest_bytes_from_a_line_start() -> None:
    h = History(limit=100)
    for i in range(50):
        h.append(f"line {i:03d}\r\n".encode())
    data = h.snapshot()
    assert len(data) <= 100
    assert data.startswith(b"line ") and data.endswith(b"line 049\r\n")
    small = History(limit=1000, seed=b"seeded\r\n")
    small.append(b"more")
    assert small.snapshot() == b"seeded\r\nmore"


def test_an_echo_is_no_reaction_but_a_new_line_is() -> None:
    s = Screen(5, 40)
    s.feed(b"sh$ read -p 'Proceed? [y/N] ' a\r\nProceed? [y/N] ")
    before = (s.lines(), s.cursor.row)
    s.feed(b"^[")  # the echo of Esc: read still waits
    assert not prompt_reacted(*before, s)
    s.feed(b"y\r\n")
    assert prompt_reacted(*before, s)


def test_a_dialog_that_goes_away_is_a_reaction() -> None:
    s = Screen(6, 40)
    s.feed(b"\x1b[?25l" + ("─" * 20).encode() + b"\r\n Do you want to proceed?\r\n \xe2\x9d\xaf 1. Yes\r\n   2. No")
    before = (s.lines(), s.cursor.row)
    s.feed(b"\x1b[2J\x1b[H answered 1")
    assert prompt_reacted(*before, s)
