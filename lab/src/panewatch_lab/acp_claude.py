"""Claude Code as an ACP agent for the lab: Zed's adapter on the lab's mock Messages API.

The adapter (npm ``@zed-industries/claude-agent-acp``) speaks ACP on stdio and drives the
Claude Code CLI bundled in its Agent SDK, which talks to ``ANTHROPIC_BASE_URL`` — the mock —
so the whole agent runs offline on loopback. Two settings make that work (notes/acp.md):

- ``IS_SANDBOX=1``: the SDK always passes ``--allow-dangerously-skip-permissions``, which the
  CLI refuses as root ("cannot be used with root/sudo privileges") unless told it is in a
  sandbox; without it ``session/new`` fails with "Query closed before response received".
  Permissions are still asked: the session runs in the ``default`` mode.
- a HOME of its own, so the user's settings and sessions stay out of the lab's runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from panewatch_lab.claude_env import find_npm_bin

PACKAGE = "@zed-industries/claude-agent-acp"
#: The adapter version the lab and its notes were made with (it bundles Claude Code 2.1.83).
PINNED_VERSION = "0.23.1"


def find_adapter() -> str | None:
    """``$PANEWATCH_CLAUDE_ACP_BIN``, then ``.lab-npm`` in the working directory, then ``PATH``."""
    return find_npm_bin("PANEWATCH_CLAUDE_ACP_BIN", "claude-agent-acp")


def adapter_env(home: str | os.PathLike[str], base_url: str, api_key: str) -> dict[str, str]:
    """The adapter's environment: its own HOME, the mock as the API, nothing nonessential."""
    Path(home).mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "ANTHROPIC_API_KEY": api_key,
        "ANTHROPIC_BASE_URL": base_url,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "IS_SANDBOX": "1",
    }
