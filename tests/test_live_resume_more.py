"""Resume of opencode, Copilot CLI, Cline and gptme for real, on the lab's tool-calling mock: each is
launched through the service on the tmux host with its hooks, answers one turn, and its hooks
report its conversation id; then the tmux server is killed (the session turns ``lost``), and
``POST /resume`` starts the pinned CLI again with the manifest's resume arguments and that id. The
conversation is back when the agent's next request to the mock carries the earlier turn (the mock
logs every request's body) — and, where the agent redraws its transcript, the screen shows it.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_lab_support import lab_or_skip
from live import Live
from panewatch.engine.events import Reported
from panewatch.hosts.tmux import tmux_usable
from panewatch.procs.resume import agent_session_id
from panewatch_lab.agent_labs import LABS, AgentLab
from panewatch_lab.agent_scenario import content_texts, last_turn, typed_text
from panewatch_lab.loopback import LoopbackServer
from test_live_agents import settled, shows, wait_turn
from test_resume_claude import conversation_of, tmux_server, until

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}"),
]

#: Per case: the agent, its ready screen, the resume arguments before the id, whether its own
#: daemons are gone too (a reboot) or only its pane (tmux killed), and the hook event that ends a
#: turn, which the resumed agent's hooks must report again (fresh token, the same conversation).
#: Cline runs a resumed session (``--id``) in its hub daemon, not in the TUI: the hooks are the
#: daemon's children. Where the daemon outlived the tmux server (it is no pane's descendant any
#: more) the report socket does not take them, and the resumed pane's state is its screen's.
CASES: dict[str, dict[str, Any]] = {
    "opencode": {"agent": "opencode", "ready": "ctrl+p commands", "resume": ["--session"], "ended": "session.idle"},
    "copilot": {"agent": "copilot", "ready": "/ commands", "resume": ["--resume"], "ended": "agentStop"},
    "cline": {"agent": "cline", "ready": "Auto-approve all disabled", "resume": ["--id"], "ended": None},
    # gptme's --name picks the conversation: the launch's own `--name lab-session` is replaced by
    # the resume's; it turns itself non-interactive when it sees PYTEST_CURRENT_TEST (the wrap)
    "gptme": {
        "agent": "gptme",
        "ready": "^User:",
        "resume": ["--name"],
        "ended": "turn.post",
        "wrap": ["env", "-u", "PYTEST_CURRENT_TEST"],
        "replaced": ["--name", "lab-session"],
        # a line-oriented CLI whose every turn ends with tiktoken's offline warnings (7 lines
        # each, five and more seen): at 32 rows they pushed the reply off the screen once
        "rows": 64,
    },
    "cline-rebooted": {
        "agent": "cline",
        "ready": "Auto-approve all disabled",
        "resume": ["--id"],
        "daemons_gone": True,
        "ended": "TaskComplete",
    },
}
#: Slow starters (opencode: 60-90 s to its first frame on this 2-core machine under load).
READY_S = 240
REPLY = "Hello from the mock model."


async def _turn(live: Live, mock: LoopbackServer, sid: str, ready: str) -> dict[str, Any]:
    """One ``task:hello`` turn from the agent's ready screen to its answer and idle (its info)."""
    await shows(live, sid, ready, READY_S)
    await live.wait_state(sid, "idle", 60)
    await settled(live, sid, quiet=2.0, timeout=60)
    before = last_turn(mock.records()).requests
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:hello"})
    assert r.status_code == 200, r.text
    await wait_turn(mock, "done", before + 1, 90)
    await shows(live, sid, REPLY, 60)
    return await live.wait_state(sid, "idle", 60)


