"""opencode, Qwen Code, Copilot CLI, Continue, gptme and Cline through the whole service, driven only through the API.

One run per agent (their CI cost kept small: these are slow starters): launched by
``POST /api/sessions`` against the lab's tool-calling chat mock, the session must read ``working``
(source ``start``) until the agent's own idle rule matched, then ``working`` while the model
thinks, ``blocked`` while its shell command waits (``/send`` refused), and after a confirmed
``/answer`` the command must have run and the pane be ``idle`` again. The mock's JSON-lines log is
the ground truth for what the model was doing. Where the agent has hooks the service adds at launch
(Qwen Code, Cline, opencode's plugin, Copilot CLI, gptme's plugin), the hooks' reports must
arrive too (in ``/explain``'s ``signals.report`` at each step), and nothing may land in the user's
own files; gptme's plugin also runs beside the user's own plugins (both still run).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from agent_lab_support import lab_or_skip
from live import Live, live_server
from panewatch.engine.events import Reported
from panewatch.procs.resume import agent_session_id
from panewatch_lab.agent_scenario import last_turn
from panewatch_lab.loopback import LoopbackServer
from test_live_agents import Decisions, rows, settled, shows, wait_turn

pytestmark = pytest.mark.live

#: Per agent: what its ready screen shows, the rule that must say idle, the rule that must say
#: blocked for the shell prompt (and any other rule allowed to say blocked meanwhile: Qwen's title
#: turns ✳︎ a moment before the box is drawn), and the keys a confirmed /answer sends to allow the
#: command once.
AGENTS: dict[str, dict[str, Any]] = {
    "opencode": {
        "ready": "ctrl+p commands",
        "idle_rule": "input_box",
        "blocked_rule": "permission_request",
        "asked": "Permission required",
        "answer": {"keys": "\r"},
        "hooks": (
            {"chat.message", "tool.execute.before", "permission.replied"},
            {"permission.asked"},
            {"session.idle"},
        ),
        "reported": {"working": {"chat.message"}, "blocked": {"permission.asked"}, "idle": {"session.idle"}},
        # the plugin's permission.asked names the command: the request is the structured one
        "request": {"source": "hook", "tool": "bash", "subject": "touch x.txt", "disagrees": None},
    },
    "qwen": {
        "ready": "Type your message",
        "idle_rule": "input_box",
        "blocked_rule": "confirmation",
        "also_blocked": {"waiting_title"},
        "asked": "Waiting for user confirmation",
        "answer": {"keys": "\r"},
        "hooks": ({"UserPromptSubmit", "PreToolUse", "PostToolUse"}, {"PermissionRequest"}, {"Stop"}),
    },
    "copilot": {
        "ready": "/ commands",
        "idle_rule": "composer",
        "blocked_rule": "question_box",
        "asked": "Do you want to run this command",
        "answer": {"keys": "\r"},
        "hooks": ({"userPromptSubmitted", "preToolUse", "postToolUse"}, {"permissionRequest"}, {"agentStop"}),
        "reported": {"working": {"userPromptSubmitted"}, "blocked": {"permissionRequest"}, "idle": {"agentStop"}},
        "request": {"source": "hook", "tool": "bash", "subject": "touch x.txt", "disagrees": None},
    },
    "continue": {
        "ready": "Ask anything, @ for context",
        "idle_rule": "input_box",
        "blocked_rule": "permission_box",
        "asked": "Would you like to continue",
        "answer": {"keys": "\r"},
    },
    "gptme": {
        "ready": "^User:",
        "idle_rule": "user_prompt",
        "blocked_rule": "confirm_question",
        "also_blocked": {"confirmation_title"},
        "asked": "Execute shell?",
        "answer": {"keys": "y\r"},
        # gptme turns itself non-interactive (no prompt, no confirmations) when it sees
        # PYTEST_CURRENT_TEST, which the service's environment passes on to every pane here
        "wrap": ["env", "-u", "PYTEST_CURRENT_TEST"],
        # its plugin (an entry point on PYTHONPATH): gptme asks inside the tool's execution, so
        # tool.execute.pre comes before the question and tool.confirm names its command
        "hooks": (
            {"turn.pre", "generation.pre", "tool.execute.pre", "tool.execute.post"},
            {"tool.confirm"},
            {"turn.post"},
        ),
        "reported": {"working": {"generation.pre"}, "blocked": {"tool.confirm"}, "idle": {"turn.post"}},
        "request": {"source": "hook", "tool": "shell", "subject": "touch x.txt", "disagrees": None},
        "conversation": "lab-session",
        "untouched": [".config/gptme/config.toml"],
        # the next task goes in as soon as the turn's end is reported, as a script acting on the
        # event would: gptme flushes keys typed before its prompt, so its plugin reports the end
        # only once the prompt reads keys
        "send_on_idle_report": True,
    },
    "cline": {
        "ready": "Auto-approve all disabled",
        "idle_rule": "prompt_footer",
        "blocked_rule": "permission_box",
        "asked": "Cline needs permission",
        "answer": {"keys": "y"},
        "hooks": ({"TaskStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"}, set(), {"TaskComplete"}),
        # 3.0.65 has no permission event: PreToolUse comes before its approval box
        "reported": {"working": {"TaskStart"}, "blocked": {"PreToolUse"}, "idle": {"TaskComplete"}},
    },
}
#: Slow starters (opencode: 60-90 s to its first frame on this 2-core machine under load).
READY_S = 240


def _files(home: Path) -> dict[str, str]:
    """Every small text file under the agent's HOME (its config), to see that no hook landed there."""
    out = {}
    for path in home.rglob("*.json"):
        try:
            if path.stat().st_size < 200_000:
                out[str(path.relative_to(home))] = path.read_text()
        except OSError:
            continue
    return out


