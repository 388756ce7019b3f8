"""The HTTP and WebSocket API: in process over the ASGI transport, on real PTYs (the agents are bash
scripts) or on the memory host (no process at all: ``unit``); behind a real uvicorn only where the
socket is the point (an outside client, a client that stops reading)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import websockets

from engine_support import TESTER
from live import TOKEN, live_server, memory_server, next_event
from scripted import claude_like


def bash(script: str) -> list[str]:
    return ["bash", "--norc", "--noprofile", "-c", script]


@pytest.fixture
async def live(request):
    """The API in process: on the memory host for a unit test, else on real PTYs."""
    async with memory_server() if request.node.get_closest_marker("unit") else live_server() as server:
        yield server


@pytest.fixture
async def socket_live():
    """The API behind a real uvicorn on loopback."""
    async with live_server(socket=True) as server:
        yield server


async def working_read(live, sid: str, timeout: float = 10.0) -> None:
    """Until the engine has read the agent's working screen. A launch reads ``working`` from
    ``start`` before anything is drawn, and Claude's manifest has no start-up window, so a blank
    screen read under load is ``idle`` for a moment: a gate opened on the first event could let
    the dialog replace a working screen the engine never read (seen: blocked with prev idle)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        screen = (await live.http.get(f"/api/sessions/{sid}/screen")).json()  # read fresh
        if (screen["state"], screen["rule"]) == ("working", "interrupt_footer"):
            return
        assert asyncio.get_running_loop().time() < deadline, screen
        await asyncio.sleep(0.05)


@pytest.mark.integration
async def test_blocked_event_send_refused_answer_accepted_state_moves_on(live, tmp_path):
    gate = tmp_path / "go"  # each working phase lasts until the test has seen it
    async with live.ws("/ws/state") as ws:
        snapshot = json.loads(await ws.recv())
        assert snapshot["type"] == "snapshot" and snapshot["sessions"] == []
        s = await live.create(agent="claude", command=bash(claude_like(gate=str(gate))), rows=12, cols=60)
        created = await next_event(ws, "created")
        assert created["session"]["id"] == s["id"]
        await next_event(ws, "state", session=s["id"], state="working")  # the launch's placeholder
        await working_read(live, s["id"])  # and the agent's own working screen
        Path(f"{gate}.1").touch()
        ev = await next_event(ws, "state", session=s["id"], state="blocked")
        assert ev["source"] == "screen" and ev["rule"] == "permission_dialog" and ev["prev"] == "working"
        assert set(ev) >= {"session", "state", "prev", "source", "rule", "at"}

        screen = (await live.http.get(f"/api/sessions/{s['id']}/screen")).json()
        prompt_id = screen["prompt"].pop("id")  # this prompt instance (test_prompt_id)
        assert len(prompt_id) == 20
        assert screen["prompt"] == {
            "kind": "options",
            "options": [
                {"option": 1, "label": "Yes", "selected": True},
                {"option": 2, "label": "No", "selected": False},
            ],
        }

        r = await live.http.post(f"/api/sessions/{s['id']}/send", json={"text": "hello"})
        assert r.status_code == 409
        assert r.json()["state"] == "blocked" and "blocked" in r.json()["detail"]

        r = await live.http.post(f"/api/sessions/{s['id']}/answer", json={"option": 1})
        assert r.status_code == 422 and "confirm" in r.text
        r = await live.http.post(f"/api/sessions/{s['id']}/answer", json={"option": 1, "confirm": True})
        assert r.status_code == 200, r.text
        assert r.json()["took"] is True and r.json()["state"] != "blocked"
        await next_event(ws, "state", session=s["id"], state="working", prev="blocked")
        Path(f"{gate}.2").touch()
        await next_event(ws, "state", session=s["id"], state="idle", prev="working")
        note = await next_event(ws, "notification", session=s["id"], state="idle")
        assert "done" in note["title"]

        r = await live.http.post(f"/api/sessions/{s['id']}/answer", json={"keys": "\r", "confirm": True})
        assert r.status_code == 409 and r.json()["state"] == "idle"

        r = await live.http.post(f"/api/sessions/{s['id']}/send", json={"text": "next"})
        assert r.status_code == 200
        screen = (await live.http.get(f"/api/sessions/{s['id']}/screen")).json()
        assert set(screen) >= {"rows", "cursor", "state", "rule", "prompt"}
        assert len(screen["rows"]) == 12


