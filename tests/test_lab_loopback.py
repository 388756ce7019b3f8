"""The one loopback harness: a real uvicorn on a kernel-chosen port, in this loop or a thread."""

from __future__ import annotations

import socket
import threading
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from panewatch_lab.loopback import Loopback, LoopbackServer, free_port

pytestmark = pytest.mark.integration


class TurnLog:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.closed = False
        self.lock = threading.Lock()

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.records)

    def close(self) -> None:
        self.closed = True


def app() -> Starlette:
    async def hello(request: Request) -> JSONResponse:
        request.app.state.log.records.append({"path": request.url.path, "thread": threading.current_thread().name})
        return JSONResponse({"ok": True})

    a = Starlette(routes=[Route("/hello", hello)])
    a.state.log = TurnLog()
    return a


def test_free_port_is_free_on_loopback() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # nothing holds it


async def test_serving_in_this_loop_answers_then_lets_the_port_go() -> None:
    lb = Loopback()
    async with lb.serving(app()) as served, httpx.AsyncClient() as client:
        assert served is lb and lb.url == f"http://127.0.0.1:{lb.port}"
        assert (await client.get(lb.url + "/hello")).json() == {"ok": True}
    assert lb.sock.fileno() == -1  # closed with the block
    with socket.socket() as s:
        s.bind(("127.0.0.1", lb.port))


def test_a_thread_of_its_own_and_the_mock_shape() -> None:
    with LoopbackServer(app()) as mock:
        assert httpx.get(mock.url + "/hello", timeout=10).status_code == 200
        records = mock.records()
    assert [r["path"] for r in records] == ["/hello"]
    assert records[0]["thread"].startswith("loopback-")  # served off the caller's thread
    assert mock.app.state.log.closed
