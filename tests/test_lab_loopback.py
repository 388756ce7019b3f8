"""The one loopback harness: a real uvicorn on a kernel-chosen port, in this loop or a thread."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from panewatch_lab.loopback import PORT_SLICES, Loopback, LoopbackServer, _below_ephemeral, free_port

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


def test_free_port_is_never_one_an_outgoing_connection_could_take(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race seen once: a port handed out, then taken (as a client's source port, or by
    another worker) before the server bound it. Handed-out ports lie below the ephemeral range,
    one slice per worker, and one process never hands out the same port twice in a row."""
    ports = _below_ephemeral()
    if ports is None:
        pytest.skip("no room below this kernel's ip_local_port_range")
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])  # the kernel's own
    seen: dict[str, set[int]] = {}
    for worker in ("", "gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        seen[worker] = {free_port() for _ in range(20)}
        assert len(seen[worker]) == 20  # in turn, not the same one again
        assert all(ports.start <= p < low for p in seen[worker])
    for a in seen:
        for b in seen:
            assert a == b or not seen[a] & seen[b]  # slices do not overlap
    with socket.socket() as held:  # a port a listener holds is skipped, all the way round
        held.bind(("127.0.0.1", free_port()))
        held.listen()
        round_trip = {free_port() for _ in range(len(ports) // PORT_SLICES)}
        assert held.getsockname()[1] not in round_trip


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
