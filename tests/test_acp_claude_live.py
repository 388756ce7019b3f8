"""The real Claude Code ACP adapter on the lab's mock API, through the ACP client: states
from the protocol, a permission answered by option id, the tool's result in the mock's log,
a second prompt, and a cancel that ends idle with ``cancelled``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from claude_support import API_KEY, mock_api
from live import live_server, next_event
from panewatch.acp import AcpClient, Timeouts
from panewatch_lab.acp_claude import PACKAGE, PINNED_VERSION, adapter_env, find_adapter
from test_acp_client import Recorder

ADAPTER = find_adapter()
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        ADAPTER is None,
        reason=f"the ACP adapter is not installed (npm install --prefix "
        f".lab-npm {PACKAGE}@{PINNED_VERSION}, or set PANEWATCH_CLAUDE_ACP_BIN)",
    ),
]


@dataclass
class Mock:
    url: str
    log: Path

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def requests(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["event"] == "request" and r["path"] == "/v1/messages"]


@pytest.fixture
def mock(tmp_path: Path) -> Iterator[Mock]:
    log = tmp_path / "mock.jsonl"
    with mock_api("acp", log) as url:
        yield Mock(url, log)


async def test_claude_over_acp_permission_answer_second_prompt_cancel(mock: Mock, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rec = Recorder()
    assert ADAPTER is not None
    client = AcpClient(
        [ADAPTER],
        cwd=str(project),
        env=adapter_env(tmp_path / "home", mock.url, API_KEY),
        listener=rec,
        timeouts=Timeouts(initialize=60, new_session=60, cancel=20),
    )
    try:
        ready = await rec.until("idle", 90)
        assert ready.startswith("session/new: ready, Claude Agent 0.23.1"), ready

        client.prompt("acp:bash")
        why = await rec.until("blocked", 60)
        perm = client.pending()
        assert perm is not None and perm.tool_kind == "execute"
        assert "echo panewatch-acp-$((6*7))" in why
        assert {o["option_id"] for o in perm.options} == {"allow_always", "allow", "reject"}
        assert not any(r["step"] == "acp-bash-done" for r in mock.requests())  # nothing ran yet
        client.answer("allow", request=perm.key)
        assert rec.state == "working"
        assert await rec.until("idle", 60) == "stopReason end_turn"
        done = [r for r in mock.requests() if r["step"] == "acp-bash-done"]
        assert done and done[-1]["conversation"]["result"].strip() == "panewatch-acp-42"
        assert (project / "acp-ran.txt").read_text().strip() == "panewatch-acp-42"
        tool = next(e for e in client.conversation.entries if e.kind == "tool")
        assert tool.status == "completed"

        client.prompt("acp:hello")
        assert await rec.until("idle", 60) == "stopReason end_turn"
        assert [e.text for e in client.conversation.entries if e.kind == "agent"][-1] == "Hello over ACP."

        client.prompt("acp:slow")
        assert rec.state == "working"
        client.cancel()
        assert await rec.until("idle", 30) == "stopReason cancelled"
        states = [s for s, _ in rec.states]
        assert states == [
            "idle",
            "working",
            "blocked",
            "working",
            "idle",
            "working",
            "idle",
            "working",
            "working",
            "idle",
        ]
    finally:
        await client.terminate(grace=3)
        client.close()


async def test_claude_acp_session_through_the_server(mock: Mock, tmp_path: Path) -> None:
    """The acceptance run: prompt → working → permission → blocked on /ws/state (timed against
    the tap's record of when the agent sent the request) → confirmed /answer → the tool ran →
    idle; a second prompt; cancel → idle with cancelled."""
    project, tap = tmp_path / "project", tmp_path / "tap.jsonl"
    project.mkdir()
    assert ADAPTER is not None
    env = adapter_env(tmp_path / "home", mock.url, API_KEY)
    command = [sys.executable, "-m", "panewatch_lab.acp_tap", "--log", str(tap), "--", ADAPTER]
    async with live_server() as live, live.ws("/ws/state") as ws:
        info = await live.create(kind="acp", agent="claude", command=command, cwd=str(project), env=env)
        sid = info["id"]
        await live.wait_state(sid, "idle", timeout=90)

        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "acp:bash"})
        assert r.status_code == 200, r.text
        await next_event(ws, "state", session=sid, state="working", rule="session/prompt")
        blocked = await next_event(ws, "state", session=sid, state="blocked", timeout=60)
        seen = time.time()
        assert blocked["source"] == "acp" and "echo panewatch-acp-$((6*7))" in blocked["why"]
        asked = next(
            r
            for r in map(json.loads, tap.read_text().splitlines())
            if r["dir"] == "from_agent" and '"session/request_permission"' in r["line"]
        )
        sent, asked_at = json.loads(asked["line"]), asked["wall"]
        latency_ms = (seen - asked_at) * 1000
        print(f"\nblocked on /ws/state {latency_ms:.1f} ms after the agent sent session/request_permission")
        (tmp_path / "latency.txt").write_text(f"{latency_ms:.1f}\n")
        assert sent["params"]["toolCall"]["kind"] == "execute"

        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "acp:hello"})
        assert r.status_code == 409
        conv = (await live.http.get(f"/api/sessions/{sid}/conversation")).json()
        r = await live.http.post(
            f"/api/sessions/{sid}/answer",
            json={"option": "allow", "request": conv["permission"]["request"], "confirm": True},
        )
        assert r.status_code == 200 and r.json()["took"] is True, r.text
        await next_event(ws, "state", session=sid, state="working", rule="session/request_permission")
        idle = await next_event(ws, "state", session=sid, state="idle", timeout=60)
        assert idle["why"] == "stopReason end_turn"
        done = [r for r in mock.requests() if r["step"] == "acp-bash-done"]
        assert done and done[-1]["conversation"]["result"].strip() == "panewatch-acp-42"

        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "acp:hello"})
        assert r.status_code == 200
        idle = await next_event(ws, "state", session=sid, state="idle", timeout=60)
        assert idle["why"] == "stopReason end_turn"
        screen = (await live.http.get(f"/api/sessions/{sid}/screen")).json()
        assert any("Hello over ACP." in row for row in screen["rows"])

        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "acp:slow"})
        await next_event(ws, "state", session=sid, state="working", rule="session/prompt")
        r = await live.http.post(f"/api/sessions/{sid}/cancel")
        assert r.status_code == 200, r.text
        idle = await next_event(ws, "state", session=sid, state="idle", timeout=30)
        assert idle["rule"] == "stopReason" and idle["why"] == "stopReason cancelled"
        await live.http.delete(f"/api/sessions/{sid}")
