"""The mock API served by a real uvicorn on a loopback port, in a background thread.

The capture tool and the live tests need the mock running beside them and need to read its
log (the ground truth) directly, without a subprocess or a log file to parse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from panewatch_lab.loopback import Loopback
from panewatch_lab.mock_api import build_app
from panewatch_lab.mock_http import TurnLog
from panewatch_lab.scenario import Scenario


class MockServer:
    """``with MockServer("basic") as mock: mock.url, mock.records()``."""

    def __init__(
        self,
        scenario: Scenario | str | Path | None = None,
        log_path: str | Path | None = None,
        log_bodies: bool = False,
        host: str = "127.0.0.1",
    ) -> None:
        self.app = build_app(scenario, log_path, log_bodies=log_bodies)
        self._loopback = Loopback(host)
        self.host, self.port = host, self._loopback.port

    @property
    def url(self) -> str:
        return self._loopback.url

    @property
    def log(self) -> TurnLog:
        return self.app.state.log

    def records(self) -> list[dict[str, Any]]:
        """A copy of every log record so far (request, first_token, reply)."""
        return self.log.snapshot()

    def start(self, timeout: float = 10.0) -> Self:
        self._loopback.start(self.app, timeout)
        return self

    def close(self) -> None:
        self._loopback.close(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
