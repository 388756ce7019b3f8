"""A worktree session in the dashboard (Debian's Chromium, a real server, real git): the card shows
its branch and "+N −M in K files", the diff view shows the change, a comment on two selected
lines reaches the pane as text, and deleting it with uncommitted work asks before losing it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import card_of, dashboard_server, open_dashboard, playwright_or_skip
from dashboard_support import ARTIFACTS, IDLE_LINE, RULE, Server, prompt_agent

pytestmark = pytest.mark.browser

expect = playwright_or_skip(timeout_ms=15_000).expect

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}

#: Idle (Claude's idle box), after changing lines 10 and 11 of app.py; echoes each line it is sent.
EDITING_AGENT = [
    "bash",
    "-c",
    "\n".join(
        [
            "stty -echo",
            "sed -i 's/^line 10$/line ten/; s/^line 11$/line eleven/' app.py",
            f"printf '%s\\r\\n' '{RULE}' '❯ ' '{RULE}' '{IDLE_LINE}'",
            'while read -r line; do printf "got:%s\\r\\n" "$line"; done',
            "exec sleep 600",
        ]
    ),
]


def git(cwd: Path | str, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with dashboard_server("worktrees", tmp_path_factory.mktemp("logs")) as srv:
        yield srv


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    at = tmp_path / "repo"
    at.mkdir()
    git(at, "init", "-q", "-b", "main")
    (at / "app.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    git(at, "add", "app.py")
    git(at, "commit", "-q", "-m", "first")
    return at


def test_the_diff_view_shows_the_change_and_a_comment_on_two_lines_reaches_the_pane(
    browser, server: Server, repo: Path
) -> None:
    s = server.create(EDITING_AGENT, name="review-me", worktree={"repo": str(repo), "branch": "agent/review"})
    context, page, errors = open_dashboard(browser, server, layout="cards")
    try:
        card = card_of(page, s["id"])
        expect(card.locator(".changes-line")).to_contain_text("branch agent/review")
        summary = card.locator(".changes-summary")
        expect(summary).to_have_text("+2 −2 in 1 file")
        summary.click()
        diff = card.locator(".diff-view")
        expect(diff).to_be_visible()
        expect(diff.locator(".diff-file-head")).to_contain_text("app.py")
        expect(diff.locator("tr.diff-add")).to_have_text(["10line ten", "11line eleven"])
        expect(diff.locator("tr.diff-del")).to_have_count(2)

        diff.locator('tr.diff-add[data-line="10"]').click()
        diff.locator('tr.diff-add[data-line="11"]').click(modifiers=["Shift"])
        expect(diff.locator("tr.selected")).to_have_count(4)  # both lines, old and new
        expect(card.locator(".review-where")).to_have_text("app.py lines 10–11")
        card.locator(".review-text").fill("put these back as numbers")
        ARTIFACTS.mkdir(exist_ok=True)
        card.screenshot(path=str(ARTIFACTS / "dashboard-worktree.png"))
        card.locator(".review-send").click()
        expect(card.locator(".review-result")).to_contain_text("Sent to the agent")
        expect(card.locator(".screen")).to_contain_text("got:In app.py lines 10–11: put these back as numbers")

        # deleting asks first: the worktree has uncommitted work; confirmed, it goes, the branch stays
        card.locator("button.delete").click()
        card.locator(".confirm-yes").click()
        expect(card.locator(".confirm-text")).to_contain_text("uncommitted changes (app.py)")
        expect(card.locator(".confirm-yes")).to_have_text("Delete and discard")
        assert os.path.isdir(s["cwd"])  # nothing deleted yet
        card.locator(".confirm-yes").click()
        expect(card).to_have_count(0)
        assert not os.path.exists(s["cwd"])
        assert git(repo, "rev-parse", "--verify", "refs/heads/agent/review")
        assert errors == [], f"errors in the page's console: {errors}"
    finally:
        context.close()
        server.delete_all()


def test_a_comment_to_a_blocked_pane_is_refused_with_the_reason(browser, server: Server, repo: Path) -> None:
    bash, flag, script = prompt_agent(work=60)
    s = server.create(
        [bash, flag, "printf 'todo\\n' > notes.txt\n" + script],
        name="asks",
        worktree={"repo": str(repo), "branch": "asks"},
    )
    context, page, errors = open_dashboard(browser, server, layout="cards")
    try:
        card = card_of(page, s["id"])
        expect(card).to_have_attribute("data-state", "blocked")
        card.locator(".changes-summary").click()
        expect(card.locator(".changes-summary")).to_have_text("+1 −0 in 1 file")
        card.locator('.diff-view tr.diff-add[data-line="1"]').click()
        card.locator(".review-text").fill("also list the tests")
        card.locator(".review-send").click()
        result = card.locator(".review-result")
        expect(result).to_contain_text("Not sent:")
        expect(result).to_contain_text("blocked")
        expect(result).to_have_attribute("data-kind", "warn")
        expect(card.locator(".screen")).not_to_contain_text("also list the tests")
        expect(card.locator(".review-text")).to_have_value("also list the tests")  # kept, to send later
        assert errors == [], f"errors in the page's console: {errors}"
    finally:
        context.close()
        with server.client() as c:
            c.delete(f"/api/sessions/{s['id']}", params={"discard": "true"})
