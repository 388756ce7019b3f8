"""``/report`` over a Unix socket, where the kernel says who is calling.

A bearer token in an agent's environment is readable by every other agent of the same user
(``/proc/<pid>/environ``), so pane A could report for pane B. Here no token is needed: the socket's
peer credentials (``SO_PEERCRED``) give the calling process, and the session is the one whose root
process is that caller or one of its ancestors (:func:`proctree.session_of`). A process cannot make
itself the descendant of another pane's process, so a report always lands on the reporter's own
pane. A request that names another session gets the same refusal as one that names none that exists.
Anyone may connect (mode 0666): who calls is what decides, so agents run as another user (a hard
boundary, README: Threat model) can report too, and a process outside every pane reports for none.

HTTP/1.1 is parsed with ``h11`` (what uvicorn uses), so ``curl --unix-socket`` works from hooks.

The same endpoint also listens on a loopback TCP port (``url``) for hooks that cannot reach a Unix
socket (Claude Code's native ``http`` hooks, which need no ``curl``). There the request must name
its session (``X-Panewatch-Session`` or ``?session=``) and is taken only if a process of that
session holds the connecting socket (:mod:`tcp_peer`): the same guarantee by another route.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import struct
import tempfile
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11

from .proctree import descendants, session_of
from .tcp_peer import holders, socket_inode

log = logging.getLogger("panewatch.report")

MAX_BODY = 64 * 1024
READ_TIMEOUT_S = 5.0
#: Connections served at once; more are closed at once (a pane opening thousands costs nothing).
MAX_CONNECTIONS = 64
#: The one refusal for "not your pane" and "no such pane": no oracle of which sessions exist.
NOT_YOURS = (403, {"detail": "this process belongs to no session it may report for"})

#: (session id, body) → (status, JSON answer); raises nothing.
Handler = Callable[[str, bytes], tuple[int, dict[str, Any]]]


def peer_pid(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process that connected."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


class ReportSocket:
    """A Unix-socket HTTP endpoint for ``POST /report``, sessions found by the caller's ancestry."""

    def __init__(self, path: Path, roots: Callable[[], Mapping[int, str]], handle: Handler) -> None:
        self.path = path
        self.roots = roots
        self.handle = handle
        self._servers: list[asyncio.base_events.Server] = []
        self._open = 0
        #: the loopback TCP endpoint (``http://127.0.0.1:<port>/report``), once started
        self.url = ""

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o711)
        self.path.unlink(missing_ok=True)
        self._servers.append(await asyncio.start_unix_server(self._serve, path=str(self.path), limit=MAX_BODY))
        os.chmod(self.path, 0o666)
        await self._start_tcp()

    async def _start_tcp(self) -> None:
        """Listen on the port the last server used (agents that outlive it, under tmux, keep that
        URL in their hooks), else on a free one, kept for the next server."""
        saved = self.path.with_suffix(".port")
        try:
            wanted = int(saved.read_text())
        except (OSError, ValueError):
            wanted = 0
        for port in dict.fromkeys((wanted, 0)):
            try:
                server = await asyncio.start_server(self._serve, "127.0.0.1", port, limit=MAX_BODY)
            except OSError:
                continue
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}/report"
            with suppress(OSError):
                saved.write_text(str(port))
            return
        log.warning("no loopback TCP report endpoint: Claude's http hooks fall back to curl")

    async def close(self) -> None:
        for server in self._servers:
            server.close()
            with suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)
        self._servers.clear()
        self.path.unlink(missing_ok=True)

    def decide(
        self, pid: int | None, target: str, method: str, named: str | None = None
    ) -> tuple[str | None, tuple[int, dict[str, Any]] | None]:
        """(session, None) when the caller ``pid`` may report, else (None, refusal). ``named``: the
        session the request names (header), else its ``?session=``."""
        parts = urlsplit(target)
        if parts.path != "/report":
            return None, (404, {"detail": "only POST /report is served here"})
        if method != "POST":
            return None, (405, {"detail": "POST /report"})
        sid = session_of(pid, self.roots()) if pid is not None else None
        named = named or parse_qs(parts.query).get("session", [None])[0]
        if sid is None or (named and named != sid):
            return None, NOT_YOURS
        return sid, None

    def tcp_caller(self, sock: socket.socket, named: str | None) -> int | None:
        """A process of session ``named`` that holds the other end of this loopback connection
        (None: none does, or no session is named). Reads ``/proc``: run it off the event loop."""
        root = next((pid for pid, sid in self.roots().items() if sid == named), None) if named else None
        if root is None:
            return None
        inode = socket_inode(sock.getpeername()[:2], sock.getsockname()[:2])
        found = holders(inode, descendants(root)) if inode is not None else []
        return found[0] if found else None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._open >= MAX_CONNECTIONS:
            writer.close()
            return
        self._open += 1
        try:
            await self._serve_one(reader, writer)
        finally:
            self._open -= 1

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=16 * 1024)
        try:
            sock = writer.get_extra_info("socket")
            status, answer = await asyncio.wait_for(self._one_request(conn, reader, sock), READ_TIMEOUT_S)
        except (TimeoutError, h11.RemoteProtocolError, ConnectionError, OSError):
            status, answer = 400, {"detail": "bad or slow request"}
        except Exception:  # never let a hook's request take the server's loop down
            log.exception("report socket request failed")
            status, answer = 500, {"detail": "internal error"}
        # a native http hook reads a JSON answer as hook output (a decision): it gets none
        tcp = writer.get_extra_info("socket").family != socket.AF_UNIX
        await self._answer(conn, writer, status, None if tcp else answer)

    async def _caller(self, sock: socket.socket, request: h11.Request) -> tuple[int | None, str | None]:
        """(calling pid or None, the session the request names)."""
        named = next((v.decode("latin-1") for k, v in request.headers if k == b"x-panewatch-session"), None)
        if sock.family == socket.AF_UNIX:
            return peer_pid(sock)[0], named
        named = named or parse_qs(urlsplit(request.target.decode("latin-1")).query).get("session", [None])[0]
        return await asyncio.to_thread(self.tcp_caller, sock, named), named

    async def _one_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, sock: socket.socket
    ) -> tuple[int, dict[str, Any]]:
        sid: str | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                pid, named = await self._caller(sock, event)
                sid, refusal = self.decide(pid, event.target.decode("latin-1"), event.method.decode("latin-1"), named)
                if refusal is not None:  # refused before the body is read
                    return refusal
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    return 413, {"detail": f"report larger than {MAX_BODY} bytes"}
            elif isinstance(event, h11.EndOfMessage):
                assert sid is not None
                return self.handle(sid, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("closed before the request ended")

    @staticmethod
    async def _answer(
        conn: h11.Connection, writer: asyncio.StreamWriter, status: int, answer: dict[str, Any] | None
    ) -> None:
        body = b"" if answer is None else json.dumps(answer, ensure_ascii=True).encode()
        try:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                writer.write(
                    conn.send(
                        h11.Response(
                            status_code=status,
                            headers=[
                                *([("content-type", "application/json")] if body else []),
                                ("content-length", str(len(body))),
                                ("connection", "close"),
                            ],
                        )
                    )
                )
                writer.write(conn.send(h11.Data(data=body)))
                writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
        except (h11.LocalProtocolError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with suppress(Exception):
                await writer.wait_closed()


def socket_path(state_dir: Path) -> Path:
    """``<state_dir>/report.sock`` — a stable name, so that agents that outlive a server (tmux)
    reach the next one — unless a live server answers there (then a name of this server's own), or
    the path is longer than a Unix socket address may be (then a private temporary folder)."""
    path = Path(state_dir) / "report.sock"
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            path = Path(state_dir) / f"report-{os.getpid()}-{secrets.token_hex(3)}.sock"
        except OSError:
            pass  # stale: the server that made it is gone
        finally:
            probe.close()
    if len(os.fsencode(path)) < 100:
        return path
    return Path(tempfile.mkdtemp(prefix="panewatch-")) / "report.sock"


#: The Claude Code hook command: its payload to the pane's own report socket, never failing the agent.
REPORT_COMMAND = (
    'curl -sS -m 2 -o /dev/null -X POST --unix-socket "$PANEWATCH_REPORT_SOCKET"'
    ' -H "Content-Type: application/json" --data-binary @-'
    ' "http://panewatch/report?session=$PANEWATCH_SESSION" >/dev/null 2>&1 || true'
)
