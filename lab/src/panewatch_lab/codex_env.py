"""A prepared CODEX_HOME for Codex CLI: the mock as its model provider, a trusted project.

From the research notes on 0.171.0: ``wire_api = "responses"`` is the only accepted value,
``approval_policy = "on-request"`` (``untrusted`` stops start-up), and ``--no-daemon`` keeps
the TUI from starting an app-server daemon that outlives it and breaks the next run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PINNED_VERSION = "0.171.0"
PACKAGE = "@openai/codex"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "gpt-5.5-codex"


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home, project = Path(home), Path(project)
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
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
    (codex_home / "config.toml").write_text(config)
    tmp = home / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL") and v}
    env.update(
        {
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            "TMPDIR": str(tmp),
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
            "OPENAI_API_KEY": API_KEY,
        }
    )
    env.setdefault("LANG", "C.UTF-8")
    return env


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
