"""Serve any of the lab's mock apps on a loopback port from a background thread.

The capture tool and the live tests run a mock beside the CLI and read its log (the ground
truth) directly; ``app.state.log`` must be a ``TurnLog``.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette


class LoopbackServer:
    """``with LoopbackServer(app) as mock: mock.url, mock.records()``."""

    def __init__(self, app: Starlette, host: str = "127.0.0.1") -> None:
        self.app, self.host = app, host
        self._sock = socket.socket()
        self._sock.bind((host, 0))
        self.port: int = self._sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def records(self) -> list[dict[str, Any]]:
        return self.app.state.log.snapshot()

    def start(self, timeout: float = 10.0) -> Self:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])),
                                        name=f"mock-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the mock did not start")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()
        self.app.state.log.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
