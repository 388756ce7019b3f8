"""The approval policy on the real Claude Code CLI (the lab's mock API, real uvicorn, the CLI's
own hooks on): a policy allowing ``ls`` answers the Bash dialog for ``ls -la`` with no person,
the rule as the actor, and still leaves ``ls; rm -rf build`` to a person."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from claude_support import API_KEY, CLAUDE, NEEDS_CLAUDE
from live import Live, live_server
from panewatch_lab.claude_env import prepare_home
from panewatch_lab.mock_server import MockServer
from test_live_claude import Events, main_steps, screen_shows

pytestmark = [pytest.mark.live, NEEDS_CLAUDE]

POLICY = """
[[rules]]
id = "ls"
tool = "Bash"
subject = '^ls( -[a-zA-Z]+)*$'
action = "allow"
reason = "listing files is harmless"

[[rules]]
id = "touch-txt"
tool = "Bash"
subject = '^touch [a-z]+\\.txt$'
action = "allow"
reason = "an empty text file in the project is harmless"
"""

#: Two tasks: a listing (asked for: see the settings below), and a list of commands whose first
#: one the rule's pattern would allow.
SCENARIO = """
description = "the approval policy's live test"

[pacing]
ttft = 0.3
chunk_chars = 24
chunk_delay = 0.02
ping_every = 0.5

[[steps]]
id = "listing"
when = { task = "task:listing", after = "user" }
text = "Listing the files."
tools = [{ name = "Bash", input = { command = "ls -la", description = "List files" } }]

[[steps]]
id = "listing-done"
when = { task = "task:listing", after = "Bash" }
text = "Those are the files."

[[steps]]
id = "compound"
when = { task = "task:compound", after = "user" }
text = "Cleaning up."
tools = [{ name = "Bash", input = { command = "ls; rm -rf build", description = "List, then remove build" } }]

[[steps]]
id = "compound-denied"
when = { task = "task:compound", after = "Bash", error = true }
text = "Understood, I won't run it."

[[steps]]
id = "compound-done"
when = { task = "task:compound", after = "Bash" }
text = "Cleaned up."

[[steps]]
id = "remove"
when = { task = "task:remove", after = "user" }
text = "Removing the build folder."
tools = [{ name = "Bash", input = { command = "rm -rf build", description = "Remove build" } }]

[[steps]]
id = "remove-refused"
when = { task = "task:remove", after = "Bash" }
text = "The removal was refused."

[[steps]]
id = "told-why"
when = { task = "^Refused by policy rule no-rm: ", after = "user" }
text = "Understood: the build folder stays."
"""


@pytest.fixture
def mock(tmp_path: Path) -> AsyncIterator[MockServer]:
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    with MockServer(path) as server:
        yield server


async def test_a_policy_allowing_ls_answers_ls_la_and_leaves_a_compound_command_to_a_person(
    mock: MockServer, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    env = prepare_home(tmp_path / "home", project, API_KEY, mock.url)
    # Claude Code runs `ls -la` without asking (its read-only list); the user's own settings make
    # it ask, as a user who wants to see every command would
    (tmp_path / "home" / ".claude" / "settings.json").write_text('{"permissions": {"ask": ["Bash(ls:*)"]}}')
    async with live_server(socket=True, policy_file=policy) as live, live.ws("/ws/state") as ws:
        events = Events(ws)
        try:
            await _run(live, events, mock, project, env)
        finally:
            events.close()


async def _run(live: Live, events: Events, mock: MockServer, project: Path, env: dict[str, str]) -> None:
    s = await live.create(
        agent="claude", command=[CLAUDE, "--permission-mode", "default"], cwd=str(project), env=env, rows=32, cols=120
    )
    sid = s["id"]
    await screen_shows(live, sid, "? for shortcuts", 30)

    def policy_event(action: str):
        return lambda e: e.get("type") == "policy" and e.get("session") == sid and e.get("action") == action

    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:listing"})
    assert r.status_code == 200, r.text
    decided = await events.wait(policy_event("allow"), 30)
    assert decided["rule"] == "ls" and decided["request"]["source"] == "hook", decided
    assert decided["request"]["subject"] == "ls -la"
    blocked = [e for e in events.states(sid) if e["state"] == "blocked"]
    assert blocked, "the CLI asked (its Bash dialog), and the policy answered it"
    await screen_shows(live, sid, "Those are the files.", 30)
    assert main_steps(mock) == ["listing", "listing-done"]

    mark = len(events.seen)
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:compound"})
    assert r.status_code == 200, r.text
    asked = await events.wait(policy_event("ask"), 30, after=mark)
    assert asked["rule"] is None and asked["request"]["subject"] == "ls; rm -rf build", asked
    rows = await screen_shows(live, sid, "Do you want to proceed?")
    assert (await live.http.get(f"/api/sessions/{sid}")).json()["state"] == "blocked", rows
    assert (project / "build").is_dir()  # nobody answered
    prompt = (await live.http.get(f"/api/sessions/{sid}/screen")).json()["prompt"]
    no = next(o["option"] for o in prompt["options"] if o["label"].startswith("No"))
    r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": no, "confirm": True})
    assert r.status_code == 200 and r.json()["took"] is True, r.text
    assert (project / "build").is_dir()


#: A rule that refuses ``rm -rf build``. Claude's "No" ends the turn at "What should Claude do
#: instead?" and waits at its input box (manifests/claude.toml: ``tell_why``), so the deny comes
#: with the rule's reason, typed there.
DENY = """
[[rules]]
id = "no-rm"
tool = "Bash"
subject = '^rm -rf [a-z]+$'
action = "deny"
reason = "nothing is deleted without a person"
"""


def _main_requests(mock: MockServer) -> list[dict[str, Any]]:
    return [
        r
        for r in mock.records()
        if r["event"] == "request" and r.get("path") == "/v1/messages" and r["conversation"]["kind"] == "main"
    ]


@pytest.fixture
def logged(tmp_path: Path) -> Iterator[MockServer]:
    """The same mock, logging each request's body (the deny test reads what the model was sent)."""
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    with MockServer(path, log_bodies=True) as server:
        yield server


