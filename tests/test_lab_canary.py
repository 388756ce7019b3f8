"""The canary's verdict table: drift is any capture read wrong or refused, named by its rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from panewatch_lab.canary import Row, installed_version, table

pytestmark = pytest.mark.unit


def test_drift_is_named_and_the_table_has_every_size() -> None:
    rows = [
        Row("bash", "32x120", "blocked", "blocked", "tool_confirmation", ""),
        Row("bash", "24x80", "blocked", "idle", None, "no rule matched"),
        Row("thinking", "32x120", "working", "idle", "input_box", "Type your message"),
        Row("fresh", "24x80", "idle", "refused", None, "screen lacks 'Type your message'"),
    ]
    text = table(rows, [(32, 120), (24, 80)])
    assert "| bash | blocked | blocked (tool_confirmation) | **idle** (no rule matched) |" in text
    assert "| thinking | working | **idle** (input_box) | – |" in text
    assert "**refused**" in text
    assert [r.drift for r in rows] == [False, True, True, True]


def test_latest_is_reported_as_the_version_the_install_put_there(tmp_path: Path) -> None:
    npm = tmp_path / "npm" / "node_modules" / "@qwen-code" / "qwen-code"
    npm.mkdir(parents=True)
    (npm / "package.json").write_text(json.dumps({"name": "@qwen-code/qwen-code", "version": "0.25.1"}))
    assert installed_version("qwen", tmp_path / "npm") == "0.25.1"
    claude = tmp_path / "claude" / "node_modules" / "@anthropic-ai" / "claude-code"
    claude.mkdir(parents=True)
    (claude / "package.json").write_text(json.dumps({"version": "2.1.400"}))
    assert installed_version("claude", tmp_path / "claude") == "2.1.400"
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for name, version in (("aider_chat", "0.87.0"), ("gptme", "0.36.0")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n")
    assert installed_version("aider", tmp_path / "venv") == "0.87.0"
    assert installed_version("gptme", tmp_path / "venv") == "0.36.0"
    assert installed_version("codex", tmp_path / "npm") is None  # not installed there: unknown, not a guess
