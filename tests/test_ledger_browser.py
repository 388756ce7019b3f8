"""The ledger on the page (Debian's Chromium, a real server): the view lists every decision with
who made it and what they were shown, a session's view opens on its own rows, and what the
agent drew or the user named is only ever text (a session named like markup stays text)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from browser_support import card_of, dashboard_server, playwright_or_skip
from dashboard_support import Server, idle_agent
from scripted import claude_like

pytestmark = pytest.mark.browser

expect = playwright_or_skip(timeout_ms=15_000).expect

#: The cards layout: each session's card has its Ledger button among its tools.
DASHBOARD_LAYOUT = "cards"
HOSTILE = '<img src=x onerror="window.__owned=1">'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("ledger", tmp_path_factory.mktemp("server-logs")) as srv:
        yield srv


def wait_state(server: Server, sid: str, state: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while (now := server.client().get(f"/api/sessions/{sid}").json()["state"]) != state:
        assert time.monotonic() < deadline, f"{sid} stayed {now}, wanted {state}"
        time.sleep(0.1)


def test_the_ledger_lists_decisions_and_a_session_opens_on_its_own(page, server: Server) -> None:
    asked = server.create(["bash", "--norc", "--noprofile", "-c", claude_like(work=30)], name="asked")["id"]
    other = server.create(idle_agent("OTHER"), name=HOSTILE, agent=None)["id"]
    wait_state(server, asked, "blocked")
    answered = server.client().post(f"/api/sessions/{asked}/answer", json={"option": 1, "confirm": True})
    assert answered.status_code == 200, answered.text

    page.locator("#ledger-toggle").click()  # (on a wide page the tools show without "More")
    view = page.locator("#ledger")
    expect(view).to_be_visible()
    rows = view.locator(".ledger-row")
    expect(rows).to_have_count(3)  # two creates and the answer
    answer = rows.filter(has_text="option 1 — took")
    expect(answer).to_contain_text("token")
    expect(answer).to_contain_text("asked: Bash")
    answer.locator("summary").click()
    expect(answer.locator("pre")).to_contain_text("Do you want to proceed?")
    assert page.evaluate("window.__owned") is None and view.locator("img").count() == 0

    view.locator("form[method=dialog] button").click()
    card_of(page, asked).locator(".ledger-open").click()
    expect(view).to_be_visible()
    expect(view.locator("input[name=session]")).to_have_value(asked)
    expect(rows).to_have_count(2)  # its create and its answer; not the other session's
    assert other not in view.inner_text()