@pytest.mark.integration
async def test_session_lifecycle_and_views(live, tmp_path):
    s = await live.create(
        command=bash("printf 'hello from %s\\r\\n' \"$PWD\"; sleep 30"),
        cwd=str(tmp_path),
        rows=10,
        cols=200,
        name="demo",
    )
    assert s["name"] == "demo" and s["cwd"] == str(tmp_path) and s["pid"] > 0
    listed = (await live.http.get("/api/sessions")).json()["sessions"]
    assert [x["id"] for x in listed] == [s["id"]]
    info = (await live.http.get(f"/api/sessions/{s['id']}")).json()
    for key in ("state", "since", "source", "rule", "agent", "pid", "foreground", "exit_code", "rows", "cols", "title"):
        assert key in info
    for _ in range(50):
        screen = (await live.http.get(f"/api/sessions/{s['id']}/screen")).json()
        if screen["rows"][0]:
            break
        await asyncio.sleep(0.05)
    assert screen["rows"][0] == f"hello from {tmp_path}"
    explain = (await live.http.get(f"/api/sessions/{s['id']}/explain")).json()
    assert explain["decision"]["state"] == live.engine.info(s["id"]).state
    assert explain["agent"] == "shell" and explain["rules"]
    assert all({"name", "matched", "reason"} <= set(rule) for rule in explain["rules"])
    assert explain["rows"][0].startswith("hello from")

    r = await live.http.post(f"/api/sessions/{s['id']}/resize", json={"rows": 20, "cols": 90})
    assert r.status_code == 200 and (r.json()["rows"], r.json()["cols"]) == (20, 90)
    r = await live.http.post(f"/api/sessions/{s['id']}/resize", json={"rows": 1, "cols": 90})
    assert r.status_code == 422

    r = await live.http.patch(f"/api/sessions/{s['id']}", json={"name": "renamed"})
    assert r.status_code == 200 and r.json()["name"] == "renamed", r.text
    assert (await live.http.get(f"/api/sessions/{s['id']}")).json()["name"] == "renamed"
    for bad in ({"name": ""}, {"name": "x" * 81}, {"name": "ok", "cwd": "/"}, {"name": " \t "}):
        r = await live.http.patch(f"/api/sessions/{s['id']}", json=bad)
        assert r.status_code == 422 and ("name" in r.text or "cwd" in r.text), (bad, r.text)
    assert (await live.http.patch("/api/sessions/nope", json={"name": "x"})).status_code == 404

    r = await live.http.delete(f"/api/sessions/{s['id']}")
    assert r.status_code == 200
    assert (await live.http.get(f"/api/sessions/{s['id']}")).status_code == 404
    assert (await live.http.delete(f"/api/sessions/{s['id']}")).status_code == 404


