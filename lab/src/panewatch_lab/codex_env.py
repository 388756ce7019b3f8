"""A prepared CODEX_HOME for Codex CLI: the mock as its model provider, a trusted project.

From the research notes on 0.171.0: ``wire_api = "responses"`` is the only accepted value,
``approval_policy = "on-request"`` (``untrusted`` stops start-up), and ``--no-daemon`` keeps
the TUI from starting an app-server daemon that outlives it and breaks the next run.
"""

from __future__ import annotations

import json
from pathlib import Path

from panewatch_lab._agent_home import agent_env, write_file

PINNED_VERSION = "0.171.0"
PACKAGE = "@openai/codex"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "gpt-5.5-codex"


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home, project = Path(home), Path(project)
    codex_home = home / ".codex"
    config = f'''model = "{MODEL}"
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{base_url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[projects.{json.dumps(str(project.resolve()))}]
trust_level = "trusted"
'''
    write_file(codex_home / "config.toml", config)
    return agent_env(home, {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": API_KEY})


def codex_argv(binary: str, project: Path) -> list[str]:
    return [binary, "--no-daemon"]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """Undo what ``prepare_home`` set, to meet a first start's dialogs: ``untrusted`` (no trust
    entry: in a git repository Codex asks "Trust this folder?"), ``no-auth`` (no key and no
    provider: the sign-in screen)."""
    config = Path(env["CODEX_HOME"]) / "config.toml"
    text = config.read_text()
    if "untrusted" in conditions:
        text = text[: text.index("[projects.")]
    if "no-auth" in conditions:
        env.pop("OPENAI_API_KEY", None)
        text = text.replace('model_provider = "mock"\n', "")
    config.write_text(text)
    return argv
