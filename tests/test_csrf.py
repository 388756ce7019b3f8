"""Issue 25, item 5: what the login cookie may do depends on where the request comes from.

A plain ``<form method=POST>`` on another port of 127.0.0.1 is the same site as the dashboard, so
the SameSite cookie went along: it resumed a lost session and logged the dashboard out. Every
POST/PUT/PATCH/DELETE authenticated by the cookie now needs the service's own ``Origin`` (or
``Sec-Fetch-Site: same-origin``); bearer-token scripts are not asked. Over the ASGI transport: the headers are the point, not the
socket (test_dashboard_csrf.py sends the forms from a real browser to a real server).
"""

from __future__ import annotations

import httpx
import pytest

from live import TOKEN, Live, live_server
from panewatch.server import login_url

pytestmark = pytest.mark.integration


async def logged_in(live: Live) -> httpx.AsyncClient:
    """A client holding a dashboard login cookie, as a browser does after the login URL."""
    client = live.client()
    r = await client.get(f"/?token={TOKEN}", follow_redirects=False)
    assert r.status_code == 303 and "panewatch_login" in client.cookies
    return client


FOREIGN = [
    ({"Origin": "http://127.0.0.1:1"}, "Origin 'http://127.0.0.1:1'"),  # another port: the same site
    ({"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, "Origin 'http://evil.example'"),
    ({"Origin": "null"}, "Origin 'null'"),  # a sandboxed frame, a redirect across sites
    ({"Sec-Fetch-Site": "same-site"}, "no Origin header"),
    ({}, "no Origin header"),  # a script that found the cookie but not the token
]


@pytest.mark.parametrize("headers,said", FOREIGN, ids=["other-port", "cross-site", "null", "same-site", "none"])
async def test_a_foreign_post_with_the_cookie_is_refused_and_the_cookie_still_works(tmp_path, headers, said):
    async with live_server(state_dir=tmp_path / "state") as live:
        s = await live.create(command=["sleep", "30"], name="kept")
        browser = await logged_in(live)
        try:
            for method, path in (
                ("POST", "/logout"),
                ("POST", f"/api/sessions/{s['id']}/resume"),
                ("POST", f"/api/sessions/{s['id']}/send"),
                ("DELETE", f"/api/sessions/{s['id']}"),
                ("POST", "/api/sessions"),
            ):
                r = await browser.request(method, path, headers=headers, json={"text": "y"})
                assert r.status_code == 403, (method, path, r.text)
                detail = r.json()["detail"]
                assert detail.startswith("cross-site request refused") and said in detail, detail
            # nothing happened: the session is there, untouched, and the login still works
            assert (await browser.get("/api/sessions")).json()["sessions"][0]["id"] == s["id"]
            assert (await browser.get(f"/api/sessions/{s['id']}")).json()["pid"] == s["pid"]
            # the page's own requests pass: its Origin, or the browser's word for it
            assert (
                await browser.post(f"/api/sessions/{s['id']}/resume", headers={"Origin": live.url})
            ).status_code != 403
            r = await browser.post(
                f"/api/sessions/{s['id']}/send", headers={"Sec-Fetch-Site": "same-origin"}, json={"text": "hi"}
            )
            assert r.status_code == 200, r.text
            r = await browser.post("/logout", headers={"Origin": live.url})
            assert r.json()["logged_out"] is True  # and only now is the cookie dead
        finally:
            await browser.aclose()


async def test_bearer_scripts_public_url_and_allowed_origins_are_not_refused(tmp_path):
    public = "http://panewatch.example.org"  # (https would make the cookie Secure: not sent here)
    async with live_server(
        state_dir=tmp_path / "state", public_url=public, allowed_origins=["http://localhost:3000"]
    ) as live:
        # a script with the token: whatever Origin it sends (it could send any), it is the token's
        r = await live.http.post(
            "/api/sessions", json={"command": ["sleep", "30"]}, headers={"Origin": "http://x.test"}
        )
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        browser = await logged_in(live)
        try:
            # behind a proxy the Host is rewritten: public_url's origin is the dashboard's own
            r = await browser.post(f"/api/sessions/{sid}/send", headers={"Origin": public}, json={"text": "a"})
            assert r.status_code == 200, r.text
            r = await browser.post(
                f"/api/sessions/{sid}/send", headers={"Origin": "http://localhost:3000"}, json={"text": "b"}
            )
            assert r.status_code == 200, r.text
            r = await browser.post(
                f"/api/sessions/{sid}/send", headers={"Origin": "https://other.example.org"}, json={"text": "c"}
            )
            assert r.status_code == 403
            # the same origins are the WebSockets' too
        finally:
            await browser.aclose()
        async with live.ws("/ws/state", origin=public) as ws:
            assert (await ws.recv()).startswith("{")


async def test_safe_methods_and_cookie_free_requests_are_unchanged(tmp_path):
    async with live_server(state_dir=tmp_path / "state") as live:
        browser = await logged_in(live)
        try:  # GET changes nothing, so a cross-site GET is what SameSite and CORS already cover
            r = await browser.get("/api/sessions", headers={"Origin": "http://127.0.0.1:1"})
            assert r.status_code == 200
        finally:
            await browser.aclose()
        async with live.client() as anon:  # no cookie: the usual 401
            r = await anon.post("/api/sessions", json={"command": ["true"]}, headers={"Origin": "http://127.0.0.1:1"})
            assert r.status_code == 401


def test_the_login_url_names_a_site_of_its_own_on_loopback():
    assert login_url("127.0.0.1", 8765, "T") == "http://panewatch.localhost:8765/?token=T"
    assert login_url("0.0.0.0", 8765, "T") == "http://panewatch.localhost:8765/?token=T"
    assert login_url("localhost", 1, "T") == "http://panewatch.localhost:1/?token=T"
    assert login_url("::1", 8765, "T") == "http://[::1]:8765/?token=T"  # not IPv4 loopback: as bound
    assert login_url("192.0.2.7", 8765, "T") == "http://192.0.2.7:8765/?token=T"


async def test_the_host_allow_list_takes_the_login_urls_name(tmp_path):
    async with live_server(state_dir=tmp_path / "state") as live, live.client() as c:
        r = await c.get(f"/?token={TOKEN}", headers={"Host": f"panewatch.localhost:{live.port}"})
        assert r.status_code == 303
        login = r.cookies["panewatch_login"]
        r = await c.post(
            "/logout",
            headers={
                "Host": f"panewatch.localhost:{live.port}",
                "Origin": f"http://panewatch.localhost:{live.port}",
                "Cookie": f"panewatch_login={login}",
            },
        )
        assert r.json()["logged_out"] is True
