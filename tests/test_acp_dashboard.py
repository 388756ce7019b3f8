"""An ACP session's card in a real browser (Debian's Chromium) against a real server: the
conversation (messages, tool calls with status, the plan), the permission request as one
button per option, answered only after an inline confirmation, and "Cancel turn"."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import card_of, dashboard_server, playwright_or_skip
from claude_support import API_KEY, mock_api
from dashboard_support import ARTIFACTS, Server
from panewatch_lab.acp_claude import PACKAGE, PINNED_VERSION, adapter_env, find_adapter

expect = playwright_or_skip().expect

#: These tests are the cards layout's (a card and a terminal per session), the page's second view;
#: the attention queue, its first, is tests/test_dashboard_queue.py's.
DASHBOARD_LAYOUT = "cards"

AGENT = str(Path(__file__).with_name("acp_agent.py"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("acp", tmp_path_factory.mktemp("server-logs")) as srv:
        yield srv


def send(server: Server, sid: str, text: str) -> None:
    with server.client() as c:
        r = c.post(f"/api/sessions/{sid}/send", json={"text": text})
    assert r.status_code == 200, r.text


@pytest.mark.browser
def test_the_permission_is_answered_from_a_button(page, server: Server, tmp_path: Path) -> None:
    sid = server.create([sys.executable, AGENT], name="acp-scripted", agent=None, kind="acp", cwd=str(tmp_path))["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("idle")
    expect(card.locator(".acp-log")).to_contain_text("connected to Scripted agent 1.0")
    expect(card.locator(".screen")).to_have_count(0)  # the conversation replaces the screen

    card.locator(".send-text").fill("perm")
    card.locator(".send-button").click()
    expect(card.locator(".badge-state")).to_have_text("blocked")
    expect(card.locator(".badge")).to_have_attribute(
        "title",
        "source: acp · rule: session/request_permission\n"
        "session/request_permission: touch marker.txt (execute) "
        "— options: Allow [allow], Always allow [allow-always], "
        "Reject [reject]",
    )
    perm = card.locator(".acp-permission")
    expect(perm).to_be_visible()
    expect(perm.locator(".acp-perm-title")).to_have_text("touch marker.txt (execute)")
    expect(perm.locator(".acp-perm-detail")).to_have_text("touch marker.txt")
    buttons = perm.locator(".options button")
    expect(buttons).to_have_text(["Allow", "Always allow", "Reject"])
    expect(card.locator(".prompt:not(.acp-permission)")).to_be_hidden()  # no screen-parsed prompt
    expect(card.locator(".acp-tool")).to_contain_text("touch marker.txt")
    expect(card.locator(".acp-tool")).to_have_attribute("data-status", "pending")
    expect(card.locator(".send-text")).to_be_disabled()

    # a click only asks; Cancel sends nothing
    buttons.filter(has_text="Reject").click()
    confirm = card.locator(".acp .confirm")
    expect(confirm.locator(".confirm-text")).to_have_text("Answer “Reject” to touch marker.txt in acp-scripted?")
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_be_hidden()
    expect(card.locator(".badge-state")).to_have_text("blocked")

    buttons.filter(has_text="Always allow").click()
    expect(confirm).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-acp-permission.png"), full_page=True)
    confirm.get_by_role("button", name="Confirm").click()
    expect(card.locator(".acp-result")).to_have_text(re.compile(r"^✓ Answered “Always allow”; now (working|idle)\.$"))
    expect(card.locator(".badge-state")).to_have_text("idle")
    expect(perm).to_be_hidden()
    expect(card.locator(".acp-tool")).to_have_attribute("data-status", "completed")
    expect(card.locator(".acp-tool .acp-tool-text")).to_have_text("created marker.txt")
    expect(card.locator(".acp-agent").last).to_have_text("Agent: Done.")
    expect(card.locator(".acp-note").last).to_have_text("stopReason end_turn")
    assert (tmp_path / "marker.txt").read_text() == "ran\n"

    # the plan, and thoughts
    send(server, sid, "plan")
    plan = card.locator(".acp-plan")
    expect(plan).to_be_visible()
    expect(plan.locator("li")).to_have_text(["● Read the code (completed)", "◐ Write the fix (in_progress)"])
    expect(card.locator(".acp-thought")).to_contain_text("Thinking about a plan.")
    page.screenshot(path=str(ARTIFACTS / "dashboard-acp-conversation.png"), full_page=True)


@pytest.mark.browser
def test_cancel_turn_from_the_card(page, server: Server, tmp_path: Path) -> None:
    sid = server.create([sys.executable, AGENT], name="acp-slow", agent=None, kind="acp", cwd=str(tmp_path))["id"]
    card = card_of(page, sid)
    expect(card.locator(".badge-state")).to_have_text("idle")
    expect(card.locator(".acp-cancel")).to_be_hidden()
    send(server, sid, "slow")
    expect(card.locator(".badge-state")).to_have_text("working")
    card.locator(".acp-cancel").click()
    expect(card.locator(".badge-state")).to_have_text("idle")
    expect(card.locator(".acp-note").last).to_have_text("stopReason cancelled")
    expect(card.locator(".acp-cancel")).to_be_hidden()


@pytest.mark.live
def test_claude_over_acp_answered_from_a_button(page, server: Server, tmp_path: Path) -> None:
    """The same, with the real Claude ACP adapter on the lab's mock API."""
    adapter = find_adapter()
    if adapter is None:
        pytest.skip(f"the ACP adapter is not installed (npm install --prefix .lab-npm {PACKAGE}@{PINNED_VERSION})")
    with mock_api("acp", tmp_path / "mock.jsonl") as url:
        project = tmp_path / "project"
        project.mkdir()
        env = adapter_env(tmp_path / "home", url, API_KEY)
        sid = server.create([adapter], name="claude-acp", agent="claude", kind="acp", cwd=str(project), env=env)["id"]
        card = card_of(page, sid)
        expect(card.locator(".badge-state")).to_have_text("idle", timeout=90_000)
        card.locator(".send-text").fill("acp:bash")
        card.locator(".send-button").click()
        expect(card.locator(".badge-state")).to_have_text("blocked", timeout=60_000)
        buttons = card.locator(".acp-permission .options button")
        expect(buttons).to_have_text(["Always Allow", "Allow", "Reject"])
        expect(card.locator(".acp-perm-title")).to_contain_text("echo panewatch-acp-$((6*7))")
        buttons.filter(has_text=re.compile(r"^Allow$")).click()
        card.locator(".acp .confirm").get_by_role("button", name="Confirm").click()
        expect(card.locator(".badge-state")).to_have_text("idle", timeout=60_000)
        expect(card.locator(".acp-tool").last).to_have_attribute("data-status", "completed")
        expect(card.locator(".acp-agent").last).to_have_text("Agent: The command printed the answer.")
        expect(card.locator(".acp-tool-text").last).to_have_text("panewatch-acp-42")  # its output, unfenced
        assert (project / "acp-ran.txt").read_text().strip() == "panewatch-acp-42"
        page.screenshot(path=str(ARTIFACTS / "dashboard-acp-claude.png"), full_page=True)
