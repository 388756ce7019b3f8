"""The approval policy on the real Claude Code CLI (the lab's mock API, real uvicorn, the CLI's
own hooks on): a policy allowing ``ls`` answers the Bash dialog for ``ls -la`` with no person,
the rule as the actor, and still leaves ``ls; rm -rf build`` to a person."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

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
