"""Notifications: which transitions ring, the 30 s cooldown, and each sink for real."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from panewatch.sinks.notify import Notifier
from panewatch_lab.loopback import Loopback


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def transition(n: Notifier, prev: str | None, state: str, session: str = "s1", **given):
    fields = dict(source="screen", rule="permission_dialog", why="a permission dialog") | given
    return n.on_transition(session=session, name="pane", agent="claude", prev=prev, state=state, **fields)


@pytest.mark.unit
def test_only_entering_blocked_and_turn_end_notify():
    n = Notifier(clock=Clock())
    assert transition(n, "working", "blocked") is not None
    assert transition(n, "blocked", "blocked") is None
    assert transition(n, "idle", "working") is None
    assert transition(n, "working", "idle") is not None
    assert transition(n, "blocked", "idle", session="s2") is None  # answered "no": not a turn end
    assert transition(n, "working", "exited") is None


@pytest.mark.unit
def test_redrawn_prompt_does_not_notify_twice_within_cooldown():
    clock = Clock()
    n = Notifier(clock=clock, cooldown=30)
    assert transition(n, "working", "blocked")
    clock.t += 2
    assert transition(n, "blocked", "working") is None
    clock.t += 1
    assert transition(n, "working", "blocked") is None  # the same prompt redrawn
    assert transition(n, "working", "blocked", session="other") is not None  # per session
    clock.t += 27.5
    assert transition(n, "working", "blocked") is not None  # 30.5 s after the first
    assert n.sent == 3


@pytest.mark.unit
def test_a_prompt_after_an_answer_rings_at_once_but_a_redrawn_one_does_not():
    clock = Clock()
    n = Notifier(clock=clock, cooldown=30)
    assert transition(n, "working", "blocked")
    clock.t += 2
    assert transition(n, "working", "blocked") is None  # redrawn, nobody answered
    n.answered("s1")  # an answer took: what comes next is another prompt
    clock.t += 2
    assert transition(n, "working", "blocked") is not None
    assert transition(n, "working", "idle") is not None and n.sent == 3


@pytest.mark.unit
def test_cooldown_is_per_state():
    clock = Clock()
    n = Notifier(clock=clock, cooldown=30)
    assert transition(n, "working", "blocked")
    assert transition(n, "working", "idle")  # a different state rings at once
    clock.t += 5
    assert transition(n, "working", "idle") is None


@pytest.mark.unit
def test_wording_comes_from_the_messages_file_and_subscribers_get_it():
    got = []
    n = Notifier(clock=Clock())
    unsubscribe = n.subscribe(got.append)
    note = transition(n, "working", "blocked")
    assert note.title == "pane needs you"
    assert "a permission dialog" in note.body
    assert got == [note]
    unsubscribe()
    transition(n, "working", "idle")
    assert got == [note]


@pytest.mark.unit
def test_a_blocked_note_says_what_is_asked_cleaned():
    n = Notifier(clock=Clock())
    ask = {"question": "Allow this command?", "tool": "Bash", "subject": "ls -la\x1b[31m\u202e", "source": "hook"}
    note = transition(n, "working", "blocked", source="hook", rule="hook:PermissionRequest", request=ask)
    assert (note.question, note.tool, note.subject) == ("Allow this command?", "Bash", "ls -la[31m")
    assert note.body == "claude asks: Allow this command? ls -la[31m"  # escapes and bidi marks dropped
    assert note.as_env()["PANEWATCH_SUBJECT"] == "ls -la[31m"  # the command sink gets it too
    only = transition(n, "working", "blocked", session="s2", request={"question": "Which file?"})
    assert only.body == "claude asks: Which file?"
    plain = transition(n, "working", "blocked", session="s3")  # nothing read: the rule's reason
    assert plain.body == "claude is waiting for your answer: a permission dialog" and plain.subject == ""


@pytest.mark.integration
async def test_command_sink_runs_with_details_in_the_environment(tmp_path):
    out = tmp_path / "env.txt"
    n = Notifier(clock=Clock(), command=f'env | grep ^PANEWATCH_ | sort > "{out}"')
    transition(n, "working", "blocked")
    for _ in range(100):
        if out.exists() and out.stat().st_size:
            break
        await asyncio.sleep(0.05)
    env = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert env["PANEWATCH_SESSION"] == "s1"
    assert env["PANEWATCH_STATE"] == "blocked"
    assert env["PANEWATCH_PREV"] == "working"
    assert env["PANEWATCH_RULE"] == "permission_dialog"
    assert env["PANEWATCH_TITLE"] == "pane needs you"
    await n.aclose()


@pytest.mark.integration
async def test_webhook_sink_posts_json_to_a_real_server():
    received: list[dict] = []

    async def hook(request: Request) -> JSONResponse:
        received.append(json.loads(await request.body()))
        return JSONResponse({"ok": True})

    async with Loopback().serving(Starlette(routes=[Route("/hook", hook, methods=["POST"])]), "error") as lb:
        n = Notifier(clock=Clock(), webhook=f"{lb.url}/hook")
        transition(n, "working", "blocked")
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.05)
        assert received and received[0]["state"] == "blocked" and received[0]["session"] == "s1"
        await n.aclose()


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["/nonexistent/command", "exit 3"])
async def test_failing_command_sink_is_harmless(bad):
    n = Notifier(clock=Clock(), command=bad)
    assert transition(n, "working", "blocked") is not None
    await asyncio.sleep(0.2)
    await n.aclose()
    assert n.sent == 1  # the notification counted, the failure only logged
