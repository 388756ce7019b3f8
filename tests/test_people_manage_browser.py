"""Managing people on the page (Debian's Chromium, a real server): an owner restricts a session
to a user from the People view, by keyboard, and another user's page (a device paired as that
user) loses it at once and gets it back when the restriction is lifted; an owner removes a user
after confirming, and that user's device is refused from then on; an owner's own removal is
refused with the server's reason; the ledger's Person filter shows one person's rows, every
device of theirs, and the Actor field one device's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from browser_support import dashboard_server, open_dashboard, pair_page, playwright_or_skip
from dashboard_support import Server, idle_agent

pytestmark = pytest.mark.browser

expect = playwright_or_skip(timeout_ms=15_000).expect


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("people-manage", tmp_path_factory.mktemp("server-logs")) as srv:
        yield srv


def tab_to(page: Any, target: Any, most: int = 12) -> None:
    """Press Tab until ``target`` has the focus (it is reachable by keyboard), at most ``most`` times."""
    for _ in range(most):
        if target.evaluate("el => el === document.activeElement"):
            return
        page.keyboard.press("Tab")
    expect(target).to_be_focused()


def paired_token(server: Server, user: str, role: str, name: str) -> tuple[str, dict[str, str]]:
    """A device of ``user`` paired by a script: its id and its bearer header."""
    with server.client() as api:
        code = api.post("/api/devices/pair", json={"user": user, "role": role}).json()["code"]
    made = httpx.post(f"{server.url}/pair", json={"code": code, "name": name}, timeout=10.0).json()
    return made["device"]["id"], {"Authorization": f"Bearer {made['token']}"}


def test_an_owner_restricts_a_session_and_another_users_page_loses_it_until_lifted(browser, server: Server) -> None:
    alpha = server.create(idle_agent("ALPHA"), name="alpha", agent=None)["id"]
    beta = server.create(idle_agent("BETA"), name="beta", agent=None)["id"]
    amy_context, amy_page, amy_errors = pair_page(browser, server, "amy", "operator", "amy's laptop")
    bob_context, bob_page, bob_errors = pair_page(browser, server, "bob", "viewer", "bob's phone")
    context, page, errors = open_dashboard(browser, server)
    try:
        expect(bob_page.locator(f'.row[data-id="{beta}"]')).to_be_visible()
        page.locator("#people-toggle").focus()
        page.keyboard.press("Enter")
        view = page.locator("#people")
        expect(view).to_be_visible()
        row = view.locator(f'.access[data-session="{beta}"]')
        expect(row.locator(".access-who")).to_have_text("everyone")
        tab_to(page, row.locator(".access-toggle"), most=40)
        page.keyboard.press("Enter")
        expect(row.locator(".access-toggle")).to_have_attribute("aria-expanded", "true")
        expect(row.locator("input[type=checkbox]").first).to_be_focused()
        amy = row.get_by_label("amy (operator)")
        tab_to(page, amy)
        page.keyboard.press("Space")
        expect(amy).to_be_checked()
        tab_to(page, row.locator(".access-save"))
        page.keyboard.press("Enter")
        expect(row.locator(".access-who")).to_have_text("only amy")
        expect(row.locator(".access-toggle")).to_be_focused()  # the new row keeps the keyboard's place
        expect(view.locator(".people-status")).to_have_text("beta is seen only by amy (and owners).")
        assert server.client().get(f"/api/sessions/{beta}/users").json()["users"] == ["amy"]

        expect(bob_page.locator(f'.row[data-id="{beta}"]')).to_have_count(0)  # live: no reload
        expect(bob_page.locator(f'.row[data-id="{alpha}"]')).to_be_visible()
        expect(amy_page.locator(f'.row[data-id="{beta}"]')).to_be_visible()
        # an operator manages no people: no People view, no person picker in its ledger
        expect(amy_page.locator("#people-toggle")).to_be_hidden()
        amy_page.locator("#ledger-toggle").click()
        expect(amy_page.locator("#ledger")).to_be_visible()
        expect(amy_page.locator("#ledger select[name=user]")).to_be_hidden()
        expect(amy_page.locator("#ledger input[name=actor]")).to_be_visible()
        amy_page.keyboard.press("Escape")
        amy_page.locator(f'.row[data-id="{alpha}"] .row-open').click()
        amy_card = amy_page.locator(f'#detail .card[data-id="{alpha}"]')
        expect(amy_card.locator(".ledger-open")).to_be_visible()
        expect(amy_card.locator(".access-card")).to_be_hidden()  # drawn for owners only
        bob_page.reload()  # and it stays gone after one
        expect(bob_page.locator("#connection")).to_have_attribute("data-status", "live")
        expect(bob_page.locator(f'.row[data-id="{alpha}"]')).to_be_visible()
        expect(bob_page.locator(f'.row[data-id="{beta}"]')).to_have_count(0)

        page.keyboard.press("Escape")  # no trap: Esc leaves the view, back where the owner was
        expect(view).to_be_hidden()
        expect(page.locator("#people-toggle")).to_be_focused()

        # the session's own card leads there too: its choice of users opened, the keyboard in it
        page.locator(f'.row[data-id="{beta}"] .row-open').click()
        card = page.locator(f'#detail .card[data-id="{beta}"]')
        card.locator(".access-card").click()
        expect(view).to_be_visible()
        expect(row.locator(".access-toggle")).to_have_attribute("aria-expanded", "true")
        expect(row.get_by_label("amy (operator)")).to_be_checked()
        expect(row.locator("input[type=checkbox]").first).to_be_focused()
        tab_to(page, row.locator(".access-open"))
        page.keyboard.press("Enter")
        expect(row.locator(".access-who")).to_have_text("everyone")
        expect(bob_page.locator(f'.row[data-id="{beta}"]')).to_be_visible()
        assert server.client().get(f"/api/sessions/{beta}/users").json()["users"] == []
        page.keyboard.press("Escape")
        expect(view).to_be_hidden()
        expect(card.locator(".access-card")).to_be_focused()
    finally:
        context.close()
        amy_context.close()
        bob_context.close()
        server.delete_all()
    assert errors == amy_errors == bob_errors == [], (errors, amy_errors, bob_errors)


def test_an_owner_removes_a_user_after_confirming_and_its_device_is_refused(browser, server: Server) -> None:
    carl_context, carl_page, _ = pair_page(browser, server, "carl", "viewer", "carl's tablet")
    context, page, errors = open_dashboard(browser, server)
    try:
        assert carl_context.request.get(f"{server.url}/api/sessions").status == 200
        page.locator("#people-toggle").click()
        view = page.locator("#people")
        carl = view.locator('.person[data-user="carl"]')
        carl.locator(".remove-user").focus()
        page.keyboard.press("Enter")
        confirm = carl.locator(".person-confirm")
        expect(confirm).to_contain_text("Remove carl? Its device is revoked at once.")
        expect(confirm.locator(".confirm-yes")).to_be_focused()
        page.keyboard.press("Tab")
        expect(confirm.locator(".confirm-no")).to_be_focused()
        page.keyboard.press("Enter")  # cancelled: nothing removed, the keyboard back on Remove
        expect(confirm).to_be_hidden()
        expect(carl.locator(".remove-user")).to_be_focused()
        assert carl_context.request.get(f"{server.url}/api/sessions").status == 200

        page.keyboard.press("Enter")
        page.keyboard.press("Enter")  # the confirmation's "Remove carl" has the focus
        expect(view.locator(".people-status")).to_have_text("Removed carl; revoked 1 devices.")
        expect(carl).to_have_count(0)
        assert "carl" not in {u["name"] for u in server.client().get("/api/users").json()["users"]}
        assert carl_context.request.get(f"{server.url}/api/sessions").status in (401, 403)
        expect(carl_page.locator("#connection")).not_to_have_attribute("data-status", "live")
    finally:
        context.close()
        carl_context.close()
    assert errors == [], errors


def test_an_owners_own_removal_is_refused_with_the_servers_reason(browser, server: Server) -> None:
    context, page, errors = pair_page(browser, server, "olga", "owner", "olga's laptop")
    try:
        expect(page.locator("body")).to_have_attribute("data-role", "owner")
        page.locator("#people-toggle").click()
        olga = page.locator('#people .person[data-user="olga"]')
        expect(olga).to_contain_text("olga (you)")
        olga.locator(".remove-user").click()
        olga.locator(".confirm-yes").click()
        expect(page.locator("#people .people-status")).to_have_text(
            "olga not removed: olga is you: removing it would revoke this device; another owner or the API token can"
        )
        expect(page.locator('#people .person[data-user="olga"] .remove-user')).to_be_focused()
        expect(page.locator("#connection")).to_have_attribute("data-status", "live")
        assert context.request.get(f"{server.url}/api/me").json()["user"] == "olga"
    finally:
        context.close()
    assert errors == [], errors


def test_a_role_changed_while_the_page_is_open_changes_its_controls_without_a_reload(browser, server: Server) -> None:
    context, page, errors = pair_page(browser, server, "vera", "viewer", "vera's tablet")
    try:
        expect(page.locator("body")).to_have_attribute("data-role", "viewer")
        with server.client() as api:
            assert api.patch("/api/users/vera", json={"role": "operator"}).status_code == 200
        expect(page.locator("body")).to_have_attribute("data-role", "operator")
        with server.client() as api:
            assert api.patch("/api/users/vera", json={"role": "viewer"}).status_code == 200
        expect(page.locator("body")).to_have_attribute("data-role", "viewer")
        expect(page.locator("#connection")).to_have_attribute("data-status", "live")
    finally:
        context.close()
    assert errors == [], errors


def test_an_owner_reads_one_persons_ledger_rows_or_one_devices(browser, server: Server) -> None:
    pixel, on_pixel = paired_token(server, "dana", "operator", "pixel")
    _, on_laptop = paired_token(server, "dana", "operator", "laptop")
    _, on_phone = paired_token(server, "erin", "operator", "phone")
    made = {}
    for label, headers in (("by-pixel", on_pixel), ("by-laptop", on_laptop), ("by-phone", on_phone)):
        with server.client() as api:
            r = api.post("/api/sessions", json={"command": idle_agent(label), "name": label}, headers=headers)
            assert r.status_code == 201, r.text
            made[label] = r.json()["id"]
    context, page, errors = open_dashboard(browser, server)
    try:
        page.locator("#ledger-toggle").click()
        view = page.locator("#ledger")
        expect(view).to_be_visible()
        expect(view.locator(".ledger-status")).to_contain_text("decisions")  # every row, first
        view.get_by_label("Person").select_option("dana")
        rows = view.locator(".ledger-row")
        expect(rows).to_have_count(2)  # both of dana's devices, not erin's
        expect(rows.filter(has_text="device pixel of dana")).to_contain_text(made["by-pixel"])
        expect(rows.filter(has_text="device laptop of dana")).to_contain_text(made["by-laptop"])
        view.get_by_label("Person").select_option("")
        expect(rows).not_to_have_count(2)  # everyone's again
        view.get_by_label("Actor").fill(pixel)  # one device, by its id
        view.get_by_role("button", name="Show").click()
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("device pixel of dana")
        view.get_by_label("Actor").fill("erin")  # a person's name in the Actor field
        view.get_by_role("button", name="Show").click()
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text(made["by-phone"])
    finally:
        context.close()
        server.delete_all()
    assert errors == [], errors


def test_the_ledger_opened_before_the_page_knows_its_role_still_offers_the_people(browser, server: Server) -> None:
    paired_token(server, "fay", "operator", "fay's phone")
    context, page, errors = open_dashboard(browser, server)
    held: list[Any] = []
    try:
        page.route("**/api/me", lambda route: held.append(route))  # the page's question about its role, kept waiting
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-status", "live")
        assert len(held) == 1 and page.locator("body").get_attribute("data-role") is None
        page.locator("#ledger-toggle").click()  # opened while the page does not know it is an owner's
        expect(page.locator("#ledger")).to_be_visible()
        held[0].continue_()
        expect(page.locator("body")).to_have_attribute("data-role", "owner")
        expect(page.locator("#ledger").get_by_label("Person").locator("option", has_text="fay")).to_have_count(1)
    finally:
        context.close()
    assert errors == [], errors
