"""The Sessions dashboard in a real browser (Debian's Chromium, headless) against a real server.

Every wait is Playwright's auto-waiting ``expect``; nothing sleeps blindly. Screenshots of the
desktop and phone layouts are saved under ``artifacts/``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import card_of, dashboard_server, open_dashboard, playwright_or_skip
from dashboard_support import (
    ARTIFACTS,
    IDLE_LINE,
    Server,
    echo_agent,
    free_port,
    idle_agent,
    prompt_agent,
)

pytestmark = pytest.mark.browser

expect = playwright_or_skip().expect

#: These tests are the cards layout's (a card and a terminal per session), the page's second view;
#: the attention queue, its first, is tests/test_dashboard_queue.py's.
DASHBOARD_LAYOUT = "cards"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("dash", tmp_path_factory.mktemp("server-logs")) as srv:
        yield srv


# --- an agent's own desktop notification ------------------------------------------------------


def test_an_agents_osc9_notification_shows_on_its_card_as_text(page, server: Server) -> None:
    argv = idle_agent("tests ran")  # then, a second later, OSC 9 with markup in its text
    argv[-1] = argv[-1].replace("exec sleep", "sleep 1\nprintf '\\033]9;build <b>done</b>\\007'\nexec sleep")
    sid = server.create(argv, name="builder")["id"]
    card = card_of(page, sid)
    expect(card.locator(".agent-message")).to_have_text("🔔 build <b>done</b>")  # text, never HTML
    expect(card.locator(".agent-message b")).to_have_count(0)
    expect(card.locator(".agent-message")).to_have_attribute("title", re.compile(r"^osc9 notification from the agent"))


# --- logging in ------------------------------------------------------------------------------


def test_token_login_sets_a_cookie_and_shows_the_sessions(browser, server: Server) -> None:
    sid = server.create(idle_agent("hello from the card"), name="hello-card")["id"]
    context = browser.new_context()
    try:
        page = context.new_page()
        response = page.goto(f"{server.url}/?token={server.token}")
        assert response is not None and response.status == 200
        assert page.url == f"{server.url}/"  # the token left the address bar
        cookie = next(c for c in context.cookies() if c["name"] == "panewatch_login")
        assert cookie["httpOnly"]
        # the page opens on the queue (its own context: not the cards layout of this module's pages)
        row = page.locator(f'#queue .row[data-id="{sid}"]')
        expect(row.locator(".row-name")).to_have_text("hello-card")
        expect(row.locator(".row-state")).to_have_text("idle")
        expect(row.locator(".row-agent")).to_have_text("claude")
        expect(row.locator(".row-line")).to_have_text("hello from the card")  # above its input box
        expect(row.locator(".row-time")).to_have_text(re.compile(r"^\d+s$"))
        expect(page.locator("#detail .screen")).to_contain_text("hello from the card")  # its terminal, beside
        expect(page).to_have_title("Panewatch")
        expect(page.get_by_label("Sound")).not_to_be_checked()  # a sound only when asked for
    finally:
        context.close()
        server.delete_all()


def test_an_idle_row_shows_a_line_drawn_after_its_state_settled(browser, server: Server, tmp_path: Path) -> None:
    """The page reads a screen when its state changes; an agent that draws its last words after
    going idle sends no other change, so that read stayed empty (it did, under load)."""
    go = tmp_path / "draw"
    sid = server.create(idle_agent("drawn while idle", after=go), name="late-card")["id"]
    context = browser.new_context()
    try:
        page = context.new_page()
        with page.expect_response(lambda r: f"/api/sessions/{sid}/screen" in r.url):
            page.goto(f"{server.url}/?token={server.token}")
        row = page.locator(f'#queue .row[data-id="{sid}"]')
        expect(row.locator(".row-state")).to_have_text("idle")
        expect(row.locator(".row-line")).to_have_text(IDLE_LINE.strip())  # read before the text came
        since = next(s for s in server.sessions() if s["id"] == sid)["since"]
        go.touch()
        expect(row.locator(".row-line")).to_have_text("drawn while idle", timeout=15000)
        assert next(s for s in server.sessions() if s["id"] == sid)["since"] == since  # no change came
    finally:
        context.close()
        server.delete_all()


def test_wrong_or_missing_token_is_refused_without_data(browser, server: Server) -> None:
    server.create(idle_agent("secret screen"), name="private")
    context = browser.new_context()
    try:
        page = context.new_page()
        sockets: list[str] = []
        page.on("websocket", lambda ws: sockets.append(ws.url))
        response = page.goto(f"{server.url}/?token=not-the-token")
        assert response is not None and response.status == 403
        expect(page.locator("h1")).to_have_text("Wrong token")
        assert page.locator(".card").count() == 0
        assert not any(c["name"] == "panewatch_login" for c in context.cookies())

        response = page.goto(f"{server.url}/")
        assert response is not None and response.status == 401
        assert page.locator(".card").count() == 0
        assert sockets == []  # the refusal pages run no script

        # a forged cookie gets neither the API nor a byte from the state WebSocket
        context.add_cookies([{"name": "panewatch_login", "value": "forged-token", "url": server.url}])
        assert page.request.get(f"{server.url}/api/sessions").status == 403
        outcome = page.evaluate(
            """url => new Promise(resolve => {
            const got = [];
            const ws = new WebSocket(url);
            ws.onmessage = e => got.push(e.data);
            ws.onclose = e => resolve({ got, code: e.code });
        })""",
            server.url.replace("http", "ws") + "/ws/state",
        )
        assert outcome["got"] == []
        assert "secret screen" not in page.content()
    finally:
        context.close()
        server.delete_all()


# --- blocked first, answered after a confirmation -------------------------------------------


def test_blocked_card_goes_first_and_is_answered_after_confirmation(page, server: Server) -> None:
    calm = server.create(idle_agent("nothing to see"), name="calm")["id"]
    expect(card_of(page, calm).locator(".badge-state")).to_have_text("idle")
    page.get_by_role("button", name="Enable notifications").click()
    expect(page.get_by_label("Notifications")).to_be_checked()  # allowed: now a switch

    sid = server.create(prompt_agent(work=3), name="asker")["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("blocked")
    expect(page.locator("#cards > .card").first).to_have_attribute("data-id", sid)
    expect(page).to_have_title("(1) Panewatch")
    # the hover text names the source and rule, then the rule's own `why` from the manifest
    expect(card.locator(".badge")).to_have_attribute(
        "title", re.compile(r"^source: screen · rule: permission_dialog\na permission dialog: .+")
    )
    options = card.locator(".options button")
    expect(options).to_have_text(["1. Yes", "2. No", "Esc"])
    expect(card.locator(".options button.selected")).to_have_text("1. Yes")
    expect(card.locator(".send-text")).to_be_disabled()
    expect(card.locator(".send-button")).to_be_disabled()

    # the server's notification event became a browser notification and a line in the page
    page.wait_for_function("() => window.__notes.some(n => n.title === 'asker needs you')")
    expect(page.locator("#last-alert")).to_contain_text("asker needs you")

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-desktop.png"), full_page=True)

    # a click only asks; Cancel sends nothing
    options.filter(has_text="1. Yes").click()
    confirm = card.locator(".confirm")
    expect(confirm).to_be_visible()
    expect(confirm.locator(".confirm-text")).to_have_text("Send 1. Yes to asker?")
    expect(card.locator(".confirm-yes")).to_be_focused()
    card.get_by_role("button", name="Cancel").click()
    expect(confirm).to_be_hidden()
    expect(options.first).to_be_focused()  # back where the user was
    options.filter(has_text="2. No").click()
    expect(confirm.locator(".confirm-text")).to_have_text("Send 2. No to asker?")
    page.keyboard.press("Escape")
    expect(confirm).to_be_hidden()
    assert any("❯ 1. Yes" in row for row in server.screen(sid))  # still asking
    expect(card.locator(".badge-state")).to_have_text("blocked")

    options.filter(has_text="1. Yes").click()
    card.get_by_role("button", name="Confirm").click()
    expect(card.locator(".result")).to_have_text("✓ Took: sent 1. Yes; now working.")
    expect(card.locator(".badge-state")).to_have_text("working")
    expect(card.locator(".screen")).to_contain_text("answered 1")
    expect(card.locator(".prompt")).to_be_hidden()
    expect(card.locator(".send-text")).to_be_enabled()
    expect(page).to_have_title("Panewatch")
    expect(card.locator(".badge-state")).to_have_text("idle")
    # answered, the card keeps its place until the user moves on; then creation order again
    expect(page.locator("#cards > .card").first).to_have_attribute("data-id", sid)
    card_of(page, calm).locator(".meta").click()
    expect(page.locator("#cards > .card").first).to_have_attribute("data-id", calm)


def test_an_answer_that_no_longer_applies_says_so(page, server: Server) -> None:
    sid = server.create(prompt_agent(work=30), name="raced")["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("blocked")
    card.locator(".options button", has_text="2. No").click()
    expect(card.locator(".confirm-text")).to_have_text("Send 2. No to raced?")
    # meanwhile the prompt is answered elsewhere (a script, another tab)
    with server.client() as c:
        r = c.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})
    assert r.json()["took"] is True
    # the page withdraws its question when the pane stops being blocked
    expect(card.locator(".badge-state")).to_have_text("working")
    expect(card.locator(".confirm")).to_be_hidden()


def test_send_box_types_into_an_idle_session(page, server: Server) -> None:
    sid = server.create(echo_agent(), name="echo")["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("idle")
    card.locator(".send-text").fill("hello there")
    card.get_by_role("button", name="Send").click()
    expect(card.locator(".result")).to_have_text("Sent “hello there”.")
    expect(card.locator(".screen")).to_contain_text("got:hello there")
    expect(card.locator(".send-text")).to_have_value("")


def test_screen_keeps_the_agents_colours_and_the_cursor(page, server: Server) -> None:
    script = [
        "bash",
        "-c",
        "stty -echo; printf '\\x1b[31mRED\\x1b[0m plain \\x1b[1;48;2;0;0;255mBOLD\\x1b[0m\\r\\n'; "
        "printf '\\x1b[7mINV\\x1b[0m'; exec sleep 600",
    ]
    sid = server.create(script, name="colours")["id"]
    card = card_of(page, sid)
    screen = card.locator(".screen")
    expect(screen).to_contain_text("RED plain BOLD")
    red = screen.locator("span", has_text="RED")
    expect(red).to_have_css("color", "rgb(224, 108, 117)")
    bold = screen.locator("span", has_text="BOLD")
    expect(bold).to_have_css("background-color", "rgb(0, 0, 255)")
    expect(bold).to_have_css("font-weight", "700")
    inverse = screen.locator("span", has_text="INV")
    expect(inverse).to_have_css("background-color", "rgb(220, 223, 228)")  # reverse video: fg as bg
    expect(screen.locator(".xterm-cursor")).to_have_count(1)


# --- creating, deleting, opening large -----------------------------------------------------


def test_create_and_delete_a_session_from_the_page(page, server: Server, tmp_path: Path) -> None:
    page.get_by_role("button", name="New session").click()
    form = page.locator("#new-session")
    expect(form).to_be_visible()
    agent = form.locator("select[name=agent]")
    expect(agent.locator("option[value=claude]")).to_have_count(1)
    expect(agent).to_have_value("claude")

    # mistakes are explained, not sent
    form.locator("input[name=command]").fill('["bash", "-c"')
    form.get_by_role("button", name="Start").click()
    expect(form.locator(".form-status")).to_contain_text("not valid")
    form.locator("input[name=command]").fill("bash -c 'exec sleep 600'")
    form.locator("input[name=cwd]").fill(str(tmp_path / "missing"))
    form.get_by_role("button", name="Start").click()
    expect(form.locator(".form-status")).to_contain_text("is not a folder")
    assert server.sessions() == []

    agent.select_option("")  # no agent: the command alone
    form.locator("input[name=command]").fill(
        json.dumps(["bash", "-c", "printf 'made from the page\\r\\n'; exec sleep 600"])
    )
    form.locator("input[name=cwd]").fill(str(tmp_path))
    form.locator("input[name=name]").fill("from-page")
    form.get_by_role("button", name="Start").click()
    expect(form.locator(".form-status")).to_contain_text("Started from-page")
    card = page.locator("#cards > .card", has=page.locator("h2", has_text="from-page"))
    expect(card).to_have_count(1)
    expect(card.locator(".screen")).to_contain_text("made from the page")
    expect(card.locator(".cwd")).to_have_attribute("title", str(tmp_path))
    (made,) = server.sessions()
    assert made["name"] == "from-page" and made["cwd"] == str(tmp_path) and made["agent"] != "claude"

    # a space-separated command with quotes, under an agent
    agent.select_option("claude")
    form.locator("input[name=command]").fill("bash -c \"printf 'two words\\r\\n'; exec sleep 600\"")
    form.locator("input[name=name]").fill("quoted")
    form.get_by_role("button", name="Start").click()
    quoted = page.locator("#cards > .card", has=page.locator("h2", has_text="quoted"))
    expect(quoted.locator(".screen")).to_contain_text("two words")

    card.get_by_role("button", name="Delete").click()
    expect(card.locator(".confirm-text")).to_have_text("Delete from-page? This stops its process.")
    card.locator(".confirm").get_by_role("button", name="Delete").click()
    expect(card).to_have_count(0)
    assert [s["name"] for s in server.sessions()] == ["quoted"]


def test_open_one_session_large_and_close_it(page, server: Server) -> None:
    sid = server.create(idle_agent("look at me"), name="big", rows=30, cols=100)["id"]
    card = card_of(page, sid)
    expect(card.locator(".screen")).to_contain_text("look at me")
    assert card.locator(".xterm-rows > div").count() == 30  # the pane at its own size
    card.get_by_role("button", name="Open large").click()
    expect(card).to_have_class("card card-large")
    expect(page.locator("#backdrop")).to_be_visible()
    expect(card.locator(".screen")).to_contain_text("look at me")
    expect(card.locator(".details")).to_contain_text(sid)
    page.keyboard.press("Escape")
    expect(card).to_have_class("card")
    expect(page.locator("#backdrop")).to_be_hidden()


# --- connections ---------------------------------------------------------------------------


def test_dropped_websockets_reconnect_and_resynchronise(page, server: Server) -> None:
    sid = server.create(echo_agent(), name="survivor")["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("idle")
    page.evaluate("""() => {
        window.__statuses = [];
        const el = document.getElementById('connection');
        new MutationObserver(() => window.__statuses.push(el.dataset.status))
            .observe(el, { attributes: true, attributeFilter: ['data-status'] });
        window.panewatch.dropConnections();
    }""")
    page.wait_for_function("() => window.__statuses.includes('reconnecting')")
    expect(page.locator("#connection")).to_have_attribute("data-status", "live")
    # events flow again: a session made meanwhile shows up, and the old card's screen is live
    other = server.create(idle_agent("made after the drop"), name="later")["id"]
    expect(card_of(page, other).locator(".screen")).to_contain_text("made after the drop")
    card.locator(".send-text").fill("still here")
    card.get_by_role("button", name="Send").click()
    expect(card.locator(".screen")).to_contain_text("got:still here")
    expect(page.locator("#banner")).to_be_hidden()


def test_server_restart_shows_a_banner_and_recovers(browser, tmp_path: Path) -> None:
    token = "restart-" + secrets.token_urlsafe(12)
    srv = Server(token, port=free_port(), log_dir=tmp_path).start()
    context = None
    try:
        context, page, errors = open_dashboard(browser, srv, network_down=True, layout="cards")
        sid = srv.create(idle_agent("before the restart"), name="old")["id"]
        expect(card_of(page, sid).locator(".screen")).to_contain_text("before the restart")
        banner = page.locator("#banner")

        srv.stop()
        expect(banner).to_be_visible()
        expect(banner).to_contain_text("reconnecting")
        expect(page.locator("#connection")).to_have_attribute("data-status", "reconnecting")

        srv.start()
        expect(page.locator("#connection")).to_have_attribute("data-status", "live", timeout=20_000)
        # the tmux host kept the agent: the same card is back, its screen as it was, no new login,
        # and no "sessions are gone" banner since none is
        expect(banner).to_be_hidden()
        expect(page.locator("#cards > .card")).to_have_count(1)
        expect(card_of(page, sid).locator(".screen")).to_contain_text("before the restart")
        new = srv.create(idle_agent("after the restart"), name="new")["id"]
        expect(card_of(page, new).locator(".screen")).to_contain_text("after the restart")

        # restarted with another token: the page asks to log in again instead of retrying forever
        srv.stop()
        srv.start(token="other-" + secrets.token_urlsafe(12))
        expect(banner).to_contain_text("Log in again", timeout=20_000)
        expect(page.locator("#connection")).to_have_attribute("data-status", "auth")
        page.goto(f"{srv.url}/?token={srv.token}")
        expect(page.locator("#connection")).to_have_attribute("data-status", "live")
        expect(page.locator("#banner")).to_be_hidden()
        assert errors == []
    finally:
        if context is not None:
            context.close()
        srv.stop()


# --- phones ----------------------------------------------------------------------------------


def test_phone_width_stacks_cards_without_page_overflow(browser, server: Server) -> None:
    long = "x" * 110 + " the end of a long line"
    wide = server.create(idle_agent(long), name="a-session-with-a-rather-long-name-for-a-phone", cols=160)["id"]
    asker = server.create(prompt_agent(work=30), name="asker")["id"]
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
        expect(card_of(page, asker).locator(".badge-state")).to_have_text("blocked")
        # the blocked card went first and pushed this one below the fold, where xterm.js does not
        # render (it pauses off-screen terminals): a user scrolls to it, and so does the test
        card_of(page, wide).scroll_into_view_if_needed()
        expect(card_of(page, wide).locator(".screen")).to_contain_text("the end of a long line", timeout=30_000)
        expect(page.locator("#cards > .card").first).to_have_attribute("data-id", asker)

        def overflow() -> int:
            return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")

        assert overflow() <= 0
        first, second = (page.locator("#cards > .card").nth(i).bounding_box() for i in range(2))
        assert first and second and first["x"] == second["x"] and second["y"] > first["y"] + first["height"] - 1
        assert first["x"] + first["width"] <= 390
        # the 160-column pane fits its card: the font scales, nothing is clipped or scrolls sideways
        page.wait_for_function("id => window.panewatch.cards.get(id)?.term.clipped === false", arg=wide)
        screen = card_of(page, wide).locator(".screen")
        assert screen.evaluate("el => el.scrollWidth <= el.clientWidth")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-phone.png"), full_page=True)

        page.get_by_role("button", name="New session").click()
        expect(page.locator("#new-session select[name=agent] option[value=claude]")).to_have_count(1)
        assert overflow() <= 0

        card_of(page, wide).get_by_role("button", name="Open large").click()
        expect(card_of(page, wide)).to_have_class("card card-large")
        assert overflow() <= 0
        assert errors == []
    finally:
        context.close()
        server.delete_all()


# --- the page's pure helpers, run in the browser ------------------------------------------------


def test_command_and_environment_parsing(page) -> None:
    # (a prompt's options are read on the server: tests/test_prompts.py)
    result = page.evaluate("""async () => {
        const m = await import('/static/parse.js');
        return {
            argv_words: m.parseCommand(`claude --model "opus 4" it\\\\'s 'a b'`),
            argv_json: m.parseCommand('["python", "-m", "x y"]'),
            empty: m.parseCommand('   '),
            bad: (() => { try { m.parseCommand('["a", 1]'); } catch (e) { return e.message; } })(),
            env: m.parseEnv('A=1\\n\\n# note\\nB_2=x=y \\nC='),
            bad_env: (() => { try { m.parseEnv('A=1\\n2B=x'); } catch (e) { return e.message; } })(),
            order: m.cardOrder([
                { id: 'a', state: 'idle', since: 5, created: 1 },
                { id: 'b', state: 'blocked', since: 9, created: 2 },
                { id: 'c', state: 'blocked', since: 3, created: 3 },
                { id: 'd', state: 'working', since: 1, created: 4 }]),
            durations: [m.formatDuration(7), m.formatDuration(185), m.formatDuration(7500)],
        };
    }""")
    assert "parseOptions" not in page.evaluate("async () => Object.keys(await import('/static/parse.js'))")
    assert result["argv_words"] == ["claude", "--model", "opus 4", "it's", "a b"]
    assert result["argv_json"] == ["python", "-m", "x y"]
    assert result["empty"] is None
    assert "array of strings" in result["bad"]
    assert result["env"] == {"A": "1", "B_2": "x=y", "C": ""}
    assert result["bad_env"].startswith("environment line 2: write NAME=value")
    assert result["order"] == ["c", "b", "a", "d"]
    assert result["durations"] == ["7s", "3m 05s", "2h 05m"]


# --- the lab's fake agent (Claude's real drawing habits), when it is there ----------------------


def _asking_seed() -> int:
    """A seed whose first turn asks before a tool call (the plan is deterministic per seed)."""
    for seed in range(50):
        out = subprocess.run(
            [sys.executable, "-m", "panewatch_lab.fake_agent", "--plan", "1", "--seed", str(seed), *FAKE_ARGS],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
        if any(step["asks"] for step in json.loads(out)["steps"]):
            return seed
    pytest.skip("no seed below 50 makes the fake agent ask")


FAKE_ARGS = ["--speed", "4", "--prompt-prob", "1", "--question-prob", "0"]


def test_a_prompt_drawn_like_claude_is_answered_from_the_page(page, server: Server) -> None:
    try:
        found = importlib.util.find_spec("panewatch_lab.fake_agent") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        pytest.skip("the lab's fake agent (panewatch_lab.fake_agent) is not there")
    seed = _asking_seed()
    sid = server.create(
        [sys.executable, "-m", "panewatch_lab.fake_agent", "--seed", str(seed), *FAKE_ARGS],
        agent="fake",
        name="fake-claude",
    )["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("idle")
    card.locator(".send-text").fill("tidy the build scripts")
    card.get_by_role("button", name="Send").click()
    expect(card.locator(".badge-state")).to_have_text("blocked", timeout=15_000)
    options = card.locator(".options button.option:not(.option-esc)")
    expect(options.first).to_have_text(re.compile(r"^1\. Yes"))
    assert options.count() >= 2
    options.first.click()
    card.locator(".confirm").get_by_role("button", name="Confirm").click()
    expect(card.locator(".result")).to_contain_text("✓ Took")
    expect(card.locator(".badge-state")).not_to_have_text("blocked")
