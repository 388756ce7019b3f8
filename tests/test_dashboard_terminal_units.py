"""The terminal channel's pure parts: the prompt read off a screen, the repaint, the history ring,
and the check that an answer made the program react (not just echo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from panewatch.runtime import prompt_reacted
from panewatch.screen import Screen
from panewatch.terminal_ws import History, find_options, repaint

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude" / "2.1.332"


def screen_of(path: Path, rows: int, cols: int) -> Screen:
    s = Screen(rows, cols)
    s.feed(path.read_bytes())
    return s


@pytest.mark.parametrize("size", ["24x80", "32x120", "50x160"])
def test_question_dialog_options_on_both_sides_of_its_inner_rule(size: str) -> None:
    rows, cols = map(int, size.split("x"))
    lines = screen_of(CAPTURES / f"blocked-question-{size}.raw", rows, cols).lines()
    options = find_options(lines)
    assert [o["option"] for o in options] == [1, 2, 3, 4]
    assert options[0] == {"option": 1, "label": "Apple", "selected": True}
    assert options[3]["label"] == "Chat about this"


def test_permission_dialog_options_from_a_capture() -> None:
    lines = screen_of(CAPTURES / "blocked-bash-option-2-32x120.raw", 32, 120).lines()
    options = find_options(lines)
    assert [o["option"] for o in options] == [1, 2, 3, 4]
    assert [o["selected"] for o in options] == [False, True, False, False]
    assert options[3]["label"] == "No"


def test_numbered_lines_above_a_menu_are_not_its_options() -> None:
    lines = [" 1. an agent reply mentioning options", " 2. and a second point", "─" * 40,
             " Do you want to proceed?", " ❯ 1. Yes", "   2. No", "", " Esc to cancel"]
    assert [o["label"] for o in find_options(lines)] == ["Yes", "No"]
    assert find_options(["nothing", "to see"]) == []
    assert find_options([" 2. a second without a first"]) == []


def test_repaint_draws_the_same_screen_colours_and_cursor() -> None:
    src = Screen(10, 40)
    src.feed(b"plain \x1b[31mred\x1b[0m \x1b[1;48;2;0;0;255mbold-on-blue\x1b[0m\r\n\x1b[7minverse\x1b[0m\r\n"
             b"\x1b[38;5;208mcolour208\x1b[0m \xe5\xae\xbd wide\x1b[?2004h\x1b[4;7H")
    copy = Screen(10, 40)
    copy.feed(b"old junk that the repaint erases\r\n" * 3)
    copy.feed(repaint(src))
    assert copy.lines() == src.lines()
    assert copy.styles() == src.styles()
    assert (copy.cursor.row, copy.cursor.col, copy.cursor.hidden) == (3, 6, False)
    assert copy.mode(2004)


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