async def reported(live: Live, sid: str, facts: dict[str, Any], phase: str, timeout: float = 30) -> None:
    """Wait until the session's latest hook report (``/explain``'s ``signals.report``) is one of the
    events ``facts["reported"][phase]`` names: each hook is a process of its own, so under load
    the screen can change before its report comes in."""
    events = facts.get("reported", {}).get(phase)
    if not events:
        return
    deadline = time.monotonic() + timeout
    while True:
        info = (await live.http.get(f"/api/sessions/{sid}/explain")).json()
        if (info["signals"].get("report") or {}).get("event") in events:
            return
        assert time.monotonic() < deadline, f"no {phase} hook report among {sorted(events)}: {info['signals']}"
        await asyncio.sleep(0.05)


async def until(check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("agent", list(AGENTS))
async def test_start_working_blocked_answer_idle(agent: str, tmp_path: Path) -> None:
    facts = AGENTS[agent]
    lab, binary = lab_or_skip(agent)
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    with LoopbackServer(lab.mock(None)) as mock:
        async with live_server(mode="change") as live:
            reports: list[Reported] = []
            live.engine.subscribe(lambda e: reports.append(e) if isinstance(e, Reported) else None)
            env = lab.prepare(home, project, mock.url)
            argv = [*facts.get("wrap", ()), *lab.start_up(frozenset(), home, project, env, lab.argv(binary, project))]
            config_before = _files(home)
            untouched = {name: (home / name).read_bytes() for name in facts.get("untouched", ())}
            s = await live.create(agent=agent, command=argv, cwd=str(project), env=env, rows=32, cols=120)
            sid = s["id"]
            decisions = Decisions(live, sid)
            try:
                await _drive(live, mock, sid, facts, project, decisions, reports)
            finally:
                decisions.close()
                await live.http.delete(f"/api/sessions/{sid}")
                if lab.cleanup is not None:
                    lab.cleanup(home)
            if "hooks" in facts:
                working, blocked, ended = facts["hooks"]
                seen = [(e.event, e.state) for e in reports]
                assert any(ev in working and st == "working" for ev, st in seen), seen
                assert not blocked or any(ev in blocked and st == "blocked" for ev, st in seen), seen
                assert any(ev in ended and st == "idle" for ev, st in seen), seen
                after = _files(home)
                changed = [name for name, text in config_before.items() if after.get(name) != text]
                assert not any("hooks" in after.get(name, "") for name in changed), changed
                assert {name: (home / name).read_bytes() for name in untouched} == untouched
                if "conversation" in facts:
                    # every event named the conversation `--name` gave (its log folder's name)
                    assert {agent_session_id(e.payload) for e in reports} == {facts["conversation"]}, seen


async def _drive(
    live: Live,
    mock: LoopbackServer,
    sid: str,
    facts: dict[str, Any],
    project: Path,
    decisions: Decisions,
    reports: list[Reported],
) -> None:
    # start → idle only once the agent drew its input box (its rule, never "nothing matched")
    await shows(live, sid, facts["ready"], READY_S)
    info = await live.wait_state(sid, "idle", 30)
    assert (info["source"], info["rule"]) == ("screen", facts["idle_rule"]), info
    assert decisions.seen[0][1:3] == ("working", "start"), decisions.seen
    await settled(live, sid, quiet=2.0, timeout=60)

    # a turn the model is slow to answer reads working
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:slow"})
    assert r.status_code == 200 and r.json()["state_before"] == "idle", r.text
    await wait_turn(mock, "waiting", 1, 60)
    await live.wait_state(sid, "working", 30)
    await reported(live, sid, facts, "working")
    await wait_turn(mock, "done", 1, 90)
    await live.wait_state(sid, "idle", 60)
    await reported(live, sid, facts, "idle")
    if not facts.get("send_on_idle_report"):
        await settled(live, sid, quiet=1.0, timeout=30)

    # a shell command reads blocked; /send is refused; a confirmed /answer takes and the command runs
    before = last_turn(mock.records()).requests
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:bash"})
    assert r.status_code == 200, r.text
    try:
        await wait_turn(mock, "tool", before + 1, 90)
    except AssertionError as exc:  # what the agent shows instead says why
        raise AssertionError(f"{exc}; its screen:\n" + "\n".join(await rows(live, sid))) from None
    await shows(live, sid, facts["asked"], 90)
    info = await live.wait_state(sid, "blocked", 15)
    assert info["source"] in {"screen", "hook"}, info
    await reported(live, sid, facts, "blocked")
    if "request" in facts:
        request = (await live.http.get(f"/api/sessions/{sid}")).json()["request"]
        assert {k: request[k] for k in facts["request"]} == facts["request"], (request, [r.payload for r in reports])
    explain = (await live.http.get(f"/api/sessions/{sid}/explain")).json()
    assert explain["screen_verdict"]["rule"] == facts["blocked_rule"], explain["screen_verdict"]
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "hello"})
    assert r.status_code == 409 and r.json()["state"] == "blocked", r.text
    await asyncio.sleep(0.5)  # the same settle a person gives a prompt before answering it
    r = await live.http.post(f"/api/sessions/{sid}/answer", json={**facts["answer"], "confirm": True})
    assert r.status_code == 200 and r.json()["took"] is True, r.text
    await until(lambda: (project / "x.txt").exists(), "the approved command never ran", 60)
    await wait_turn(mock, "done", before + 2, 90)
    await live.wait_state(sid, "idle", 60)
    await reported(live, sid, facts, "idle")
    allowed = {facts["blocked_rule"], *facts.get("also_blocked", ())}
    wrongly = [d for d in decisions.seen if d[1] == "blocked" and d[2] == "screen" and d[3] not in allowed]
    assert not wrongly, decisions.seen


