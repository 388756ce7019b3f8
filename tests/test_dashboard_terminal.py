"""The cards' terminals in a real browser (Debian's Chromium) against a real server and real PTYs:
keyboard into the pane, scrollback, resize, the server's prompt answers, the held-back-keys
guard, and the dashboard fixes of issue 15. Phone screenshots go to ``artifacts/``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from browser_support import card_of, dashboard_server, open_dashboard, playwright_or_skip
from dashboard_support import (
    ARTIFACTS,
    REPO,
    SHELL_ENV,
    Server,
    capture_agent,
    prompt_agent,
    shell,
    tui_agent,
)

pytestmark = pytest.mark.browser

sync_api = playwright_or_skip()
expect = sync_api.expect

#: These tests are the cards layout's (a card and a terminal per session), the page's second view;
#: the attention queue, its first, is tests/test_dashboard_queue.py's.
DASHBOARD_LAYOUT = "cards"

CAPTURES = REPO / "fixtures" / "claude" / "2.1.332"


#: The window in which keys typed after a prompt appeared are held back: 1 s by default, wider here
#: so that keys the test types as soon as the page shows the prompt still arrive within it on a
#: loaded machine (at load 5 they came more than 1 s after the pane turned blocked).
HOLD_MS = 4000


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with dashboard_server("term", ARTIFACTS / "server-logs", extra=["--hold-keys-ms", str(HOLD_MS)]) as srv:
        yield srv


def new_shell(server: Server, name: str, **extra) -> str:
    return server.create(shell(), name=name, agent="shell", env=dict(SHELL_ENV), **extra)["id"]


def buffer_lines(page, sid: str) -> list[str]:
    """Every line the card's terminal holds, scrollback included."""
    return page.evaluate("id => window.panewatch.cards.get(id)?.term.lines()", sid)


def visible_rows(page, sid: str) -> list[str]:
    """The rows the card's terminal shows now (its DOM, as a user sees it)."""
    return (
        card_of(page, sid)
        .locator(".xterm-rows > div")
        .evaluate_all("rows => rows.map(r => r.textContent.replace(/\\u00a0/g, ' ').trimEnd())")
    )


def shows_line_one(page, sid: str) -> None:
    """The terminal draws (on its next frame) a row that is just "1": the top of the count."""
    card_of(page, sid).locator(".xterm-rows > div", has_text=re.compile(r"^1$")).first.wait_for()


def wait_for_line(page, sid: str, pattern: str, timeout: float = 10_000) -> None:
    try:
        page.wait_for_function(
            """([id, source]) => {
            const re = new RegExp(source);
            return window.panewatch.cards.get(id)?.term.lines().some(l => re.test(l.trimEnd()));
        }""",
            arg=[sid, pattern],
            timeout=timeout,
        )
    except sync_api.TimeoutError:
        shown = [line for line in buffer_lines(page, sid) if line.strip()][-12:]
        raise AssertionError(f"no line matching {pattern!r} in the terminal; its last lines: {shown}") from None


def last_line(page, sid: str) -> str:
    return [line for line in buffer_lines(page, sid) if line.strip()][-1].rstrip()


def type_in(page, sid: str, text: str) -> None:
    """Click the card's terminal and type, as a user would."""
    card_of(page, sid).locator(".screen .xterm").click()
    page.keyboard.type(text)


def ask(page, sid: str, command: str) -> None:
    """Type a command that asks a question into the card's terminal and run it: the card turns
    blocked once the question itself is on its own line — the command's echo (`read -p "Sure?
    [y/N]"` as it is typed) can read blocked for a moment before the command even runs."""
    type_in(page, sid, command)
    page.keyboard.press("Enter")
    question = re.search(r'read (?:-s )?-p "([^"]*?)\s*"', command)
    assert question is not None, command
    wait_for_line(page, sid, "^" + re.escape(question.group(1)))
    expect(card_of(page, sid).locator(".badge-state")).to_have_text("blocked")


def foreground(server: Server, sid: str) -> str | None:
    with server.client() as c:
        return c.get(f"/api/sessions/{sid}").json()["foreground"]


