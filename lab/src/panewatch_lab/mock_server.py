"""The mock API served by a real uvicorn on a loopback port, in a background thread.

The capture tool and the live tests need the mock running beside them and need to read its
log (the ground truth) directly, without a subprocess or a log file to parse.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any, Self

import uvicorn

from panewatch_lab.mock_api import RequestLog, build_app
from panewatch_lab.scenario import Scenario


class MockServer:
    """``with MockServer("basic") as mock: mock.url, mock.records()``."""

    def __init__(self, scenario: Scenario | str | Path | None = None, log_path: str | Path | None = None,
                 log_bodies: bool = False, host: str = "127.0.0.1") -> None:
        self.app = build_app(scenario, log_path, log_bodies=log_bodies)
        self.host = host
        self._sock = socket.socket()
        self._sock.bind((host, 0))
        self.port: int = self._sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on"))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log(self) -> RequestLog:
        return self.app.state.log

    def records(self) -> list[dict[str, Any]]:
        """A copy of every log record so far (request, first_token, reply)."""
        with self.log._lock:
            return list(self.log.records)

    def start(self, timeout: float = 10.0) -> Self:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])),
                                        name=f"mock-api-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the mock API did not start")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
