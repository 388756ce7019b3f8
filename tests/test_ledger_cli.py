"""The ledger end to end: a real ``panewatch serve`` answers a prompt and is killed with SIGKILL
right after; the answer's row is kept, ``panewatch ledger verify`` (a real process, the registry
opened read-only) passes, ``export`` has the row, and after one row is edited with the
``sqlite3`` tool, verify exits 1 naming that row."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dashboard_support import free_port
from panewatch.registry import REGISTRY_FILE
from panewatch_lab.serve_proc import ServeProcess, env_without_panewatch
from scripted import claude_like

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
TOKEN = "ledger-test-token-0123456789"


def ledger_cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "panewatch", "ledger", *args, "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_without_panewatch(),
        check=False,
    )


def wait_for(check, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.mark.skipif(
    shutil.which("sqlite3") is None, reason="the sqlite3 tool is not installed (apt-get install sqlite3)"
)
def test_an_answer_survives_sigkill_verifies_and_an_edit_is_named(tmp_path: Path) -> None:
    state, port = tmp_path / "state", free_port()
    extra = ["--pane-host", "pty", "--sweep-ms", "100", "--state-dir", str(state)]
    serve = ServeProcess(TOKEN, extra, port=port, env=env_without_panewatch(), log=tmp_path / "server.log", cwd=REPO)
    serve.start()
    try:
        with httpx.Client(base_url=serve.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15) as client:
            command = ["bash", "--norc", "--noprofile", "-c", claude_like(work=30)]
            created = client.post("/api/sessions", json={"agent": "claude", "command": command, "rows": 12, "cols": 60})
            assert created.status_code == 201, created.text
            sid = created.json()["id"]
            wait_for(lambda: client.get(f"/api/sessions/{sid}").json()["state"] == "blocked", what="the prompt")
            answered = client.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})
            assert answered.status_code == 200 and answered.json()["took"] is True, answered.text
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGKILL)  # at once: no shutdown, no flush
        serve.proc.wait(10)
    finally:
        serve.stop(grace=5)

    checked = ledger_cli("verify", state=state)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "ledger intact: 2 rows"
    exported = ledger_cli("export", state=state)
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(r["seq"], r["action"], r["session"]) for r in rows] == [(1, "create", sid), (2, "answer", sid)]
    assert rows[1]["took"] is True and rows[1]["actor"]["kind"] == "token" and rows[1]["state"] == "blocked"
    assert "Do you want to proceed?" in "\n".join(rows[1]["screen"])

    edit = "UPDATE ledger SET body = replace(body, '\"took\":true', '\"took\":false') WHERE seq = 2;"
    subprocess.run(["sqlite3", str(state / REGISTRY_FILE), edit], check=True, timeout=30)
    broken = ledger_cli("verify", state=state)
    assert broken.returncode == 1
    assert "row 2: edited" in broken.stderr


def test_verify_without_a_registry_says_so(tmp_path: Path) -> None:
    result = ledger_cli("verify", state=tmp_path)
    assert result.returncode == 2
    assert "no registry at" in result.stderr and "--state-dir" in result.stderr
