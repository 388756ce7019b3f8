"""The attention queue, the dashboard's first view, in Debian's Chromium against a real
``panewatch serve`` and real panes (issue 27): 20 sessions in every state, what each blocked one
asks on its row in the first viewport, keys alone reaching and answering a waiting session, Tab
that never types into a pane, one live terminal that fits its box, and axe-core's audit.

Every pane's agent logs the keys it receives (``queue_support.FLEET_AGENT``): what the page
sends by accident would be there. Screenshots of both widths go to ``artifacts/``.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from browser_support import dashboard_server, open_dashboard, playwright_or_skip
from dashboard_support import ARTIFACTS, LAB_MANIFESTS, REPO, Server
from panewatch.hosts.tmux import tmux_usable
from queue_support import Fleet, fleet_agent, make_fleet, state_of, wait_for, wait_state

pytestmark = pytest.mark.browser

expect = playwright_or_skip(timeout_ms=15_000).expect
if tmux_usable() is not None:
    pytest.skip(f"tmux host unavailable: {tmux_usable()}", allow_module_level=True)

AXE = REPO / "web" / "vendor" / "axe-core" / "axe.min.js"
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
PHONE_OPTIONS = {"viewport": PHONE, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("queue", tmp_path_factory.mktemp("server-logs")) as srv:
        yield srv


@pytest.fixture(autouse=True)
def no_sessions_left(server: Server) -> Iterator[None]:
    """Each test starts and ends without sessions."""
    server.delete_all()
    yield
    server.delete_all()


@pytest.fixture
def fleet(server: Server, tmp_path: Path) -> Fleet:
    return make_fleet(server, tmp_path)


@contextmanager
def dashboard(browser, server: Server, **options: Any) -> Iterator[Any]:
    """The page in a fresh context (1440×900 unless told); it must log no error."""
    context, page, errors = open_dashboard(browser, server, **{"viewport": DESKTOP, **options})
    try:
        yield page
        assert errors == [], f"errors in the page's console: {errors}"
    finally:
        context.close()


def row(page, sid: str):
    return page.locator(f'#queue .row[data-id="{sid}"]')


def in_first_viewport(page, locator) -> bool:
    """The element is drawn inside the viewport as the page opened: nothing scrolled."""
    box = locator.bounding_box()
    size = page.viewport_size
    scrolled = page.evaluate("() => window.scrollY")
    return bool(box and scrolled == 0 and box["y"] >= 0 and box["y"] + box["height"] <= size["height"])


def all_rows_shown(page, fleet: Fleet) -> None:
    expect(page.locator("#queue .row")).to_have_count(len(fleet.all))
    for sid, asks in fleet.asks.items():
        expect(row(page, sid).locator(".request")).to_contain_text(asks)
        # its answers too: what is asked shows from the screen first, the answers once its
        # prompt is read, and a digit pressed in between has nothing to choose (seen at load 4)
        expect(row(page, sid).locator("button.option").first).to_be_visible()


# --- the queue: order, what is asked, the first viewport -------------------------------------------


def test_twenty_sessions_every_question_in_the_first_viewport(browser, server: Server, fleet: Fleet) -> None:
    with dashboard(browser, server) as page:
        all_rows_shown(page, fleet)
        # blocked first, the longest wait first; then working, idle, exited, lost
        order = page.locator("#queue .row").evaluate_all("rows => rows.map(r => r.dataset.id)")
        assert order[:4] == fleet.blocked
        states = page.locator("#queue .row").evaluate_all("rows => rows.map(r => r.dataset.state)")
        assert states == ["blocked"] * 4 + ["working"] * 6 + ["idle"] * 5 + ["exited"] * 3 + ["lost"] * 2
        # what each asks, on its row, with its answers: all four without scrolling
        for sid, asks in fleet.asks.items():
            ask = row(page, sid).locator(".request")
            expect(ask).to_be_visible()
            assert in_first_viewport(page, ask), f"{asks!r} is not in the first viewport"
            assert in_first_viewport(page, row(page, sid).locator(".options button").first)
        expect(row(page, fleet.blocked[0]).locator(".options button")).to_have_text(
            [re.compile(r"^1\. Yes$"), re.compile(r"^2\. Yes, and always allow"), re.compile(r"^3\. Yes, and switch"),
             "4. No", "Esc"]
        )  # fmt: skip
        expect(row(page, fleet.blocked[1]).locator(".options button")).to_have_text(["1Yes", "2No", "Esc"])
        # the summary counts every state, lost too, each in its own colour
        summary = page.locator("#summary")
        expect(summary.locator("button")).to_have_text(
            ["20 sessions", "4 blocked", "6 working", "5 idle", "3 exited", "2 lost"]
        )
        colours = {
            state: summary.locator(f'button[data-state="{state}"]').evaluate("b => getComputedStyle(b).color")
            for state in ("blocked", "working", "idle", "exited", "lost")
        }
        assert len(set(colours.values())) == 5, colours
        lost_row = row(page, fleet.lost[0])
        expect(lost_row.locator(".row-line")).to_contain_text("tmux window was closed")
        assert lost_row.evaluate("r => getComputedStyle(r).borderLeftStyle") == "dashed"
        # one live terminal, beside the list, for the first session; not one per session
        expect(page.locator("#detail .xterm")).to_have_count(1)
        expect(page.locator(".xterm")).to_have_count(1)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "queue-1440x900.png"))
        page.screenshot(path=str(ARTIFACTS / "queue-1440x900-full.png"), full_page=True)


def test_phone_shows_the_first_question_without_scrolling(browser, server: Server, fleet: Fleet) -> None:
    with dashboard(browser, server, **PHONE_OPTIONS) as page:
        all_rows_shown(page, fleet)
        first = row(page, fleet.blocked[0])
        expect(first.locator(".request")).to_contain_text(fleet.asks[fleet.blocked[0]])
        assert in_first_viewport(page, first.locator(".request"))
        assert in_first_viewport(page, first.locator(".options button").first)
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        expect(page.locator(".xterm")).to_have_count(0)  # no terminal until one is opened
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "queue-390x844.png"))
        page.screenshot(path=str(ARTIFACTS / "queue-390x844-full.png"), full_page=True)

        # a row opens its terminal as a view of its own; Back returns to the list
        first.locator(".row-open").tap()
        detail = page.locator("#detail .card")
        expect(detail).to_have_attribute("data-id", fleet.blocked[0])
        expect(page.locator("#queue")).to_be_hidden()
        expect(detail.locator(".xterm-rows")).to_contain_text("Do you want to proceed?")
        host = detail.locator(".term-host")
        page.wait_for_function("id => window.panewatch.detail?.term?.clipped === false", arg=fleet.blocked[0])
        assert host.evaluate("h => h.querySelector('.xterm-screen').getBoundingClientRect().right") <= 390
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        page.screenshot(path=str(ARTIFACTS / "queue-390x844-terminal.png"))
        detail.get_by_role("button", name="← Sessions").tap()
        expect(page.locator("#queue")).to_be_visible()
        expect(page.locator(".xterm")).to_have_count(0)


# --- keys -------------------------------------------------------------------------------------------


def test_keys_alone_reach_the_second_waiting_session_and_answer_it(browser, server: Server, fleet: Fleet) -> None:
    second = fleet.blocked[1]  # the shell's [y/N]
    with dashboard(browser, server) as page:
        all_rows_shown(page, fleet)
        expect(page.locator("body")).to_be_focused()  # a fresh load: nothing has the keyboard
        page.keyboard.press("n")
        expect(row(page, fleet.blocked[0]).locator(".row-open")).to_be_focused()
        page.keyboard.press("n")
        target = row(page, second)
        expect(target.locator(".row-open")).to_be_focused()
        page.keyboard.press("1")  # its first answer: only asks
        confirm = target.locator(".confirm")
        expect(confirm).to_be_visible()
        expect(confirm.locator(".confirm-text")).to_have_text("Send Yes to migrate?")
        expect(target.locator(".confirm-yes")).to_be_focused()
        assert fleet.received(second) == b""  # nothing sent before the confirmation
        page.keyboard.press("Escape")  # cancelled: still nothing
        expect(confirm).to_be_hidden()
        assert fleet.received(second) == b""
        page.keyboard.press("1")
        expect(target.locator(".confirm-yes")).to_be_focused()
        page.keyboard.press("Enter")  # confirmed
        expect(target.locator(".result")).to_have_text(re.compile(r"^✓ Took: sent Yes; now idle\."))
        expect(target).to_have_attribute("data-state", "idle")
        assert fleet.received(second) == b"y\r"
        # nothing else received a key
        assert fleet.typed_into() == {second: b"y\r"}


def test_200_tabs_across_the_page_type_nothing_into_any_pane(browser, server: Server, fleet: Fleet) -> None:
    with dashboard(browser, server) as page:
        all_rows_shown(page, fleet)
        detail = page.locator("#detail .card")
        expect(detail.locator(".xterm-rows")).to_contain_text("Do you want to proceed?")  # a live terminal is there
        visited: set[str] = set()
        for i in range(200):
            page.keyboard.press("Tab" if i < 100 else "Shift+Tab")
            where = page.evaluate("""() => {
                const a = document.activeElement;
                return (a.closest('.xterm') ? 'TERMINAL ' : '') + a.tagName + '.' + a.className;
            }""")
            assert not where.startswith("TERMINAL"), f"Tab {i + 1} entered a terminal"
            visited.add(where)
        assert len(visited) > 20  # it did walk the page: the header, the rows' buttons, the detail's
        assert fleet.typed_into() == {}
        # the logs do see keys: Enter on a row enters its terminal, where every key is the pane's
        # (Tab and Esc too), until Ctrl+] hands the keyboard back
        idle = fleet.idle[0]
        row(page, idle).locator(".row-open").focus()
        page.keyboard.press("Enter")
        expect(detail).to_have_attribute("data-id", idle)
        expect(detail.locator(".xterm-helper-textarea")).to_be_focused()
        expect(detail.locator(".term-hint")).to_contain_text("Ctrl+] returns to the page")
        page.keyboard.type("hi")
        page.keyboard.press("Tab")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Escape")
        expect(detail.locator(".xterm-helper-textarea")).to_be_focused()
        page.keyboard.press("Control+BracketRight")
        expect(row(page, idle).locator(".row-open")).to_be_focused()
        page.keyboard.press("Tab")
        wait_for(lambda: fleet.received(idle) == b"hi\t\x1b[Z\x1b", "the keys typed in the terminal")
        assert set(fleet.typed_into()) == {idle}


def test_keys_move_open_filter_and_group(browser, server: Server, fleet: Fleet) -> None:
    with dashboard(browser, server) as page:
        all_rows_shown(page, fleet)
        page.keyboard.press("?")
        help_ = page.locator("#keys-help")
        expect(help_).to_be_visible()
        expect(help_).to_contain_text("Ctrl")
        page.keyboard.press("Escape")
        expect(help_).to_be_hidden()

        page.keyboard.press("j")
        expect(row(page, fleet.blocked[0]).locator(".row-open")).to_be_focused()
        page.keyboard.press("j")
        page.keyboard.press("j")
        expect(row(page, fleet.blocked[2]).locator(".row-open")).to_be_focused()
        page.keyboard.press("k")
        expect(row(page, fleet.blocked[1]).locator(".row-open")).to_be_focused()
        # the terminal view follows the current row
        detail = page.locator("#detail .card")
        expect(detail).to_have_attribute("data-id", fleet.blocked[1])
        page.keyboard.press("Shift+N")  # the previous waiting one
        expect(row(page, fleet.blocked[0]).locator(".row-open")).to_be_focused()
        page.keyboard.press("o")  # hide the terminal
        expect(page.locator("#detail")).to_be_hidden()
        expect(page.locator(".xterm")).to_have_count(0)
        page.keyboard.press("o")
        expect(detail).to_have_attribute("data-id", fleet.blocked[0])

        page.keyboard.press("/")
        expect(page.locator("#filter")).to_be_focused()
        page.keyboard.type("worker")
        expect(page.locator("#queue .row")).to_have_count(6)
        page.keyboard.press("Escape")
        expect(page.locator("#queue .row")).to_have_count(20)

        # each count filters; pressed again, everything is back
        page.locator('#summary button[data-state="lost"]').click()
        expect(page.locator("#queue .row")).to_have_count(2)
        expect(page.locator('#summary button[data-state="lost"]')).to_have_attribute("aria-pressed", "true")
        page.locator('#summary button[data-state="lost"]').click()
        expect(page.locator("#queue .row")).to_have_count(20)

        page.locator("#queue .row-open").first.focus()
        page.keyboard.press("g")
        groups = page.locator("#queue .group-title")
        expect(groups).to_have_count(2)
        expect(groups.first).to_contain_text("proj-api")
        expect(groups.first).to_contain_text("blocked")
        page.keyboard.press("g")  # by node: a lone server is one node
        expect(groups).to_have_text([re.compile(r"^this server · 20 · 4 blocked$")])
        page.keyboard.press("g")
        expect(page.locator("#queue .group-title:visible")).to_have_count(0)
        assert fleet.typed_into() == {}


def test_terminal_fits_its_view_and_fit_to_view_resizes_the_pane(browser, server: Server, tmp_path: Path) -> None:
    sid = server.create(fleet_agent(tmp_path / "wide.keys", "idle", "W" * 119 + "|"), name="wide", rows=32, cols=120)[
        "id"
    ]
    with dashboard(browser, server) as page:
        detail = page.locator("#detail .card")
        expect(detail).to_have_attribute("data-id", sid)
        expect(detail.locator(".xterm-rows")).to_contain_text("W" * 119 + "|")
        # fit to pane: all 120 columns inside the box, nothing scrolls sideways
        page.wait_for_function("() => window.panewatch.detail?.term?.clipped === false")
        screen = detail.locator(".screen")
        assert screen.evaluate("el => el.scrollWidth <= el.clientWidth")
        assert state_of(server, sid)["cols"] == 120
        expect(detail.get_by_role("button", name="Fit to pane")).to_have_attribute("aria-pressed", "true")
        # fit to view: the pane takes the box's size at a readable font
        detail.get_by_role("button", name="Fit to view").click()
        expect(detail.get_by_role("button", name="Fit to view")).to_have_attribute("aria-pressed", "true")
        page.wait_for_function(
            "id => { const t = window.panewatch.detail?.term; return t && t.size.cols !== 120; }", arg=sid
        )
        cols = page.evaluate("() => window.panewatch.detail.term.size.cols")
        assert cols < 120  # the box beside the list is narrower than 120 columns at 12 px
        page.wait_for_function("() => window.panewatch.detail?.term?.clipped === false")
        # closing the view gives the pane its size back
        page.keyboard.press("Escape")
        expect(page.locator("#detail")).to_be_hidden()
        wait_for(lambda: (state_of(server, sid)["rows"], state_of(server, sid)["cols"]) == (32, 120), "the size back")


# --- what is asked, from the request the server sends -----------------------------------------------


def test_the_request_shows_question_and_subject_as_text(browser, server: Server, tmp_path: Path) -> None:
    """The row shows the server's ``request``: read off the shell's prompt line by its manifest,
    and, when a hook's request replaces it (as a state event brings it), that one, with no page
    change; a pane's text stays text."""
    sid = server.create(fleet_agent(tmp_path / "yn.keys", "yn"), name="asker", agent="shell")["id"]
    wait_state(server, sid, "blocked")
    with dashboard(browser, server) as page:
        r = row(page, sid)
        expect(r.locator(".request")).to_have_text("Drop old tables? [y/N]")
        expect(r.locator(".request")).to_have_attribute("data-source", "screen")  # the server's reading
        hostile = {
            "question": "Run <img src=x onerror=alert(1)> this?",
            "tool": "Bash",
            "subject": "rm -rf build/ && make <b>release</b>",
            "detail": "x" * 2000,
            "source": "hook",
        }
        # as a state event would bring a hook's request
        page.evaluate("([id, request]) => window.panewatch.rows.get(id).update({ request })", [sid, hostile])
        request = r.locator(".request")
        expect(request.locator(".req-question")).to_have_text(hostile["question"])
        expect(request.locator(".req-subject")).to_have_text(hostile["subject"])
        expect(request.locator(".req-tool")).to_have_text("Bash")
        expect(request).to_have_attribute("data-source", "hook")
        expect(request.locator("img, b")).to_have_count(0)
        assert len(request.locator(".req-detail").inner_text()) <= 600  # bounded
        expect(r.locator(".options button")).to_have_text(["1Yes", "2No", "Esc"])  # answers still the prompt's


