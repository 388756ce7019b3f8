"""The real Codex and Gemini CLIs report through the hooks Panewatch adds at launch.

Each CLI is launched by ``POST /api/sessions`` against its lab mock, exactly as a user would
launch it; the service adds its hooks (Codex: ``-c`` overrides with their trust; Gemini: an
overlay ``GEMINI_CLI_HOME``), the hooks ``curl`` the report socket, and this test watches what
arrived: the engine's ``report`` events (a sink, as any tool is) and ``/explain``'s report. A turn
must report working then idle, an escalated command must report blocked (from the hook, not
only the screen), and the agent's own session id must be what the pane would resume.

``PANEWATCH_SAVE_HOOK_PAYLOADS=<folder>`` keeps every payload that arrived, one JSON file each
(how ``fixtures/hooks/`` was made).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_lab_support import lab_or_skip
from live import Live, live_server
from panewatch.engine.events import Reported
from panewatch.procs.resume import agent_session_id
from panewatch_lab.agent_labs import LABS
from panewatch_lab.loopback import LoopbackServer
from test_live_agents import AGENTS, rows, settled, shows, wait_turn

pytestmark = pytest.mark.live


#: Per agent: (events that say working, events that say blocked, events that end a turn).
EVENTS = {
    "codex": ({"UserPromptSubmit", "PreToolUse", "PostToolUse"}, {"PermissionRequest"}, {"Stop"}),
    "gemini": ({"BeforeAgent", "BeforeTool", "AfterTool"}, {"Notification:ToolPermission"}, {"AfterAgent"}),
}


async def until(check: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


@asynccontextmanager
async def reporting(agent: str, tmp_path: Path) -> AsyncIterator[tuple[LoopbackServer, Live, list[Reported], dict]]:
    """The agent's lab mock and a live server whose engine's report events are recorded, with
    the environment that points the agent (its home and project in ``tmp_path``) at the mock."""
    (tmp_path / "project").mkdir()
    with LoopbackServer(LABS[agent].mock(None)) as mock:
        async with live_server(mode="sweep") as live:
            reports: list[Reported] = []
            live.engine.subscribe(lambda e: reports.append(e) if isinstance(e, Reported) else None)
            env = LABS[agent].prepare(tmp_path / "home", tmp_path / "project", mock.url)
            yield mock, live, reports, env


async def launch_ready(live: Live, agent: str, binary: str, tmp_path: Path, env: dict, **size: int) -> str:
    """The agent launched in its project as a service session, once it is ready and went quiet."""
    project = tmp_path / "project"
    s = await live.create(agent=agent, command=LABS[agent].argv(binary, project), cwd=str(project), env=env, **size)
    await shows(live, s["id"], AGENTS[agent]["ready"], 40)
    await settled(live, s["id"])
    return s["id"]


async def send(live: Live, sid: str, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /send``, which must be accepted; its answer."""
    r = await live.http.post(f"/api/sessions/{sid}/send", json=body)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("agent", list(EVENTS))
