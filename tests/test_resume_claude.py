"""Resume of a real Claude Code session on the lab's mock: its hooks report its session id, the
tmux server dies, the session is lost, and Resume starts ``claude --resume <that id>`` in the
same folder under the same session id, showing the earlier conversation."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import uvicorn

from claude_support import CLAUDE, NEEDS_CLAUDE
from live import TOKEN, Live
from panewatch.api import create_app
from panewatch.config import Settings
from panewatch.hosting import open_hosting
from panewatch.hosts.tmux import tmux_usable
from panewatch_lab.mock_server import MockServer
from panewatch_lab.scenario import load_scenario
from test_live_claude import launch, screen_shows

pytestmark = [
    pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}"),
    NEEDS_CLAUDE,
]


@pytest.fixture
def mock() -> Iterator[MockServer]:
    with MockServer(load_scenario("basic")) as server:
        yield server


@asynccontextmanager
async def tmux_server(state: Path) -> AsyncIterator[Live]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    settings = Settings(token=TOKEN, port=port, sweep_ms=100, pane_host="tmux", state_dir=state)
    app = create_app(settings, hosting=open_hosting(state_dir=state, pane_host="tmux", token=TOKEN))
    app.state.engine.service_url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task
        await asyncio.sleep(0.01)
    live = Live(app, port)
    try:
        yield live
    finally:
        await live.http.aclose()
        server.should_exit = True
        await task
        sock.close()
        subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], capture_output=True, check=False)


async def test_lost_claude_session_resumes_its_conversation(mock: MockServer, tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with tmux_server(state) as live:
        sid = await launch(live, mock, tmp_path)
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:think about it, then answer"})
        assert r.status_code == 200
        await screen_shows(live, sid, "The answer is 42.", 40)
        await live.wait_state(sid, "idle", 20)
        row = (
            sqlite3.connect(state / "sessions.sqlite3")
            .execute("SELECT agent_session_id FROM sessions WHERE id = ?", (sid,))
            .fetchone()
        )
        conversation = row[0]
        assert conversation, "the hooks reported Claude's session_id"
        before = (await live.http.get(f"/api/sessions/{sid}")).json()

        subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], check=True)
        lost = await live.wait_state(sid, "lost", 5)
        assert lost["error"] == "the tmux server is gone"

        r = await live.http.post(f"/api/sessions/{sid}/resume")
        assert r.status_code == 200, r.text
        resumed = r.json()
        assert resumed["id"] == sid and resumed["cwd"] == before["cwd"] and resumed["pid"] != before["pid"]
        assert resumed["command"][:5] == [CLAUDE, "--permission-mode", "default", "--resume", conversation]
        assert resumed["command"][-2] == "--settings", "hooks again, with a fresh token"
        await screen_shows(live, sid, "The answer is 42.", 40)  # the earlier conversation is back
        await live.wait_state(sid, "idle", 30)
        r = await live.http.post(f"/api/sessions/{sid}/resume")
        assert r.status_code == 409 and "only a lost session" in r.json()["detail"]
