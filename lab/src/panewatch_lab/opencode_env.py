"""opencode against the tool-calling chat mock: a provider of its own, permissions that ask.

From the research on 1.18.33 (../shared/research/more-agents.md; notes/agents-more-lab.md): ``@ai-sdk/openai-compatible`` is
bundled, so a provider in ``~/.config/opencode/opencode.json`` pointing at the mock needs no
download; ``"permission": {"bash": "ask", "edit": "ask"}`` is what makes it ask at all (its
default is to allow everything). The binary comes from the ``opencode-linux-x64`` optional
dependency of ``opencode-ai``.
"""

from __future__ import annotations

from pathlib import Path

from panewatch_lab._agent_home import agent_env, write_json, xdg_dirs

PINNED_VERSION = "1.18.33"
PACKAGE = "opencode-ai"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "mock-coder"


def config(base_url: str) -> dict[str, object]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": API_KEY},
                "models": {MODEL: {"name": "Mock Coder", "limit": {"context": 128000, "output": 8192}}},
            }
        },
        "model": f"mock/{MODEL}",
        "small_model": f"mock/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "ask", "edit": "ask"},
    }


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home = Path(home)
    write_json(home / ".config" / "opencode" / "opencode.json", config(base_url))
    return agent_env(
        home,
        {
            **xdg_dirs(home, "config", "data", "cache", "state"),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_SHARE": "1",
        },
    )


def opencode_argv(binary: str, project: Path) -> list[str]:
    return [binary]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """opencode asks nothing at first start (no trust, no login with a configured provider)."""
    return argv
