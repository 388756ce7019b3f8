"""``panewatch lab ...`` as a user runs it: dispatch, usage errors, the fake agent and the mock API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from claude_support import mock_api
from panewatch_lab.cli import COMMANDS, main, parse_sizes


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "panewatch", "lab", *args], capture_output=True, text=True, check=False, timeout=timeout
    )


@pytest.mark.unit
def test_usage_lists_every_command_and_unknown_ones_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("mock-api", "fake-agent", "capture"))
    assert main([]) == 2
    assert main(["nope"]) == 2 and "unknown command 'nope'" in capsys.readouterr().err
    assert set(COMMANDS) >= {"mock-api", "fake-agent", "capture"}


@pytest.mark.unit
def test_sizes_parse_and_bad_ones_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_sizes("32x120, 24X80") == [(32, 120), (24, 80)]
    assert main(["capture", "--sizes", "32by120", "--list"]) == 2
    assert "bad size '32by120'" in capsys.readouterr().err
    assert main(["capture", "--sizes", "3x120", "--list"]) == 2


@pytest.mark.unit
def test_capture_list_and_unknown_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capture", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "blocked-bash" in listed and "working-typed" in listed
    assert main(["capture", "--only", "no-such-kind"]) == 2
    assert "unknown kind(s) ['no-such-kind']" in capsys.readouterr().err


@pytest.mark.integration
def test_fake_agent_passes_its_options_through() -> None:
    r = run("fake-agent", "--seed", "7", "--plan", "2")
    assert r.returncode == 0, r.stderr
    turns = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(turns) == 2 and {"think_seconds", "steps", "reply"} <= set(turns[0])
    r = run("fake-agent", "--help")
    assert r.returncode == 0 and "panewatch lab fake-agent" in r.stdout


@pytest.mark.integration
def test_mock_api_serves_and_logs(tmp_path: Path) -> None:
    log = tmp_path / "mock.jsonl"
    with mock_api("basic", log, program=(sys.executable, "-m", "panewatch", "lab", "mock-api")) as url:
        # a main turn, as the CLI sends it: streamed, with tools
        body = {
            "model": "m",
            "max_tokens": 10,
            "stream": True,
            "tools": [{"name": "Bash", "input_schema": {}}],
            "messages": [{"role": "user", "content": "task:hello"}],
        }
        r = httpx.post(f"{url}/v1/messages", json=body, timeout=10)
        assert r.status_code == 200 and "event: message_stop" in r.text
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in records] == ["request", "first_token", "reply"]
    assert records[0]["step"] == "hello" and records[-1]["status"] == "complete"
