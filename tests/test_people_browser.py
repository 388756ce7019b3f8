"""People and roles on the page (Debian's Chromium, a real server): an owner's People view lists
the users with their devices and roles and changes a role in place; a viewer's page (a device
paired for a viewer) shows what is asked but no answer buttons, send box or session tools, and
none of the owner's tools."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from browser_support import dashboard_server, open_dashboard, pair_page, playwright_or_skip
from dashboard_support import Server
from scripted import claude_like

pytestmark = pytest.mark.browser

expect = playwright_or_skip(timeout_ms=15_000).expect


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("people", tmp_path_factory.mktemp("server-logs")) as srv:
        yield srv


def wait_state(server: Server, sid: str, state: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while (now := server.client().get(f"/api/sessions/{sid}").json()["state"]) != state:
        assert time.monotonic() < deadline, f"{sid} stayed {now}, wanted {state}"
        time.sleep(0.1)


def test_an_owner_sees_people_and_changes_a_role_in_place(browser, server: Server) -> None:
    viewer_context, _, _ = pair_page(browser, server, "vera", "viewer", "vera's phone")
    context, page, errors = open_dashboard(browser, server)
    try:
        expect(page.locator("body")).to_have_attribute("data-role", "owner")
        page.locator("#people-toggle").click()
        view = page.locator("#people")
        expect(view).to_be_visible()
        vera = view.locator('.person[data-user="vera"]')
        expect(vera).to_contain_text("vera's phone")
        expect(vera.locator("select.role")).to_have_value("viewer")
        vera.locator("select.role").select_option("operator")
        expect(view.locator(".people-status")).to_have_text("vera is operator now.")
        users = {u["name"]: u["role"] for u in server.client().get("/api/users").json()["users"]}
        assert users["vera"] == "operator"
        view.locator("input[name=name]").fill("sam")
        view.locator(".people-add button").click()
        expect(view.locator('.person[data-user="sam"] select.role')).to_have_value("viewer")
    finally:
        context.close()
        viewer_context.close()
    assert errors == [], errors


def test_a_viewer_sees_what_is_asked_but_no_answer_buttons_or_tools(browser, server: Server) -> None:
    sid = server.create(["bash", "--norc", "--noprofile", "-c", claude_like(work=30)], name="asked")["id"]
    wait_state(server, sid, "blocked")
    context, page, errors = pair_page(browser, server, "val", "viewer", "val's tablet")
    try:
        expect(page.locator("body")).to_have_attribute("data-role", "viewer")
        row = page.locator(f'.row[data-id="{sid}"]')
        expect(row.locator(".row-ask")).to_contain_text("Do you want to proceed?")  # it sees what is asked
        expect(row.locator(".row-options button").first).to_be_attached()  # drawn, and not offered:
        expect(row.locator(".row-options")).to_be_hidden()
        row.locator(".row-open").click()
        card = page.locator(f'#detail .card[data-id="{sid}"]')
        expect(card.locator(".screen")).to_contain_text("Do you want to proceed?")  # it watches the terminal
        for hidden in (".options", "form.send", "form.keys", ".card-tools .delete", ".card-tools .rename"):
            expect(card.locator(hidden)).to_be_hidden()
        for tool in ("#new-toggle", "#people-toggle", "#pair-device", "#devices-toggle"):
            expect(page.locator(tool)).to_be_hidden()
        card.locator(".screen").click()  # typing into the terminal sends nothing: the pane still asks
        page.keyboard.press("1")
        time.sleep(1.0)  # (nothing should happen: there is no event to wait for)
        assert server.client().get(f"/api/sessions/{sid}").json()["state"] == "blocked"
        expect(page.locator("#connection")).to_have_attribute("data-status", "live")
    finally:
        context.close()
        server.delete_all()
    assert errors == [], errors
