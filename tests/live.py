"""A Panewatch server for tests, in the test's event loop, reached in one of three ways:

- ``live_server()``: the app over ``httpx.ASGITransport`` (no socket, no uvicorn), its lifespan
  run as uvicorn would run it (the report socket, the engine on real PTYs): for API tests whose
  point is the engine and the agents behind the API, not the HTTP server;
- ``live_server(socket=True)``: the same app served by a real uvicorn on loopback, for tests
  whose point is the socket (a stuck client's buffers, a body refused before it is read, an
  outside client such as the CLI or curl talking to the service);
- ``memory_server()``: the app on an engine with the memory host and a hand-moved clock, over
  the ASGI transport, lifespan not run (no report socket): a ``unit`` test of the API.

Each gives a :class:`Live` with the same face: ``http`` (with the token), ``client()`` (without),
``ws(path)`` (a WebSocket: a real one on a socket, else :class:`AsgiWebSocket`), ``create`` and
``wait_state``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from socket import create_connection
from typing import Any

import httpx
import websockets
from websockets.frames import Close

from panewatch.api import create_app
from panewatch.clock import ManualClock
from panewatch.config import Settings
from panewatch.engine import Engine, EngineOptions
from panewatch.hosts.memory import MemoryHost
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.policy import PolicyStore
from panewatch_lab.loopback import Loopback

TOKEN = "test-token-0123456789"
#: The port an in-process server says it has (its URLs and Host checks use it; nothing listens on
#: it: a test that hands ``live.url`` to another process must ask for ``socket=True``).
NO_SOCKET_PORT = 9
#: The peer address an in-process request comes from.
CLIENT = ("127.0.0.1", 50000)


class Live:
    def __init__(self, app: Any, port: int, *, in_process: bool = False) -> None:
        self.app = app
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.ws_base = f"ws://127.0.0.1:{port}"
        self.engine = app.state.engine
        self.in_process = in_process
        self._transport = httpx.ASGITransport(app=app, client=CLIENT) if in_process else None
        self.http = self.client(headers={"Authorization": f"Bearer {TOKEN}"})

    def client(self, **kw: Any) -> httpx.AsyncClient:
        """An HTTP client of this server (no credentials unless given)."""
        kw.setdefault("timeout", 15)
        return httpx.AsyncClient(base_url=self.url, transport=self._transport, **kw)

    def ws(self, path: str, token: str | None = TOKEN, origin: str | None = None, **kw: Any):
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if origin is not None:
            headers["Origin"] = origin
        if self.in_process:
            return AsgiWebSocket(self.app, path, headers, self.port)
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


class MemoryLive(Live):
    """A :class:`Live` whose engine runs on the memory host (``host``) and a hand-moved ``clock``."""

    def __init__(self, app: Any, host: MemoryHost, clock: ManualClock) -> None:
        super().__init__(app, NO_SOCKET_PORT, in_process=True)
        self.host, self.clock = host, clock

    async def settle(self, seconds: float = 0.1) -> None:
        """Let host callbacks run (one loop turn), then move the clock (sweeps run)."""
        await asyncio.sleep(0)
        self.clock.advance(seconds)
        await asyncio.sleep(0)


class AsgiWebSocket:
    """A WebSocket to an ASGI app in this event loop, with the face of a ``websockets`` client
    (``recv``, ``send``; a close raises ``websockets.exceptions.ConnectionClosed`` with ``rcvd``)."""

    def __init__(self, app: Any, path: str, headers: dict[str, str], port: int) -> None:
        path, _, query = path.partition("?")
        self.app = app
        self.scope = {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "scheme": "ws",
            "server": ("127.0.0.1", port),
            "client": CLIENT,
            "root_path": "",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "headers": [(b"host", f"127.0.0.1:{port}".encode())]
            + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "subprotocols": [],
            "state": {},
        }
        self._to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closed: Close | None = None

    async def __aenter__(self) -> AsgiWebSocket:
        self._task = asyncio.ensure_future(self._run())
        await self._to_app.put({"type": "websocket.connect"})
        first = await self._next()
        if first["type"] == "websocket.close":
            raise websockets.exceptions.InvalidStatus(httpx.Response(403))  # refused before accepting
        assert first["type"] == "websocket.accept", first
        return self

    async def _run(self) -> None:
        try:
            await self.app(self.scope, self._to_app.get, self._from_app.put)
        finally:
            await self._from_app.put({"type": "websocket.close", "code": 1006, "reason": "the app returned"})

    async def _next(self) -> dict[str, Any]:
        message = await self._from_app.get()
        if message["type"] == "websocket.close" and self._closed is None:
            self._closed = Close(message.get("code", 1000), message.get("reason") or "")
        return message

    async def recv(self) -> str | bytes:
        while self._closed is None:
            message = await self._next()
            if message["type"] == "websocket.send":
                text = message.get("text")
                return text if text is not None else message["bytes"]
        cls = (
            websockets.exceptions.ConnectionClosedOK
            if self._closed.code in (1000, 1001)
            else websockets.exceptions.ConnectionClosedError
        )
        raise cls(self._closed, None)

    async def send(self, data: str | bytes) -> None:
        key = "text" if isinstance(data, str) else "bytes"
        await self._to_app.put({"type": "websocket.receive", key: data})

    async def __aexit__(self, *exc: object) -> None:
        await self._to_app.put({"type": "websocket.disconnect", "code": 1000})
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 5)
            except TimeoutError:
                self._task.cancel()


async def next_event(ws: Any, kind: str, timeout: float = 10.0, **match: Any) -> dict[str, Any]:
    """The next event of this type whose fields match; on a timeout, the events passed over say
    what happened instead."""
    skipped: list[str] = []

    async def find() -> dict[str, Any]:
        while True:
            event = json.loads(await ws.recv())
            if event.get("type") == kind and all(event.get(k) == v for k, v in match.items()):
                return event
            skipped.append(" ".join(f"{k}={event.get(k)}" for k in ("type", "state", "prev", "source", "rule")))

    try:
        return await asyncio.wait_for(find(), timeout)
    except TimeoutError:
        raise AssertionError(
            f"no {kind} event with {match} in {timeout} s; passed over:\n" + "\n".join(skipped)
        ) from None


@asynccontextmanager
async def live_server(*, socket: bool = False, **overrides: Any) -> AsyncIterator[Live]:
    """The service on real PTYs, in process (``socket=False``) or behind a real uvicorn."""
    overrides.setdefault("state_dir", Path(tempfile.mkdtemp(prefix="pw-state-")))
    if not socket:
        app = create_app(Settings(token=TOKEN, port=NO_SOCKET_PORT, sweep_ms=100, **overrides))
        async with app.router.lifespan_context(app):
            live = Live(app, NO_SOCKET_PORT, in_process=True)
            try:
                yield live
            finally:
                await live.http.aclose()
        return
    loopback = Loopback()
    app = create_app(Settings(token=TOKEN, port=loopback.port, sweep_ms=100, **overrides))
    async with loopback.serving(app):
        live = Live(app, loopback.port)
        try:
            yield live
        finally:
            await live.http.aclose()


@asynccontextmanager
async def memory_server(**overrides: Any) -> AsyncIterator[MemoryLive]:
    """The service's API on the memory host and a hand-moved clock: no process, no socket."""
    overrides.setdefault("state_dir", Path(tempfile.mkdtemp(prefix="pw-state-")))
    settings = Settings(token=TOKEN, port=NO_SOCKET_PORT, sweep_ms=100, **overrides)
    clock, host = ManualClock(), MemoryHost()
    engine = Engine(
        ManifestStore.from_dirs(bundled_manifest_dir()),
        host=host,
        clock=clock,
        wall=clock.time,
        options=EngineOptions(sweep_ms=100),
        policy=PolicyStore.from_file(settings.policy_file),
    )
    app = create_app(settings, engine=engine)
    await engine.start()
    live = MemoryLive(app, host, clock)
    try:
        yield live
    finally:
        await live.http.aclose()
        await engine.stop()


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20.0) -> None:
    """Block until ``proc`` accepts connections on ``port`` (failing with what it printed to its
    pipes, if it died). A real ``panewatch serve`` is started with ``panewatch_lab.serve_proc``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if proc.poll() is not None:
                out = b"".join(pipe.read() for pipe in (proc.stdout, proc.stderr) if pipe is not None)
                raise AssertionError(f"{what} exited with {proc.returncode}:\n{out.decode(errors='replace')}") from None
            assert time.monotonic() < deadline, f"{what} did not start in {timeout} s"
            time.sleep(0.05)
