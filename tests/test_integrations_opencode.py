"""opencode's plugin: the events it really posts read as the state they mean (a permission with its
structured request), and what a launch adds (an inline config naming the plugin, never a file of
the user's).

The payloads in ``fixtures/hooks/opencode/1.18.33/`` were posted by ``opencode_plugin.js`` inside
the real opencode 1.18.33 on the lab's mock, to a Unix socket that wrote each one down, in order:
a shell command allowed once, a file write rejected, then a slow turn interrupted with Esc.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from panewatch.access.validation import clean_report
from panewatch.integrations import INTEGRATIONS, UnknownPayload, hooked
from panewatch.integrations.opencode import CONTENT_VARIABLE, PLUGIN, with_plugin
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.resume import agent_session_id
from panewatch.states import State

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hooks" / "opencode" / "1.18.33"
W, B, IDLE = State.working, State.blocked, State.idle


def _payloads() -> list[dict[str, object]]:
    """The payloads as the service takes them (``clean_report``: only ``tool_input`` stays nested)."""
    files = sorted(FIXTURES.glob("*.json"))
    assert files, "no captured opencode payloads"
    return [clean_report(json.loads(f.read_text())) for f in files]


def test_opencode_events_read_as_the_state_they_mean() -> None:
    opencode = INTEGRATIONS["opencode"]
    reports = [opencode.interpret(p, float(n), {}) for n, p in enumerate(_payloads())]
    assert all(r is not None for r in reports)
    got = [(r.event, r.state) for r in reports if r is not None]
    assert got == [
        ("chat.message", W),
        ("tool.execute.before", W),
        ("permission.asked", B),
        ("permission.replied", W),
        ("tool.execute.after", W),
        ("session.idle", IDLE),
        ("chat.message", W),
        ("tool.execute.before", W),
        ("permission.asked", B),
        ("permission.replied", W),  # rejected
        ("session.idle", IDLE),
        ("chat.message", W),
        ("session.error", IDLE),  # Esc mid-turn
        ("session.idle", IDLE),
        ("session.idle", IDLE),
    ]


def test_every_event_names_the_conversation_a_resume_reopens() -> None:
    # the plugin's sessionID, in every event the real opencode sent, as the service takes them:
    # the id `opencode --session ID` reopens
    ids = {agent_session_id(p) for p in _payloads()}
    assert ids == {"ses_dc0a7c4dbffebx1AZnxa8LoGiF"}


def test_a_permission_carries_its_structured_request() -> None:
    opencode = INTEGRATIONS["opencode"]
    shell = opencode.interpret(_payloads()[2], 0.0, {})
    assert shell is not None and shell.request is not None
    assert (shell.request.tool, shell.request.subject, shell.request.subject_kind) == ("bash", "touch x.txt", "command")
    assert shell.request.source == "hook"
    edit = opencode.interpret(_payloads()[8], 0.0, {})
    assert edit is not None and edit.request is not None
    assert edit.request.tool == "edit" and edit.request.subject_kind == "path"
    assert edit.request.subject is not None and edit.request.subject.endswith("/notes.txt")


def test_a_foreign_payload_is_refused() -> None:
    with pytest.raises(UnknownPayload):
        INTEGRATIONS["opencode"].interpret({"opencode": "nonsense"}, 0.0, {})


def test_the_opencode_manifest_names_its_hooks() -> None:
    manifest = ManifestStore.from_dirs(bundled_manifest_dir()).get("opencode")
    assert manifest is not None and manifest.manifest.hooks == "opencode"


def test_launch_names_a_private_copy_of_the_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    argv, env = hooked(INTEGRATIONS["opencode"], ["opencode"], ["opencode"], {"HOME": "/h"})
    assert argv == ["opencode"]
    plugins = json.loads(env[CONTENT_VARIABLE])["plugin"]
    assert len(plugins) == 1 and plugins[0].startswith("file:///")
    copy = Path(plugins[0].removeprefix("file://"))
    assert copy.read_text() == PLUGIN.read_text()
    assert copy.parent.stat().st_mode & 0o077 == 0 and copy.parent.stat().st_uid == os.getuid()
    assert hooked(INTEGRATIONS["opencode"], ["opencode"], ["wrapper.sh"], {})[1] == {}


def test_the_users_inline_config_keeps_its_plugins() -> None:
    theirs = json.dumps({"plugin": ["my-plugin"], "theme": "dark"})
    merged = json.loads(with_plugin(theirs, Path("/p/panewatch.js")) or "null")
    assert merged == {"plugin": ["my-plugin", "file:///p/panewatch.js"], "theme": "dark"}
    assert with_plugin("{not json", Path("/p/x.js")) is None  # no plugin, the launch goes on
    assert with_plugin('{"plugin": "x"}', Path("/p/x.js")) is None
