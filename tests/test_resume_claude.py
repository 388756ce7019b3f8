"""Resume of a real Claude Code session on the lab's mock: its hooks report its session id, the
tmux server dies, the session is lost, and Resume starts ``claude --resume <that id>`` in the
same folder under the same session id, showing the earlier conversation — and with the launch's
own wrappers, flags and environment, also after the server itself restarted in between."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import uvicorn

from claude_support import API_KEY, CLAUDE, NEEDS_CLAUDE
from live import TOKEN, Live
from panewatch.api import create_app
from panewatch.config import Settings
from panewatch.hosting import open_hosting
from panewatch.hosts.tmux import tmux_usable
from panewatch_lab.claude_env import prepare_home
from panewatch_lab.mock_server import MockServer
from panewatch_lab.scenario import load_scenario
from test_live_claude import launch, screen_shows

pytestmark = [
    pytest.mark.live,
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
    hosting = open_hosting(state_dir=state, pane_host="tmux", token=TOKEN)
    app = create_app(settings, hosting=hosting)
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
        if hosting.lock is not None:  # held for the process's life: this "process" ends here
            hosting.lock.release()


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


def conversation_of(state: Path, sid: str) -> str | None:
    conn = sqlite3.connect(state / "sessions.sqlite3")
    try:
        row = conn.execute("SELECT agent_session_id FROM sessions WHERE id = ?", (sid,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


async def until(check: Callable[[], object], what: str, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"{what} never happened in {timeout} s"
        await asyncio.sleep(0.05)


def proc_argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


async def test_a_restricted_wrapped_claude_resumes_restricted_after_a_restart(mock: MockServer, tmp_path: Path) -> None:
    # the case: plan mode and a denied tool, behind two wrappers (an environment and a
    # priority); the server stops, tmux dies, a new server shows it lost from its registry alone
    state, project = tmp_path / "state", tmp_path / "project"
    env = prepare_home(tmp_path / "home", project, API_KEY, mock.url)
    flags = ["--permission-mode", "plan", "--disallowedTools", "Bash"]
    launched = ["env", "LAB_MARK=kept", "nice", "-n", "3", CLAUDE, *flags]
    async with tmux_server(state) as live:
        s = await live.create(agent="claude", command=launched, cwd=str(project), env=env, rows=32, cols=120)
        sid = s["id"]
        assert s["command"][: len(launched)] == launched and s["command"][len(launched)] == "--settings"
        await screen_shows(live, sid, "plan mode on", 30)  # the flag took: the footer says so
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:think about it, then answer"})
        assert r.status_code == 200, r.text
        await screen_shows(live, sid, "The answer is 42.", 40)
        await live.wait_state(sid, "idle", 20)
        conversation = conversation_of(state, sid)
        assert conversation, "the hooks reported Claude's session_id (through the wrappers)"
    # the server is gone and so is its tmux server (the context killed it)
    async with tmux_server(state) as live:
        lost = await live.wait_state(sid, "lost", 10)
        assert lost["resume"] == {"possible": True, "why": None}
        r = await live.http.post(f"/api/sessions/{sid}/resume")
        assert r.status_code == 200, r.text
        pid = r.json()["pid"]
        # env and nice exec the agent in the same process: its argv once claude runs there
        await until(
            lambda: os.path.basename(next(iter(proc_argv(pid)), "")).startswith("claude"), "claude in the pane", 20
        )
        argv = proc_argv(pid)
        assert argv[1 : len(flags) + 3] == [*flags, "--resume", conversation], argv
        assert argv[len(flags) + 3] == "--settings", "fresh hooks"
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"LAB_MARK=kept" in environ, "the wrapper's environment"
        assert f"ANTHROPIC_BASE_URL={env['ANTHROPIC_BASE_URL']}".encode() in environ, "the session's own env"
        niceness = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
        assert niceness == min(os.nice(0) + 3, 19), "nice -n 3 kept (on top of the test's own niceness)"
        await screen_shows(live, sid, "The answer is 42.", 40)  # the same conversation
        await screen_shows(live, sid, "plan mode on", 30)  # and in plan mode again
