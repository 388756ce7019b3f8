"""The approval policy of ``test_live_policy.py`` (one file, a rule allowing ``ls``) on the real
Codex and Gemini CLIs: their own permission hooks give the request (Codex's PermissionRequest,
Gemini's ToolPermission notification with the confirmation's details), the screen's dialog must
read the same command, and only then does the rule answer. A compound command stays a person's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_lab_support import lab_or_skip
from live import Live, live_server
from panewatch_lab.agent_scenario import last_turn
from panewatch_lab.loopback import LoopbackServer
from test_live_agents import AGENTS, settled, shows, state_is, wait_turn
from test_live_claude import Events
from test_live_policy import DENY, POLICY, policy_rows

pytestmark = pytest.mark.live

#: Each task asks the model's shell for one command (Codex: escalated, so it asks). Gemini never
#: asks for `ls` (its own list of safe commands), so there the rule that answers is the one for
#: `touch notes.txt`, from the same policy file.
ALLOWED = {"codex": ("task:listing", "ls", "ls -la"), "gemini": ("task:touch", "touch-txt", "touch notes.txt")}
SCENARIO = """
description = "the approval policy on Codex and Gemini"

[[steps]]
id = "listing"
task = "task:listing"
shell = "ls -la"

[[steps]]
id = "touch"
task = "task:touch"
shell = "touch notes.txt"

[[steps]]
id = "remove"
task = "task:remove"
shell = "rm -rf build"

[[steps]]
id = "compound"
task = "task:compound"
shell = "ls; rm -rf build"
"""


def _policy_event(sid: str, action: str) -> Any:
    return lambda e: e.get("type") == "policy" and e.get("session") == sid and e.get("action") == action


@asynccontextmanager
async def _ready(agent: str, work: Path, policy: str) -> AsyncIterator[tuple[Live, Events, LoopbackServer, str]]:
    """The real CLI on its lab mock, launched through a real server with ``policy``, once its
    input box is up and quiet: (server, its state events, the mock, the session id)."""
    lab, binary = lab_or_skip(agent)
    (work / "scenario.toml").write_text(SCENARIO)
    (work / "policy.toml").write_text(policy)
    (work / "project" / "build").mkdir(parents=True)
    with LoopbackServer(lab.mock(work / "scenario.toml")) as mock:
        async with live_server(socket=True, policy_file=work / "policy.toml") as live, live.ws("/ws/state") as ws:
            events = Events(ws)
            try:
                env = lab.prepare(work / "home", work / "project", mock.url)
                project = work / "project"
                s = await live.create(
                    agent=agent, command=lab.argv(binary, project), cwd=str(project), env=env, rows=32, cols=120
                )
                sid = s["id"]
                await shows(live, sid, AGENTS[agent]["ready"], 40)
                await state_is(live, sid, "idle", 10)
                await settled(live, sid)
                yield live, events, mock, sid
            finally:
                events.close()


@pytest.mark.parametrize("agent", ["codex", "gemini"])
async def test_the_policy_allowing_ls_answers_ls_la_and_leaves_a_compound_command_to_a_person(
    agent: str, tmp_path: Path
) -> None:
    async with _ready(agent, tmp_path, POLICY) as (live, events, mock, sid):
        await _run(agent, live, events, mock, sid, tmp_path)


async def _run(agent: str, live: Live, events: Events, mock: LoopbackServer, sid: str, work: Path) -> None:
    # the agent's hook and its dialog agree on a command a rule allows: the rule answers "yes, once"
    task, rule, command = ALLOWED[agent]
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": task})
    assert r.status_code == 200, r.text
    decided = await events.wait(_policy_event(sid, "allow"), 40)
    assert decided["rule"] == rule and decided["request"]["source"] == "hook", decided
    assert decided["request"]["subject"] == command, decided
    await wait_turn(mock, "done", 2, 30)  # the command's result went back to the model
    assert [e["state"] for e in events.states(sid)].count("blocked") >= 1, "the CLI asked, the policy answered"
    await state_is(live, sid, "idle", 20)
    ledger = (await live.http.get("/api/ledger", params={"session": sid})).json()["entries"]
    row = next(e for e in ledger if e["action"] == "answer")
    assert row["actor"]["kind"] == "policy" and row["took"] is True, row

    # `ls; rm -rf build`: the same rule does not cover it; the dialog waits for a person
    mark = len(events.seen)
    before = last_turn(mock.records()).requests
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:compound"})
    assert r.status_code == 200, r.text
    asked = await events.wait(_policy_event(sid, "ask"), 40, after=mark)
    assert asked["rule"] is None and asked["request"]["subject"] == "ls; rm -rf build", asked
    await shows(live, sid, AGENTS[agent]["asked"], 20)
    assert (await live.http.get(f"/api/sessions/{sid}")).json()["state"] == "blocked"
    assert (work / "project" / "build").is_dir()  # nobody answered
    prompt = (await live.http.get(f"/api/sessions/{sid}/screen")).json()["prompt"]
    no = next(o["option"] for o in prompt["options"] if o["label"].lower().startswith("no"))
    r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": no, "confirm": True})
    assert r.status_code == 200 and r.json()["took"] is True, r.text
    await state_is(live, sid, "idle", 30)
    assert (work / "project" / "build").is_dir()
    assert last_turn(mock.records()).requests > before


# DENY (test_live_policy's rule): Codex's "No, and tell Codex what to do differently" and Gemini's
# "No, suggest changes (esc)" both end the turn at the agent's input box (``tell_why`` in their
# manifests), so the refusal comes with the rule's reason, typed there.


@pytest.mark.parametrize("agent", ["codex", "gemini"])
async def test_a_deny_refuses_and_tells_the_agent_why(agent: str, tmp_path: Path) -> None:
    """The path exercised: the agent's hook only reports the request (Codex's PermissionRequest
    hook answers nothing; Gemini's ToolPermission is a notification), so the CLI draws its own
    dialog and the rule answers that dialog's "No" through the guarded answer, as a person's keys
    would, then types its reason at the input box the CLI goes back to."""
    async with _ready(agent, tmp_path, DENY) as (live, events, mock, sid):
        r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:remove"})
        assert r.status_code == 200, r.text
        decided = await events.wait(_policy_event(sid, "deny"), 40)
        assert decided["rule"] == "no-rm" and decided["request"]["subject"] == "rm -rf build", decided
        assert decided["request"]["source"] == "hook", decided
        # the reason reaches the model as the user's next words
        deadline = asyncio.get_running_loop().time() + 30
        while not any("Refused by policy rule no-rm" in str(r.get("task")) for r in mock.records()):
            assert asyncio.get_running_loop().time() < deadline, mock.records()
            await asyncio.sleep(0.1)
        # the model was asked nothing between the refusal and the reason, which is the user's own words
        asked = [
            (r["step"], r["task"], r["after"])
            for r in mock.records()
            if r["event"] == "request" and r["kind"] == "main"
        ]
        reason = "Refused by policy rule no-rm: nothing is deleted without a person"
        assert asked == [("remove", "task:remove", "user"), ("fallback", reason, "user")], asked
        await state_is(live, sid, "idle", 30)
        assert (tmp_path / "project" / "build").is_dir()
        # the rule's two rows: its answer, and the words it typed (the ledger writes them as they come)
        by_policy, ledger = await policy_rows(live, sid)
        assert by_policy == [("answer", "no-rm", True), ("send", "no-rm", None)], ledger