def _conversation(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of a request's user and assistant messages."""
    out = []
    for message in body.get("messages") or []:
        if message.get("role") in ("user", "assistant"):
            out.append((message["role"], typed_text(content_texts(message.get("content")))))
    return out


def _stop_daemons(lab: AgentLab, home: Path) -> None:
    """Cline's hub daemons of this run, ended until none is left: a TUI that is still going away
    can start one more after the first round."""
    if lab.cleanup is None:
        return
    quiet = 0
    for _ in range(100):
        lab.cleanup(home)
        left = [p for p in Path("/proc").glob("[0-9]*/environ") if _home_of(p) == home]
        quiet = quiet + 1 if not left else 0
        if quiet >= 3:
            return
        time.sleep(0.2)


def _home_of(environ: Path) -> Path | None:
    try:
        found = [v for v in environ.read_bytes().split(b"\0") if v.startswith(b"HOME=")]
    except OSError:
        return None
    return Path(found[0][5:].decode(errors="replace")) if found else None


async def _lose_and_resume(
    live: Live,
    mock: LoopbackServer,
    s: dict[str, Any],
    facts: dict[str, Any],
    launched: list[str],
    state: Path,
    reports: Callable[[], list[Reported]],
    home: Path,
) -> None:
    """One turn, the tmux server killed, the lost session resumed, another turn."""
    lab, sid = LABS[facts["agent"]], s["id"]
    await _turn(live, mock, sid, facts["ready"])
    await until(lambda: conversation_of(state, sid), f"{facts['agent']}'s hooks reporting its conversation", 30)
    conversation = conversation_of(state, sid)

    subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], check=True)
    lost = await live.wait_state(sid, "lost", 10)
    assert lost["resume"] == {"possible": True, "why": None}, lost
    if facts.get("daemons_gone") and lab.cleanup is not None:
        lab.cleanup(home)  # what a reboot does to Cline's hub daemon too

    before = len(reports())
    r = await live.http.post(f"/api/sessions/{sid}/resume")
    assert r.status_code == 200, r.text
    resumed = r.json()
    replaced = facts.get("replaced", [])
    at = next((i for i in range(len(launched)) if launched[i : i + len(replaced)] == replaced), len(launched))
    wanted = [*launched[:at], *launched[at + len(replaced) :], *facts["resume"], conversation]
    assert resumed["command"][: len(wanted)] == wanted, resumed["command"]
    assert resumed["id"] == sid and resumed["pid"] != s["pid"]
    await shows(live, sid, REPLY, READY_S)  # the earlier turn, redrawn from the agent's store
    after = await _turn(live, mock, sid, facts["ready"])
    if facts["ended"] is None:
        assert after["source"] == "screen", after  # idle from its own screen rule
        return
    # the resumed agent's hooks report again, naming the same conversation
    await until(
        lambda: any(e.event == facts["ended"] for e in reports()[before:]),
        f"a {facts['ended']} hook report after the resume",
        30,
    )
    assert {agent_session_id(e.payload) for e in reports()[before:]} == {conversation}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_lost_agent_resumes_its_conversation(case: str, tmp_path: Path) -> None:
    facts = CASES[case]
    agent = facts["agent"]
    lab, binary = lab_or_skip(agent)
    state, project, home = tmp_path / "state", tmp_path / "project", tmp_path / "home"
    project.mkdir()
    with LoopbackServer(lab.mock(None, None, log_bodies=True)) as mock:
        env = lab.prepare(home, project, mock.url)
        launched = [*facts.get("wrap", ()), *lab.start_up(frozenset(), home, project, env, lab.argv(binary, project))]
        try:
            async with tmux_server(state) as live:
                reports: list[Reported] = []
                live.engine.subscribe(lambda e: reports.append(e) if isinstance(e, Reported) else None)
                rows = facts.get("rows", 32)
                s = await live.create(agent=agent, command=launched, cwd=str(project), env=env, rows=rows, cols=120)
                try:
                    await _lose_and_resume(live, mock, s, facts, launched, state, lambda: reports, home)
                finally:
                    await live.http.delete(f"/api/sessions/{s['id']}")  # the pane's processes ended first
        finally:
            _stop_daemons(lab, home)
    main = [r for r in mock.records() if r["event"] == "request" and r.get("kind") == "main"]
    said = _conversation(main[-1]["body"])
    # the request after the resume carries the turn before it: the conversation was reopened
    assert sum(role == "user" and text.endswith("task:hello") for role, text in said) >= 2, said
    assert any(role == "assistant" and REPLY in text for role, text in said), said
