"""Servers on loopback for the lab, the benchmark and the tests: one port picker, one harness.

``free_port`` is for a server another process will start (the port is free when asked and
outside the range the kernel gives outgoing connections, so only another listener could take it); ``Loopback`` binds its socket at once and hands that very socket to
uvicorn, so there is no race. A ``Loopback`` serves an app either in the caller's event loop
(``async with lb.serving(app)``: the tests, whose code shares the server's loop) or in a thread
with a loop of its own (``lb.start(app)`` … ``lb.close()``: the lab's synchronous tools, and the
evaluation, whose measurements must not delay the server). ``LoopbackServer`` is the mock-API
shape of it (the mocks of other CLIs: ``records()`` from the app's turn log).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Self

import uvicorn

HOST = "127.0.0.1"


#: How many ports below the kernel's ephemeral range ``free_port`` hands out, and in how many
#: slices (one per pytest worker, the rest for processes outside pytest).
PORT_WINDOW, PORT_SLICES = 12_000, 8
_cursor: dict[int, int] = {}


def _below_ephemeral() -> range | None:
    """The ports just below ``ip_local_port_range``: no outgoing connection ever takes one as
    its source port. None where the range cannot be read or leaves no room."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    start = max(1024, low - PORT_WINDOW)
    return range(start, low) if low - start >= 100 * PORT_SLICES else None


def _slice(ports: range) -> range:
    """This process's slice of ``ports``: one per pytest-xdist worker (``gw0`` …), so that two
    workers never pick the same port; slice 0 outside pytest-xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    n = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = len(ports) // PORT_SLICES
    first = ports.start + (n % PORT_SLICES) * size
    return range(first, first + size)


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now, for a server another process will start.

    Not the kernel's ``bind(0)``: that port comes from the ephemeral range, and between this
    call and the server's own bind an outgoing connection (a test's client, a CLI calling its
    mock) could take it as its source port, or another pytest worker be handed it too. These
    ports lie below that range, in a slice per worker, handed out in turn by this process."""
    ports = _below_ephemeral()
    if ports is None:
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    mine = _slice(ports)
    start = _cursor.setdefault(mine.start, random.randrange(len(mine)))
    for i in range(len(mine)):
        port = mine.start + (start + i) % len(mine)
        if _bindable(host, port):
            _cursor[mine.start] = (start + i + 1) % len(mine)
            return port
    raise OSError(f"no free port in {mine.start}-{mine.stop - 1} on {host}")


class Loopback:
    """A socket bound on loopback now; a uvicorn server for an app on it later."""

    def __init__(self, host: str = HOST) -> None:
        self.host = host
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.port: int = self.sock.getsockname()[1]
        self.server: uvicorn.Server | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def _server(self, app: Any, log_level: str, lifespan: str) -> uvicorn.Server:
        self.server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan=lifespan))
        return self.server

    @asynccontextmanager
    async def serving(self, app: Any, log_level: str = "warning", lifespan: str = "on") -> AsyncIterator[Self]:
        """Serve ``app`` in this event loop until the block ends."""
        server = self._server(app, log_level, lifespan)
        task = asyncio.ensure_future(server.serve(sockets=[self.sock]))
        try:
            while not server.started:
                if task.done():
                    await task
                    raise RuntimeError(f"the server on port {self.port} stopped before it started")
                await asyncio.sleep(0.01)
            yield self
        finally:
            server.should_exit = True
            await task
            self.sock.close()

    def start(self, app: Any, timeout: float = 15.0, log_level: str = "warning", lifespan: str = "on") -> Self:
        """Serve ``app`` from a thread with its own event loop (``self.loop``); returns once it listens."""
        server = self._server(app, log_level, lifespan)

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            loop.run_until_complete(server.serve(sockets=[self.sock]))
            loop.close()

        self._thread = threading.Thread(target=serve, name=f"loopback-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def close(self, timeout: float = 20.0) -> None:
        """Stop a server started with ``start`` and release the socket."""
        if self.server is not None:
            self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.sock.close()


class LoopbackServer:
    """``with LoopbackServer(app) as mock: mock.url, mock.records()``: a mock model API whose
    ``app.state.log`` is a turn log (``snapshot()``, ``close()``), served from a thread."""

    def __init__(self, app: Any, host: str = HOST) -> None:
        self.app, self.host = app, host
        self._loopback = Loopback(host)
        self.port: int = self._loopback.port

    @property
    def url(self) -> str:
        return self._loopback.url

    def records(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = self.app.state.log.snapshot()
        return records

    def start(self, timeout: float = 10.0) -> Self:
        self._loopback.start(self.app, timeout, lifespan="off")
        return self

    def close(self) -> None:
        self._loopback.close(10)
        self.app.state.log.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