@pytest.mark.unit
async def test_bad_requests_get_a_4xx_with_a_reason_and_the_server_lives_on(live, tmp_path):
    cases = [
        ({"agent": "nobody"}, "unknown agent"),
        ({}, "agent, a command"),
        ({"command": []}, "command"),
        ({"command": ["true"], "rows": 1}, "rows"),
        ({"command": ["true"], "cwd": str(tmp_path / "missing")}, "not a folder"),
        ({"command": ["true"], "bogus": 1}, "bogus"),
    ]
    for body, reason in cases:
        r = await live.http.post("/api/sessions", json=body)
        assert r.status_code == 422, (body, r.text)
        assert reason in r.text, (body, r.text)
    r = await live.http.post("/api/sessions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    s = await live.create(command=["/nonexistent/agent"])
    assert s["state"] == "exited" and "cannot start" in s["error"]
    assert (await live.http.get("/healthz")).json()["ok"] is True
    for path in ("/screen", "/explain"):
        assert (await live.http.get(f"/api/sessions/nope{path}")).status_code == 404
    r = await live.http.post("/api/sessions/nope/send", json={"text": "x"})
    assert r.status_code == 404
    r = await live.http.post("/api/sessions/nope/answer", json={"option": 1, "keys": "x", "confirm": True})
    assert r.status_code == 422


@pytest.mark.integration
async def test_an_agent_not_reading_its_input_gets_409_not_500(live):
    s = await live.create(command=bash("stty raw -echo; printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40)
    statuses = []
    for _ in range(40):  # 100 KB each, into an agent that never reads
        r = await live.http.post(f"/api/sessions/{s['id']}/send", json={"text": "x" * 100_000, "enter": False})
        statuses.append(r.status_code)
        if r.status_code != 200:
            break
    assert statuses[-1] == 409, statuses
    assert "the agent is not reading its input" in r.json()["detail"] and r.json()["state"]
    assert (await live.http.get("/healthz")).json()["ok"] is True


@pytest.mark.unit
async def test_every_auth_failure_is_refused(live):
    async with live.client() as anon:
        assert (await anon.get("/api/sessions")).status_code == 401
        assert (await anon.get("/api/sessions", headers={"Authorization": "Bearer wrong"})).status_code == 403
        assert (await anon.get("/api/sessions", headers={"Authorization": "Basic abc"})).status_code == 401
        assert (await anon.post("/api/sessions", json={"command": ["true"]})).status_code == 401
        assert (await anon.get("/healthz")).status_code == 200
        assert (await anon.get("/")).status_code == 401
        assert (await anon.get("/?token=wrong")).status_code == 403
        r = await anon.get(f"/?token={TOKEN}", follow_redirects=False)
        assert r.status_code == 303 and "panewatch_login=" in r.headers["set-cookie"]
        assert "httponly" in r.headers["set-cookie"].lower() and TOKEN not in r.headers["set-cookie"]
        login = r.cookies["panewatch_login"]
        anon.cookies.set("panewatch_login", login)
        assert (await anon.get("/api/sessions")).status_code == 200
        anon.cookies.set("panewatch_login", TOKEN)  # the token is not a login
        assert (await anon.get("/api/sessions")).status_code == 403
        anon.cookies.set("panewatch_login", login)
        # the page's own POST (a browser sends its Origin; one from elsewhere is refused: test_csrf)
        assert (await anon.post("/logout", headers={"Origin": live.url})).json()["logged_out"] is True
        anon.cookies.set("panewatch_login", login)  # a revoked login stays refused
        assert (await anon.get("/api/sessions")).status_code == 403

    async def refused(**kw) -> int:
        with pytest.raises(websockets.exceptions.ConnectionClosed) as info:
            async with live.ws("/ws/state", **kw) as ws:
                await ws.recv()
        return info.value.rcvd.code

    assert await refused(token=None) == 4401
    assert await refused(token="wrong") == 4403
    assert await refused(origin="http://evil.example") == 4403
    assert await refused(origin="http://127.0.0.1:1") == 4403  # another localhost port is another origin
    async with live.ws("/ws/state", origin=live.url) as ws:  # the page's own origin
        assert json.loads(await ws.recv())["type"] == "snapshot"
    async with live.ws(f"/ws/state?token={TOKEN}", token=None) as ws:
        assert json.loads(await ws.recv())["type"] == "snapshot"


@pytest.mark.integration
async def test_report_endpoint_auth_and_validation(live):
    s = await live.create(agent="claude", command=bash("printf ' ? for shortcuts'; sleep 30"), rows=6, cols=40)
    await live.wait_state(s["id"], "idle")
    token = live.engine.report_token(s["id"])
    url = f"/report?session={s['id']}"
    async with live.client() as c:
        auth = {"Authorization": f"Bearer {token}"}
        assert (await c.post(url, json={"state": "working"})).status_code == 401
        assert (
            await c.post(url, json={"state": "working"}, headers={"Authorization": f"Bearer {TOKEN}"})
        ).status_code == 403  # the API token is not a report token
        # a wrong token gets the same answer whether the session exists or not (no oracle)
        wrong = await c.post(url, json={"state": "working"}, headers={"Authorization": "Bearer nope-nope"})
        unknown = await c.post("/report?session=nope", json={"state": "working"}, headers=auth)
        assert (wrong.status_code, wrong.json()) == (unknown.status_code, unknown.json()) and wrong.status_code == 403
        assert (await c.post(url, content=b"not json", headers=auth)).status_code == 422
        assert (await c.post(url, json=["a"], headers=auth)).status_code == 422
        assert (await c.post(url, json={"state": "waiting"}, headers=auth)).status_code == 422
        assert (
            await c.post(url, json={"hook_event_name": "Stop", "pad": "x" * 70000}, headers=auth)
        ).status_code == 413
        r = await c.post(url, json={"hook_event_name": "SubagentStop"}, headers=auth)
        assert r.status_code == 202 and r.json()["accepted"] is False
        r = await c.post(url, json={"hook_event_name": "PreToolUse", "tool_name": "Bash"}, headers=auth)
        assert r.status_code == 202 and r.json()["state"] == "working"
    info = (await live.http.get(f"/api/sessions/{s['id']}")).json()
    assert (info["state"], info["source"], info["rule"]) == ("working", "hook", "PreToolUse")


@pytest.mark.integration
async def test_hook_command_reaches_report_with_curl(live, tmp_path):
    """The exact command Claude's hooks run, executed by a shell inside a session."""
    from panewatch.integrations.claude import REPORT_COMMAND

    script = tmp_path / "hook.sh"
    script.write_text(
        f"printf ' ? for shortcuts'; sleep 0.5; "
        f'echo \'{{"hook_event_name":"PermissionRequest","tool_name":"Bash"}}\' | {REPORT_COMMAND}; '
        f"sleep 30\n"
    )
    s = await live.create(agent="claude", command=["bash", str(script)], rows=6, cols=40)
    info = await live.wait_state(s["id"], "blocked")
    assert (info["source"], info["rule"]) == ("hook", "PermissionRequest")


@pytest.mark.integration
async def test_screen_websocket_full_then_changed_rows(live):
    s = await live.create(
        command=bash("printf 'one\\r\\n'; read -r x; printf 'two %s\\r\\n' \"$x\"; sleep 30"), rows=6, cols=40
    )
    async with live.ws(f"/ws/sessions/{s['id']}/screen") as ws:
        first = json.loads(await ws.recv())
        assert first["full"] is True and len(first["rows"]) == 6
        deadline = time.monotonic() + 5
        rows = first["rows"]
        while "one" not in rows[0] and time.monotonic() < deadline:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
            for k, v in msg.get("changed", {}).items():
                rows[int(k)] = v
        await live.engine.write_keys(s["id"], b"abc\r", actor=TESTER)
        while not any(r.startswith("two abc") for r in rows):
            msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert msg["full"] is False
            for k, v in msg["changed"].items():
                rows[int(k)] = v
        assert rows[0] == "one"
    async with live.ws("/ws/sessions/nope/screen") as ws:
        with pytest.raises(websockets.exceptions.ConnectionClosed) as info:
            await ws.recv()
        assert info.value.rcvd.code == 4404


@pytest.mark.integration
async def test_a_stuck_screen_client_does_not_stall_the_agent(socket_live):
    """A client that never reads: the agent's output keeps flowing and other clients are served."""
    # one process, no fork per line: the output's pace is the PTY's, not the machine's fork rate
    s = await socket_live.create(
        command=bash(
            "x=$(printf 'x%.0s' $(seq 80)); i=0; while [ $i -lt 4000 ]; do "
            "printf 'line %05d %s\\r\\n' $i \"$x\"; i=$((i+1)); done; printf 'END'; sleep 30"
        ),
        rows=40,
        cols=120,
    )
    stuck = await socket_live.ws(f"/ws/sessions/{s['id']}/screen", max_size=None).__aenter__()
    stuck.transport.pause_reading()  # never read: its socket buffers fill up
    try:
        deadline = time.monotonic() + 30
        while "END" not in "\n".join(socket_live.engine.screen_now(s["id"]).rows):
            assert time.monotonic() < deadline, "the agent stalled behind a stuck client"
            await asyncio.sleep(0.05)
        async with socket_live.ws("/ws/state") as ws:
            assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "snapshot"
    finally:
        stuck.transport.abort()


@pytest.mark.integration
async def test_wait_command_exits_0_when_reached_and_1_on_timeout(socket_live):
    s = await socket_live.create(agent="claude", command=bash(claude_like(prompt_after=0.5)), rows=12, cols=60)
    env = {**os.environ, "PANEWATCH_TOKEN": TOKEN, "PANEWATCH_URL": socket_live.url}
    cmd = [sys.executable, "-m", "panewatch", "wait", s["id"], "--until"]
    proc = await asyncio.create_subprocess_exec(*cmd, "blocked", "--timeout", "10", env=env)
    assert await proc.wait() == 0
    proc = await asyncio.create_subprocess_exec(*cmd, "idle", "--timeout", "0.5", env=env, stderr=subprocess.PIPE)
    assert await proc.wait() == 1
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "panewatch",
        "wait",
        "nope",
        "--until",
        "idle",
        "--timeout",
        "2",
        env=env,
        stderr=subprocess.PIPE,
    )
    assert await proc.wait() == 2


@pytest.mark.unit
async def test_openapi_is_published(live):
    r = await live.http.get("/openapi.json")
    paths = r.json()["paths"]
    for path in ("/api/sessions", "/api/sessions/{sid}/send", "/api/sessions/{sid}/answer", "/report"):
        assert path in paths
    assert (await live.http.get("/docs")).status_code == 200
