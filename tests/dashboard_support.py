"""Helpers for the dashboard's browser tests: a real server in a subprocess, scripted stand-in
agents, and Debian's Chromium for Playwright.

The agents are bash scripts that draw what Claude's rules look for (a horizontal rule, a
numbered menu with ``❯``, the dialog's footer; ``esc to interrupt`` while working; ``? for
shortcuts`` when idle), launched with ``"agent": "claude"`` so Claude's manifest classifies
them (argv[0] is ``bash``, so no hooks are added).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import httpx

from panewatch_lab.loopback import free_port

REPO = Path(__file__).resolve().parent.parent
#: The lab's manifests (its ``fake`` agent), when the lab is installed: not bundled with the runtime.
LAB_MANIFESTS = Path(spec.origin).with_name("manifests") if (spec := find_spec("panewatch_lab")) and spec.origin else None
ARTIFACTS = REPO / "artifacts"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]

RULE = "─" * 40


class Server:
    """``panewatch serve`` in a subprocess, on a fixed port so that it can be restarted there."""

    def __init__(self, token: str, port: int | None = None, log_dir: Path | None = None) -> None:
        self.token = token
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_dir = log_dir
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, token: str | None = None, timeout: float = 20.0) -> Server:
        if token is not None:
            self.token = token
        env = {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_") or k == "PANEWATCH_STATE_DIR"}
        env["PYTHONUNBUFFERED"] = "1"
        self.starts += 1
        log = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.log_dir / f"server-{self.port}-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "panewatch", "serve", "--port", str(self.port), "--token", self.token,
             "--sweep-ms", "100", *(["--manifests", str(LAB_MANIFESTS)] if LAB_MANIFESTS else [])],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        if log is not subprocess.DEVNULL:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"panewatch serve exited with {self.proc.returncode} (log in {self.log_dir})")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"panewatch serve did not answer /healthz within {timeout}s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    # -- the HTTP API, as a script would use it ---------------------------------------------
    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10.0)

    def create(self, command: list[str], *, name: str, agent: str | None = "claude", **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"command": command, "name": name, **extra}
        if agent:
            body["agent"] = agent
        with self.client() as c:
            r = c.post("/api/sessions", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    def sessions(self) -> list[dict[str, Any]]:
        with self.client() as c:
            r = c.get("/api/sessions")
        r.raise_for_status()
        return r.json()["sessions"]

    def screen(self, sid: str) -> list[str]:
        with self.client() as c:
            r = c.get(f"/api/sessions/{sid}/screen")
        r.raise_for_status()
        return r.json()["rows"]

    def delete_all(self) -> None:
        with self.client() as c:
            for s in c.get("/api/sessions").json()["sessions"]:
                c.delete(f"/api/sessions/{s['id']}")


# --- scripted agents ------------------------------------------------------------------------


def _bash(*lines: str) -> list[str]:
    return ["bash", "-c", "\n".join(lines)]


def _printf(text: str) -> str:
    """A printf of ``text`` with \\r\\n line ends (``text`` must not hold a single quote)."""
    assert "'" not in text and "%" not in text
    return "printf '" + text.replace("\n", "\\r\\n") + "'"


CLEAR = "printf '\\x1b[2J\\x1b[H'"
IDLE_LINE = " ? for shortcuts"


def prompt_agent(*, work: float = 4.0) -> list[str]:
    """Claude-like: a permission menu read as one key (no Enter), then work, then idle."""
    return _bash(
        "stty -echo",
        "sleep 0.2",
        _printf(f"{RULE}\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n Esc to cancel · Tab to amend\n"),
        "read -rsn1 key",
        "printf '\\r\\x1b[5A\\x1b[J'",
        'printf " answered %s\\r\\n" "$key"',
        _printf("✻ Working… (esc to interrupt)\n"),
        f"sleep {work}",
        CLEAR,
        _printf(f"{RULE}\n❯ \n{RULE}\n{IDLE_LINE}\n"),
        "exec sleep 600",
    )


def idle_agent(text: str = "") -> list[str]:
    """An idle prompt box (optionally below some text) that never changes."""
    body = (text + "\n") if text else ""
    return _bash("stty -echo", _printf(f"{body}{RULE}\n❯ \n{RULE}\n{IDLE_LINE}\n"), "exec sleep 600")


def echo_agent() -> list[str]:
    """Idle; echoes each line it is sent as ``got:<line>``."""
    return _bash(
        "stty -echo",
        _printf(f"{RULE}\n❯ \n{RULE}\n{IDLE_LINE}\n"),
        'while read -r line; do printf "got:%s\\r\\n" "$line"; done',
        "exec sleep 600",
    )


def json_argv(argv: list[str]) -> str:
    return json.dumps(argv)
