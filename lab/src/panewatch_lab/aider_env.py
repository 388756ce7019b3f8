"""Aider against the mock's chat-completions endpoint: no update check, no analytics, no git.

Aider runs from its own venv (``.lab-aider``, ``aider-chat`` 0.86.x from PyPI); the model is
``openai/<name>`` with ``--openai-api-base`` pointing at the mock.
"""

from __future__ import annotations

import json
from pathlib import Path

from panewatch_lab._agent_home import agent_env, write_file

PINNED_VERSION = "0.86.2"
PACKAGE = "aider-chat"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "openai/mock-coder"

_BASE_URL: dict[str, str] = {}


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home = Path(home)
    # a fresh model-price cache: otherwise Aider fetches it from GitHub at start and prints
    # the failure (no network) above its first prompt
    info = {
        "max_input_tokens": 128000,
        "max_tokens": 8192,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": "openai",
        "mode": "chat",
    }
    write_file(
        home / ".aider" / "caches" / "model_prices_and_context_window.json",
        json.dumps({"mock-coder": info, "openai/mock-coder": info}),
    )
    return agent_env(
        home,
        {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_API_BASE": f"{base_url}/v1",
            "AIDER_CHECK_UPDATE": "false",
            "AIDER_ANALYTICS": "false",
            # litellm fetches a model price list from GitHub at start unless told not to
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        },
        tmpdir=False,
    )


def aider_argv(binary: str, project: Path) -> list[str]:
    return [
        binary,
        "--model",
        MODEL,
        "--no-check-update",
        "--no-show-release-notes",
        "--no-analytics",
        "--no-auto-commits",
        "--no-git",
        "--no-show-model-warnings",
        "--edit-format",
        "diff",
        "--map-tokens",
        "0",
        "--no-detect-urls",
    ]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """``git``: Aider may use git, so it asks its start-up questions ("No git repo found, create
    one…?" outside a repository, "Add .aider* to .gitignore?" inside one)."""
    return [a for a in argv if a != "--no-git"] if "git" in conditions else argv
