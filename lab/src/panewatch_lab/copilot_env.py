"""GitHub Copilot CLI against the tool-calling chat mock, offline, with no GitHub login.

From the research on 1.0.102: ``COPILOT_OFFLINE=true`` with ``COPILOT_PROVIDER_BASE_URL`` /
``_API_KEY`` and ``COPILOT_MODEL`` is "bring your own key" against an OpenAI-compatible
endpoint (chat completions by default). Its first start in a folder asks whether to trust it;
the lab records the project as trusted in ``~/.copilot/config.json`` unless a capture asks
for that dialog (``untrusted``).
"""

from __future__ import annotations

import json
from pathlib import Path

from panewatch_lab._agent_home import agent_env, write_json, xdg_dirs

PINNED_VERSION = "1.0.102"
PACKAGE = "@github/copilot"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "mock-coder"


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home, project = Path(home), Path(project)
    config = {"trusted_folders": [str(project.resolve())], "banner": "never", "beep": False}
    write_json(home / ".copilot" / "config.json", config)
    return agent_env(
        home,
        {
            **xdg_dirs(home, "config", "state"),
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": f"{base_url}/v1",
            "COPILOT_PROVIDER_API_KEY": API_KEY,
            "COPILOT_MODEL": MODEL,
            "COPILOT_AUTO_UPDATE": "false",
        },
    )


def copilot_argv(binary: str, project: Path) -> list[str]:
    return [binary]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """``untrusted``: no trusted folder (Copilot asks "Do you trust the files in this folder?")."""
    if "untrusted" in conditions:
        path = home / ".copilot" / "config.json"
        config = json.loads(path.read_text())
        config["trusted_folders"] = []
        write_json(path, config)
    return argv
