"""The approval policy on the page, in Debian's Chromium against a real ``panewatch serve`` with a
policy file (issue 30): a blocked row says what a rule that did not act would have done, and the
kill switch pauses and resumes the policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from browser_support import dashboard_server, open_dashboard, playwright_or_skip
from dashboard_support import REPO, Server, capture_agent

pytestmark = pytest.mark.browser

expect = playwright_or_skip(timeout_ms=15_000).expect

#: Claude's real Bash dialog for `touch x.txt`, replayed by a program that is not Claude: no hook
#: stands behind it, so the rule must not act — and the page says it would have.
FAKE_DIALOG = REPO / "fixtures" / "claude" / "2.1.332" / "blocked-bash-32x120.raw"
POLICY = """
[[rules]]
id = "touch-txt"
tool = "Bash"
subject = '^touch [a-z]+\\.txt$'
action = "allow"
reason = "an empty text file is harmless"
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("policy")
    (folder / "policy.toml").write_text(POLICY)
    with dashboard_server("policy", folder, extra=["--policy-file", str(folder / "policy.toml")]) as srv:
        yield srv


def test_a_drawn_dialog_is_left_to_a_person_and_the_row_says_the_policy_would_allow_it(browser, server: Server) -> None:
    sid = server.create(capture_agent(FAKE_DIALOG), name="fake-dialog", rows=32, cols=120)["id"]
    context, page, errors = open_dashboard(browser, server)
    try:
        row = page.locator(f'#queue .row[data-id="{sid}"]')
        expect(row.locator(".row-state")).to_have_text("blocked")
        note = row.locator(".req-policy")
        expect(note).to_have_text("The policy would allow this (rule touch-txt); you decide.")
        assert "not the agent's own" in (note.get_attribute("title") or "")
        expect(row.locator(".row-options button").first).to_be_visible()  # a person still answers
        ledger = server.client().get("/api/ledger", params={"session": sid}).json()["entries"]
        assert [e["detail"] for e in ledger if e["action"] == "policy"] == ["ask: the policy would allow this"]
        assert errors == []
    finally:
        context.close()
        server.delete_all()


def test_the_kill_switch_pauses_and_resumes_the_policy(browser, server: Server) -> None:
    context, page, errors = open_dashboard(browser, server)
    try:
        page.set_viewport_size({"width": 1440, "height": 900})
        switch = page.locator("#policy-switch")
        expect(switch).to_have_text("Pause policy")
        switch.click()
        expect(switch).to_have_text("Resume policy")
        expect(switch).to_have_attribute("aria-pressed", "true")
        assert server.client().get("/api/policy").json()["paused"] is True
        switch.click()
        expect(switch).to_have_text("Pause policy")
        assert server.client().get("/api/policy").json()["paused"] is False
        assert errors == []
    finally:
        context.close()
