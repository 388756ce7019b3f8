"""Find the pinned Claude Code CLI and give it a HOME that goes straight to its prompt.

A fresh HOME would show onboarding, a theme picker, an API-key confirmation and a folder
trust dialog, none of which Panewatch needs to capture every time; the lab writes the
config those dialogs would have written. The values were found by running 2.1.332 against
the mock and reading what it saved (see notes/lab.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

#: The version the lab's notes and captures were made with.
PINNED_VERSION = "2.1.332"
#: Where ``npm install --prefix .lab-npm <package>@<pinned>`` (run in a checkout, as
#: ``.ci/run`` does) puts the lab's npm CLIs, relative to the working directory.
NPM_BIN_DIR = Path(".lab-npm/node_modules/.bin")


def find_npm_bin(env_var: str, name: str) -> str | None:
    """An npm CLI of the lab: ``$env_var`` (if executable), then ``.lab-npm`` in the working
    directory, then ``PATH``."""
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    local = Path.cwd() / NPM_BIN_DIR / name
    if local.exists() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


def find_claude() -> str | None:
    """The CLI to run: ``$PANEWATCH_CLAUDE_BIN``, then ``.lab-npm`` in the working directory, then ``PATH``."""
    return find_npm_bin("PANEWATCH_CLAUDE_BIN", "claude")


def claude_version(binary: str) -> str | None:
    """``x.y.z`` from ``claude --version`` (captures are filed under the version that drew them)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"\s*(\d+\.\d+\.\d+\S*)", out)
    return m.group(1) if m else None


def claude_config(
    project_dir: str | os.PathLike[str], api_key: str, *, trusted: bool = True, key_approved: bool = True
) -> dict[str, object]:
    """The ``~/.claude.json`` of a user who finished onboarding and trusts ``project_dir``.

    ``trusted=False`` / ``key_approved=False`` leave the folder-trust / API-key dialog in place
    at start-up (the captures of those dialogs need them).
    """
    return {
        "hasCompletedOnboarding": True,
        "lastOnboardingVersion": PINNED_VERSION,
        "lastReleaseNotesSeen": PINNED_VERSION,
        "theme": "dark",
        "autoUpdates": False,
        "numStartups": 1,
        # The CLI stores the last 20 characters of keys the user approved at start-up.
        "customApiKeyResponses": {"approved": [api_key[-20:]] if key_approved else [], "rejected": []},
        "projects": {
            str(Path(project_dir).resolve()): {
                "hasTrustDialogAccepted": trusted,
                "hasCompletedProjectOnboarding": True,
                "allowedTools": [],
            }
        },
    }


def prepare_home(
    home: str | os.PathLike[str],
    project_dir: str | os.PathLike[str],
    api_key: str,
    base_url: str | None = None,
    *,
    trusted: bool = True,
    key_approved: bool = True,
) -> dict[str, str]:
    """Write a HOME for the CLI and return the environment to launch it with.

    ``base_url`` is the mock API (``ANTHROPIC_BASE_URL``); launch with
    ``--permission-mode default`` so permission prompts are shown.
    """
    home_path = Path(home)
    (home_path / ".claude").mkdir(parents=True, exist_ok=True)
    Path(project_dir).mkdir(parents=True, exist_ok=True)
    (home_path / ".claude.json").write_text(
        json.dumps(claude_config(project_dir, api_key, trusted=trusted, key_approved=key_approved), indent=2)
    )
    env = {
        "HOME": str(home_path),
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "TERM": "xterm-256color",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "ANTHROPIC_API_KEY": api_key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    return env


def claude_argv(binary: str, *extra: str) -> list[str]:
    """The command line the lab launches: prompts on (recent versions default to auto mode)."""
    return [binary, "--permission-mode", "default", *extra]
