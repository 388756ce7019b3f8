"""ACP sessions through the real server (uvicorn on loopback) with the scripted ACP agent:
the same API, events and guards as terminal sessions, with states from the protocol."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from live import live_server, next_event
from panewatch.engine import HostKind

pytestmark = pytest.mark.integration

AGENT = str(Path(__file__).with_name("acp_agent.py"))


async def start(live, tmp_path: Path, *flags: str) -> str:
    info = await live.create(kind="acp", command=[sys.executable, AGENT, *flags], cwd=str(tmp_path), name="scripted")
    assert info["kind"] == "acp"
    await live.wait_state(info["id"], "idle")
    return info["id"]


async def test_prompt_permission_answer_cancel_over_http_and_ws_state(tmp_path: Path) -> None:
    async with live_server() as live, live.ws("/ws/state") as ws:
        sid = await start(live, tmp_path)
        info = (await live.http.get(f"/api/sessions/{sid}")).json()
        assert info["source"] == "acp" and info["rule"] == "session/new"
        explain = (await live.http.get(f"/api/sessions/{sid}/explain")).json()
        assert explain["rules"] == [] and explain["decision"]["event"] == "session/new"

        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "perm"})
        assert r.status_code == 200, r.text
        working = await next_event(ws, "state", session=sid, state="working", rule="session/prompt")
        assert working["source"] == "acp" and working["rule"] == "session/prompt"
        blocked = await next_event(ws, "state", session=sid, state="blocked")
        assert blocked["rule"] == "session/request_permission" and "touch marker.txt" in blocked["why"]

        # guarded writes: no prompt while blocked, no answer without confirm or with a wrong option
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "hello"})
        assert r.status_code == 409 and "permission request is pending" in r.json()["detail"]
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": "allow"})
        assert r.status_code == 422
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": "maybe", "confirm": True})
        assert r.status_code == 422 and "was not offered" in r.json()["detail"]
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"keys": "y", "confirm": True})
        assert r.status_code == 422

        screen = (await live.http.get(f"/api/sessions/{sid}/screen")).json()
        prompt = screen["prompt"]
        assert prompt["kind"] == "options" and [o["option_id"] for o in prompt["options"]] == [
            "allow",
            "allow-always",
            "reject",
        ]
        assert any("Permission: touch marker.txt" in row for row in screen["rows"])
        conv = (await live.http.get(f"/api/sessions/{sid}/conversation")).json()
        request = conv["permission"]["request"]

        r = await live.http.post(
            f"/api/sessions/{sid}/answer", json={"option": "allow", "request": request, "confirm": True}
        )
        assert r.status_code == 200 and r.json()["took"] is True, r.text
        await next_event(ws, "state", session=sid, state="idle")
        assert (tmp_path / "marker.txt").read_text() == "ran\n"
        r = await live.http.post(
            f"/api/sessions/{sid}/answer", json={"option": "allow", "request": request, "confirm": True}
        )
        assert (r.status_code == 409 and "no longer pending" in r.json()["detail"]) or "no permission" in r.text

        # a second prompt, then cancel (an explicit action) ends idle with cancelled
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "perm"})
        await next_event(ws, "state", session=sid, state="blocked")
        r = await live.http.post(f"/api/sessions/{sid}/cancel")
        assert r.status_code == 200, r.text
        idle = await next_event(ws, "state", session=sid, state="idle")
        assert idle["rule"] == "stopReason" and idle["why"] == "stopReason cancelled"
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "request": request, "confirm": True})
        assert r.status_code == 409
        r = await live.http.post(f"/api/sessions/{sid}/cancel")
        assert r.status_code == 409 and "nothing to cancel" in r.json()["detail"]


async def test_conversation_websocket_and_exit(tmp_path: Path) -> None:
    async with live_server() as live:
        sid = await start(live, tmp_path)
        async with live.ws(f"/ws/sessions/{sid}/conversation") as ws:
            first = json.loads(await ws.recv())
            assert first["type"] == "conversation" and first["state"] == "idle"
            await live.http.post(f"/api/sessions/{sid}/send", json={"text": "plan"})

            async def planned() -> dict:
                while True:
                    view = json.loads(await ws.recv())
                    if view["plan"] and view["state"] == "idle":
                        return view

            view = await asyncio.wait_for(planned(), 10)
            assert [p["status"] for p in view["plan"]] == ["completed", "in_progress"]
            assert any(e["kind"] == "agent" and e["text"] == "Planned." for e in view["entries"])

        await live.http.post(f"/api/sessions/{sid}/send", json={"text": "crash"})
        info = await live.wait_state(sid, "exited")
        assert info["exit_code"] == 3 and info["source"] == "exit"
        assert "the model exploded" in info["why"]
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "hello"})
        assert r.status_code == 409


async def test_bad_requests_are_4xx_with_a_reason(tmp_path: Path) -> None:
    async with live_server() as live:
        r = await live.http.post("/api/sessions", json={"kind": "acp", "agent": "nope"})
        assert r.status_code == 422 and "unknown ACP agent 'nope'" in r.json()["detail"]
        r = await live.http.post("/api/sessions", json={"kind": "weird", "command": ["x"]})
        assert r.status_code == 422
        r = await live.http.post("/api/sessions", json={"kind": "acp", "command": ["/nonexistent/agent"]})
        assert r.status_code == 201 and r.json()["state"] == "exited"
        pty = await live.create(command=["bash", "-c", "sleep 30"])
        r = await live.http.post(f"/api/sessions/{pty['id']}/cancel")
        assert r.status_code == 422
        r = await live.http.get(f"/api/sessions/{pty['id']}/conversation")
        assert r.status_code == 422
        sid = await start(live, tmp_path)
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "  "})
        assert r.status_code == 422
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": "allow", "confirm": True})
        assert r.status_code == 409 and "no permission request is pending" in r.json()["detail"]
        # a fault of the agent is the session's error, and the session goes on
        await live.http.post(f"/api/sessions/{sid}/send", json={"text": "nooptions"})
        info = await live.wait_state(sid, "idle")
        for _ in range(100):
            info = (await live.http.get(f"/api/sessions/{sid}")).json()
            if info["why"] == "stopReason end_turn":
                break
            await asyncio.sleep(0.05)
        assert "a permission request with no options" in info["error"]
        conv = (await live.http.get(f"/api/sessions/{sid}/conversation")).json()
        assert "scripted-agent: turn 'nooptions'" in conv["stderr_tail"]


async def test_an_agent_that_never_initializes_exits_with_the_reason(tmp_path: Path) -> None:
    async with live_server() as live:
        acp = live.engine.hosts.by_kind[HostKind.acp]
        acp.timeouts = type(acp.timeouts)(initialize=0.5)
        info = await live.create(kind="acp", command=[sys.executable, AGENT, "--silent-init"], cwd=str(tmp_path))
        assert info["state"] == "working"
        info = await live.wait_state(info["id"], "exited")
        assert info["why"] == "the agent did not answer initialize within 0.5 s"