def size_of(server: Server, sid: str) -> tuple[int, int]:
    with server.client() as c:
        info = c.get(f"/api/sessions/{sid}").json()
    return info["rows"], info["cols"]


def wait_until(check, timeout: float = 10.0) -> None:
    """Poll the server (not the page) until ``check()`` holds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def cursor_line(server: Server, sid: str) -> str:
    with server.client() as c:
        view = c.get(f"/api/sessions/{sid}/screen").json()
    return view["rows"][view["cursor"]["row"]]


# --- keyboard into the pane ---------------------------------------------------------------------


def test_shell_takes_keys_ctrl_c_and_arrows(page, server: Server) -> None:
    sid = new_shell(server, "sh")
    card = card_of(page, sid)
    wait_for_line(page, sid, r"^sh\$")
    word = "hi-" + secrets.token_hex(4)
    type_in(page, sid, f"echo {word}")
    page.keyboard.press("Enter")
    wait_for_line(page, sid, f"^{word}$")
    expect(card.locator(".screen")).to_contain_text(word)

    page.keyboard.type("sleep 300")
    page.keyboard.press("Enter")
    wait_until(lambda: foreground(server, sid) == "sleep")
    page.keyboard.press("Control+C")
    wait_until(lambda: foreground(server, sid) == "bash")
    wait_for_line(page, sid, r"^\^C$")
    assert last_line(page, sid) == "sh$"

    page.keyboard.press("ArrowUp")  # readline recalls the last command
    page.wait_for_function(
        "id => window.panewatch.cards.get(id)?.term.lines().filter(l => l.trim()).at(-1).trimEnd() === 'sh$ sleep 300'",
        arg=sid,
    )
    page.keyboard.press("Control+U")
    page.keyboard.press("Tab")  # completion is the shell's, not a focus move
    expect(card.locator(".screen .xterm-helper-textarea")).to_be_focused()


def test_paste_goes_in_as_bracketed_paste_when_the_shell_asked_for_it(page, server: Server) -> None:
    sid = new_shell(server, "paster")
    wait_for_line(page, sid, r"^sh\$")
    card_of(page, sid).locator(".screen .xterm").click()
    # a real paste event on the terminal, as the browser fires it for Ctrl+V
    page.evaluate("""() => {
        const dt = new DataTransfer();
        dt.setData('text/plain', 'echo pasted-one\\necho pasted-two');
        document.activeElement.dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true,
                                                                           cancelable: true}));
    }""")
    # bash turned bracketed paste on: the two lines wait in its edit buffer, nothing ran yet
    wait_until(lambda: any("echo pasted-two" in row for row in server.screen(sid)))
    assert not any(row == "pasted-one" for row in server.screen(sid))
    page.keyboard.press("Enter")
    wait_for_line(page, sid, "^pasted-one$")
    wait_for_line(page, sid, "^pasted-two$")


def test_keys_typed_while_the_terminal_connects_are_sent_once_it_is_up(page, server: Server) -> None:
    """A terminal opened and typed into at once (a slow connection, a loaded machine) loses no
    key: its channel is held back here until the keys are typed, then let through."""
    sid = new_shell(server, "typist")
    wait_for_line(page, sid, r"^sh\$")
    held: list = []
    page.route_web_socket(re.compile(r"/ws/sessions/[^/]+/term"), lambda ws: held.append(ws))  # not connected yet
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-status", "live")
    page.wait_for_function("id => window.panewatch.cards.get(id)?.term", arg=sid)
    type_in(page, sid, "echo typed-ahead")
    page.keyboard.press("Enter")
    assert len(held) == 1 and not any("typed-ahead" in row for row in server.screen(sid))
    held[0].connect_to_server()
    wait_for_line(page, sid, "^typed-ahead$")


def test_claude_like_agent_interrupted_with_esc_and_dialog_driven_by_arrows(page, server: Server) -> None:
    sid = server.create(tui_agent(work=0.5), name="tui")["id"]
    card = card_of(page, sid)
    badge = card.locator(".badge-state")
    expect(badge).to_have_text("idle")
    # its prompt drawn, as a user sees it before typing: a blank screen reads idle too, and keys
    # typed before the agent's tty.setraw (TCSAFLUSH) are thrown away by the terminal
    expect(card.locator(".screen")).to_contain_text("? for shortcuts")
    type_in(page, sid, "slow task")
    page.keyboard.press("Enter")
    expect(badge).to_have_text("working")
    expect(card.locator(".screen")).to_contain_text("esc to interrupt")
    page.keyboard.press("Escape")
    expect(card.locator(".screen")).to_contain_text("Interrupted by user")
    expect(badge).to_have_text("idle")

    page.keyboard.type("deploy")
    page.keyboard.press("Enter")
    expect(badge).to_have_text("blocked")
    expect(card.locator(".options button.selected")).to_have_text("1. Yes")
    page.wait_for_timeout(HOLD_MS + 200)  # past the held-back guard: the user has seen the dialog
    page.keyboard.press("ArrowDown")
    expect(card.locator(".options button.selected")).to_have_text("2. Yes, and don't ask again")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")
    expect(card.locator(".screen")).to_contain_text("chose option 2 for deploy")
    expect(badge).to_have_text("idle")
    expect(card.locator(".held")).to_be_hidden()


# --- prompts answered from what the server decided ----------------------------------------------


def test_claude_question_dialog_offers_its_options_and_one_takes(page, server: Server) -> None:
    capture = CAPTURES / "blocked-question-32x120.raw"
    sid = server.create(capture_agent(capture), name="fruit", rows=32, cols=120)["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("blocked")
    # options 1-3 above the dialog's inner rule and 4 below it: all four, from the server
    expect(card.locator(".options button")).to_have_text(
        ["1. Apple", "2. Banana", "3. Type something.", "4. Chat about this", "Esc"]
    )
    expect(card.locator(".options button.selected")).to_have_text("1. Apple")
    expect(card.locator(".prompt-note")).to_be_hidden()
    card.locator(".options button", has_text="2. Banana").click()
    card.locator(".confirm").get_by_role("button", name="Confirm").click()
    expect(card.locator(".result")).to_have_text(re.compile(r"^✓ Took: sent 2\. Banana; now idle\."))
    expect(card.locator(".screen")).to_contain_text("answered 2")


def test_shell_yes_no_and_password_prompts_answered_from_the_page(page, server: Server) -> None:
    sid = new_shell(server, "asker")
    card = card_of(page, sid)
    wait_for_line(page, sid, r"^sh\$")
    ask(page, sid, 'read -p "Proceed? [y/N] " a; echo "got:$a"')
    expect(card.locator(".options button")).to_have_text(["Yes", "No", "Esc"])
    card.get_by_role("button", name="Yes", exact=True).click()
    expect(card.locator(".confirm-text")).to_have_text("Send Yes to asker?")
    card.locator(".confirm").get_by_role("button", name="Confirm").click()
    expect(card.locator(".result")).to_have_text(re.compile(r"^✓ Took: sent Yes; now idle\."))
    wait_for_line(page, sid, "^got:y$")

    secret = "hunter2-" + secrets.token_hex(6)
    ask(page, sid, 'read -s -p "Password: " pw; echo; echo "length:${#pw}"')
    field = card.get_by_label("Password to send")
    expect(field).to_be_visible()
    expect(field).to_have_attribute("type", "password")
    field.fill(secret)
    card.get_by_role("button", name="Send password").click()
    expect(card.locator(".confirm-text")).to_have_text("Send the password to asker?")
    card.locator(".confirm").get_by_role("button", name="Confirm").click()
    expect(card.locator(".result")).to_have_text(re.compile(r"^✓ Took: sent the password; now idle\."))
    wait_for_line(page, sid, f"^length:{len(secret)}$")
    expect(field).to_have_value("")
    assert secret not in page.content()
    assert secret not in page.evaluate("document.body.innerText")
    assert not any(secret in line for line in buffer_lines(page, sid))


def test_esc_that_is_only_echoed_is_not_reported_as_taken(page, server: Server) -> None:
    sid = new_shell(server, "echoer")
    card = card_of(page, sid)
    wait_for_line(page, sid, r"^sh\$")
    ask(page, sid, 'read -p "Proceed? [y/N] " a; echo "got:[$a]"')
    card.locator(".options button.option-esc").click()
    card.locator(".confirm").get_by_role("button", name="Confirm").click()
    # read takes Esc as a character of the answer and keeps waiting: that is no answer, whether
    # the echoed ^[ still matches the rule or not
    expect(card.locator(".result")).to_have_text(re.compile(r"^✗ Did not take: "), timeout=15_000)
    assert cursor_line(server, sid).startswith("Proceed? [y/N]")
    assert not any(line.startswith("got:") for line in server.screen(sid))
    card.locator(".screen .xterm").click()
    page.keyboard.press("Enter")
    wait_for_line(page, sid, r"^got:\[")


def test_keys_typed_right_after_a_prompt_appears_are_held_back(page, server: Server) -> None:
    sid = new_shell(server, "guarded")
    card = card_of(page, sid)
    wait_for_line(page, sid, r"^sh\$")
    ask(page, sid, 'sleep 1; read -p "Sure? [y/N] " a; echo "got:[$a]"')
    page.keyboard.type("y")  # typed as the prompt appeared: the user cannot have read it
    page.keyboard.press("Enter")
    notice = card.locator(".held")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("A prompt appeared — check it before answering")
    expect(notice).to_contain_text("2 key bytes held back")
    assert cursor_line(server, sid) == "Sure? [y/N]"  # nothing reached the pane
    notice.get_by_role("button", name="Send anyway").click()
    wait_for_line(page, sid, r"^got:\[y\]$")
    expect(notice).to_be_hidden()
    expect(card.locator(".result")).to_contain_text("Sent the 2 held-back key bytes")
    expect(card.locator(".badge-state")).to_have_text("idle")

    # the same, dropped
    ask(page, sid, 'sleep 1; read -p "Again? [y/N] " b; echo "got:[$b]"')
    page.keyboard.type("n")
    expect(notice).to_be_visible()
    notice.get_by_role("button", name="Drop").click()
    expect(notice).to_be_hidden()
    expect(card.locator(".result")).to_have_text("Dropped the held-back keys.")
    assert cursor_line(server, sid) == "Again? [y/N]"
    page.wait_for_timeout(HOLD_MS + 100)  # once the prompt has been up that long, keys go through
    card.locator(".screen .xterm").click()
    page.keyboard.type("n")
    page.keyboard.press("Enter")
    wait_for_line(page, sid, r"^got:\[n\]$")


# --- scrollback, reload, resize -------------------------------------------------------------------


def test_scrollback_reaches_line_one_also_after_a_reload(browser, server: Server) -> None:
    sid = new_shell(server, "counter")
    context, page, errors = open_dashboard(browser, server, layout="cards")
    try:
        wait_for_line(page, sid, r"^sh\$")
        type_in(page, sid, "seq 1 3000")
        page.keyboard.press("Enter")
        wait_for_line(page, sid, "^3000$")
        screen = card_of(page, sid).locator(".screen .xterm")

        def viewport_y() -> int:
            return page.evaluate("id => window.panewatch.cards.get(id)?.term.viewportY", sid)

        def scroll_to_top() -> None:
            # once loaded: the terminal scrolls to the bottom when the history and repaint are
            # parsed ("ready"), which after a reload can come after the wheel and undo it
            page.wait_for_function("id => window.panewatch.cards.get(id)?.term.loaded === true", arg=sid)
            screen.hover()
            bottom = viewport_y()
            page.mouse.wheel(0, -300)  # the wheel scrolls back a few lines at a time
            page.wait_for_function("([id, y]) => window.panewatch.cards.get(id)?.term.viewportY < y", arg=[sid, bottom])
            screen.click()
            for _ in range(200):  # Shift+PageUp a page at a time, as in xterm
                page.keyboard.press("Shift+PageUp")
                if viewport_y() == 0:
                    break
            assert viewport_y() == 0

        scroll_to_top()
        shows_line_one(page, sid)
        rows = visible_rows(page, sid)
        assert rows[:3] == ["sh$ seq 1 3000", "1", "2"], rows[:3]
        assert len(buffer_lines(page, sid)) > 3000

        type_in(page, sid, "echo after-the-count")  # typing brings the view back to the prompt
        page.keyboard.press("Enter")
        wait_for_line(page, sid, "^after-the-count$")
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-status", "live")
        wait_for_line(page, sid, "^after-the-count$")
        lines = buffer_lines(page, sid)
        assert "sh$ seq 1 3000" in lines and lines[lines.index("sh$ seq 1 3000") + 1] == "1"
        scroll_to_top()
        shows_line_one(page, sid)
        assert errors == []
    finally:
        context.close()
        server.delete_all()


def test_large_view_resizes_the_pane_and_closing_restores_it(page, server: Server) -> None:
    sid = new_shell(server, "sizer", rows=24, cols=80)
    card = card_of(page, sid)
    wait_for_line(page, sid, r"^sh\$")
    card.get_by_role("button", name="Open large").click()
    expect(card).to_have_class(re.compile(r"\bcard-large\b"))
    wait_until(lambda: size_of(server, sid) != (24, 80))
    rows, cols = size_of(server, sid)
    assert cols > 80 and rows > 24  # 1280×900 holds more than 80×24 at 12 px
    size = page.evaluate("id => window.panewatch.cards.get(id)?.term.size", sid)
    assert size == {"rows": rows, "cols": cols}
    card.locator(".screen .xterm").click()
    page.keyboard.type("stty size")
    page.keyboard.press("Enter")
    wait_for_line(page, sid, f"^{rows} {cols}$")
    # Esc in the terminal is the pane's; elsewhere it closes the modal
    page.keyboard.press("Escape")
    expect(card).to_have_class(re.compile(r"\bcard-large\b"))
    card.get_by_role("button", name="Close").focus()
    page.keyboard.press("Escape")
    expect(card).not_to_have_class(re.compile(r"\bcard-large\b"))
    wait_until(lambda: size_of(server, sid) == (24, 80))
    page.wait_for_function("id => window.panewatch.cards.get(id)?.term.size.cols === 80", arg=sid)


def test_large_view_is_a_modal_without_the_hooks_json(page, server: Server) -> None:
    sid = new_shell(server, "modal")
    card = card_of(page, sid)
    card.get_by_role("button", name="Open large").click()
    expect(card.get_by_role("button", name="Close")).to_be_focused()
    expect(card).to_have_attribute("aria-modal", "true")
    for _ in range(12):
        page.keyboard.press("Shift+Tab")
        assert card.evaluate("el => el.contains(document.activeElement)")
    for _ in range(12):
        page.keyboard.press("Tab")
        inside = card.evaluate("el => el.contains(document.activeElement)")
        assert inside
        if page.evaluate("document.activeElement.classList.contains('xterm-helper-textarea')"):
            break  # the terminal takes Tab as a key for the pane from here
    assert page.locator("header.top").evaluate("el => el.inert")
    page.locator("#backdrop").click(position={"x": 3, "y": 3}, force=True)
    expect(card).not_to_have_class(re.compile(r"\bcard-large\b"))
    expect(card.get_by_role("button", name="Open large")).to_be_focused()
    assert not page.locator("header.top").evaluate("el => el.inert")
    shown = page.evaluate("""async () => {
        const m = await import('/static/parse.js');
        return m.shortCommand(['claude', '--settings', JSON.stringify({hooks: {Stop: [{hooks: [
            {type: 'command', command: 'curl -s http://127.0.0.1:1/report'}]}]}}), '--model', 'my model']);
    }""")
    assert shown == 'claude --settings {…} --model "my model"'


# --- prompts stay in view -------------------------------------------------------------------------


def test_a_card_moving_first_shows_its_prompt_and_keeps_scroll_when_it_goes_back(page, server: Server) -> None:
    first = new_shell(server, "first")
    second = new_shell(server, "second")
    wait_for_line(page, second, r"^sh\$")
    expect(page.locator("#cards > .card").first).to_have_attribute("data-id", first)
    ask(page, second, 'seq 1 200; read -p "Continue? [y/N] " a; echo "got:[$a]"')
    card = card_of(page, second)
    expect(page.locator("#cards > .card").first).to_have_attribute("data-id", second)
    page.wait_for_function("id => window.panewatch.cards.get(id)?.term.atBottom", arg=second)
    assert any(row.startswith("Continue? [y/N]") for row in visible_rows(page, second))

    card.get_by_role("button", name="Yes", exact=True).click()
    card.locator(".confirm").get_by_role("button", name="Confirm").click()
    expect(card.locator(".result")).to_contain_text("✓ Took")
    # answered: it keeps its place (first) until the user moves on
    expect(card.locator(".badge-state")).to_have_text("idle")
    expect(page.locator("#cards > .card").first).to_have_attribute("data-id", second)
    card.locator(".screen .xterm").hover()
    page.mouse.wheel(0, -600)
    page.wait_for_function("id => !window.panewatch.cards.get(id).term.atBottom", arg=second)
    kept = page.evaluate("id => window.panewatch.cards.get(id)?.term.viewportY", second)
    card_of(page, first).locator(".meta").click()  # the user moves on
    expect(page.locator("#cards > .card").first).to_have_attribute("data-id", first)
    assert page.evaluate("id => window.panewatch.cards.get(id)?.term.viewportY", second) == kept
    # the result line fades, then goes
    expect(card.locator(".result")).to_have_class(re.compile(r"\bfading\b"), timeout=12_000)
    expect(card.locator(".result")).to_be_empty(timeout=8_000)


def test_reload_while_blocked_never_leaves_a_loading_note(page, server: Server) -> None:
    trust = server.create(capture_agent(CAPTURES / "blocked-trust-32x120.raw"), name="trust")["id"]
    asker = new_shell(server, "yn")
    wait_for_line(page, asker, r"^sh\$")
    type_in(page, asker, 'read -p "Go? [y/N] " a')
    page.keyboard.press("Enter")
    wait_until(lambda: cursor_line(server, asker) == "Go? [y/N]")
    for sid in (trust, asker):
        expect(card_of(page, sid).locator(".badge-state")).to_have_text("blocked")
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-status", "live")
    trust_card, asker_card = card_of(page, trust), card_of(page, asker)
    # a menu without numbers: its rows, answered with the arrow keys the server worked out
    expect(trust_card.locator(".options button")).to_have_text(["No, exit", "Yes, I trust this folder", "Esc"])
    expect(trust_card.locator(".options button.selected")).to_have_text("No, exit")
    expect(trust_card.get_by_label("Keys to send to the prompt")).to_be_visible()
    expect(asker_card.locator(".options button")).to_have_text(["Yes", "No", "Esc"])
    for card in (trust_card, asker_card):
        expect(card.locator(".prompt")).not_to_contain_text("Loading")
        expect(card.locator(".prompt")).not_to_contain_text("Reading the prompt")
    page.screenshot(path=str(ARTIFACTS / "dashboard-terminal-desktop.png"), full_page=True)


# --- the page around the cards --------------------------------------------------------------------


def test_new_session_reports_failed_starts_and_takes_an_environment(page, server: Server) -> None:
    page.get_by_role("button", name="New session").click()
    form = page.locator("#new-session")
    form.locator("select[name=agent]").select_option("")
    status = form.locator(".form-status")

    form.locator("input[name=command]").fill("no-such-program-here --flag")
    form.get_by_role("button", name="Start").click()
    expect(status).to_have_text(re.compile(r"^Failed: .*could not start .*exit code 127\."))
    expect(status).to_have_attribute("data-kind", "error")

    form.locator("input[name=command]").fill("bash -c 'echo boom-on-stderr >&2; exit 3'")
    form.get_by_role("button", name="Start").click()
    expect(status).to_have_text(re.compile(r"^Failed: .* exited at once — exit code 3\.\nboom-on-stderr"))

    form.locator("textarea[name=env]").fill("not a variable")
    form.get_by_role("button", name="Start").click()
    expect(status).to_have_text(re.compile(r"^environment line 1: write NAME=value"))

    mark = secrets.token_hex(4)
    form.locator("textarea[name=env]").fill(f"# a comment\nPW_MARK=m-{mark}\n")
    form.locator("input[name=command]").fill(
        """bash -c 'printf "\\033]0;title-%s\\007" "$PW_MARK"; echo "env:$PW_MARK"; exec sleep 600'"""
    )
    form.locator("input[name=name]").fill("with-env")
    form.get_by_role("button", name="Start").click()
    expect(status).to_have_text(re.compile(r"^Started with-env"))
    expect(status).to_have_attribute("data-kind", "ok")
    card = page.locator("#cards > .card", has=page.locator("h2", has_text="with-env"))
    expect(card.locator(".screen")).to_contain_text(f"env:m-{mark}")
    expect(card.locator(".term-title")).to_have_text(f"title-m-{mark}")


def test_last_alert_is_a_button_cleared_with_its_session_and_notifications_switch_off(page, server: Server) -> None:
    page.get_by_role("button", name="Enable notifications").click()
    switch = page.get_by_label("Notifications")
    expect(switch).to_be_checked()
    sid = server.create(prompt_agent(work=30), name="pinger")["id"]
    page.wait_for_function(
        "() => window.__notes.some(n => n.title === 'pinger needs you')"
    )  # a function: a bare expression is eval'd, which the page's CSP forbids
    alert = page.locator("#last-alert")
    expect(alert).to_contain_text("pinger needs you")
    alert.focus()  # a button: reachable by keyboard
    page.keyboard.press("Enter")
    expect(card_of(page, sid).get_by_role("button", name="Open large")).to_be_focused()

    switch.uncheck()
    count = page.evaluate("window.__notes.length")
    other = server.create(prompt_agent(work=30), name="quiet")["id"]
    expect(alert).to_contain_text("quiet needs you")  # the page still says it
    assert page.evaluate("window.__notes.length") == count  # but no browser notification
    page.reload()
    expect(page.get_by_label("Notifications")).not_to_be_checked()  # remembered

    with server.client() as c:
        c.delete(f"/api/sessions/{other}")
    page.wait_for_function("id => !window.panewatch.sessions.has(id)", arg=other)
    expect(page.locator("#last-alert-line")).to_be_hidden()


def test_phone_width_targets_why_by_tap_and_screenshots(browser, server: Server) -> None:
    asker = server.create(prompt_agent(work=30), name="asker")["id"]
    calm = new_shell(server, "calm")
    context, page, errors = open_dashboard(
        browser,
        server,
        layout="cards",
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
    )
    try:
        card = card_of(page, asker)
        expect(card.locator(".badge-state")).to_have_text("blocked")
        expect(card.locator(".options button")).to_have_text(["1. Yes", "2. No", "Esc"])
        wait_for_line(page, calm, r"^sh\$")
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-terminal-phone.png"), full_page=True)

        small = page.evaluate("""() => [...document.querySelectorAll(
                'button, select, input:not([type=checkbox]), textarea, .toggle, .badge')]
            .filter(el => el.offsetParent !== null && !el.closest('.xterm'))
            .map(el => { const r = el.getBoundingClientRect();
                         return {what: el.className || el.id || el.tagName, w: r.width, h: r.height}; })
            .filter(t => t.w < 44 || t.h < 44)""")
        assert small == [], small

        why = card.locator(".why")
        expect(why).to_be_hidden()
        card.locator(".badge").tap()
        expect(why).to_be_visible()
        expect(why).to_contain_text("rule: permission_dialog")
        expect(why).to_contain_text("a permission dialog")
        card.locator(".badge").focus()
        page.keyboard.press("Enter")
        expect(why).to_be_hidden()

        card.get_by_role("button", name="Open large").tap()
        expect(card).to_have_class(re.compile(r"\bcard-large\b"))
        page.screenshot(path=str(ARTIFACTS / "dashboard-terminal-phone-large.png"))
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        assert errors == []
    finally:
        context.close()
        server.delete_all()


def test_terminal_socket_refuses_a_wrong_token_and_a_foreign_origin(server: Server) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    sid = new_shell(server, "locked")
    url = server.url.replace("http", "ws") + f"/ws/sessions/{sid}/term"

    def closed_with(target: str, **kwargs) -> int | None:
        with connect(target, open_timeout=5, **kwargs) as ws:
            try:
                ws.recv(timeout=5)
            except ConnectionClosed as exc:
                return exc.rcvd.code if exc.rcvd else None
        return None

    try:
        assert closed_with(url + "?token=wrong") == 4403
        assert closed_with(url) == 4401
        assert closed_with(url + f"?token={server.token}", origin="http://evil.example") == 4403
        with connect(url + f"?token={server.token}", open_timeout=5) as ws:
            assert json.loads(ws.recv(timeout=5))["type"] == "hello"
    finally:
        server.delete_all()


def _raw_websocket(port: int, path: str) -> socket.socket:
    """A WebSocket opened by hand on a socket with a small fixed receive buffer, so that what
    the client does not read stays with the server (a library would read it into memory)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def _send_text(sock: socket.socket, text: str) -> None:
    data = text.encode()
    mask = os.urandom(4)
    size = bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + struct.pack("!H", len(data))
    sock.sendall(bytes([0x81]) + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def _read_frame(sock: socket.socket) -> tuple[int, bytes]:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            assert chunk, "the server closed the socket"
            out += chunk
        return out

    b0, b1 = exactly(2)
    size = b1 & 0x7F
    if size == 126:
        size = struct.unpack("!H", exactly(2))[0]
    elif size == 127:
        size = struct.unpack("!Q", exactly(8))[0]
    return b0 & 0x0F, exactly(size)


def test_a_slow_client_is_resynchronised_not_queued(server: Server) -> None:
    """A client that reads nothing while the pane floods gets the latest screen, not the flood."""
    sid = new_shell(server, "flood")
    flood = 24_000_000
    # far more than the kernel's socket buffers hold (send side up to tcp_wmem's 4 MB, which
    # autotuning may reach) plus the server's 512 KiB backlog: at 6 MB one CI run never tripped it
    unread = 18_000_000
    sock = _raw_websocket(server.port, f"/ws/sessions/{sid}/term?token={server.token}")
    try:
        sock.settimeout(30)
        _send_text(
            sock,
            json.dumps(
                {
                    "type": "input",
                    # the marker is spelt so that the echo of the typed line never matches it: a
                    # shell that starts after the keys arrive echoes them, then draws its prompt,
                    # and "flood-done ... sh$" once ended the read before the flood was read
                    "data": f'yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {flood}; echo flood-""done\r',
                }
            ),
        )
        deadline = time.monotonic() + 120

        def bytes_read() -> int:  # this session's, by id: the list may hold another test's too
            return next(s["bytes_read"] for s in server.sessions() if s["id"] == sid)

        while bytes_read() < unread and time.monotonic() < deadline:
            time.sleep(0.2)  # read nothing while most of the flood leaves the pane
        left_pane = bytes_read()
        received, resync, tail = 0, False, b""
        while time.monotonic() < deadline:
            opcode, payload = _read_frame(sock)
            if opcode == 2:
                received += len(payload)
                tail = (tail + payload)[-4000:]
            elif opcode == 1:
                resync = resync or json.loads(payload).get("resync", False)
            if b"flood-done" in tail and b"sh$" in tail[tail.rfind(b"flood-done") :]:
                break
        # it was told to start over from the screen
        assert resync, f"no resync: {left_pane:,} bytes had left the pane unread, {received:,} received"
        assert received < flood  # and did not get the whole flood (what it missed was dropped)
        assert "flood-done" in tail.decode(errors="replace")
    finally:
        sock.close()
        server.delete_all()
