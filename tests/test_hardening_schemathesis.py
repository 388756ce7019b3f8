"""Issue 13: a bounded schemathesis run against ``/openapi.json`` with the token — 0 responses ≥ 500.

The server runs as ``panewatch serve`` in its own process; the operations on ``{sid}`` get a live
session's id (otherwise every one of them would only ever see 404). DELETE of that session is left
out so that it stays alive for the rest of the run (deleting is covered by test_hardening_procs).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hardening_support import ServerProcess

pytestmark = pytest.mark.integration

#: Examples per operation and the seed: bounded and reproducible (about half a minute here).
MAX_EXAMPLES = 20
SEED = 7


def _schemathesis() -> list[str]:
    exe = shutil.which("schemathesis", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("schemathesis is not installed (pip install -e '.[test]')")
    return [exe]


def test_schemathesis_finds_no_server_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = _schemathesis()
    server = ServerProcess(tmp_path / "state")
    try:
        sid = server.create(command=["cat"], rows=10, cols=40, name="fuzzed")["id"]
        config = tmp_path / "schemathesis.toml"
        config.write_text(f'[parameters]\n"path.sid" = "{sid}"\n')
        run = subprocess.run(
            [
                *cli,
                "--config-file",
                str(config),
                "run",
                f"{server.url}/openapi.json",
                "-H",
                f"Authorization: Bearer {server.token}",
                "--checks",
                "not_a_server_error",
                "-n",
                str(MAX_EXAMPLES),
                "--seed",
                str(SEED),
                "-w",
                "1",
                "--phases",
                "examples,coverage,fuzzing",
                "--exclude-method",
                "DELETE",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
        summary = [line for line in run.stdout.splitlines() if "generated" in line or "passed" in line]
        with capsys.disabled():
            print("\nschemathesis:", "; ".join(x.strip() for x in summary[-2:]))
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        assert any("generated" in line for line in summary), run.stdout[-2000:]
        # the live session took the fuzzed writes and is still there
        assert server.http.get(f"/api/sessions/{sid}").status_code == 200
        assert server.http.get("/api/sessions").status_code == 200
    finally:
        err = server.stop(signal.SIGTERM)
    assert "Traceback" not in err, err[-4000:]
