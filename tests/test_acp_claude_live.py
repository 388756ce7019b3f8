"""The real Claude Code ACP adapter on the lab's mock API, through the ACP client: states
from the protocol, a permission answered by option id, the tool's result in the mock's log,
a second prompt, and a cancel that ends idle with ``cancelled``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from panewatch.acp import AcpClient, Timeouts
from panewatch_lab.acp_claude import PACKAGE, PINNED_VERSION, adapter_env, find_adapter

from live import wait_listening
from test_acp_client import Recorder
from test_lab_claude_live import free_port

ADAPTER = find_adapter()
pytestmark = pytest.mark.skipif(ADAPTER is None, reason=f"the ACP adapter is not installed (npm install --prefix "
                                f".lab-npm {PACKAGE}@{PINNED_VERSION}, or set PANEWATCH_CLAUDE_ACP_BIN)")
API_KEY = "sk-ant-api03-lab-0123456789abcdefghijklmnopqrstuvwxyz"


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
    port, log = free_port(), tmp_path / "mock.jsonl"
    server = subprocess.Popen(
        [sys.executable, "-m", "panewatch_lab.mock_api", "--port", str(port), "--scenario", "acp", "--log", str(log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port, server, "mock API")
        yield Mock(f"http://127.0.0.1:{port}", log)
    finally:
        server.terminate()
        server.wait(10)


async def test_claude_over_acp_permission_answer_second_prompt_cancel(mock: Mock, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rec = Recorder()
    assert ADAPTER is not None
    client = AcpClient([ADAPTER], cwd=str(project), env=adapter_env(tmp_path / "home", mock.url, API_KEY),
                       listener=rec, timeouts=Timeouts(initialize=60, new_session=60, cancel=20))
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
        assert states == ["idle", "working", "blocked", "working", "idle", "working", "idle", "working", "working",
                          "idle"]
    finally:
        await client.terminate(grace=3)
        client.close()
