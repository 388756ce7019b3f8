"""Gemini CLI's own ACP mode (``--experimental-acp``) on the lab's Gemini mock, through the ACP
client: a shell command asks for permission (Gemini's own option ids), the answer lets it run,
the turn ends ``end_turn``; a cancel ends a slow turn ``cancelled``."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
import uvicorn

from panewatch.acp import AcpClient, Timeouts
from test_acp_client import Recorder

agent_labs = pytest.importorskip("panewatch_lab.agent_labs", reason="the lab's Gemini mock (agents branch) is absent")
LAB = agent_labs.get_lab("gemini")
GEMINI = LAB.find()
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        GEMINI is None, reason=f"Gemini CLI is not installed (npm install --prefix .lab-npm {LAB.package}@{LAB.pinned})"
    ),
]


async def test_gemini_over_acp_permission_and_cancel(tmp_path: Path) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(LAB.mock(None, tmp_path / "mock.jsonl"), log_level="warning"))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    project = tmp_path / "project"
    project.mkdir()
    rec = Recorder()
    env = LAB.prepare(tmp_path / "home", project, f"http://127.0.0.1:{port}")
    assert GEMINI is not None
    client = AcpClient(
        [GEMINI, "--experimental-acp"],
        cwd=str(project),
        env=env,
        listener=rec,
        timeouts=Timeouts(initialize=60, new_session=60, cancel=20),
    )
    try:
        assert (await rec.until("idle", 90)).startswith("session/new: ready, Gemini CLI")
        client.prompt("task:bash")
        why = await rec.until("blocked", 60)
        assert why.startswith("session/request_permission: touch x.txt (execute)")
        perm = client.pending()
        assert perm is not None
        kinds = {o["kind"]: o["option_id"] for o in perm.options}
        assert set(kinds) >= {"allow_once", "reject_once"}
        client.answer(kinds["allow_once"])
        assert await rec.until("idle", 60) == "stopReason end_turn"
        assert (project / "x.txt").exists()
        assert next(e for e in client.conversation.entries if e.kind == "tool").status == "completed"

        client.prompt("task:think")
        client.cancel()
        assert await rec.until("idle", 30) == "stopReason cancelled"
    finally:
        await client.terminate(grace=3)
        client.close()
        server.should_exit = True
        await serving
        sock.close()
