"""A real ``panewatch serve`` in its own process, for tests that need its pid, its RSS or a kill -9."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from live import wait_listening
from panewatch.proctree import live as alive


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python -m panewatch serve`` on loopback; ``token`` is read from the file or the login URL it prints."""

    def __init__(
        self,
        state_dir: Path,
        *,
        token_file: Path | None = None,
        token: str | None = None,
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,
        pane_host: str = "pty",
    ) -> None:
        self.port = free_port()
        self.state_dir = state_dir
        argv = [
            sys.executable,
            "-m",
            "panewatch",
            "serve",
            "--port",
            str(self.port),
            "--state-dir",
            str(state_dir),
            "--sweep-ms",
            "100",
            "--pane-host",
            pane_host,
            *(extra or []),
        ]
        # pty by default: these tests are about the pty host's reaper, and a tmux host would keep
        # its agents (and its tmux server) after the test's server stops
        if token_file is not None:
            argv += ["--token-file", str(token_file)]
        if token is not None:
            argv += [f"--token={token}"]  # a generated token may start with "-"
        child_env = {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_")}
        child_env.update(env or {})
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env)
        self.pid = self.proc.pid
        wait_listening(self.port, self.proc, "panewatch serve", timeout=30)
        self.url = f"http://127.0.0.1:{self.port}"
        self.stdout_lines: list[str] = []
        if token_file is not None:
            self.token = token_file.read_text().strip()
        elif token is not None:
            self.token = token
        else:
            self.token = self._printed_token()
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=15)

    def _printed_token(self) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode()
            self.stdout_lines.append(line)
            found = re.search(r"\?token=(\S+)", line)
            if found:
                return found.group(1)
        raise AssertionError("no login URL printed: " + "".join(self.stdout_lines))

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def create(self, **body: Any) -> dict[str, Any]:
        r = self.http.post("/api/sessions", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    def wait_state(self, sid: str, state: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            info = self.http.get(f"/api/sessions/{sid}").json()
            if info["state"] == state:
                return info
            assert time.monotonic() < deadline, f"{sid} is {info['state']} ({info['source']}), wanted {state}"
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> str:
        """Signal the server, wait for it, return its stderr."""
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err.decode(errors="replace")


def wait_file(path: Path, lines: int = 1, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        if path.exists():
            got = [x for x in path.read_text().splitlines() if x.strip()]
            if len(got) >= lines:
                return got
        assert time.monotonic() < deadline, f"{path} did not get {lines} lines"
        time.sleep(0.05)


def wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    """The pids still running (not zombies) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


#: A pane that leaves processes every old clean-up missed, and writes their pids to ``$1``:
#: a setsid grandchild, one that ignores SIGHUP, a double-forked daemon with an empty environment.
STUBBORN = r"""
out="$1"
setsid sleep 1001 & echo $! >> "$out"
( trap '' HUP; exec sleep 1002 ) & echo $! >> "$out"
( setsid env -i /bin/sh -c 'trap "" HUP; sleep 1003 & echo $! >> '"$out"'; wait' & )
sleep 1004 & echo $! >> "$out"
echo ready
sleep 1000
"""
