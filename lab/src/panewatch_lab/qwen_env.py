"""Qwen Code (a Gemini CLI fork) against the tool-calling chat mock: OpenAI auth, asking mode.

From the research on 0.24.4: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``OPENAI_MODEL`` and
``security.auth.selectedType = "openai"`` reach the mock with no dialog; ``--approval-mode
default`` is what makes it ask (its first start is otherwise in "Auto" mode, where an LLM
classifier, here the mock, approves tool calls). The vendored ripgrep comes without its exec
bit from npm; Qwen then boxes an "EACCES" warning above the composer, so the lab sets the bit
(``fix_install``), as a working install has it.
"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from panewatch_lab._agent_home import agent_env, write_json

PINNED_VERSION = "0.24.4"
PACKAGE = "@qwen-code/qwen-code"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "mock-coder"


def settings(trusted: bool = True) -> dict[str, object]:
    return {
        "security": {"auth": {"selectedType": "openai"}, "folderTrust": {"enabled": not trusted}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "ide": {"enabled": False, "hasSeenNudge": True},
        # After a turn Qwen 0.24.4 sends background requests with tools, which the mock cannot tell
        # from the user's turn: a follow-up suggestion ("[SUGGESTION MODE: …]", all its tools)
        # and a "managed memory" extraction (read_file … write_file). The capture plan then saw
        # the turn answered by 'fallback' (canary of 2026-12-04; the mock's log is in
        # notes/canary-2026-12-04.md; the captures of 2026-12-02 on the same version passed, why
        # they did not fire then is not known). The lab turns both off; a user's Qwen has them on.
        "ui": {"hideTips": True, "enableFollowupSuggestions": False},
        "memory": {"enableManagedAutoMemory": False},
    }


def fix_install(binary: str) -> None:
    """Give the vendored ``rg`` its exec bit (npm drops it; a user's working install has it)."""
    root = Path(binary).resolve().parent
    for rg in root.glob("vendor/ripgrep/*/rg"):
        mode = rg.stat().st_mode
        if not mode & stat.S_IXUSR:
            rg.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home, project = Path(home), Path(project)
    write_json(home / ".qwen" / "settings.json", settings())
    env = agent_env(
        home,
        {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": f"{base_url}/v1", "OPENAI_MODEL": MODEL, "NO_BROWSER": "1"},
    )
    if project.is_dir():
        git_project(project, env)
    return env


def qwen_argv(binary: str, project: Path) -> list[str]:
    fix_install(binary)
    return [binary, "--approval-mode", "default"]


def git_project(project: Path, env: dict[str, str]) -> None:
    """Make the project a git repository: outside one, 0.24.4 ran ``touch x.txt`` without asking
    in default approval mode (measured: the same call asked inside a repository), and users run
    it in their repositories."""
    if not (project / ".git").exists():
        subprocess.run(["git", "init", "-q", str(project)], check=True, env=env, capture_output=True)


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """The project is always a git repository (``git_project``). ``untrusted``: folder trust on
    and the project not trusted (Qwen asks, as Gemini does)."""
    git_project(project, env)
    if "untrusted" in conditions:
        write_json(home / ".qwen" / "settings.json", settings(trusted=False))
    return argv
