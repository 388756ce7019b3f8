"""The door of the HTTP server: Host, credentials and body size are checked before routing.

Before this middleware an unauthenticated 40 MB JSON body was parsed (the server grew from 63 MB
to 1.14 GB) before the 401. Here the order is: the Host header (a DNS-rebinding page names its
own host), then the credentials (a callback, so the rules stay in one place with the app), and
only then is the body read — at most ``limit_for(path)`` bytes, refused with 413 past that, and
JSON nested deeper than the parser can take is refused with 422. Every answer carries headers
that keep the dashboard out of frames and stop content sniffing.

Pure ASGI: no framework in the logic, so it wraps whatever app the factory builds.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from .validation import MAX_JSON_DEPTH, json_too_deep

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: (status, reason, extra headers) or None to let the request through.
Refusal = tuple[int, str, dict[str, str]]
Authorize = Callable[[HTTPConnection], "Refusal | None"]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

#: The dashboard loads only its own scripts; xterm.js writes <style> elements, hence 'unsafe-inline'
#: for styles only. The WebSocket origin is the page's own (named, for older CSP implementations).
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self' {ws}; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
#: FastAPI's /docs pages load Swagger UI from a CDN: they keep only the framing rule.
DOCS_CSP = "frame-ancestors 'none'"
DOCS_PATHS = ("/docs", "/redoc")


class HostAllowList:
    """Loopback names (``localhost``, ``*.localhost``, 127.0.0.0/8, ``::1``), the bound address
    when it is a specific one, ``public_url``'s host, and names given by the user (``*`` = any)."""

    def __init__(self, extra: Iterable[str] = (), public_url: str | None = None, bind: str | None = None) -> None:
        names = {n.strip().lower().rstrip(".") for n in extra if n.strip()}
        if public_url:
            host = urlsplit(public_url).hostname
            if host:
                names.add(host.lower())
        if bind and bind not in ("0.0.0.0", "::", ""):
            names.add(bind.lower().strip("[]"))
        self.any = "*" in names
        self.names = frozenset(names - {"*"})

    @staticmethod
    def hostname(header: str) -> str:
        """``Host`` without its port (``[::1]:8765`` → ``::1``)."""
        header = header.strip().lower()
        if header.startswith("["):
            return header[1 : header.find("]")] if "]" in header else header
        return header.rsplit(":", 1)[0] if header.count(":") == 1 else header

    def allows(self, header: str | None) -> bool:
        if header is None or self.any:  # no Host: not a browser, so not a rebinding page
            return True
        name = self.hostname(header).rstrip(".")
        if name in LOOPBACK_NAMES or name.endswith(".localhost") or name in self.names:
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False


def security_headers(path: str, host: str | None) -> list[tuple[bytes, bytes]]:
    csp = (
        DOCS_CSP
        if path.startswith(DOCS_PATHS)
        else PAGE_CSP.format(ws=f"ws://{host} wss://{host}" if host and all(c not in host for c in " ;,'\"") else "")
    )
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]


class _TooLarge(Exception):
    pass


class HttpGuard:
    """ASGI middleware: Host allow-list, ``authorize`` before any body byte, body limits, headers."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostAllowList,
        authorize: Authorize | None = None,
        limit_for: Callable[[str], int] = lambda path: 1 << 20,
        max_json_depth: int = MAX_JSON_DEPTH,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.authorize = authorize
        self.limit_for = limit_for
        self.max_json_depth = max_json_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        conn = HTTPConnection(scope)
        host = conn.headers.get("host")
        if not self.hosts.allows(host):
            if scope["type"] == "websocket":  # refused before accept: the handshake gets a 403
                await send({"type": "websocket.close", "code": 1008, "reason": "host not allowed"})
                return
            await _respond(
                send, 421, "host not allowed (DNS rebinding guard): add it with --allowed-hosts", scope["path"], None
            )
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        refusal = self._refuse_before_body(conn, path)
        body, more = b"", receive
        if refusal is None:
            body, more, refusal = await self._read(conn, receive, path)
        if refusal is not None:
            status, reason, headers = refusal
            await _respond(send, status, reason, path, host, headers)
            return
        await self.app(scope, _replay(body, more), _with_headers(send, security_headers(path, host)))

    def _refuse_before_body(self, conn: HTTPConnection, path: str) -> Refusal | None:
        """The token, then the declared length: nothing of the body is read for a refusal."""
        if self.authorize is not None and (refusal := self.authorize(conn)) is not None:
            return refusal
        limit = self.limit_for(path)
        length = conn.headers.get("content-length")
        if length is not None and not length.isdigit():
            return 400, "bad Content-Length", {}
        if length is not None and int(length) > limit:
            return 413, f"body larger than {limit} bytes", {}
        return None

    async def _read(self, conn: HTTPConnection, receive: Receive, path: str) -> tuple[bytes, Receive, Refusal | None]:
        """The body, read to at most the path's limit, and refused if its JSON nests too deep."""
        limit = self.limit_for(path)
        try:
            body, more = await _read_body(receive, limit)
        except _TooLarge:
            return b"", receive, (413, f"body larger than {limit} bytes", {})
        if body and _is_json(conn) and json_too_deep(body, self.max_json_depth):
            return body, more, (422, f"JSON nested deeper than {self.max_json_depth} levels", {})
        return body, more, None


def _replay(body: bytes, more: Receive) -> Receive:
    """A receive that hands the app the body read already, then whatever follows (a disconnect)."""
    replayed = False

    async def receive() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await more()

    return receive


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """A send that adds the security headers the app did not set itself."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {k.lower() for k, _ in message.get("headers", [])}
            message = {
                **message,
                "headers": [*message.get("headers", []), *[(k, v) for k, v in extra if k not in present]],
            }
        await send(message)

    return send_with_headers


def _is_json(conn: HTTPConnection) -> bool:
    kind = conn.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind in ("", "application/json") or kind.endswith("+json")


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """The whole body (at most ``limit`` bytes) and the receive to use after it (disconnects)."""
    chunks = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":

            async def gone(last: Message = message) -> Message:
                return last

            return bytes(chunks), gone
        chunks += message.get("body", b"")
        if len(chunks) > limit:
            raise _TooLarge
        if not message.get("more_body", False):
            return bytes(chunks), receive


async def _respond(
    send: Send, status: int, reason: str, path: str, host: str | None, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps({"detail": reason}).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        # the client may still be sending a body we will not read: do not keep this connection
        (b"connection", b"close"),
        *security_headers(path, host),
    ]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
