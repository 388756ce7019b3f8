"""Issue 13, HTTP and headers: every request the review used to break the service — no 5xx, no
ghost session, and the session list and /ws/state keep working after each. Validation and headers
are checked in process on the memory host (``unit``); what happens on the wire (a body streamed
past the limit, a raw handshake with a foreign Host) against a real uvicorn, or a real server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest

from hardening_support import ServerProcess
from live import TOKEN, live_server, memory_server


@pytest.fixture
async def live(tmp_path, request):
    """The API on the memory host for a unit test, else behind a real uvicorn."""
    unit = request.node.get_closest_marker("unit")
    async with (
        memory_server(state_dir=tmp_path / "state")
        if unit
        else live_server(socket=True, state_dir=tmp_path / "state") as server
    ):
        yield server


async def still_healthy(live, sessions_before: int | None = None) -> list[dict]:
    """The list answers, every session has a process or says why not, /ws/state gives its snapshot."""
    r = await live.http.get("/api/sessions")
    assert r.status_code == 200, r.text
    sessions = r.json()["sessions"]
    for s in sessions:
        assert s["pid"] is not None or (s["state"] == "exited" and s["error"]), f"ghost session: {s}"
    if sessions_before is not None:
        assert len(sessions) == sessions_before, "a refused request left a session behind"
    async with live.ws("/ws/state") as ws:
        snapshot = json.loads(await ws.recv())
        assert snapshot["type"] == "snapshot" and len(snapshot["sessions"]) == len(sessions)
    return sessions


def raw(body: str) -> dict:
    """A request body given as JSON text, so that escapes like \\ud800 reach the server as written."""
    return {"content": body.encode(), "headers": {"content-type": "application/json"}}


UNENCODABLE_SESSIONS = [
    ('{"command": ["echo", "\\udc80"]}', "surrogate"),
    ('{"command": ["echo", "\\ud800"]}', "surrogate"),
    ('{"command": ["\\ud800"]}', "surrogate"),
    ('{"command": ["echo", "a\\u0000b"]}', "NUL"),
    ('{"command": ["true"], "env": {"A": "x\\u0000y"}}', "NUL"),
    ('{"command": ["true"], "env": {"A=B": "x"}}', "'='"),
    ('{"command": ["true"], "env": {"A\\u0000": "x"}}', "NUL"),
    ('{"command": ["true"], "env": {"\\udc80": "x"}}', "surrogate"),
    ('{"command": ["true"], "env": {"": "x"}}', "'='"),
    ('{"command": ["true"], "cwd": "/tmp\\u0000x"}', "NUL"),
    ('{"command": ["true"], "cwd": "/tmp/\\udcff"}', "surrogate"),
    ('{"command": ["true"], "name": "\\ud800"}', "surrogate"),
    ('{"agent": "\\ud800"}', "surrogate"),
]


@pytest.mark.unit
@pytest.mark.parametrize("body,reason", UNENCODABLE_SESSIONS, ids=[b for b, _ in UNENCODABLE_SESSIONS])
async def test_unencodable_session_input_is_a_short_422_and_spawns_nothing(live, body, reason):
    await live.create(command=["agent"])
    r = await live.http.post("/api/sessions", **raw(body))
    assert r.status_code == 422, r.text
    # pydantic itself refuses some surrogates ("not a unicode string"); the rest are ours
    assert reason in r.text or (reason == "surrogate" and "unicode" in r.text), r.text
    assert len(r.content) < 2000
    await still_healthy(live, sessions_before=1)


@pytest.mark.unit
async def test_writes_with_unencodable_text_are_refused(live):
    s = await live.create(command=["agent"], rows=6, cols=40)
    for path, body in (
        (f"/api/sessions/{s['id']}/send", '{"text": "a\\ud800"}'),
        (f"/api/sessions/{s['id']}/answer", '{"keys": "\\udc80", "confirm": true}'),
    ):
        r = await live.http.post(path, **raw(body))
        assert r.status_code == 422 and ("surrogate" in r.text or "unicode" in r.text), r.text
    await still_healthy(live, sessions_before=1)


@pytest.mark.unit
async def test_a_hook_report_with_unencodable_or_huge_text_is_cleaned_not_fatal(live):
    s = await live.create(command=["agent"])
    token = live.engine.report_token(s["id"])
    auth = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
    url = f"/report?session={s['id']}"
    async with live.client() as c:
        r = await c.post(url, content=b'{"state": "idle", "detail": "\\ud800 tail"}', headers=auth)
        assert r.status_code == 202, r.text
        r = await c.post(
            url,
            content=json.dumps({"hook_event_name": "PermissionRequest", "tool_name": "\udc80" + "x" * 5000}).encode(),
            headers=auth,
        )
        assert r.status_code == 202, r.text
    sessions = await still_healthy(live, sessions_before=1)
    assert sessions[0]["state"] == "blocked" and len(sessions[0]["why"]) < 700
    assert "\ufffd" in sessions[0]["why"]  # the surrogate became U+FFFD, the rest is kept


@pytest.mark.unit
@pytest.mark.parametrize("path", ["/report?session={sid}", "/api/sessions", "/api/sessions/{sid}/send"])
async def test_json_nested_30000_deep_is_a_422(live, path):
    s = await live.create(command=["agent"])
    token = live.engine.report_token(s["id"]) if path.startswith("/report") else TOKEN
    body = b"[" * 30000 + b"]" * 30000
    r = await live.http.post(
        path.format(sid=s["id"]),
        content=body,
        headers={"Authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    assert r.status_code == 422 and "nested deeper" in r.text, r.text
    body = b'{"state": ' + b'{"a": ' * 200 + b"1" + b"}" * 200 + b"}"
    r = await live.http.post(
        path.format(sid=s["id"]),
        content=body,
        headers={"Authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    await still_healthy(live, sessions_before=1)


@pytest.mark.integration
async def test_big_sends_are_refused_without_echoing_them(live):
    s = await live.create(command=["bash", "--norc", "-c", "read -r x; sleep 30"], rows=6, cols=40)
    status, _ = await asyncio.to_thread(
        _post_huge, live.port, f"/api/sessions/{s['id']}/send", f"Authorization: Bearer {TOKEN}\r\n", 10 << 20
    )
    assert status == 413
    r = await live.http.post(f"/api/sessions/{s['id']}/send", json={"text": "x" * 200_000})  # under the body limit
    assert r.status_code == 422 and len(r.content) < 2000, r.text[:500]
    assert "100000" in r.text
    await still_healthy(live, sessions_before=1)


@pytest.mark.integration
async def test_host_allow_list_guards_against_dns_rebinding(live):
    async with httpx.AsyncClient(base_url=live.url) as c:
        for host in ("evil.example", "evil.example:80", "127.0.0.1.evil.example"):
            r = await c.get("/healthz", headers={"Host": host})
            assert r.status_code == 421 and "host not allowed" in r.text, (host, r.status_code)
        for host in (
            f"127.0.0.1:{live.port}",
            f"localhost:{live.port}",
            f"panewatch.localhost:{live.port}",
            f"[::1]:{live.port}",
            "127.1.2.3",
        ):
            assert (await c.get("/healthz", headers={"Host": host})).status_code == 200, host
    reader, writer = await asyncio.open_connection("127.0.0.1", live.port)
    writer.write(
        (
            "GET /ws/state HTTP/1.1\r\nHost: evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n"
        ).encode()
    )
    status_line = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status_line.split()[1] == b"403", status_line  # refused before the handshake


@pytest.mark.unit
async def test_configured_public_url_and_extra_hosts_are_allowed(tmp_path):
    async with (
        memory_server(
            state_dir=tmp_path / "s", public_url="https://pw.example.org/x", allowed_hosts=["box.lan"]
        ) as live,
        live.client() as c,
    ):
        for host, status in (("pw.example.org", 200), ("box.lan:8765", 200), ("other.lan", 421)):
            assert (await c.get("/healthz", headers={"Host": host})).status_code == status, host


@pytest.mark.unit
async def test_security_headers_on_the_page_the_api_and_refusals(live):
    async with live.client() as c:
        r = await c.get(f"/?token={TOKEN}", follow_redirects=True)  # follows to the page with the login cookie
        assert r.status_code == 200 and "<html" in r.text.lower()
        for resp in (
            r,
            await live.http.get("/api/sessions"),
            await c.get("/api/sessions", headers={"Authorization": "Bearer x"}),
        ):
            csp = resp.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
            assert resp.headers["x-content-type-options"] == "nosniff"
            assert resp.headers["referrer-policy"] == "no-referrer"
            assert resp.headers["x-frame-options"] == "DENY"


def _post_huge(port: int, path: str, headers: str, size: int) -> tuple[int, float]:
    """Send the head of a ``size``-byte JSON POST, keep streaming the body from a thread, and
    time the answer from the end of the head. Returns (status, seconds)."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n{headers}\r\n"
    ).encode()
    sock.sendall(head)
    t0 = time.perf_counter()

    def pump() -> None:
        chunk = b'{"text": "' + b"a" * (1 << 20)
        sent = 0
        try:
            while sent < size:
                sock.sendall(chunk[: size - sent])
                sent += len(chunk)
        except OSError:
            pass

    threading.Thread(target=pump, daemon=True).start()
    answer = b""
    while b"\r\n" not in answer:
        answer += sock.recv(4096)
    elapsed = time.perf_counter() - t0
    sock.close()
    return int(answer.split()[1]), elapsed