#: A ``sitecustomize`` of the user's (on its ``PYTHONPATH``) that makes each of gptme's fsyncs take
#: a second, as a busy disk does: gptme writes its log, fsynced, between its ``turn.post`` hook
#: and its prompt, and flushes whatever was typed meanwhile.
SLOW_DISK = """
import os, time
_fsync = os.fsync


def _slow(fd):
    time.sleep(1.0)
    return _fsync(fd)


os.fsync = _slow
"""


async def test_a_task_sent_as_soon_as_gptmes_turn_ends_is_not_lost(tmp_path: Path) -> None:
    """The turn's end (idle) is reported once gptme's prompt reads keys, not at its hook: sent on
    the report, the next task reaches the model even while gptme is still writing its log (at
    the hook, the terminal echoed it and gptme threw it away: the mock never saw it)."""
    lab, binary = lab_or_skip("gptme")
    project, home, slow = tmp_path / "project", tmp_path / "home", tmp_path / "slow-disk"
    project.mkdir()
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_DISK)
    with LoopbackServer(lab.mock(None)) as mock:
        async with live_server(mode="change") as live:
            env = {**lab.prepare(home, project, mock.url), "PYTHONPATH": str(slow)}
            argv = [*AGENTS["gptme"]["wrap"], *lab.argv(binary, project)]
            s = await live.create(agent="gptme", command=argv, cwd=str(project), env=env, rows=32, cols=120)
            sid = s["id"]
            try:
                await shows(live, sid, "^User:", READY_S)
                await settled(live, sid, quiet=2.0, timeout=60)
                for turn, task in enumerate(("task:hello", "task:again"), start=1):
                    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": task})
                    assert r.status_code == 200, r.text
                    try:
                        await wait_turn(mock, "done", turn, 60)
                    except AssertionError as exc:
                        raise AssertionError(
                            f"{task}: {exc}; its screen:\n" + "\n".join(await rows(live, sid))
                        ) from None
                    # this turn's end (its working reports came before its request), then at once the next
                    await reported(live, sid, AGENTS["gptme"], "idle", timeout=60)
            finally:
                await live.http.delete(f"/api/sessions/{sid}")


