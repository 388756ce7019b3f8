"""A prepared HOME for Gemini CLI: API-key auth against the mock, no nags, a trusted folder.

Measured on 0.61.0 (see notes/agents-lab.md): with these files the CLI draws its input box
1–3 s after start with no dialog; ``GOOGLE_GEMINI_BASE_URL`` is used as the SDK's base URL.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from panewatch_lab._agent_home import INHERITED, agent_env, write_json

PINNED_VERSION = "0.61.0"
PACKAGE = "@google/gemini-cli"
API_KEY = "AIzaSy-lab-0123456789abcdefghijklmnopqrs"


def find_gemini(prefix: str | Path | None = None) -> str | None:
    """The lab prefix's ``gemini`` (``.lab-npm`` at the repository root), else PATH's."""
    root = Path(prefix) if prefix else Path(__file__).resolve().parents[3] / ".lab-npm"
    local = root / "node_modules" / ".bin" / "gemini"
    return str(local) if local.exists() else shutil.which("gemini")


def prepare_home(
    home: str | Path, project: str | Path, base_url: str, *, trusted: bool = True, allowed: list[str] | None = None
) -> dict[str, str]:
    """Write ``~/.gemini`` and return the CLI's environment."""
    home, project = Path(home), Path(project)
    gem = home / ".gemini"
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
        "general": {
            "disableAutoUpdate": True,
            "disableUpdateNag": True,
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
        },
        "privacy": {"usageStatisticsEnabled": False},
        "ui": {"hideTips": True, "hideBanner": False},
        "ide": {"enabled": False, "hasSeenNudge": True},
    }
    if allowed:
        settings["tools"] = {"allowed": allowed}
    write_json(gem / "settings.json", settings)
    write_json(gem / "trustedFolders.json", {str(project.resolve()): "TRUST_FOLDER"} if trusted else {})
    return agent_env(
        home,
        {
            "GEMINI_API_KEY": API_KEY,
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "NO_BROWSER": "1",
            "GEMINI_CLI_NO_RELAUNCH": "true",
        },
        inherit=(*INHERITED, "NODE_OPTIONS"),
    )


def gemini_argv(binary: str, *extra: str) -> list[str]:
    return [binary, *extra]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """Undo what ``prepare_home`` set, to meet a first start's dialogs: ``untrusted`` (no trusted
    folder: "Do you trust the files in this folder?"), ``no-auth`` (no auth type chosen: "How
    would you like to authenticate for this project?").

    Untrusted, the CLI may relaunch itself as a user's does: it applies a trust decision by
    restarting ("Gemini CLI is restarting to apply the trust changes..."), and without the
    relaunch it exits (199) instead, which no user sees."""
    gem = home / ".gemini"
    if "untrusted" in conditions:
        (gem / "trustedFolders.json").write_text("{}")
        env.pop("GEMINI_CLI_NO_RELAUNCH", None)
    if "no-auth" in conditions:
        settings = json.loads((gem / "settings.json").read_text())
        del settings["security"]["auth"]
        write_json(gem / "settings.json", settings)
    return argv
