"""The policy over HTTP (in process, memory host): what is in force, the kill switch, the
metrics; and ``panewatch policy check``."""

from __future__ import annotations

from pathlib import Path

import pytest

from live import memory_server
from panewatch import cli

pytestmark = [pytest.mark.unit]

POLICY = """
[[rules]]
id = "ls"
tool = "Bash"
subject = '^ls( -[a-zA-Z]+)*$'
action = "allow"
reason = "listing files is harmless"

[[rules]]
id = "aider-ls"
agent = "aider"
subject = '^ls$'
action = "allow"
reason = "aider has no hooks"
screen_only = true
"""


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return path


async def test_the_policy_in_force_marks_screen_only_rules_and_pauses_and_resumes(policy_file: Path) -> None:
    async with memory_server(policy_file=policy_file) as live:
        status = (await live.http.get("/api/policy")).json()
        assert (status["file"], status["paused"], status["error"]) == (str(policy_file), False, None)
        assert [(r["id"], r["screen_only"]) for r in status["rules"]] == [("ls", False), ("aider-ls", True)]
        paused = await live.http.post("/api/policy/pause")
        assert paused.status_code == 200 and paused.json()["paused"] is True
        assert (await live.http.get("/api/policy")).json()["paused"] is True
        assert (await live.http.post("/api/policy/resume")).json()["paused"] is False
        metrics = (await live.http.get("/metrics")).text
        assert 'panewatch_policy_decisions_total{action="allow"} 0' in metrics


async def test_the_kill_switch_needs_the_token(policy_file: Path) -> None:
    async with memory_server(policy_file=policy_file) as live:
        async with live.client() as anonymous:
            refused = await anonymous.post("/api/policy/pause")
        assert refused.status_code == 401
        assert (await live.http.get("/api/policy")).json()["paused"] is False


async def test_without_a_policy_file_nothing_is_in_force() -> None:
    async with memory_server() as live:
        status = (await live.http.get("/api/policy")).json()
        assert (status["file"], status["rules"]) == (None, [])


def test_policy_check_says_valid_or_where_and_why(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["policy", "check", str(policy_file)]) == 0
    assert "2 rules, valid (1 act on screen text alone)" in capsys.readouterr().out
    policy_file.write_text(POLICY.replace('reason = "aider has no hooks"\n', ""))
    assert cli.main(["policy", "check", str(policy_file)]) == 1
    err = capsys.readouterr().err
    assert f"{policy_file}:9" in err and "reason" in err and "Field required" in err


def test_the_example_policy_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(__file__).resolve().parent.parent / "docs" / "policy.example.toml"
    assert cli.main(["policy", "check", str(example)]) == 0
    assert "valid" in capsys.readouterr().out
