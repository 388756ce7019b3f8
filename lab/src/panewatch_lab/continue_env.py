"""Continue CLI (``cn``) against the tool-calling chat mock: a local config.yaml, no hub login.

``cn --config <file>`` takes a local assistant file: one model with ``provider: openai`` and
``apiBase`` at the mock reaches it with no sign-in. Its default policies ask before ``Bash`` and
``Write`` ("Would you like to continue?" with "> Continue (tab)"); ``--auto`` would allow all.
"""

from __future__ import annotations

from pathlib import Path

from panewatch_lab._agent_home import agent_env, write_file

PINNED_VERSION = "1.5.47"
PACKAGE = "@continuedev/cli"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "mock-coder"


def config_path(home: Path) -> Path:
    return home / ".continue" / "config.yaml"


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home = Path(home)
    write_file(
        config_path(home),
        "name: lab\n"
        "version: 0.0.1\n"
        "schema: v1\n"
        "models:\n"
        f"  - name: {MODEL}\n"
        "    provider: openai\n"
        f"    model: {MODEL}\n"
        f"    apiBase: {base_url}/v1\n"
        f"    apiKey: {API_KEY}\n"
        "    roles: [chat, edit, apply]\n"
        "    capabilities: [tool_use]\n",
    )
    return agent_env(home, {})


def continue_argv(binary: str, project: Path) -> list[str]:
    return [binary]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """The lab's config file (in ``home``) named with ``--config``; ``no-auth``: none named, so
    ``cn`` first asks for an Anthropic API key (it reads no config from ``~/.continue`` itself)."""
    return argv if "no-auth" in conditions else [*argv, "--config", str(config_path(home))]