async def test_hooks_report_a_turn_and_a_permission_prompt(agent: str, tmp_path: Path) -> None:
    _, binary = lab_or_skip(agent)
    working, blocked, ended = EVENTS[agent]
    async with reporting(agent, tmp_path) as (mock, live, reports, env):
        config = _config_files(tmp_path / "home")  # before the launch: the hooks must not land in them
        sid = await launch_ready(live, agent, binary, tmp_path, env, rows=32, cols=120)

        # a plain turn: working from the hooks, then idle when it ends
        mark = len(reports)
        before = len([r for r in mock.records() if r["event"] == "request"])
        await send(live, sid, {"text": "task:hello"})
        await wait_turn(mock, "done", 1, 30)
        await until(
            lambda: any(e.event in ended for e in reports[mark:]),
            f"no turn-end hook arrived: {[e.event for e in reports]}\n" + "\n".join(await rows(live, sid)),
        )
        seen = [(e.event, e.state) for e in reports[mark:]]
        assert any(ev in working and st == "working" for ev, st in seen), seen
        assert any(ev in ended and st == "idle" for ev, st in seen), seen
        assert len([r for r in mock.records() if r["event"] == "request"]) > before

        # an escalated command: the permission hook reports blocked while the prompt is up
        mark = len(reports)
        await send(live, sid, {"text": "task:bash"})
        await shows(live, sid, AGENTS[agent]["asked"], 30)
        await until(
            lambda: any(e.event in blocked for e in reports[mark:]),
            f"no permission hook arrived: {[(e.event, e.state) for e in reports[mark:]]}",
        )
        assert [e.state for e in reports[mark:] if e.event in blocked] == ["blocked"]
        info = (await live.http.get(f"/api/sessions/{sid}/explain")).json()
        assert info["decision"]["state"] == "blocked", info["decision"]
        assert info["signals"]["report"]["state"] == "blocked", info["signals"]
        assert info["signals"]["report"]["event"] in blocked, info["signals"]
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={**AGENTS[agent]["answer"], "confirm": True})
        assert r.status_code == 200 and r.json()["took"] is True, r.text
        await until(lambda: (tmp_path / "project" / "x.txt").exists(), "the approved command never ran")
        await until(
            lambda: any(e.event in ended for e in reports[mark:]),
            f"the approved turn never ended: {[e.event for e in reports[mark:]]}",
        )
        await live.wait_state(sid, "idle", 20)

        # every payload named the agent's own session, the id the registry keeps for a resume
        ids = {agent_session_id(e.payload) for e in reports}
        assert len(ids) == 1 and None not in ids, ids
        # the hooks came per launch: none was written into the user's own config files, which
        # keep all they had (Codex itself adds its own TUI notes to config.toml: not ours)
        after = _config_files(tmp_path / "home")
        assert after.keys() == config.keys()
        for name, before in config.items():
            old, new = _parse(name, before), _parse(name, after[name])
            assert "hooks" not in new and {k: new.get(k) for k in old} == old, name
        _save(agent, reports)
        await live.http.delete(f"/api/sessions/{sid}")


async def test_codex_esc_mid_turn_reports_idle_by_its_interrupt_hook(tmp_path: Path) -> None:
    """Claude sends no hook when a turn is interrupted with Esc; Codex has ``Interrupt``, which
    the service adds: the report that says the turn ended comes from the agent itself."""
    _, binary = lab_or_skip("codex")
    async with reporting("codex", tmp_path) as (mock, live, reports, env):
        sid = await launch_ready(live, "codex", binary, tmp_path, env)
        await send(live, sid, {"text": "task:slow"})
        await wait_turn(mock, "waiting", 1, 15)  # the model has not answered yet (3 s)
        await until(lambda: any(e.event == "UserPromptSubmit" for e in reports), "no UserPromptSubmit")
        mark = len(reports)
        sent = await send(live, sid, {"text": "\x1b", "enter": False})
        assert sent["state_before"] == "working", sent
        await until(
            lambda: any(e.event == "Interrupt" for e in reports[mark:]),
            f"no Interrupt hook: {[e.event for e in reports[mark:]]}\n" + "\n".join(await rows(live, sid)),
        )
        assert [e.state for e in reports[mark:] if e.event == "Interrupt"] == ["idle"]
        assert not any(e.event == "Stop" for e in reports[mark:])
        await live.wait_state(sid, "idle", 10)
        await live.http.delete(f"/api/sessions/{sid}")


def _config_files(home: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes()
        for p in (home / ".codex" / "config.toml", home / ".gemini" / "settings.json")
        if p.exists()
    }


def _parse(name: str, data: bytes) -> dict[str, Any]:
    import tomllib

    parsed: dict[str, Any] = tomllib.loads(data.decode()) if name.endswith(".toml") else json.loads(data)
    return parsed


def _save(agent: str, reports: list[Reported]) -> None:
    folder = os.environ.get("PANEWATCH_SAVE_HOOK_PAYLOADS")
    if not folder:
        return
    out = Path(folder) / agent / LABS[agent].pinned
    out.mkdir(parents=True, exist_ok=True)
    for n, event in enumerate(reports):
        name = str(event.payload.get("hook_event_name") or "report")
        (out / f"{n:02d}-{name}.json").write_text(json.dumps(event.payload, indent=2, sort_keys=True) + "\n")


