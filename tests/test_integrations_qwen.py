"""Qwen Code's hooks: its real payloads read as Claude's, and what a launch adds (never the user's files).

The payloads in ``fixtures/hooks/qwen/0.24.4/`` were sent by the real Qwen Code 0.24.4 on the lab's
mock (a turn with a shell command approved), to a hook that wrote each one down, in the order they
came; the hooks came from a ``QWEN_CODE_SYSTEM_DEFAULTS_PATH`` file, as the launch adds them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from panewatch.access.report_socket import REPORT_COMMAND
from panewatch.integrations import INTEGRATIONS, hooked
from panewatch.integrations.qwen import DEFAULTS_VARIABLE, QWEN_HOOK_EVENTS, defaults_file, with_hooks
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.resume import agent_session_id
from panewatch.states import State

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "qwen" / "0.24.4"
EXPECTED = [
    ("UserPromptSubmit", State.working),
    ("PermissionRequest", State.blocked),
    ("Notification:permission_prompt", State.blocked),
    ("PreToolUse", State.working),
    ("UserPromptSubmit", State.working),
    ("Stop", State.idle),
    ("Notification:idle_prompt", State.idle),
]


def _payloads() -> list[dict[str, object]]:
    files = sorted(FIXTURES.glob("*.json"))
    assert files, "no captured Qwen Code payloads"
    return [json.loads(f.read_text()) for f in files]


def test_qwen_payloads_read_as_the_state_they_mean_in_one_session() -> None:
    qwen, memo = INTEGRATIONS["qwen"], {}
    got = []
    for n, payload in enumerate(_payloads()):
        report = qwen.interpret(payload, float(n), memo)
        got.append(None if report is None else (report.event, report.state))
    # the permission Notification repeats the PermissionRequest seconds later: dropped, as Claude's
    assert got == [EXPECTED[0], EXPECTED[1], None, *EXPECTED[3:]]
    assert len({agent_session_id(p) for p in _payloads()}) == 1


def test_the_qwen_manifest_names_its_hooks() -> None:
    manifest = ManifestStore.from_dirs(bundled_manifest_dir()).get("qwen")
    assert manifest is not None and manifest.manifest.hooks == "qwen"


def test_launch_points_qwen_at_a_private_defaults_file_with_every_hook(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    argv, env = hooked(INTEGRATIONS["qwen"], ["qwen"], ["qwen", "--approval-mode", "default"], {"HOME": "/h"})
    assert argv == ["qwen", "--approval-mode", "default"]
    path = Path(env[DEFAULTS_VARIABLE])
    assert path.parent.stat().st_mode & 0o077 == 0 and path.parent.stat().st_uid == os.getuid()
    hooks = json.loads(path.read_text())["hooks"]
    assert set(hooks) == set(QWEN_HOOK_EVENTS)
    assert all(group[-1]["hooks"][0]["command"] == REPORT_COMMAND for group in hooks.values())
    # a wrapper script in front: it may not pass the variable on as Qwen reads it; nothing is added
    assert hooked(INTEGRATIONS["qwen"], ["qwen"], ["wrapper.sh"], {})[1] == {}


def test_the_users_own_defaults_file_is_merged_never_written(tmp_path: Path) -> None:
    theirs = tmp_path / "defaults.json"
    text = json.dumps(
        {"ui": {"theme": "dark"}, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]}}
    )
    theirs.write_text(text)
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    made = defaults_file(str(theirs), folder)
    assert made is not None and theirs.read_text() == text
    merged = json.loads(made.read_text())
    assert merged["ui"] == {"theme": "dark"}
    assert merged["hooks"]["Stop"][0]["hooks"][0]["command"] == "mine"  # theirs first, ours after
    assert merged["hooks"]["Stop"][1]["hooks"][0]["command"] == REPORT_COMMAND
    theirs.write_text("{not json")
    assert defaults_file(str(theirs), folder) is None  # no hooks, and the launch goes on


def test_with_hooks_keeps_other_events_of_the_user() -> None:
    merged = with_hooks({"hooks": {"SessionEnd": [{"hooks": []}]}})
    assert merged["hooks"]["SessionEnd"] == [{"hooks": []}]
