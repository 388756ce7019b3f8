"""Copilot CLI's hooks: its real payloads read as the state they mean (a permission with its
structured request), and what a launch adds (``--plugin-dir`` naming a private plugin).

The payloads in ``fixtures/hooks/copilot/1.0.102/`` were sent by the real Copilot CLI 1.0.102 on
the lab's mock (a shell command allowed once, then a slow turn), by the hook commands of the plugin
this module writes (``sed`` naming the event, then curl), to a Unix socket that wrote each one
down in order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from panewatch.access.report_socket import REPORT_COMMAND
from panewatch.access.validation import clean_report
from panewatch.integrations import INTEGRATIONS, UnknownPayload, hooked
from panewatch.integrations.copilot import COPILOT_EVENTS
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.resume import agent_session_id
from panewatch.states import State

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "copilot" / "1.0.102"


def _payloads() -> list[dict[str, object]]:
    """The payloads as the service takes them (``clean_report``: only ``tool_input`` stays nested)."""
    files = sorted(FIXTURES.glob("*.json"))
    assert files, "no captured Copilot CLI payloads"
    return [clean_report(json.loads(f.read_text())) for f in files]


def test_copilot_payloads_read_as_the_state_they_mean() -> None:
    copilot, memo = INTEGRATIONS["copilot"], {}
    got = []
    for n, payload in enumerate(_payloads()):
        report = copilot.interpret(payload, float(n), memo)
        got.append(None if report is None else (report.event, report.state))
    assert got == [
        ("userPromptSubmitted", State.working),
        ("preToolUse", State.working),
        ("permissionRequest", State.blocked),
        None,  # the permission notification repeats the permissionRequest: dropped, as Claude's
        ("postToolUse", State.working),
        ("agentStop", State.idle),
        ("userPromptSubmitted", State.working),
        ("agentStop", State.idle),
    ]


def test_every_payload_names_the_conversation_a_resume_reopens() -> None:
    # sessionId, in every payload the real Copilot CLI sent, as the service takes them: the id
    # `copilot --resume ID` reopens (its transcript is kept under session-state/ID)
    ids = {agent_session_id(p) for p in _payloads()}
    assert ids == {"0690d88d-89c3-4785-b1b0-7001f020ba3f"}


def test_a_permission_request_carries_its_structured_request() -> None:
    report = INTEGRATIONS["copilot"].interpret(_payloads()[2], 0.0, {})
    assert report is not None and report.request is not None
    got = report.request
    assert (got.tool, got.subject, got.subject_kind, got.source) == ("bash", "touch x.txt", "command", "hook")


def test_a_prompt_notification_alone_is_blocked_and_others_say_nothing() -> None:
    copilot = INTEGRATIONS["copilot"]
    alone = copilot.interpret(_payloads()[3], 0.0, {})
    assert alone is not None and alone.state == State.blocked and alone.event == "notification:permission_prompt"
    done = {**_payloads()[3], "notification_type": "shell_completed"}
    assert copilot.interpret(done, 0.0, {}) is None
    with pytest.raises(UnknownPayload):
        copilot.interpret({"sessionId": "x"}, 0.0, {})


def test_the_copilot_manifest_names_its_hooks() -> None:
    manifest = ManifestStore.from_dirs(bundled_manifest_dir()).get("copilot")
    assert manifest is not None and manifest.manifest.hooks == "copilot"


def test_launch_adds_a_private_plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    argv, env = hooked(INTEGRATIONS["copilot"], ["copilot"], ["copilot"], {"HOME": "/h"})
    assert argv[:2] == ["copilot", "--plugin-dir"] and len(argv) == 3 and env == {"HOME": "/h"}
    folder = Path(argv[2])
    assert folder.parent.stat().st_mode & 0o077 == 0 and folder.parent.stat().st_uid == os.getuid()
    assert json.loads((folder / "plugin.json").read_text())["hooks"] == "hooks.json"
    hooks = json.loads((folder / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(COPILOT_EVENTS)
    for event, entries in hooks.items():
        assert entries[0]["bash"].endswith(REPORT_COMMAND) and f'"copilot_event":"{event}"' in entries[0]["bash"]
    assert hooked(INTEGRATIONS["copilot"], ["copilot"], ["wrapper.sh"], {})[0] == ["wrapper.sh"]
