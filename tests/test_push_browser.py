"""Acceptance in Debian's Chromium with the real service worker and a real ``panewatch serve``.

Chromium's own push service is out of reach offline, so the server pushes to a loopback
stand-in (the wire format is checked in test_push_delivery) and the decrypted payload is handed
to the service worker through the DevTools protocol (``ServiceWorker.deliverPushMessage``), as
Chromium's push service would. The notification it shows, its receipt, an answer from its
action (the worker's own click handler, run in the worker), a stale prompt id refused with the
newer prompt untouched; then a second browser paired by code answers, is revoked, and its
socket closes at once and its next request is 401.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from browser_support import card_of, dashboard_server, open_dashboard, playwright_or_skip
from dashboard_support import RULE, Server, _bash, _printf, prompt_agent
from panewatch_lab.loopback import Loopback
from push_support import BrowserKeys, PushService

pytestmark = pytest.mark.browser

expect = playwright_or_skip().expect


@pytest.fixture(scope="module")
def stand_in() -> Iterator[tuple[Loopback, PushService]]:
    service = PushService()
    loopback = Loopback().start(service.app(), lifespan="off")
    try:
        yield loopback, service
    finally:
        loopback.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("push", tmp_path_factory.mktemp("server-logs"), ["--push-allow-loopback"]) as srv:
        yield srv


def two_prompts() -> list[str]:
    """Claude-like: a two-option permission prompt read as one key, a second of work, then a
    second prompt of the same kind (a new prompt id), which says what it got."""

    def dialog(command: str) -> str:
        return _printf(
            f"{RULE}\n Bash command\n   {command}\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n Esc to cancel\n"
        )

    return _bash(
        "stty -echo",
        "sleep 0.2",
        dialog("make first"),
        "read -rsn1 key",
        "printf '\\x1b[2J\\x1b[H'",
        'printf " first answered %s\\r\\n" "$key"',
        _printf("✻ Working… (esc to interrupt)\n"),
        "sleep 1.5",
        "printf '\\x1b[2J\\x1b[H'",
        dialog("make second"),
        "read -rsn1 key",
        'printf "\\r\\n second answered %s\\r\\n" "$key"',
        "exec sleep 600",
    )


def wait_until(what: str, check: Any, page: Any, timeout: float = 20.0) -> Any:
    """Poll ``check()`` until it returns something truthy (bounded): for state outside the page.
    Waits through ``page`` so that Playwright keeps dispatching events (CDP's) meanwhile."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        page.wait_for_timeout(50)
    return found


NOTIFICATIONS = """async () => {
  const registration = await navigator.serviceWorker.ready;
  return (await registration.getNotifications()).map((n) => ({
    title: n.title, body: n.body, tag: n.tag, actions: n.actions.map((a) => a.title), data: n.data }));
}"""

# the worker's own click handler, on the notification it showed for this push (found by its tag)
CLICK = """async ([tag, action]) => {
  const [shown] = await self.registration.getNotifications({ tag });
  return handleClick(shown, action);
}"""


def deliver(cdp: Any, origin: str, registration: str, payload: dict[str, Any]) -> None:
    cdp.send(
        "ServiceWorker.deliverPushMessage",
        {"origin": origin, "registrationId": registration, "data": json.dumps(payload)},
    )


def test_a_push_shows_its_prompt_takes_an_answer_and_refuses_a_stale_one(browser, server, stand_in) -> None:
    loopback, service = stand_in
    # the cards layout: these tests answer on a card (the page opens on the attention queue)
    context, page, errors = open_dashboard(browser, server, layout="cards", permissions=["notifications"])
    try:
        assert page.evaluate("navigator.serviceWorker.ready.then((r) => r.active.scriptURL)").endswith("/sw.js")
        worker = context.service_workers[0] if context.service_workers else context.wait_for_event("serviceworker")
        registrations: list[str] = []
        cdp = context.new_cdp_session(page)
        cdp.on(
            "ServiceWorker.workerRegistrationUpdated",
            lambda e: registrations.extend(r["registrationId"] for r in e["registrations"] if not r["isDeleted"]),
        )
        cdp.send("ServiceWorker.enable")
        registration = wait_until("the worker's registration", lambda: registrations and registrations[0], page)

        keys = BrowserKeys()
        with server.client() as api:
            r = api.post(
                "/api/push/subscriptions", json={**keys.subscription(f"{loopback.url}/push/pixel"), "name": "pixel"}
            )
            assert r.status_code == 201, r.text
            sid = server.create(two_prompts(), name="asker")["id"]
            card = card_of(page, sid)
            expect(card.locator(".badge-state")).to_have_text("blocked")
            pushes = [p for p in service.wait_for(1, timeout=20) if p.path == "/push/pixel"]
            first = keys.decrypt(wait_until("the push", lambda: pushes, page)[0].body)
            assert (
                first["session"] == sid
                and first["prompt_id"] == api.get(f"/api/sessions/{sid}/screen").json()["prompt"]["id"]
            )

            deliver(cdp, server.url, registration, first)
            shown = wait_until("the notification", lambda: page.evaluate(NOTIFICATIONS), page)
            (note,) = shown
            assert note["title"] == "asker needs you" and first["request"]["question"] in note["body"]
            assert note["actions"] == ["Yes", "No"] and note["tag"] == f"panewatch:{first['prompt_id']}"
            device = wait_until(
                "the receipt",
                lambda: [d for d in api.get("/api/push/subscriptions").json()["devices"] if d["last_receipt"]],
                page,
            )[0]
            assert device["without_receipt"] == 0 and device["receiving"] is True

            # the user taps "Yes" on the notification: the worker answers that prompt, with its id
            assert worker.evaluate(CLICK, [note["tag"], "0"]) == "took"
            expect(card.locator(".screen")).to_contain_text("first answered 1")
            follow = wait_until(
                "the follow-up",
                lambda: [n for n in page.evaluate(NOTIFICATIONS) if n["tag"].startswith("panewatch:answer:")],
                page,
            )
            assert follow[0]["body"] == "Answered: asker took it"

            # the next prompt: a new prompt id; the old notification comes back (a stale copy)
            expect(card.locator(".screen")).to_contain_text("make second")
            expect(card.locator(".badge-state")).to_have_text("blocked")
            second = api.get(f"/api/sessions/{sid}/screen").json()["prompt"]["id"]
            assert second != first["prompt_id"]
            deliver(cdp, server.url, registration, first)
            wait_until(
                "the stale notification",
                lambda: [n for n in page.evaluate(NOTIFICATIONS) if n["tag"] == note["tag"]],
                page,
            )
            assert worker.evaluate(CLICK, [note["tag"], "1"]) == "gone"
            gone = wait_until(
                "the follow-up",
                lambda: [
                    n for n in page.evaluate(NOTIFICATIONS) if n["body"].startswith("Not sent: this prompt is gone")
                ],
                page,
            )
            assert gone
            screen = api.get(f"/api/sessions/{sid}/screen").json()
            assert screen["state"] == "blocked" and screen["prompt"]["id"] == second  # the newer prompt, untouched
            assert not any("second answered" in row for row in screen["rows"])
    finally:
        context.close()
        server.delete_all()
    assert errors == [], errors


def test_a_device_paired_by_code_answers_and_is_cut_off_at_once_when_revoked(browser, server) -> None:
    with server.client() as api:
        made = api.post("/api/devices/pair").json()
        phone = browser.new_context(viewport={"width": 390, "height": 800})
        phone.add_init_script("localStorage.setItem('panewatch.layout', 'cards');")  # it answers on a card
        try:
            page = phone.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(made["url"])
            page.get_by_label("Name this device").fill("phone in the hall")
            page.get_by_role("button", name="Pair").click()
            expect(page.locator("#connection")).to_have_attribute("data-status", "live")
            (device,) = [d for d in api.get("/api/devices").json()["devices"] if d["name"] == "phone in the hall"]
            assert device["sockets"] >= 1

            sid = server.create(prompt_agent(work=30), name="asked")["id"]
            card = card_of(page, sid)
            expect(card.locator(".badge-state")).to_have_text("blocked")
            card.locator(".options button").filter(has_text="1. Yes").click()
            card.get_by_role("button", name="Confirm").click()
            expect(card.locator(".screen")).to_contain_text("answered 1")

            start = time.monotonic()
            assert api.delete(f"/api/devices/{device['id']}").json() == {"revoked": device["id"]}
            expect(page.locator("#connection")).to_have_attribute("data-status", "auth")
            print(
                f"revoked -> the phone's socket closed and the page says so: {(time.monotonic() - start) * 1000:.0f} ms"
            )
            r = page.request.get(f"{server.url}/api/sessions")
            assert r.status == 401 and "revoked" in r.json()["detail"]
            assert next(d for d in api.get("/api/devices").json()["devices"] if d["id"] == device["id"])["revoked"]
        finally:
            phone.close()
            server.delete_all()
    assert errors == [], errors


def test_the_app_is_installable_and_its_worker_caches_the_shell_only(browser, server) -> None:
    context, page, errors = open_dashboard(browser, server)
    try:
        manifest = page.request.get(f"{server.url}/manifest.webmanifest")
        assert manifest.headers["content-type"].startswith("application/manifest+json")
        data = manifest.json()
        assert data["display"] == "standalone" and data["start_url"] == "/"
        assert {i["sizes"] for i in data["icons"]} >= {"192x192", "512x512"}
        for icon in data["icons"]:
            assert page.request.get(f"{server.url}{icon['src']}").status == 200
        page.evaluate("navigator.serviceWorker.ready")
        page.reload()  # now controlled by the worker
        expect(page.locator("#connection")).to_have_attribute("data-status", "live")
        cached = page.evaluate(
            """async () => {
              const keys = [];
              for (const name of await caches.keys()) {
                for (const request of await (await caches.open(name)).keys()) keys.push(new URL(request.url).pathname);
              }
              return keys;
            }"""
        )
        assert "/" in cached and "/manifest.webmanifest" in cached
        assert not [k for k in cached if k.startswith(("/api/", "/ws/"))], cached  # live data never cached
        with httpx.Client(base_url=server.url) as plain:
            assert plain.get("/sw.js").headers["service-worker-allowed"] == "/"
    finally:
        context.close()
    assert errors == [], errors


def test_a_device_whose_pushes_get_no_receipt_is_shown_not_receiving(page, server, stand_in) -> None:
    loopback, _ = stand_in
    with server.client() as api:
        for old in api.get("/api/push/subscriptions").json()["subscriptions"]:  # another test's
            api.delete(f"/api/push/subscriptions/{old['id']}")
        sub = api.post(
            "/api/push/subscriptions",
            json={**BrowserKeys().subscription(f"{loopback.url}/push/silent"), "name": "silent"},
        ).json()
        for _ in range(3):  # accepted by the push service, never shown: no receipt comes back
            steps = api.post("/api/push/test", json={"subscription": sub["id"], "wait_s": 0.1}).json()["steps"]
            assert [s["ok"] for s in steps] == [True, True, False]
        page.get_by_role("button", name="Devices").click()
        row = page.locator('.devices li[data-device="token"]')
        expect(row).to_contain_text("silent")
        expect(row).to_contain_text("3 without receipt")
        expect(row.locator(".not-receiving")).to_have_text("⚠ not receiving")
        expect(page.locator("#devices-toggle")).to_have_text("Devices ⚠")
        api.delete(f"/api/push/subscriptions/{sub['id']}")
