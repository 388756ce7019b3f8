"""The JSON-RPC peer in memory (its byte transport is a seam): framing across any split,
bounded lines, id matching, and every malformed message reported, never raised."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from panewatch.acp.jsonrpc import INVALID_REQUEST, MalformedResponse, Peer, PeerGone, RpcError

pytestmark = pytest.mark.unit


class Wire:
    def __init__(self, **kw: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        self.faults: list[tuple[str, str]] = []
        self.notes: list[tuple[str, Any]] = []
        self.requests: list[tuple[str, Any, Any]] = []
        self.answer: Any = {"ok": True}
        self.peer = Peer(
            lambda b: self.sent.append(json.loads(b)),
            on_request=self.on_request,
            on_notification=lambda m, p: self.notes.append((m, p)),
            on_fault=lambda f: self.faults.append((f.kind, f.detail)),
            **kw,
        )

    def on_request(self, method: str, params: Any, rid: Any) -> Any:
        self.requests.append((method, params, rid))
        if method == "boom":
            raise RpcError(-32601, "no boom")
        return self.answer

    def feed(self, *messages: Any) -> None:
        for m in messages:
            self.peer.feed((m if isinstance(m, str) else json.dumps(m)).encode() + b"\n")


async def test_a_response_split_anywhere_resolves_the_request() -> None:
    w = Wire()
    fut = asyncio.ensure_future(w.peer.request("initialize", {"v": 1}))
    await asyncio.sleep(0)
    assert w.sent == [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"v": 1}}]
    raw = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"ok": 1}}).encode() + b"\n"
    for i in range(len(raw)):
        w.peer.feed(raw[i : i + 1])
    assert await fut == {"ok": 1}


async def test_requests_from_the_peer_are_answered_with_their_own_id_even_zero() -> None:
    w = Wire()
    w.feed({"jsonrpc": "2.0", "id": 0, "method": "x", "params": {}}, {"jsonrpc": "2.0", "id": "a", "method": "boom"})
    assert w.sent == [
        {"jsonrpc": "2.0", "id": 0, "result": {"ok": True}},
        {"jsonrpc": "2.0", "id": "a", "error": {"code": -32601, "message": "no boom"}},
    ]


async def test_an_awaitable_answer_is_sent_when_it_is_ready() -> None:
    w = Wire()
    gate: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    w.answer = gate
    w.feed({"jsonrpc": "2.0", "id": 7, "method": "wait"}, {"jsonrpc": "2.0", "method": "later"})
    assert w.sent == [] and w.notes == [("later", None)]  # reading went on meanwhile
    gate.set_result({"picked": "allow"})
    for _ in range(10):  # the answer goes out from a task woken by the gate: a few loop turns, no time
        if w.sent:
            break
        await asyncio.sleep(0)
    assert w.sent == [{"jsonrpc": "2.0", "id": 7, "result": {"picked": "allow"}}]


@pytest.mark.parametrize(
    ("line", "kind", "reply"),
    [
        ("npm WARN something", "noise", False),
        ("{not json", "noise", False),
        ("[1, 2]", "malformed", False),
        ('"just a string"', "malformed", False),
        ('{"jsonrpc": "1.0", "id": 3, "method": "m"}', "malformed", True),
        ('{"jsonrpc": "2.0", "id": true, "method": "m"}', "malformed", False),
        ('{"jsonrpc": "2.0", "method": 5}', "malformed", False),
        ('{"jsonrpc": "2.0"}', "malformed", False),
        ('{"jsonrpc": "2.0", "id": 99, "result": 1}', "unmatched", False),
    ],
)
async def test_bad_lines_are_reported_not_raised(line: str, kind: str, reply: bool) -> None:
    w = Wire()
    w.feed(line)
    assert [k for k, _ in w.faults] == [kind]
    assert bool(w.sent) == reply
    if reply:
        assert w.sent[0]["error"]["code"] == INVALID_REQUEST and w.sent[0]["id"] == 3
    w.feed({"jsonrpc": "2.0", "method": "still/reading"})
    assert w.notes == [("still/reading", None)]


async def test_a_response_with_both_result_and_error_fails_the_request() -> None:
    w = Wire()
    fut = asyncio.ensure_future(w.peer.request("session/prompt"))
    await asyncio.sleep(0)
    w.feed({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}})
    with pytest.raises(MalformedResponse, match="both result and error"):
        await fut


async def test_an_error_response_raises_rpc_error() -> None:
    w = Wire()
    fut = asyncio.ensure_future(w.peer.request("session/new"))
    await asyncio.sleep(0)
    w.feed({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "auth required"}})
    with pytest.raises(RpcError) as err:
        await fut
    assert err.value.code == -32000 and err.value.message == "auth required"


async def test_an_oversized_line_is_dropped_and_the_next_one_read() -> None:
    w = Wire(max_line=1000)
    w.peer.feed(b'{"jsonrpc": "2.0", "method": "big", "params": "' + b"x" * 5000)
    w.peer.feed(b"x" * 5000 + b'"}\n')
    w.feed({"jsonrpc": "2.0", "method": "small"})
    assert [k for k, _ in w.faults] == ["oversized"] and w.notes == [("small", None)]


async def test_eof_fails_what_is_pending_and_refuses_new_writes() -> None:
    w = Wire()
    fut = asyncio.ensure_future(w.peer.request("session/prompt"))
    await asyncio.sleep(0)
    w.peer.feed(b'{"jsonrpc": "2.0", "method": "last"}')  # no newline: read at EOF
    w.peer.eof()
    assert w.notes == [("last", None)]
    with pytest.raises(PeerGone):
        await fut
    with pytest.raises(PeerGone):
        w.peer.notify("session/cancel")
