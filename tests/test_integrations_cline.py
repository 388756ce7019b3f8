"""Cline's hooks: its real payloads read as the state they mean, and what a launch adds (an overlay
``CLINE_DIR``, never a write to the user's files, the user's own hooks kept running).

The payloads in ``fixtures/hooks/cline/3.0.65/`` were sent by the real Cline 3.0.65 TUI on the
lab's mock (a turn with a shell command approved, then a slow turn interrupted with Esc), to hook
files that wrote each one down, in the order they came, from an overlay ``CLINE_DIR`` as the launch
makes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from panewatch.access.report_socket import REPORT_COMMAND
from panewatch.access.validation import clean_report
from panewatch.integrations import INTEGRATIONS, UnknownPayload, hooked
from panewatch.integrations.cline import CLINE_EVENTS, hook_event, overlay_dir, runner
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.resume import agent_session_id
from panewatch.states import State

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "cline" / "3.0.65"


def _payloads() -> list[dict[str, object]]:
    """The payloads as the service takes them (``clean_report``: nested values dropped, but for
    ``sessionContext``)."""
    files = sorted(FIXTURES.glob("*.json"))
    assert files, "no captured Cline payloads"
    return [clean_report(json.loads(f.read_text())) for f in files]


def test_every_payload_names_the_session_a_resume_reopens() -> None:
    # sessionContext.rootSessionId, kept by clean_report, in every payload the real Cline sent: the
    # session `cline history` lists and `cline --id ID` reopens, not the payload's taskId
    payloads = _payloads()
    assert {agent_session_id(p) for p in payloads} == {"1796357986183_qoncj"}
    assert all(p["taskId"] == "conv_1796357998535_7sg1s01" for p in payloads)


def test_cline_payloads_read_as_the_state_they_mean() -> None:
    cline, memo = INTEGRATIONS["cline"], {}
    got = []
    for n, payload in enumerate(_payloads()):
        report = cline.interpret(payload, float(n), memo)
        got.append(None if report is None else (report.event, report.state))
    assert got == [
        ("TaskStart", State.working),
        ("PreToolUse", State.working),
        ("PostToolUse", State.working),
        ("TaskComplete", State.idle),
        ("TaskStart", State.working),
        ("SessionShutdown", State.idle),  # Esc mid-turn
    ]


def test_a_subagents_event_and_a_foreign_payload() -> None:
    cline = INTEGRATIONS["cline"]
    sub = {**_payloads()[0], "parent_agent_id": "agent_1"}
    assert cline.interpret(sub, 0.0, {}) is None
    with pytest.raises(UnknownPayload):
        cline.interpret({"hookName": "nonsense"}, 0.0, {})
    plain = cline.interpret({"state": "blocked", "detail": "x"}, 0.0, {})
    assert plain is not None and plain.state == State.blocked


def test_the_cline_manifest_names_its_hooks() -> None:
    manifest = ManifestStore.from_dirs(bundled_manifest_dir()).get("cline")
    assert manifest is not None and manifest.manifest.hooks == "cline"


def test_hook_file_names_as_cline_reads_them() -> None:
    assert hook_event("PreToolUse") == "PreToolUse"
    assert hook_event("taskcomplete.py") == "TaskComplete"
    assert hook_event("PreToolUse.txt") is None
    assert hook_event("notes.sh") is None


def _private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)


def test_launch_points_cline_at_an_overlay_with_every_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _private_tmp(tmp_path, monkeypatch)
    home = tmp_path / "home"
    (home / ".cline" / "data" / "settings").mkdir(parents=True)
    (home / ".cline" / "data" / "settings" / "providers.json").write_text("{}")
    argv = ["cline", "--tui", "--auto-approve", "false"]
    got, env = hooked(INTEGRATIONS["cline"], ["cline"], argv, {"HOME": str(home)})
    assert got == argv
    overlay = Path(env["CLINE_DIR"])
    assert overlay.parent.stat().st_mode & 0o077 == 0 and overlay.parent.stat().st_uid == os.getuid()
    assert (overlay / "data").resolve() == (home / ".cline" / "data").resolve()
    assert (overlay / "tasks").is_symlink() and (home / ".cline" / "tasks").is_dir()  # first-run folders
    hooks = {p.name: p for p in (overlay / "hooks").iterdir()}
    assert set(hooks) == set(CLINE_EVENTS)
    assert all(p.is_file() and not p.is_symlink() and REPORT_COMMAND in p.read_text() for p in hooks.values())
    assert not (home / ".cline" / "hooks").exists()  # nothing written into the user's folder
    # a wrapper script in front, another user, or --config: nothing is added
    assert hooked(INTEGRATIONS["cline"], ["cline"], ["wrapper.sh"], {})[1] == {}
    assert hooked(INTEGRATIONS["cline"], ["cline"], ["cline", "--config", "/c"], {"HOME": str(home)})[1] == {
        "HOME": str(home)
    }


def test_the_users_own_hooks_keep_running(tmp_path: Path) -> None:
    real = tmp_path / ".cline"
    (real / "hooks").mkdir(parents=True)
    mine = real / "hooks" / "PreToolUse"
    mine.write_text("#!/bin/sh\ncat > /dev/null\n")
    (real / "hooks" / "taskcomplete.py").write_text("print('done')\n")
    (real / "hooks" / "TaskStart").symlink_to(mine)  # Cline skips links: so does the overlay
    base = tmp_path / "private"
    base.mkdir(mode=0o700)
    overlay = overlay_dir(real, base)
    hooks = {p.name for p in (overlay / "hooks").iterdir()}
    # theirs under their own names; ours under the first name for the event theirs leave free
    assert {"PreToolUse", "taskcomplete.py", "PreToolUse.sh", "TaskComplete", "TaskStart"} <= hooks
    assert mine.read_text().startswith("#!/bin/sh\ncat")  # never written
    assert runner(real / "hooks" / "taskcomplete.py") == ["python3", str(real / "hooks" / "taskcomplete.py")]
    # run as Cline runs theirs: its #! line (what Cline acts on is their hook's output)
    assert (overlay / "hooks" / "PreToolUse").read_text() == f"#!/bin/sh\nexec /bin/sh {mine}\n"