def test_an_acp_permission_is_answered_from_its_row(browser, server: Server, tmp_path: Path) -> None:
    agent = str(Path(__file__).with_name("acp_agent.py"))
    sid = server.create([sys.executable, agent], name="acp-row", agent=None, kind="acp", cwd=str(tmp_path))["id"]
    wait_state(server, sid, "idle")
    with server.client() as c:
        assert c.post(f"/api/sessions/{sid}/send", json={"text": "perm"}).status_code == 200
    wait_state(server, sid, "blocked")
    with dashboard(browser, server) as page:
        r = row(page, sid)
        expect(r.locator(".request")).to_contain_text("touch marker.txt")
        buttons = r.locator(".options button")
        expect(buttons).to_have_text(["1. Allow", "2. Always allow", "3. Reject"])  # no Esc: options only
        buttons.first.click()
        r.get_by_role("button", name="Confirm").click()
        expect(r.locator(".result")).to_have_text(re.compile(r"^✓ Took: sent 1\. Allow; now "))
        expect(r).not_to_have_attribute("data-state", "blocked")
        wait_for(lambda: (tmp_path / "marker.txt").exists(), "the tool it was allowed to run")


# --- the small things: failed starts, resume, logout, run again, rename -----------------------------


def test_a_failed_start_is_a_message_at_the_form_not_a_dead_row(browser, server: Server) -> None:
    with dashboard(browser, server) as page:
        page.get_by_role("button", name="New session").click()
        form = page.locator("#new-session")
        form.locator("select[name=agent]").select_option("")
        form.locator("input[name=command]").fill("no-such-program-here --flag")
        form.get_by_role("button", name="Start").click()
        status = form.locator(".form-status")
        expect(status).to_have_text(re.compile(r"^Failed: .*could not start .*exit code 127\."))
        expect(status).to_be_in_viewport()
        expect(page.locator("#queue .row")).to_have_count(0)
        assert server.sessions() == []

        form.locator("input[name=command]").fill("bash -c 'exec sleep 600'")
        form.locator("input[name=name]").fill("fine")
        form.get_by_role("button", name="Start").click()
        expect(status).to_have_text(re.compile(r"^Started fine"))
        expect(page.locator("#queue .row")).to_have_count(1)
        assert form.evaluate("f => f.contains(document.activeElement)")  # the form keeps the keyboard


