"""JSON-RPC 2.0 over newline-delimited JSON (an ACP agent's stdin/stdout), both ways.

ACP is symmetric: the client sends requests (``session/prompt``) and the agent sends requests
back (``session/request_permission``, ``fs/read_text_file``). This module knows nothing of
ACP; it frames, matches ids and reports every fault it sees to ``on_fault`` instead of
raising or logging a traceback, because what a broken peer does is the *session's* news
(a line of stdout logging, a reply with neither result nor error), not the server's.

Work per line is bounded: a line longer than ``max_line`` is dropped unparsed. The byte
transport is a seam (``send`` out, ``feed``/``eof`` in), so tests run it in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger("panewatch.acp.jsonrpc")

#: Longest line read from the peer (a file's content travels inside one message).
MAX_LINE = 16 * 1024 * 1024

# Standard JSON-RPC error codes.
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

FaultKind = Literal["noise", "malformed", "unmatched", "oversized"]


@dataclass(frozen=True)
class Fault:
    """Something the peer wrote that is not a well-formed message we expected.

    ``noise``: a line that is not JSON (an agent logging to stdout); ``malformed``: JSON that
    is not a JSON-RPC 2.0 message; ``unmatched``: a response to no request of ours;
    ``oversized``: a line longer than the limit.
    """

    kind: FaultKind
    detail: str
    sample: str  # the start of the offending line, for the session's log


class RpcError(Exception):
    """An error response: raised by handlers to answer with it, and by ``request`` when the
    peer answered with one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class MalformedResponse(Exception):
    """The peer answered our request with something that is not a JSON-RPC response."""


class PeerGone(Exception):
    """The peer closed its output (exited) before answering."""


#: A request handler gets (method, params, request id) and returns the result, or an awaitable
#: of it (run as a task, so that a permission waiting on a user never holds up the reading of
#: later messages).
RequestHandler = Callable[[str, Any, Any], Any]
NotificationHandler = Callable[[str, Any], None]


def _sample(line: bytes | str, n: int = 200) -> str:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    return text[:n]


