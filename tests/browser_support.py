"""The browser side of the dashboard's tests: Debian's Chromium through Playwright, and a page
opened on a server's dashboard that records its console errors.

One copy for every browser test module; ``conftest.py`` builds the ``browser`` and ``page``
fixtures from it (a module defines its own ``server``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dashboard_support import CHROMIUM, CHROMIUM_ARGS, Server, console_errors


def playwright_or_skip(timeout_ms: int = 10_000) -> ModuleType:
    """Playwright's sync API for a browser test module, its ``expect`` waiting ``timeout_ms``;
    called at import, it skips the whole module (saying what is missing) without Chromium or
    Playwright."""
    if not Path(CHROMIUM).is_file():
        pytest.skip(
            f"the dashboard tests need Debian's Chromium at {CHROMIUM} (apt-get install chromium)",
            allow_module_level=True,
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="the dashboard tests need playwright")
    sync_api.expect.set_options(timeout=timeout_ms)
    return sync_api


@contextmanager
def dashboard_server(name: str, log_dir: Path, extra: list[str] | None = None) -> Iterator[Server]:
    """``panewatch serve`` for a module's browser tests, with a token of its own (``name-…``) and
    ``extra`` flags; closed for good (its tmux server too) on the way out."""
    srv = Server(f"{name}-{secrets.token_urlsafe(12)}", log_dir=log_dir, extra=extra)
    srv.start(timeout=60.0)  # (a wait for /healthz, not a sleep: start-up takes 20 s on a loaded machine)
    try:
        yield srv
    finally:
        srv.close()


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, closed on the way out."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# A Notification API the test can read: records what the page shows, grants on request.
NOTIFICATION_STUB = """
window.__notes = [];
class RecordingNotification {
  static permission = "default";
  static async requestPermission() { RecordingNotification.permission = "granted"; return "granted"; }
  constructor(title, options) { window.__notes.push({ title, body: options && options.body }); }
  close() {}
}
window.Notification = RecordingNotification;
"""


def open_dashboard(
    browser: Any, server: Server, *, network_down: bool = False, layout: str | None = None, **context_options: Any
):
    """A new browser context on ``server``'s dashboard, logged in and live: (context, page, the
    list its console errors go to). ``layout``: "cards" for the cards layout (the page opens on
    the attention queue), remembered by the page as a user's choice is."""
    from playwright.sync_api import expect

    context = browser.new_context(**{"viewport": {"width": 1280, "height": 900}, **context_options})
    context.add_init_script(NOTIFICATION_STUB)
    if layout is not None:
        context.add_init_script(f"localStorage.setItem('panewatch.layout', {json.dumps(layout)});")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", console_errors(errors, network_down=network_down))
    response = page.goto(f"{server.url}/?token={server.token}")
    assert response is not None and response.status == 200
    expect(page.locator("#connection")).to_have_attribute("data-status", "live")
    return context, page, errors


def card_of(page: Any, sid: str) -> Any:
    return page.locator(f'#cards > .card[data-id="{sid}"]')


def pair_page(browser: Any, server: Server, user: str, role: str, name: str):
    """A browser context paired (by the page's form) as a device of ``user`` (made with ``role``
    if new): (context, page, the list its page errors go to)."""
    from playwright.sync_api import expect

    with server.client() as api:
        made = api.post("/api/devices/pair", json={"user": user, "role": role}).json()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(made["url"])
    page.get_by_label("Name this device").fill(name)
    page.get_by_role("button", name="Pair").click()
    expect(page.locator("#connection")).to_have_attribute("data-status", "live")
    return context, page, errors