def test_run_again_starts_the_same_command_in_the_same_folder(browser, server: Server, tmp_path: Path) -> None:
    sid = server.create(
        ["bash", "-c", "echo ran-in-$PWD; exit 3"], name="once", cwd=str(tmp_path), env={"PW_MARK": "m1"}
    )["id"]
    wait_state(server, sid, "exited")
    with dashboard(browser, server) as page:
        row(page, sid).locator(".row-open").click()
        detail = page.locator("#detail .card")
        expect(detail).to_have_attribute("data-id", sid)
        again = detail.get_by_role("button", name="Run again")
        expect(again).to_be_visible()
        again.click()
        expect(detail.locator(".result")).to_contain_text("Started again as once")
        expect(page.locator("#queue .row")).to_have_count(2)
        made = [s for s in server.sessions() if s["id"] != sid]
        assert len(made) == 1
        old = state_of(server, sid)
        assert made[0]["command"] == old["command"] and made[0]["cwd"] == str(tmp_path)
        assert made[0]["name"] == "once"
        if "spec" not in old:  # the server does not say a session's environment yet
            expect(detail.locator(".result")).to_contain_text("does not say its environment")


def test_rename_from_the_terminal_view(browser, server: Server, tmp_path: Path) -> None:
    sid = server.create(fleet_agent(tmp_path / "r.keys", "idle"), name="old-name")["id"]
    with server.client() as c:
        supported = c.patch(f"/api/sessions/{sid}", json={"name": "old-name"}).status_code not in (404, 405)
    with dashboard(browser, server) as page:
        row(page, sid).locator(".row-open").click()
        detail = page.locator("#detail .card")
        detail.get_by_role("button", name="Rename old-name").click()
        field = detail.get_by_label("New name")
        expect(field).to_be_focused()
        field.fill("new-name")
        page.keyboard.press("Enter")
        if not supported:
            expect(detail.locator(".result")).to_have_text(
                "This server cannot rename sessions (no PATCH /api/sessions/{id})."
            )
            pytest.skip("the server has no PATCH /api/sessions/{id} yet: the page says so")
        expect(row(page, sid).locator(".row-name")).to_have_text("new-name")
        assert state_of(server, sid)["name"] == "new-name"