class Peer:
    """One JSON-RPC connection, push-fed: ``feed`` the peer's output as it arrives, ``eof`` when
    it ends. Requests and notifications from the peer are dispatched in arrival order (a
    notification's handler runs before the next line is looked at, so a turn's
    ``session/update``s are seen before the turn's response)."""

    def __init__(
        self,
        send: Callable[[bytes], None],
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        on_fault: Callable[[Fault], None],
        max_line: int = MAX_LINE,
    ) -> None:
        self._send = send
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_fault = on_fault
        self._max_line = max_line
        self._next_id = 1
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._buf = bytearray()
        self._dropping = False  # inside an oversized line: skip to its newline
        self._closed = False

    # -- sending ---------------------------------------------------------------------------
    def _write(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise PeerGone("the agent's output has ended")
        self._send(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")

    def call(self, method: str, params: Any = None) -> asyncio.Future[Any]:
        """Send a request *now* (in order with notifications sent after it) and return the
        future of its result; ``request`` awaits it."""
        rid = self._next_id
        self._next_id += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        self._pending[rid] = (method, fut)
        fut.add_done_callback(lambda _f: self._pending.pop(rid, None))
        return fut

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result; raises ``RpcError`` (an error response),
        ``MalformedResponse``, ``PeerGone`` or ``TimeoutError``."""
        fut = self.call(method, params)
        if timeout is None:
            return await fut
        return await asyncio.wait_for(fut, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def _respond(self, rid: Any, *, result: Any = None, error: RpcError | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            message["error"] = error.to_json()
        else:
            message["result"] = result
        try:
            self._write(message)
        except (PeerGone, OSError):
            pass  # the agent is gone; nobody is waiting for the answer

    # -- reading ---------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of the peer's output (any split); dispatch every whole line."""
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not self._dropping:
                    self._buf += chunk[start:]
                    if len(self._buf) > self._max_line:
                        self._on_fault(
                            Fault(
                                "oversized",
                                f"a line longer than {self._max_line} bytes",
                                _sample(bytes(self._buf[:200])),
                            )
                        )
                        self._buf.clear()
                        self._dropping = True
                return
            if self._dropping:
                self._dropping = False
            else:
                self._buf += chunk[start:nl]
                line = bytes(self._buf)
                self._buf.clear()
                self._line(line)
            start = nl + 1

    def eof(self) -> None:
        """The peer's output ended: read a last unterminated line, fail what is pending."""
        if self._buf and not self._dropping:
            line = bytes(self._buf)
            self._buf.clear()
            self._line(line)
        self._closed = True
        for _method, fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(PeerGone("the agent closed its output before answering"))

    def _line(self, raw: bytes) -> None:
        line = raw.strip()
        if not line:
            return
        try:
            message = json.loads(line)
        except ValueError:
            self._on_fault(Fault("noise", "a line on stdout that is not JSON", _sample(line)))
            return
        self._dispatch(message, line)

    def _dispatch(self, message: Any, line: bytes) -> None:
        if not isinstance(message, dict):
            self._on_fault(Fault("malformed", f"a JSON {type(message).__name__}, not a JSON-RPC object", _sample(line)))
            return
        rid = message.get("id")
        has_id = "id" in message
        id_ok = has_id and (isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)))
        method = message.get("method")
        if message.get("jsonrpc") != "2.0":
            self._malformed('no "jsonrpc": "2.0"', message, line, rid if id_ok and method else None)
            return
        if method is not None:
            if not isinstance(method, str):
                self._malformed('"method" is not a string', message, line, rid if id_ok else None)
                return
            params = message.get("params")
            if has_id and not id_ok:
                self._malformed("a request id that is neither a string nor an integer", message, line, None)
                return
            if has_id:
                self._request(rid, method, params)
            else:
                try:
                    self._on_notification(method, params)
                except Exception:  # a bug in a handler must not end the reading
                    log.exception("notification handler failed for %s", method)
            return
        if not id_ok:
            self._malformed("neither a request, a notification nor a response", message, line, None)
            return
        entry = self._pending.get(rid) if isinstance(rid, int) else None
        if entry is None:
            self._on_fault(Fault("unmatched", f"a response to id {rid!r}, which no request of ours has", _sample(line)))
            return
        method, fut = entry
        if fut.done():
            return
        has_result, has_error = "result" in message, "error" in message
        if has_result == has_error:
            fut.set_exception(
                MalformedResponse(f"the answer to {method} has {'both' if has_result else 'neither'} result and error")
            )
            self._on_fault(
                Fault(
                    "malformed",
                    f"answer to {method} with {'both' if has_result else 'neither'} result and error",
                    _sample(line),
                )
            )
            return
        if has_error:
            err = message["error"]
            if not isinstance(err, dict) or not isinstance(err.get("code"), int):
                fut.set_exception(MalformedResponse(f"the error answering {method} has no integer code"))
                return
            fut.set_exception(RpcError(err["code"], str(err.get("message", "error")), err.get("data")))
            return
        fut.set_result(message["result"])

    def _malformed(self, why: str, message: dict[str, Any], line: bytes, reply_to: Any) -> None:
        self._on_fault(Fault("malformed", why, _sample(line)))
        if reply_to is not None:
            self._respond(reply_to, error=RpcError(INVALID_REQUEST, f"invalid request: {why}"))

    def _request(self, rid: Any, method: str, params: Any) -> None:
        try:
            outcome = self._on_request(method, params, rid)
        except RpcError as exc:
            self._respond(rid, error=exc)
            return
        except Exception as exc:
            log.exception("request handler failed for %s", method)
            self._respond(rid, error=RpcError(INTERNAL_ERROR, f"client error: {exc}"))
            return
        if not inspect.isawaitable(outcome):
            self._respond(rid, result=outcome)
            return

        async def finish(awaitable: Awaitable[Any]) -> None:
            try:
                result = await awaitable
            except RpcError as exc:
                self._respond(rid, error=exc)
            except asyncio.CancelledError:
                self._respond(rid, error=RpcError(INTERNAL_ERROR, "the client stopped"))
                raise
            except Exception as exc:
                log.exception("request handler failed for %s", method)
                self._respond(rid, error=RpcError(INTERNAL_ERROR, f"client error: {exc}"))
            else:
                self._respond(rid, result=result)

        task = asyncio.ensure_future(finish(outcome))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop answering and fail what is pending (the agent is going away)."""
        self.eof()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
