"""Resume templates are manifest data; the conversation id comes from the agent's hooks."""

from __future__ import annotations

import pytest

from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.resume import ResumeError, agent_session_id, resume_argv


def test_bundled_templates_resume_the_reported_conversation() -> None:
    store = ManifestStore.from_dirs(bundled_manifest_dir())
    claude = store.get("claude").manifest
    assert resume_argv(claude.resume, "claude", "5f0c-aa") == [
        "claude",
        "--permission-mode",
        "default",
        "--resume",
        "5f0c-aa",
    ]
    assert resume_argv(store.get("codex").manifest.resume, "codex", "th-1") == ["codex", "resume", "th-1"]
    assert store.get("shell").manifest.resume == []


def test_conversation_id_from_a_hook_payload() -> None:
    assert agent_session_id({"hook_event_name": "Stop", "session_id": "0b7f3c1e-1111"}) == "0b7f3c1e-1111"
    assert agent_session_id({"session_id": "--dangerously-skip-permissions"}) is None  # never an option
    assert agent_session_id({"state": "idle"}) is None


def test_what_cannot_be_resumed_says_why() -> None:
    with pytest.raises(ResumeError, match="no resume command"):
        resume_argv([], "shell", "x")
    with pytest.raises(ResumeError, match="never reported its conversation id"):
        resume_argv(["claude", "--resume", "{agent_session_id}"], "claude", None)


def test_a_template_without_the_id_is_refused(tmp_path) -> None:
    (tmp_path / "bad.toml").write_text(
        'agent = "bad"\nversion = "1"\nresume = ["bad", "--continue"]\n'
        '[[rules]]\nname = "x"\nstate = "idle"\nwhy = "x"\nany = ["x"]\n'
    )
    store = ManifestStore.from_dirs(tmp_path)
    assert store.get("bad") is None
    assert any("resume must contain {agent_session_id}" in str(e) for e in store.errors.values())