async def test_a_deny_on_claude_refuses_and_tells_claude_why(logged: MockServer, tmp_path: Path) -> None:
    """The path exercised: Claude's hooks only *report* (the PermissionRequest hook gives the
    request, source "hook", and returns no decision), so Claude draws its own Bash dialog; the
    rule answers that dialog's "No" through the guarded answer, exactly as a person's keys would,
    then types its reason at the input box Claude goes back to."""
    policy = tmp_path / "policy.toml"
    policy.write_text(DENY)
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    env = prepare_home(tmp_path / "home", project, API_KEY, logged.url)
    async with live_server(socket=True, policy_file=policy) as live, live.ws("/ws/state") as ws:
        events = Events(ws)
        try:
            await _deny(live, events, logged, project, env)
        finally:
            events.close()


async def _deny(live: Live, events: Events, mock: MockServer, project: Path, env: dict[str, str]) -> None:
    s = await live.create(
        agent="claude", command=[CLAUDE, "--permission-mode", "default"], cwd=str(project), env=env, rows=32, cols=120
    )
    sid = s["id"]
    await screen_shows(live, sid, "? for shortcuts", 30)
    r = await live.http.post(f"/api/sessions/{sid}/send", json={"text": "task:remove"})
    assert r.status_code == 200, r.text
    decided = await events.wait(
        lambda e: e.get("type") == "policy" and e.get("session") == sid and e.get("action") == "deny", 30
    )
    assert decided["rule"] == "no-rm" and decided["request"]["source"] == "hook", decided
    assert decided["request"]["subject"] == "rm -rf build", decided
    assert any(e["state"] == "blocked" for e in events.states(sid)), "Claude drew its dialog; the rule answered it"
    # the reason reaches the model as the user's next words, with the refused call's result
    await screen_shows(live, sid, "Understood: the build folder stays.", 40)
    told = [r for r in _main_requests(mock) if r["step"] == "told-why"]
    assert len(told) == 1 and told[0]["conversation"]["after"] == "user", told
    assert told[0]["conversation"]["task"] == "Refused by policy rule no-rm: nothing is deleted without a person"
    # in one user message: the refused call's result (an error: "wait for the user to tell you how
    # to proceed"), then the reason
    last = told[0]["body"]["messages"][-1]["content"]
    refused = next(b for b in last if b["type"] == "tool_result")
    assert refused["is_error"] is True and "doesn't want to proceed" in str(refused["content"]), last
    assert last[-1]["text"] == "Refused by policy rule no-rm: nothing is deleted without a person", last
    # Claude asked the model nothing between the refusal and the words typed
    assert main_steps(mock) == ["remove", "told-why"], main_steps(mock)
    assert (project / "build").is_dir()  # the refused command never ran
    # the rule's two rows: its answer, and the words it typed
    by_policy, ledger = await policy_rows(live, sid)
    assert by_policy == [("answer", "no-rm", True), ("send", "no-rm", None)], ledger


async def policy_rows(live: Live, sid: str, least: int = 2) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """The session's ledger rows a policy rule wrote as it answered or typed, as (action, rule,
    took), once there are ``least`` of them (the ledger writes them as they come; 10 s at most),
    and the whole ledger to show when they are not what a test expects."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        ledger = (await live.http.get("/api/ledger", params={"session": sid})).json()["entries"]
        by_policy = [
            (e["action"], e["actor"]["id"], e.get("took"))
            for e in ledger
            if e["actor"]["kind"] == "policy" and e["action"] in ("answer", "send")
        ]
        if len(by_policy) >= least or asyncio.get_running_loop().time() > deadline:
            return by_policy, ledger
        await asyncio.sleep(0.1)
