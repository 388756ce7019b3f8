"""Issue 25, item 7, the API port's connections (``conn_guard``): a deadline for every request head,
a bound on its size, a cap on connections waiting for one — against a real uvicorn running the
guarded protocol on loopback, with real sockets. And the open-file limit raised at start.
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvicorn
import websockets
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from panewatch.access.conn_guard import MAX_HEAD_BYTES, Door, guarded_protocol, limits
from panewatch_lab.loopback import Loopback


async def hello(request):
    return PlainTextResponse("hello")


async def echo(ws: WebSocket) -> None:
    await ws.accept()
    await ws.send_text(await ws.receive_text())
    await ws.close()


APP = Starlette(routes=[Route("/", hello), WebSocketRoute("/ws", echo)])


@asynccontextmanager
async def guarded(cap: int = 64, header_timeout_s: float = 30.0) -> AsyncIterator[tuple[Door, int]]:
    """uvicorn serving ``APP`` through the guarded protocol on a free port: (its door, the port)."""
    door = Door(cap, header_timeout_s)
    lb = Loopback()
    config = uvicorn.Config(APP, http=guarded_protocol(door), lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[lb.sock]))
    try:
        while not server.started:
            assert not task.done(), "uvicorn stopped before it started"
            await asyncio.sleep(0.01)
        yield door, lb.port
    finally:
        server.should_exit = True
        await task
        lb.sock.close()


async def connect(port: int, sent: bytes = b"") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if sent:
        writer.write(sent)
        await writer.drain()
    return reader, writer


async def answer(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes (generous bound: the wait is for an event)."""
    return await asyncio.wait_for(reader.read(), 30)


def status_and_detail(raw: bytes) -> tuple[int, str]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)["detail"]


@pytest.mark.integration
async def test_a_half_sent_head_gets_408_and_a_silent_connection_is_closed():
    async with guarded(header_timeout_s=0.3) as (door, port):
        reader, writer = await connect(port, b"GET / HTTP/1.1\r\nHost: x\r\n")
        assert status_and_detail(await answer(reader)) == (408, "request head not complete within 0.3 s")
        writer.close()
        reader, writer = await connect(port)  # sends nothing: closed without a word
        assert await answer(reader) == b""
        writer.close()
        assert door.waiting == {}


@pytest.mark.integration
async def test_a_head_past_the_bound_is_431():
    async with guarded() as (door, port):
        reader, writer = await connect(port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEAD_BYTES + 10))
        status, detail = status_and_detail(await answer(reader))
        assert status == 431 and str(MAX_HEAD_BYTES) in detail
        writer.close()
        assert door.waiting == {}


@pytest.mark.integration
async def test_past_the_cap_the_longest_waiting_goes_and_a_whole_request_is_answered():
    async with guarded(cap=4) as (door, port):
        held = [await connect(port, b"GET / HTTP/1.1\r\nHost: x\r\n") for _ in range(4)]
        while len(door.waiting) < 4:  # each is counted once uvicorn has it
            await asyncio.sleep(0.01)
        newcomer = await connect(port, b"GET / HTTP/1.1\r\nHost: x\r\n")
        status, detail = status_and_detail(await answer(held[0][0]))  # the oldest made room
        assert status == 503 and "waiting to send a request head" in detail
        reader, writer = await connect(port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = await answer(reader)
        assert raw.startswith(b"HTTP/1.1 200") and raw.endswith(b"hello")
        assert door.evicted == 1  # a request sent whole never waits long enough to be the oldest
        for _, w in [*held, newcomer]:
            w.close()
        writer.close()


#: A burst from another process: 200 requests, each sent whole the moment its connection is up;
#: says "sent", waits for a line, then reads every answer and prints how many were 200.
BURST = """
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
    socks.append(s)
print("sent", flush=True)
sys.stdin.readline()
ok = 0
for s in socks:
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    ok += got.startswith(b"HTTP/1.1 200")
print(ok, flush=True)
"""


@pytest.mark.integration
async def test_a_burst_past_the_cap_of_requests_sent_whole_is_answered_whole():
    async with guarded(cap=8) as (door, port):
        burst = subprocess.Popen(
            [sys.executable, "-c", BURST, str(port), "200"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            # this loop (the server's) is blocked until all 200 are in the kernel's accept queue:
            # it then takes them in batches, each accepted before any of its heads is read
            assert burst.stdout is not None and burst.stdout.readline() == "sent\n"
            assert burst.stdin is not None
            burst.stdin.write("go\n")
            burst.stdin.flush()
            out = await asyncio.to_thread(burst.stdout.readline)
        finally:
            burst.kill()
            burst.wait()
        assert out.strip() == "200" and door.evicted == 0


@pytest.mark.integration
async def test_keep_alive_pipelining_and_websockets_are_served_and_leave_nothing_counted():
    async with guarded(header_timeout_s=30) as (door, port):
        reader, writer = await connect(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while got.count(b"hello") < 2:  # both pipelined requests answered on one connection
            got += await asyncio.wait_for(reader.read(65536), 30)
        while len(door.waiting) != 1:  # and it now waits, idle, for a third
            await asyncio.sleep(0.01)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert (await answer(reader)).endswith(b"hello")
        writer.close()
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as ws:
            assert door.waiting == {}  # an upgraded connection is no longer the HTTP protocol's
            await ws.send("hi")
            assert await ws.recv() == "hi"
        while door.waiting:
            await asyncio.sleep(0.01)


@pytest.mark.unit
def test_limits_follow_the_file_limit():
    assert limits(256) == (32, 32)
    assert limits(1024) == (128, 128)
    assert limits(1 << 20) == (1024, 2048)
    assert limits(40) == (8, 8)


RAISE = """
import resource, sys
from panewatch.access.conn_guard import raise_file_limit
print(*raise_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


@pytest.mark.integration
@pytest.mark.parametrize("soft,hard", [(256, 512), (300, 300)])
def test_the_open_file_limit_is_raised_to_the_hard_one(soft, hard):
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    out = subprocess.run(
        [sys.executable, "-c", RAISE], capture_output=True, text=True, check=True, preexec_fn=limited
    ).stdout.split()
    assert out == [str(soft), str(hard), str(hard)]
