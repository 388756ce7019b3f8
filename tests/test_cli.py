"""The classify / explain / fixtures commands, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from panewatch.fixtures import find_folders

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent

PROMPT = (
    "─" * 40 + "\r\n Do\x1b[5Gyou\x1b[9Gwant\x1b[14Gto\x1b[17Gproceed?\r\n"
    " ❯ 1. Yes\r\n   2. No\r\n Esc to cancel · Tab to amend"
).encode()
IDLE = ("─" * 40 + "\r\n❯ \r\n" + "─" * 40 + "\r\n  ? for shortcuts").encode()
REPLY_WITH_PROSE = (
    "⏺ Do you want to proceed?\r\n  ❯ 1. Yes\r\n    2. No\r\n  (Esc to cancel)\r\n\r\n"
    + "─" * 40
    + "\r\n❯ \r\n"
    + "─" * 40
    + "\r\n  ? for shortcuts"
).encode()


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # a deadline against a hang only: `fixtures` reads every capture (432 since issue 29), ~60 s at load 10
    return subprocess.run(
        [sys.executable, "-m", "panewatch", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.fixture
def captures(tmp_path: Path) -> Path:
    (tmp_path / "blocked.raw").write_bytes(PROMPT)
    (tmp_path / "idle.raw").write_bytes(IDLE)
    (tmp_path / "prose.raw").write_bytes(REPLY_WITH_PROSE)
    return tmp_path


def test_classify_prints_file_state_rule(captures):
    r = run(
        "classify",
        str(captures / "blocked.raw"),
        str(captures / "idle.raw"),
        str(captures / "prose.raw"),
        "--rows",
        "12",
        "--cols",
        "60",
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"{captures / 'blocked.raw'} blocked permission_dialog"
    assert lines[1] == f"{captures / 'idle.raw'} idle idle_prompt_box"
    assert lines[2] == f"{captures / 'prose.raw'} idle idle_prompt_box"  # prose is not a dialog


def test_classify_json(captures):
    r = run("classify", "--json", str(captures / "blocked.raw"))
    assert r.returncode == 0
    assert json.loads(r.stdout) == [
        {"file": str(captures / "blocked.raw"), "state": "blocked", "rule": "permission_dialog"}
    ]


def test_classify_errors_exit_2_with_one_line(captures):
    r = run("classify", "--agent", "nobody", str(captures / "idle.raw"))
    assert r.returncode == 2 and "unknown agent 'nobody'" in r.stderr and "claude" in r.stderr
    r = run("classify", str(captures / "missing.raw"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    assert r.stderr.count("\n") == 1


def test_broken_override_manifest_is_reported_and_bundled_one_used(captures, tmp_path):
    overrides = tmp_path / "m"
    overrides.mkdir()
    (overrides / "claude.toml").write_text(
        'agent = "claude"\nversion = "x"\n[[rules]]\nname = "bad"\nstate = "blocked"\nwhy = "w"\nany = ["("]\n'
    )
    r = run("classify", "--manifests", str(overrides), str(captures / "blocked.raw"))
    assert r.returncode == 0
    # the line of the pattern itself (7), inside rule 1 (which starts on line 3)
    assert "claude.toml:7: rule 1" in r.stderr and "not a valid regex" in r.stderr
    assert r.stdout.split()[1] == "blocked"


def test_explain_shows_screen_and_every_rule(captures):
    r = run("explain", str(captures / "blocked.raw"), "--rows", "8", "--cols", "50")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "│ Do you want to proceed?" in out  # real spaces where CSI n G moved the cursor
    assert "MATCH blocked  permission_dialog" in out
    assert "matched: ' ❯ 1. Y'" in out and "matched: 'Esc to cancel'" in out
    assert "verdict: blocked (permission_dialog)" in out
    rules = [line for line in out.splitlines() if line[:3].strip().rstrip(".").isdigit()]
    assert len(rules) >= 4


def test_fixtures_table_on_a_folder(captures, tmp_path):
    folder = tmp_path / "fx" / "claude" / "9.9.9"
    folder.mkdir(parents=True)
    for name in ("blocked.raw", "idle.raw", "prose.raw"):
        (folder / name).write_bytes((captures / name).read_bytes())
    (folder / "truth.toml").write_text(
        'agent = "claude"\nagent_version = "9.9.9"\nhow = "hand-made for a test"\n'
        '[[fixture]]\nfile = "blocked.raw"\nstate = "blocked"\nrows = 12\ncols = 60\n'
        '[[fixture]]\nfile = "idle.raw"\nstate = "idle"\nrows = 12\ncols = 60\n'
        '[[fixture]]\nfile = "prose.raw"\nstate = "idle"\nrows = 12\ncols = 60\n'
    )
    r = run("fixtures", str(tmp_path / "fx"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "correct: tail 2/3, screen 3/3"
    # a wrong truth makes the command fail
    (folder / "truth.toml").write_text(
        (folder / "truth.toml")
        .read_text()
        .replace('file = "idle.raw"\nstate = "idle"', 'file = "idle.raw"\nstate = "working"')
    )
    r = run("fixtures", str(tmp_path / "fx"))
    assert r.returncode == 1 and "screen 2/3" in r.stdout


def test_every_bundled_fixture_classifies_correctly():
    folders = find_folders(REPO / "fixtures")
    if not folders:
        pytest.fail("no fixture folders under fixtures/")
    r = run("fixtures", cwd=REPO)  # the checkout's fixtures/, found from the working directory
    assert r.returncode == 0, r.stdout + r.stderr
    total = sum(len(list(f.glob("*.raw"))) for f in folders)
    assert r.stdout.splitlines()[-1].endswith(f"screen {total}/{total}")
