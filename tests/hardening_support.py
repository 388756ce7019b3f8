"""A real ``panewatch serve`` in its own process, for tests that need its pid, its RSS or a kill -9."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from panewatch.procs.proctree import live as alive
from panewatch.procs.sandbox import agent_in_sandbox
from panewatch_lab.serve_proc import ServeProcess, env_without_panewatch


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
        self.state_dir = state_dir
        # pty by default: these tests are about the pty host's reaper, and a tmux host would keep
        # its agents (and its tmux server) after the test's server stops
        args = ["--state-dir", str(state_dir), "--sweep-ms", "100", "--pane-host", pane_host, *(extra or [])]
        if token_file is not None:
            args += ["--token-file", str(token_file)]
        self.serve = ServeProcess(token, args, env={**env_without_panewatch(), **(env or {})}).start(
            timeout=90
        )  # a loaded 2-core machine starts Python slowly
        self.proc, self.pid, self.port, self.url = self.serve.proc, self.serve.pid, self.serve.port, self.serve.url
        if token_file is not None:
            self.token = token_file.read_text().strip()
        elif token is not None:
            self.token = token
        else:
            self.token = self._printed_token()
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=15)

    def _printed_token(self) -> str:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = re.search(r"\?token=(\S+)", self.serve.output())
            if found:
                return found.group(1)
            time.sleep(0.05)
        raise AssertionError("no login URL printed: " + self.serve.output())

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
        """Signal the server, wait for it, return what it printed (stdout and stderr, in order)."""
        self.http.close()
        return self.serve.stop(sig, grace=timeout)


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


def host_pids(pids: list[int], root: int) -> list[int]:
    """``pids`` as this machine numbers them. A pane in a sandbox (``panewatch.procs.sandbox``) has a PID
    namespace of its own, so what its processes say of themselves (``$$``, ``$!``) is their pid
    there: each is found here by that number among the processes of the sandbox's namespace."""
    agent = agent_in_sandbox(root)
    if agent is None:
        return pids  # not in a sandbox: the same numbers
    namespace = os.readlink(f"/proc/{agent}/ns/pid")
    found: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != namespace:
                continue
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        found[int(nspid[-1])] = int(name)
    missing = [p for p in pids if p not in found]
    assert not missing, f"no process of the sandbox is numbered {missing} in it"
    return [found[p] for p in pids]