# --- Claude Code: native http hooks, no curl ----------------------------------------------------

CLAUDE_KEY = "sk-ant-api03-lab-0123456789abcdefghijklmnopqrstuvwxyz"


def _path_without_curl(folder: Path) -> str:
    """A PATH with every program of /usr/bin and /bin but curl (symbolic links)."""
    folder.mkdir()
    for source in (Path("/usr/bin"), Path("/bin")):
        for entry in source.iterdir():
            if entry.name != "curl" and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry)
    return str(folder)


def _claude() -> str:
    from panewatch.integrations.claude import HTTP_HOOKS_SINCE, installed_version
    from panewatch_lab.claude_env import find_claude

    binary = find_claude()
    if binary is None:
        pytest.skip(
            "claude CLI not installed (npm install --prefix .lab-npm @anthropic-ai/claude-code, or PANEWATCH_CLAUDE_BIN)"
        )
    if (installed_version(binary) or (0,)) < HTTP_HOOKS_SINCE:
        pytest.skip(f"claude {installed_version(binary)} is older than the first checked to take http hooks")
    return binary


@pytest.mark.parametrize("endpoint", ["live", "down"])
async def test_claude_reports_by_native_http_hooks_with_no_curl_installed(endpoint: str, tmp_path: Path) -> None:
    """``live``: with no curl on its PATH, Claude's own http hooks report a turn (working, then
    idle), identified by the process holding the socket. ``down``: hooks pointed at a port nobody
    listens on do not hold the agent up: the turn runs and the screen decides (Claude notes a
    "hook problem" in its footer)."""
    from panewatch_lab.claude_env import prepare_home
    from panewatch_lab.mock_server import MockServer
    from panewatch_lab.scenario import load_scenario

    binary = _claude()
    with MockServer(load_scenario("basic")) as mock:
        async with live_server() as live:
            if endpoint == "down":
                with socket.socket() as closed:
                    closed.bind(("127.0.0.1", 0))
                    port = closed.getsockname()[1]
                await live.engine.reachable_at(env={"PANEWATCH_REPORT_URL": f"http://127.0.0.1:{port}/report"})
            reports: list[Reported] = []
            live.engine.subscribe(lambda e: reports.append(e) if isinstance(e, Reported) else None)
            env = prepare_home(tmp_path / "home", tmp_path / "project", CLAUDE_KEY, mock.url)
            env["PATH"] = _path_without_curl(tmp_path / "bin")
            s = await live.create(
                agent="claude", command=[binary, "--permission-mode", "default"], cwd=str(tmp_path / "project"), env=env
            )
            settings = json.loads(s["command"][-1])
            hook = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]
            assert hook["type"] == "http" and hook["url"].endswith(f"/report?session={s['id']}"), hook
            await shows(live, s["id"], "? for shortcuts", 40)
            r = await live.http.post(f"/api/sessions/{s['id']}/send", json={"text": "task:hello"})
            assert r.status_code == 200, r.text
            await shows(live, s["id"], "Hello from the mock API", 30)
            await live.wait_state(s["id"], "idle", 20)
            if endpoint == "live":
                await until(lambda: any(e.event == "Stop" for e in reports), f"no Stop hook: {reports}")
                seen = [(e.event, e.state) for e in reports]
                assert ("UserPromptSubmit", "working") in seen and ("Stop", "idle") in seen, seen
            else:
                # the turn ran; the screen decided; the one trace is Claude's own footer notice
                # (why curl, silent when the service is down, stays first where it is installed)
                await shows(live, s["id"], "hook problem", 10)
                assert reports == []
                info = (await live.http.get(f"/api/sessions/{s['id']}/explain")).json()
                assert info["decision"]["state"] == "idle" and info["decision"]["source"] == "screen", info
                assert info["signals"]["report"] is None, info["signals"]
            await live.http.delete(f"/api/sessions/{s['id']}")
