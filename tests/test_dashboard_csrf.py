"""Issue 25, item 5 in a real browser (Debian's Chromium) against a real ``panewatch serve``: a page
on another port of 127.0.0.1 — the same site, so the SameSite cookie goes along — submits plain
forms to ``/logout`` and ``…/resume``; both are refused, and the dashboard stays logged in. On
the login URL's own name (``panewatch.localhost``) the page's own requests pass, and the other
port's forms do not even carry the cookie.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from browser_support import card_of, dashboard_server, playwright_or_skip
from dashboard_support import Server, echo_agent, idle_agent

pytestmark = pytest.mark.browser

#: The cards layout: these tests read a session's card (the page opens on the attention queue).
CARDS = "localStorage.setItem('panewatch.layout', 'cards');"

expect = playwright_or_skip().expect


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("csrf", tmp_path_factory.mktemp("server-logs")) as srv:
        yield srv


@contextmanager
def other_port_page() -> Iterator[str]:
    """A web server on another port of 127.0.0.1 (what any local program may run): ``/?to=URL``
    is a page whose form posts to URL as soon as it loads. Yields its address."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            target = self.path.split("?to=", 1)[1] if "?to=" in self.path else "/"
            body = (
                f'<form method="POST" action="{html.escape(target)}"></form><script>document.forms[0].submit()</script>'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def submitted(page, other: str, target: str):
    """Open the other port's page that posts to ``target``; the answer to that POST."""
    with page.expect_response(lambda r: r.url == target and r.request.method == "POST") as info:
        page.goto(f"{other}/?to={target}")
    return info.value


def test_a_form_on_another_local_port_can_neither_log_out_nor_resume(browser, server: Server) -> None:
    sid = server.create(idle_agent("still logged in"), name="kept")["id"]
    context = browser.new_context()
    context.add_init_script(CARDS)
    try:
        page = context.new_page()
        assert page.goto(f"{server.url}/?token={server.token}").status == 200  # the cookie on 127.0.0.1
        expect(card_of(page, sid).locator(".screen")).to_contain_text("still logged in")
        with other_port_page() as other:
            for path in ("/logout", f"/api/sessions/{sid}/resume"):
                response = submitted(page, other, f"{server.url}{path}")
                assert response.status == 403, (path, response.text())
                assert response.request.header_value("origin") == other  # what Chromium said it was
                assert "cross-site request refused: a POST with the login cookie" in response.text()
        # the login still works: the dashboard opens with its card, the session as it was
        assert page.goto(f"{server.url}/").status == 200
        expect(card_of(page, sid).locator(".screen")).to_contain_text("still logged in")
        assert next(s for s in server.sessions() if s["id"] == sid)["state"] == "idle"
    finally:
        context.close()
        server.delete_all()


def test_on_the_login_urls_name_the_page_works_and_other_ports_get_no_cookie(browser, server: Server) -> None:
    name = f"http://panewatch.localhost:{server.port}"
    sid = server.create(echo_agent(), name="echo")["id"]
    context = browser.new_context()
    context.add_init_script(CARDS)
    try:
        page = context.new_page()
        assert page.goto(f"{name}/?token={server.token}").status == 200  # Chromium: *.localhost is loopback
        assert page.url == f"{name}/"
        card = card_of(page, sid)
        expect(card.locator(".badge-state")).to_have_text("idle")
        card.locator(".send-text").fill("from the page")  # the page's own POST, with its Origin
        card.get_by_role("button", name="Send").click()
        expect(card.locator(".screen")).to_contain_text("got:from the page")
        with other_port_page() as other:  # another site now: the Strict cookie stays home
            response = submitted(page, other, f"{name}/logout")
            assert response.status == 200 and response.json() == {"logged_out": False}
        assert page.goto(f"{name}/").status == 200
        expect(card_of(page, sid).locator(".badge-state")).to_have_text("idle")
    finally:
        context.close()
        server.delete_all()


def test_the_printed_login_url_is_on_panewatch_localhost(server: Server) -> None:
    assert server.serve is not None
    assert f"Open the dashboard: http://panewatch.localhost:{server.port}/?token=" in server.serve.output()
