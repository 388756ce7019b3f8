"""A lost session in the dashboard (Debian's Chromium, a real server on the tmux host): the tmux
server is killed, every card turns ``lost`` with its last screen and why; an agent whose manifest
can resume its conversation gets a Resume button that brings the card back live, one that cannot
says why."""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import card_of, open_dashboard, playwright_or_skip
from dashboard_support import ARTIFACTS, LAB_MANIFESTS, Server, idle_agent
from panewatch.hosts.tmux import tmux_usable

pytestmark = pytest.mark.browser

expect = playwright_or_skip(timeout_ms=15_000).expect

#: These tests are the cards layout's (a card and a terminal per session), the page's second view;
#: the attention queue, its first, is tests/test_dashboard_queue.py's.
DASHBOARD_LAYOUT = "cards"
if tmux_usable() is not None:
    pytest.skip(f"tmux host unavailable: {tmux_usable()}", allow_module_level=True)

CONVERSATION = "conv-4242"

#: An agent that resumes: its "hook" reports its conversation id over the pane's report socket
#: (as Claude Code's hooks do); ``--resume ID`` starts that conversation again.
RESUMABLE_AGENT = r"""#!/bin/sh
if [ "$1" = --resume ]; then printf 'resumed conversation %s\r\n' "$2"; exec sleep 600; fi
curl -sS -m 5 -o /dev/null -X POST --unix-socket "$PANEWATCH_REPORT_SOCKET" \
  -H 'Content-Type: application/json' --data-binary '{"state": "idle", "session_id": "@CONVERSATION@"}' \
  "http://panewatch/report?session=$PANEWATCH_SESSION"
printf 'first conversation\r\n'
exec sleep 600
""".replace("@CONVERSATION@", CONVERSATION)

#: Its manifest: where the conversation id goes in its launched command.
RESUMABLE_MANIFEST = """
agent = "resumable"
version = "1"
description = "test stand-in: reports its conversation id; --resume ID reopens it"
extends = "claude"
processes = ["resumable-agent"]

[resume]
args = ["--resume", "{agent_session_id}"]
"""


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[Server]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    if LAB_MANIFESTS is not None:
        for each in LAB_MANIFESTS.glob("*.toml"):
            (manifests / each.name).write_text(each.read_text())
    (manifests / "resumable.toml").write_text(RESUMABLE_MANIFEST)
    agent = tmp_path / "resumable-agent"
    agent.write_text(RESUMABLE_AGENT)
    agent.chmod(0o755)
    srv = Server("lost-" + secrets.token_urlsafe(12), log_dir=tmp_path / "logs", manifests=manifests)
    srv.state_dir = tmp_path / "state"  # its own tmux server, killed by the test
    srv.start()
    yield srv
    srv.close()


def test_killed_tmux_shows_lost_cards_and_resume_brings_one_back(browser, server: Server) -> None:
    context, page, errors = open_dashboard(browser, server, layout="cards")
    try:
        agent = server.create([str(server.state_dir.parent / "resumable-agent")], name="resumable", agent="resumable")[
            "id"
        ]
        plain = server.create(idle_agent("PLAIN-MARKER"), name="plain")["id"]
        card, other = (card_of(page, sid) for sid in (agent, plain))
        expect(card.locator(".screen")).to_contain_text("first conversation")
        expect(other.locator(".screen")).to_contain_text("PLAIN-MARKER")

        def reported() -> bool:
            with server.client() as c:
                return bool(c.get(f"/api/sessions/{agent}").json()["source"] == "hook")

        deadline = time.monotonic() + 15
        while not reported() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert reported(), "the agent's report (its conversation id) never arrived"

        subprocess.run(["tmux", "-S", str(server.state_dir / "tmux.sock"), "kill-server"], check=True)

        # both cards lost: why, the last screen kept, nothing to type into
        for each in (card, other):
            expect(each).to_have_attribute("data-state", "lost")
            lost = each.locator(".lost")
            expect(lost).to_be_visible()
            expect(lost.locator(".lost-why")).to_contain_text("tmux server is gone")
            expect(each.locator(".send-text")).to_be_disabled()
        expect(other.locator(".screen")).to_contain_text("PLAIN-MARKER")
        expect(card.locator(".screen")).to_contain_text("first conversation")
        # Claude's manifest can resume, but this stand-in never reported a conversation: it says
        # so, and has no button
        expect(other.locator(".lost-note")).to_contain_text("cannot be resumed")
        expect(other.locator(".lost-note")).to_contain_text("never reported its conversation id")
        expect(other.locator("button.resume")).to_be_hidden()

        # the resumable one: Resume starts its agent again on the same conversation, same card
        resume = card.locator("button.resume")
        expect(resume).to_be_visible()
        expect(card.locator(".lost-note")).to_contain_text("same conversation")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-lost.png"))
        resume.click()
        expect(card).not_to_have_attribute("data-state", "lost")
        expect(card.locator(".lost")).to_be_hidden()
        expect(card.locator(".screen")).to_contain_text(f"resumed conversation {CONVERSATION}")
        expect(card.locator(".result")).to_contain_text("Resumed")
        expect(card.locator(".send-text")).to_be_enabled()
        with server.client() as c:
            info = c.get(f"/api/sessions/{agent}").json()
            assert info["state"] != "lost" and info["pid"] and "resume" not in info
            assert info["command"][-1] == CONVERSATION
            assert c.get(f"/api/sessions/{plain}").json()["resume"]["possible"] is False
        # the other card stays lost
        expect(other).to_have_attribute("data-state", "lost")
        assert errors == [], f"errors in the page's console: {errors}"
    finally:
        context.close()