#: Resumes with a program that is not there: the server offers Resume, and it fails.
BROKEN_RESUME = """
agent = "broken-resume"
version = "1"
description = "test stand-in: reports its conversation id; its program goes before the resume"
extends = "claude"
resume = ["no-such-agent-binary-pw", "--resume", "{agent_session_id}"]
"""


def broken_resume_manifest(agent: Path) -> str:
    """The stand-in's manifest for the agent program ``agent``: a resume in the older form
    resumes only a launch of the agent's own program (a ``bash -c`` cannot keep its launch)."""
    return BROKEN_RESUME + f"processes = [{json.dumps(agent.name)}]\ncommand = [{json.dumps(str(agent))}]\n"


def reporting_script(folder: Path) -> Path:
    """:func:`reporting_agent` as a program of its own."""
    script = folder / "reporting-agent-pw"
    script.write_text("#!/bin/bash\n" + reporting_agent()[2] + "\n")
    script.chmod(0o755)
    return script


def reporting_agent() -> list[str]:
    """Reports its conversation id over the pane's report socket (as Claude's hooks do)."""
    return [
        "bash",
        "-c",
        'curl -sS -m 5 -o /dev/null -X POST --unix-socket "$PANEWATCH_REPORT_SOCKET" '
        "-H 'Content-Type: application/json' "
        '--data-binary \'{"state": "idle", "session_id": "conv-27"}\' '
        '"http://panewatch/report?session=$PANEWATCH_SESSION"; '
        "printf 'first conversation\\r\\n'; exec sleep 600",
    ]


