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
import time
from pathlib import Path
from typing import Any

import pytest

from live import live_server
from panewatch.events import Reported
from panewatch.resume import agent_session_id
from panewatch_lab.agent_labs import LABS
from panewatch_lab.loopback import LoopbackServer
from test_live_agents import AGENTS, rows, settled, shows, wait_turn

pytestmark = pytest.mark.slow

#: Per agent: (events that say working, events that say blocked, events that end a turn).
EVENTS = {
    "codex": ({"UserPromptSubmit", "PreToolUse", "PostToolUse"}, {"PermissionRequest"}, {"Stop"}),
    "gemini": ({"BeforeAgent", "BeforeTool", "AfterTool"}, {"Notification:ToolPermission"}, {"AfterAgent"}),
}


def _binary(agent: str) -> str:
    lab = LABS[agent]
    binary = lab.find()
    if binary is None:
        pytest.skip(f"{agent} CLI not installed ({' '.join(lab.install_command(lab.pinned, lab.default_prefix()))})")
    return binary


async def until(check: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("agent", list(EVENTS))
async def test_hooks_report_a_turn_and_a_permission_prompt(agent: str, tmp_path: Path) -> None:
    binary = _binary(agent)
    lab = LABS[agent]
    working, blocked, ended = EVENTS[agent]
    (tmp_path / "project").mkdir()
    with LoopbackServer(lab.mock(None)) as mock:
        async with live_server(mode="sweep") as live:
            reports: list[Reported] = []
            live.engine.subscribe(lambda e: reports.append(e) if isinstance(e, Reported) else None)
            env = lab.prepare(tmp_path / "home", tmp_path / "project", mock.url)
            config = _config_files(tmp_path / "home")
            s = await live.create(
                agent=agent,
                command=lab.argv(binary, tmp_path / "project"),
                cwd=str(tmp_path / "project"),
                env=env,
                rows=32,
                cols=120,
            )
            sid = s["id"]
            await shows(live, sid, AGENTS[agent]["ready"], 40)
            await settled(live, sid)

            # a plain turn: working from the hooks, then idle when it ends
            mark = len(reports)
            before = len([r for r in mock.records() if r["event"] == "request"])
            r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:hello"})
            assert r.status_code == 200, r.text
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
            r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:bash"})
            assert r.status_code == 200, r.text
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
            # the user's own config files were read, never written (the hooks came per launch)
            assert _config_files(tmp_path / "home") == config
            _save(agent, reports)
            await live.http.delete(f"/api/sessions/{sid}")


def _config_files(home: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes()
        for p in (home / ".codex" / "config.toml", home / ".gemini" / "settings.json")
        if p.exists()
    }


def _save(agent: str, reports: list[Reported]) -> None:
    folder = os.environ.get("PANEWATCH_SAVE_HOOK_PAYLOADS")
    if not folder:
        return
    out = Path(folder) / agent / LABS[agent].pinned
    out.mkdir(parents=True, exist_ok=True)
    for n, event in enumerate(reports):
        name = str(event.payload.get("hook_event_name") or "report")
        (out / f"{n:02d}-{name}.json").write_text(json.dumps(event.payload, indent=2, sort_keys=True) + "\n")
