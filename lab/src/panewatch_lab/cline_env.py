"""Cline CLI against the tool-calling chat mock: an OpenAI-compatible provider, asking first.

From the research on 3.0.65: ``cline auth -p openai -k KEY -m MODEL -b URL`` writes the provider
(``~/.cline/data/settings/providers.json``); ``--auto-approve false`` is what makes it ask (its
default approves everything); ``CLINE_DISABLE_CLINE_PASS_NOTICE=1`` skips the "Try ClinePass"
promo a first start shows (``promo`` brings it back). The TUI starts a hub daemon that outlives
it: ``CLINE_HUB_PORT`` gives each run a port of its own, and ``stop_daemons`` ends the ones a
run's HOME started (by PID).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from panewatch_lab._agent_home import agent_env

PINNED_VERSION = "3.0.65"
PACKAGE = "cline"
API_KEY = "sk-lab-0123456789abcdefghijklmnopqrstuvwxyz"
MODEL = "mock-coder"


def _free_port() -> int:
    from panewatch_lab.loopback import free_port

    return free_port()


def prepare_home(home: str | Path, project: str | Path, base_url: str) -> dict[str, str]:
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    env = agent_env(
        home,
        {
            "CLINE_DISABLE_CLINE_PASS_NOTICE": "1",
            "CLINE_NO_AUTO_UPDATE": "1",
            "CLINE_HUB_PORT": str(_free_port()),
        },
    )
    binary = _binary()
    if binary:
        subprocess.run(
            [binary, "auth", "-p", "openai", "-k", API_KEY, "-m", MODEL, "-b", f"{base_url}/v1"],
            env=env,
            cwd=str(project) if Path(project).is_dir() else None,
            capture_output=True,
            timeout=120,
            check=False,
        )
    return env


def _binary() -> str | None:
    from panewatch_lab.agent_labs import LABS

    return LABS["cline"].find() if "cline" in LABS else None


def cline_argv(binary: str, project: Path) -> list[str]:
    return [binary, "--tui", "--auto-approve", "false"]


def start_up(conditions: frozenset[str], home: Path, project: Path, env: dict[str, str], argv: list[str]) -> list[str]:
    """``promo``: the first start's "Try ClinePass" notice left on."""
    if "promo" in conditions:
        env.pop("CLINE_DISABLE_CLINE_PASS_NOTICE", None)
    return argv


def stop_daemons(home: Path) -> None:
    """End the hub daemons a run with this HOME left behind (they reparent to init)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"--cline-hub-daemon" in part for part in cmdline) and f"HOME={home}".encode() in environ:
            try:
                os.kill(int(proc.name), signal.SIGTERM)
            except OSError:
                pass
