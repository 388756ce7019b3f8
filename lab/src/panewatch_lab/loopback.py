"""Servers on loopback for the lab, the benchmark and the tests: one port picker, one harness.

``free_port`` is for a server another process will start (the port is free when asked, so a
small race remains); ``Loopback`` binds its socket at once and hands that very socket to
uvicorn, so there is no race. A ``Loopback`` serves an app either in the caller's event loop
(``async with lb.serving(app)``: the tests, whose code shares the server's loop) or in a thread
with a loop of its own (``lb.start(app)`` … ``lb.close()``: the lab's synchronous tools, and the
evaluation, whose measurements must not delay the server). ``LoopbackServer`` is the mock-API
shape of it (the mocks of other CLIs: ``records()`` from the app's turn log).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Self

import uvicorn

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (for a server started by another process)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


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