def test_a_failed_resume_is_said_once_and_not_offered_again(browser, tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    if LAB_MANIFESTS is not None:
        for each in LAB_MANIFESTS.glob("*.toml"):
            (manifests / each.name).write_text(each.read_text())
    agent = reporting_script(tmp_path)
    (manifests / "broken-resume.toml").write_text(broken_resume_manifest(agent))
    srv = Server("resume-" + secrets.token_urlsafe(12), log_dir=tmp_path / "logs", manifests=manifests)
    srv.state_dir = tmp_path / "state"
    srv.start()
    try:
        sid = srv.create([str(agent)], name="broken", agent="broken-resume")["id"]
        wait_for(lambda: state_of(srv, sid)["source"] == "hook", "the agent's report")
        ref = state_of(srv, sid)["ref"]
        subprocess.run(["tmux", "-S", str(srv.state_dir / "tmux.sock"), "kill-pane", "-t", ref], check=True)
        wait_state(srv, sid, "lost")
        offer = state_of(srv, sid)["resume"]
        assert offer["possible"] is True, offer
        agent.unlink()  # the agent's program is gone: a resume must fail, and say why once
        with dashboard(browser, srv) as page:
            detail = page.locator("#detail .card")
            expect(detail).to_have_attribute("data-id", sid)
            resume = detail.get_by_role("button", name="Resume")
            expect(resume).to_be_visible()
            resume.click()
            note = detail.locator(".lost-note")
            expect(note).to_have_text(re.compile(rf"^Could not resume: cannot start '{re.escape(str(agent))}'"))
            expect(resume).to_be_hidden()  # the cause stands: no second offer
            text = detail.inner_text().lower()
            assert text.count("could not resume") == 1, text
            assert state_of(srv, sid)["resume"]["possible"] is True  # the server still offers it
    finally:
        srv.close()


def test_logout_revokes_the_login(browser, server: Server) -> None:
    context, page, errors = open_dashboard(browser, server, viewport=DESKTOP, network_down=True)
    try:
        page.get_by_role("button", name="Log out").click()
        expect(page.locator("#banner")).to_contain_text("Logged out")
        expect(page.locator("#connection")).to_have_attribute("data-status", "auth")
        assert page.request.get(f"{server.url}/api/sessions").status in (401, 403)
        assert errors == []
    finally:
        context.close()


# --- accessibility -----------------------------------------------------------------------------------


def axe_violations(page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is (axe is vendored for the
    tests only: the page never loads it)."""
    page.add_script_tag(url="/static/vendor/axe-core/axe.min.js")
    found = page.evaluate("""async () => {
        const r = await axe.run(document, { resultTypes: ['violations'] });
        return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => ({ id: v.id, impact: v.impact, help: v.help,
                         nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ')) }));
    }""")
    return found


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_axe_finds_no_serious_violation_in_list_and_terminal_views(
    browser, server: Server, fleet: Fleet, width: str
) -> None:
    assert AXE.is_file(), "axe-core is vendored under web/vendor/axe-core"
    options = {} if width == "desktop" else PHONE_OPTIONS
    with dashboard(browser, server, **options) as page:
        all_rows_shown(page, fleet)
        if width == "desktop":
            expect(page.locator("#detail .xterm")).to_have_count(1)  # list and terminal, side by side
            assert axe_violations(page) == []
            page.keyboard.press("o")  # the list alone
            expect(page.locator("#detail")).to_be_hidden()
            assert axe_violations(page) == []
        else:
            assert axe_violations(page) == []  # the list
            row(page, fleet.blocked[0]).locator(".row-open").tap()
            expect(page.locator("#detail .xterm")).to_have_count(1)  # the terminal view
            assert axe_violations(page) == []
