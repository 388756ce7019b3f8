"""Aider against the mock's chat-completions endpoint: no update check, no analytics, no git.

Aider runs from its own venv (``.lab-aider``, ``aider-chat`` 0.86.x from PyPI); the model is
``openai/<name>`` with ``--openai-api-base`` pointing at the mock.
"""

from __future__ import annotations

import os
from pathlib import Path

PINNED_VERSION = "0.86.2"
PACKAGE = "aider-chat"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "openai/mock-coder"

_BASE_URL: dict[str, str] = {}


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL") and v}
    env.update({"HOME": str(home), "TERM": "xterm-256color", "COLORTERM": "truecolor",
                "OPENAI_API_KEY": API_KEY, "OPENAI_API_BASE": f"{base_url}/v1",
                "AIDER_CHECK_UPDATE": "false", "AIDER_ANALYTICS": "false"})
    env.setdefault("LANG", "C.UTF-8")
    return env


def aider_argv(binary: str, project: Path) -> list[str]:
    return [binary, "--model", MODEL, "--no-check-update", "--no-show-release-notes", "--no-analytics",
            "--no-auto-commits", "--no-git", "--no-show-model-warnings", "--no-fancy-input",
            "--edit-format", "whole", "--map-tokens", "0", "--no-detect-urls"]
