"""The real Claude pieces the live tests share: the CLI (a module skips without it), the lab's
API key, and the lab's mock Anthropic API in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from live import wait_listening
from panewatch_lab.claude_env import PINNED_VERSION, find_claude
from panewatch_lab.loopback import free_port

#: A key of the shape the CLI accepts without asking; only the lab's mock API ever sees it.
API_KEY = "sk-ant-api03-lab-0123456789abcdefghijklmnopqrstuvwxyz"

CLAUDE = find_claude()
#: For a module that drives the real Claude Code CLI: skipped, saying how to install it, without it.
NEEDS_CLAUDE = pytest.mark.skipif(
    CLAUDE is None,
    reason="claude CLI not installed (npm install --prefix .lab-npm "
    f"@anthropic-ai/claude-code@{PINNED_VERSION}, or set PANEWATCH_CLAUDE_BIN)",
)

#: How the live tests start the mock API.
MOCK_API = (sys.executable, "-m", "panewatch_lab.mock_api")


@contextmanager
def mock_api(scenario: str, log: Path, program: Sequence[str] = MOCK_API) -> Iterator[str]:
    """The lab's mock API in a subprocess on a free loopback port, playing ``scenario`` and
    logging every request to ``log`` (JSON lines); yields its URL once it accepts connections.
    ``program`` starts it: its module by default, ``panewatch lab mock-api`` in the CLI's test."""
    port = free_port()
    server = subprocess.Popen(
        [*program, "--port", str(port), "--scenario", scenario, "--log", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_listening(port, server, "mock API")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)