#: A hook module of the user's own: it writes down every turn's end (gptme calls ``register()``).
USER_HOOK = """
import os
from gptme.hooks import HookType, register_hook


def _ended(manager=None):
    with open(os.environ["MINE_LOG"], "a") as out:
        out.write(f"{__name__} turn.post\\n")


def register():
    register_hook(f"{__name__}.ended", HookType.TURN_POST, _ended)
"""


async def test_gptme_keeps_the_users_own_plugins(tmp_path: Path) -> None:
    """gptme's plugin beside the user's own: a folder plugin named in their ``config.toml``
    (``[plugins] paths``) and an entry-point plugin on their own ``PYTHONPATH`` both still run,
    and Panewatch's reports arrive too."""
    lab, binary = lab_or_skip("gptme")
    project, home, mine = tmp_path / "project", tmp_path / "home", tmp_path / "mine"
    project.mkdir()
    (mine / "plugins" / "mine_folder" / "hooks").mkdir(parents=True)
    (mine / "plugins" / "mine_folder" / "__init__.py").write_text("")
    (mine / "plugins" / "mine_folder" / "hooks" / "ended.py").write_text(USER_HOOK)
    (mine / "path" / "mine_ep-1.0.dist-info").mkdir(parents=True)
    (mine / "path" / "mine_ep.py").write_text(
        USER_HOOK + "\n\ndef plugin():\n    from gptme.plugins.plugin import GptmePlugin\n\n"
        '    return GptmePlugin(name="mine_ep", register_hooks=register)\n'
    )
    (mine / "path" / "mine_ep-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mine-ep\nVersion: 1.0\n"
    )
    (mine / "path" / "mine_ep-1.0.dist-info" / "entry_points.txt").write_text(
        "[gptme.plugins]\nmine_ep = mine_ep:plugin\n"
    )
    log = mine / "turns.txt"
    with LoopbackServer(lab.mock(None)) as mock:
        async with live_server(mode="change") as live:
            reports: list[Reported] = []
            live.engine.subscribe(lambda e: reports.append(e) if isinstance(e, Reported) else None)
            env = lab.prepare(home, project, mock.url)
            config = home / ".config" / "gptme" / "config.toml"
            config.write_text(config.read_text() + f'\n[plugins]\npaths = ["{mine / "plugins"}"]\n')
            before = config.read_bytes()
            env = {**env, "PYTHONPATH": str(mine / "path"), "MINE_LOG": str(log)}
            argv = [*AGENTS["gptme"]["wrap"], *lab.argv(binary, project)]
            s = await live.create(agent="gptme", command=argv, cwd=str(project), env=env, rows=32, cols=120)
            sid = s["id"]
            try:
                await shows(live, sid, "^User:", READY_S)
                await live.wait_state(sid, "idle", 30)
                await settled(live, sid, quiet=2.0, timeout=60)
                r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:hello"})
                assert r.status_code == 200, r.text
                await wait_turn(mock, "done", 1, 90)
                await until(lambda: any(e.event == "turn.post" for e in reports), "Panewatch's turn.post", 60)
                await until(lambda: log.exists() and len(log.read_text().splitlines()) >= 2, "the user's hooks", 30)
            finally:
                await live.http.delete(f"/api/sessions/{sid}")
    assert sorted(log.read_text().splitlines()) == ["mine_ep turn.post", "mine_folder.hooks.ended turn.post"]
    assert config.read_bytes() == before
