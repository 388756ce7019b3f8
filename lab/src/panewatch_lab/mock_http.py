"""What the lab's mock model servers share: the turn log, the JSON body, how a reply ends.

Claude's Messages mock and the Codex, Gemini and Aider mocks speak four wire formats, but their
log is one ground truth read the same way by the captures and the live tests: one place writes
it, and one place decides whether a streamed reply ended ``complete`` or ``cancelled``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TextIO

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

#: What the catch-all route answers: whatever else a CLI calls is logged, then refused with a 404.
ANY_METHOD = ["GET", "POST", "PUT", "DELETE", "HEAD"]


class TurnLog:
    """Append-only JSON-lines log of requests and replies, shared by concurrent requests."""

    def __init__(self, path: str | Path | None = None, bodies: bool = False) -> None:
        self._fh: TextIO | None = Path(path).open("a", buffering=1) if path else None  # noqa: SIM115 -- lives with the log, closed by close()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.bodies = bodies
        self.records: list[dict[str, Any]] = []

    def next_id(self) -> int:
        return next(self._ids)

    def write(self, event: str, **fields: Any) -> None:
        record = {"mono": time.monotonic(), "wall": time.time(), "event": event, **fields}
        with self._lock:
            self.records.append(record)
            if self._fh is not None:
                self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.records)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


async def read_json(request: Request) -> dict[str, Any] | None:
    """The body as a JSON object (an empty body is ``{}``); None when it is not one."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def until_end(chunks: AsyncIterator[bytes], ended: Callable[[str], None]) -> AsyncIterator[bytes]:
    """``chunks`` as they come; then ``ended("complete")``, or ``ended("cancelled")`` when the
    CLI hung up mid-reply (e.g. the user pressed Esc): a cancelled turn's only witness."""
    status = "complete"
    try:
        async for chunk in chunks:
            yield chunk
    except (asyncio.CancelledError, GeneratorExit):
        status = "cancelled"
        raise
    finally:
        ended(status)


def mock_app(log: TurnLog, routes: list[Route], unknown: Callable[[Request], Any]) -> Starlette:
    """The mock's app: its routes, ``unknown`` for any other path, and ``app.state.log``."""
    app = Starlette(routes=[*routes, Route("/{path:path}", unknown, methods=ANY_METHOD)])
    app.state.log = log
    return app


def log_unknown(log: TurnLog, request: Request, **fields: Any) -> None:
    """Log a request no route took (to learn what a CLI calls)."""
    log.write("request", id=log.next_id(), path=request.url.path, method=request.method, kind="unknown", **fields)
