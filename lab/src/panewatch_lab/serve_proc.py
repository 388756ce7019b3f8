"""A real ``panewatch serve`` in a process of its own, started one way and known to be serving.

The benchmarks (``panewatch bench``, ``benchmarks/hosts.py``) and the tests that need the real
server process (its pid and RSS, a kill -9 and a restart, a cluster node, the dashboard in a
browser) all start it here, so that they agree on three things:

- the token goes as ``--token=VALUE``: a generated token may start with "-", which
  ``--token VALUE`` reads as a missing argument (the quick bench's cluster nodes failed so);
- its output (stdout and stderr, in order) goes to a file, never to a pipe: a pipe that nobody
  drains fills up (64 KiB of state-change lines) and then blocks the server's event loop;
- it is ready when ``/healthz`` answers 200 — after the port listens, the app serves — and when
  it never does, ``ServeError`` says why (it exited, with its code, or it was too slow) and ends
  with the tail of that output, instead of a bare timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import IO, Self

from .loopback import HOST, free_port

#: ``python -m panewatch serve``, the entry point a user runs (the bench's probe has its own).
SERVE = ("panewatch", "serve")
#: How much of a failed server's output its error quotes.
TAIL_CHARS = 3000
#: How long a server may take to answer /healthz. Generous on purpose: starting it is mostly
#: imports (~1.9 s of CPU), and on a 2-core machine at load ~16 those took 21 s of wall time.
START_TIMEOUT_S = 60.0


class ServeError(RuntimeError):
    """The server exited or never answered ``/healthz``; the message ends with its output's tail."""


def serve_argv(port: int, token: str | None, extra: Sequence[str] = (), module: Sequence[str] = SERVE) -> list[str]:
    """``python -m panewatch serve --port PORT --token=TOKEN *extra``; no token: the server's own
    (generated and kept in its state folder, or ``--token-file`` in ``extra``)."""
    argv = [sys.executable, "-m", *module, "--port", str(port)]
    if token is not None:
        argv.append(f"--token={token}")  # never "--token VALUE": a token may start with "-"
    return [*argv, *extra]


def env_without_panewatch(keep: Collection[str] = ()) -> dict[str, str]:
    """This process's environment without its ``PANEWATCH_*`` settings (but those in ``keep``):
    the server under test reads what its caller gives it, not the developer's own configuration."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_") or k in keep}


class ServeProcess:
    """``python -m panewatch serve`` on a loopback port: ``start()`` returns once it serves,
    ``stop()`` ends it (and only it) and returns what it printed.

    ``env`` is the whole environment (None: this process's); ``log`` a file its output is
    appended to (a restart on the same file keeps the earlier run's lines), else an unnamed
    temporary file that lasts until ``stop()``. ``module`` is another entry point that takes the
    same ``--port`` and ``--token`` (the bench's probe server). ``new_session`` puts it in a
    session of its own, so that a Ctrl-C meant for the caller does not reach it. ``rlimits``
    (``resource.RLIMIT_*`` → (soft, hard)) are set in the child before it runs, as ``ulimit`` would.
    """

    def __init__(
        self,
        token: str | None,
        extra: Sequence[str] = (),
        *,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
        cwd: Path | None = None,
        module: Sequence[str] = SERVE,
        new_session: bool = False,
        rlimits: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.token = token
        self.port = port or free_port()
        self.argv = serve_argv(self.port, token, extra, module)
        self.what = "python -m " + " ".join(module)  # for its errors
        self.env = dict(env) if env is not None else None
        self.log_path, self.cwd, self.new_session = log, cwd, new_session
        self.rlimits = dict(rlimits or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None  # the unnamed log, open while the server may write it
        self._final = ""  # the unnamed log's text, read when it was closed

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start it without waiting (a server that must refuse to start: ``proc.wait()``, then ``stop()``)."""
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out: IO[bytes] = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps its own copy)
        else:
            out = self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                stdout=out,
                cwd=self.cwd,
                env=self.env,
                start_new_session=self.new_session,
                preexec_fn=self._limit if self.rlimits else None,
            )
        finally:
            if out is not self._log:
                out.close()
        return self.proc

    def _limit(self) -> None:
        import resource

        for which, pair in self.rlimits.items():
            resource.setrlimit(which, pair)

    def start(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Spawn it and wait until ``/healthz`` answers 200; one that does not within ``timeout``
        seconds is stopped, and ``ServeError`` says why."""
        self.spawn()
        self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = START_TIMEOUT_S) -> None:
        """Poll ``/healthz`` (no token needed) until it answers 200; see ``start``."""
        import httpx  # here: `panewatch --help` imports the bench, and stays quick

        assert self.proc is not None, "not started"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServeError(f"{self.what} exited with {self.proc.returncode}{self._tail()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise ServeError(f"{self.what} did not answer {self.url}/healthz within {timeout:g} s{self._tail()}")

    def output(self) -> str:
        """What it printed so far (stdout and stderr, in order)."""
        if self.log_path is not None:
            return self.log_path.read_bytes().decode(errors="replace") if self.log_path.exists() else ""
        if self._log is None:
            return self._final
        # pread: the server shares this file's offset, which a seek would move under its writes
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def _tail(self) -> str:
        where = f" (all of it in {self.log_path})" if self.log_path is not None else ""
        return f"; its output ends{where}:\n{self.output()[-TAIL_CHARS:]}"

    def stop(self, sig: int = signal.SIGTERM, grace: float = 15.0) -> str:
        """Send ``sig`` if it still runs, SIGKILL it after ``grace`` seconds; returns its output."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        text = self.output()
        if self._log is not None:
            self._final = text
            self._log.close()
            self._log = None
        return text
