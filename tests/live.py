"""A real Panewatch server on loopback for tests: uvicorn in the test's event loop."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import websockets

from panewatch.api import create_app
from panewatch.config import Settings
from panewatch_lab.loopback import Loopback

TOKEN = "test-token-0123456789"


class Live:
    def __init__(self, app: Any, port: int) -> None:
        self.app = app
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.ws_base = f"ws://127.0.0.1:{port}"
        self.engine = app.state.engine
        self.http = httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15)

    def ws(self, path: str, token: str | None = TOKEN, origin: str | None = None, **kw: Any):
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if origin is not None:
            headers["Origin"] = origin
        return websockets.connect(self.ws_base + path, additional_headers=headers, **kw)

    async def create(self, **body: Any) -> dict[str, Any]:
        r = await self.http.post("/api/sessions", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    async def wait_state(self, sid: str, state: str, timeout: float = 10.0) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            info = (await self.http.get(f"/api/sessions/{sid}")).json()
            if info["state"] == state:
                return info
            if asyncio.get_running_loop().time() > deadline:
                screen = (await self.http.get(f"/api/sessions/{sid}/screen")).json()
                raise AssertionError(
                    f"{sid} is {info['state']} ({info['source']} {info['rule']}), wanted {state}\n"
                    + "\n".join(screen["rows"])
                )
            await asyncio.sleep(0.05)


async def next_event(ws: Any, kind: str, timeout: float = 10.0, **match: Any) -> dict[str, Any]:
    """The next event of this type whose fields match."""

    async def find() -> dict[str, Any]:
        while True:
            event = json.loads(await ws.recv())
            if event.get("type") == kind and all(event.get(k) == v for k, v in match.items()):
                return event

    return await asyncio.wait_for(find(), timeout)


@asynccontextmanager
async def live_server(**overrides: Any):
    loopback = Loopback()
    overrides.setdefault("state_dir", Path(tempfile.mkdtemp(prefix="pw-state-")))
    settings = Settings(token=TOKEN, port=loopback.port, sweep_ms=100, **overrides)
    app = create_app(settings)
    async with loopback.serving(app):
        live = Live(app, loopback.port)
        try:
            yield live
        finally:
            await live.http.aclose()


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20.0) -> None:
    """Block until ``proc`` accepts connections on ``port`` (failing with what it printed to its
    pipes, if it died). A real ``panewatch serve`` is started with ``panewatch_lab.serve_proc``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                out = b"".join(pipe.read() for pipe in (proc.stdout, proc.stderr) if pipe is not None)
                raise AssertionError(f"{what} exited with {proc.returncode}:\n{out.decode(errors='replace')}") from None
            assert time.monotonic() < deadline, f"{what} did not start in {timeout} s"
            time.sleep(0.05)
