"""gptme against the tool-calling chat mock: a custom OpenAI-compatible provider, native tool calls.

gptme runs from its own venv (``.lab-gptme``, ``gptme`` from PyPI). Its config
(``~/.config/gptme/config.toml``) names the mock as a ``[[providers]]`` entry; ``--tool-format
tool`` makes it call the mock's tools natively (``shell``, ``save``) instead of reading code
blocks out of the reply. It asks before every tool that changes something (``Execute shell?
[Y/n/c/e/a/?]``) unless ``--no-confirm``. Started without a conversation name or prompt it first
asks "New conversation or load previous?"; the lab names one (``--name``) unless a capture asks
for that question (``picker``).
"""

from __future__ import annotations

from pathlib import Path

from panewatch_lab._agent_home import agent_env, write_file, xdg_dirs

PINNED_VERSION = "0.35.1"
PACKAGE = "gptme"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "lab/mock-coder"
#: The conversation the lab starts (a fresh HOME each run: never one that exists).
NAME = "lab-session"


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home = Path(home)
    write_file(
        home / ".config" / "gptme" / "config.toml",
        "[[providers]]\n"
        'name = "lab"\n'
        f'base_url = "{base_url}/v1"\n'
        f'api_key = "{API_KEY}"\n'
        'default_model = "mock-coder"\n',
    )
    return agent_env(home, xdg_dirs(home, "config", "data"))


def gptme_argv(binary: str, project: Path) -> list[str]:
    return [binary, "--model", MODEL, "--tool-format", "tool", "--name", NAME]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """``picker``: no conversation named, so gptme asks "New conversation or load previous?"."""
    if "picker" in conditions and "--name" in argv:
        at = argv.index("--name")
        return argv[:at] + argv[at + 2 :]
    return argv