@pytest.mark.integration
def test_unauthenticated_40mb_body_is_refused_before_it_is_read(tmp_path, capsys):
    server = ServerProcess(tmp_path / "state")
    try:
        server.http.get("/api/sessions")  # warm up
        before = server.rss_kb()
        status, anon_s = _post_huge(server.port, "/api/sessions/x/send", "", 40 << 20)
        assert status == 401
        grew_anon = server.rss_kb() - before
        status, big_s = _post_huge(
            server.port, "/api/sessions/x/send", f"Authorization: Bearer {server.token}\r\n", 40 << 20
        )
        assert status == 413
        grew = server.rss_kb() - before
        t0 = time.perf_counter()
        assert server.http.get("/healthz").status_code == 200
        health_s = time.perf_counter() - t0
        with capsys.disabled():
            print(
                f"\n40 MB body: unauthenticated 401 in {anon_s * 1000:.1f} ms (RSS +{grew_anon / 1024:.1f} MB); "
                f"with the token 413 in {big_s * 1000:.1f} ms (RSS +{grew / 1024:.1f} MB in all); "
                f"same-run baseline /healthz {health_s * 1000:.1f} ms"
            )
        assert grew < 10 * 1024, f"RSS grew {grew} kB"
        assert anon_s < 1.0 and big_s < 1.0  # the figure itself is printed; 3.2 s before the guard
    finally:
        server.stop()


@pytest.mark.unit
@pytest.mark.parametrize(
    "spec",
    [
        {"command": ["echo", "a\x00b"]},
        {"command": ["echo", "\ud800"]},
        {"command": ["true"], "env": {"A=B": "x"}},
        {"command": ["true"], "env": {"A": "x\x00"}},
    ],
    ids=["nul-arg", "surrogate-arg", "eq-key", "nul-env"],
)
async def test_the_engine_alone_never_leaves_a_ghost(engine, spec):
    """Below the API's validation too: an argv or env the OS refuses is refused before any session
    exists (never a `working` one without a process, never a session the list cannot encode)."""
    from engine_support import TESTER
    from panewatch.engine import SessionSpec
    from panewatch.errors import InvalidRequest

    with pytest.raises(InvalidRequest) as refused:
        await engine.create(SessionSpec(**spec), actor=TESTER)
    assert "NUL" in str(refused.value) or "encode" in str(refused.value) or "bad name" in str(refused.value)
    assert await engine.list() == [] and len(engine) == 0
