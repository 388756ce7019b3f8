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

Connections are counted per peer (:class:`PeerSlots`), so that no one can hold the endpoint
shut for a pane's hooks (one shared cap of 64 let any local user refuse 14 of a pane's 40 hooks,
issue 25): on the socket a peer is the pane its caller belongs to, else its uid, from the
kernel's peer credentials at accept; over TCP, whose caller is known only once the request names
its session, a connection is in one pool as large as the whole endpoint until then, and in its
session's afterwards. A newcomer over a limit takes the place of the connection that has been
reading its request longest — a hook sends its request at once, so what goes is what sits on a
slot — and the socket and TCP are counted apart. (Over TCP, then, a hook's connection could be
pushed out only by more new connections than the whole pool holds arriving while it sends its
first line: a flood, not a held door.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import secrets
import socket
import stat
import struct
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11

from ..procs.proctree import descendants, session_of
from ._tcp_peer import holders, socket_inode

log = logging.getLogger("panewatch.report")

MAX_BODY = 64 * 1024
READ_TIMEOUT_S = 5.0
#: How long a caller of no known pane waits for launches under way (within ``READ_TIMEOUT_S``).
LAUNCH_WAIT_S = 3.0
#: Connections one peer may hold at once: a pane fires its hooks together (40 at once were seen).
PER_PEER = 64
#: Connections in all, whoever holds them (each is a descriptor): a share of the file limit.
TOTAL_MAX = 4096
#: The one refusal for "not your pane" and "no such pane": no oracle of which sessions exist.
NOT_YOURS = (403, {"detail": "this process belongs to no session it may report for"})

#: (session id, body) → (status, JSON answer); raises nothing.
Handler = Callable[[str, bytes], tuple[int, dict[str, Any]]]


#: Who holds a connection: ("unix", "session", id), ("unix", "uid", uid), ("tcp", "unnamed") or
#: ("tcp", "session", id).
Peer = tuple[str, ...]
TCP_UNNAMED: Peer = ("tcp", "unnamed")


class _Slot:
    """One connection: whose it is, how to drop it, and whether its request is still coming in."""

    __slots__ = ("close", "peer", "reading")

    def __init__(self, peer: Peer, close: Callable[[], None]) -> None:
        self.peer, self.close, self.reading = peer, close, True


class PeerSlots:
    """At most ``per_peer`` connections per peer (``TCP_UNNAMED``: ``total``) and ``total`` in
    all. One more takes the place of the peer's (or, past ``total``, anyone's) connection that
    has been reading its request longest, or is refused when every one has its request in. Only
    the event loop calls it."""

    def __init__(self, per_peer: int = PER_PEER, total: int = TOTAL_MAX) -> None:
        self.per_peer, self.total = per_peer, max(total, per_peer)
        self._all: dict[_Slot, None] = {}  # oldest first
        self._by_peer: dict[Peer, dict[_Slot, None]] = {}

    def held(self, peer: Peer) -> int:
        return len(self._by_peer.get(peer, ()))

    def limit(self, peer: Peer) -> int:
        return self.total if peer == TCP_UNNAMED else self.per_peer

    def _make_room(self, among: dict[_Slot, None], limit: int) -> bool:
        """Below ``limit`` in ``among``, dropping its longest-reading connection if need be."""
        if len(among) < limit:
            return True
        oldest = next((slot for slot in among if slot.reading), None)
        if oldest is None:
            return False
        self.free(oldest)
        oldest.close()
        return True

    def take(self, peer: Peer, close: Callable[[], None]) -> _Slot | None:
        """A slot for a new connection of ``peer`` (``close`` drops it), or None: refuse it."""
        mine = self._by_peer.get(peer, {})
        if not self._make_room(mine, self.limit(peer)) or not self._make_room(self._all, self.total):
            return None
        slot = _Slot(peer, close)
        self._all[slot] = None
        self._by_peer.setdefault(peer, {})[slot] = None
        return slot

    def move(self, slot: _Slot, peer: Peer) -> bool:
        """Count ``slot`` as ``peer``'s from now on (a TCP caller once known); False: no room."""
        self._forget(slot)
        if not self._make_room(self._by_peer.get(peer, {}), self.limit(peer)):
            self._all.pop(slot, None)
            return False
        slot.peer = peer
        self._by_peer.setdefault(peer, {})[slot] = None
        return True

    def answered(self, slot: _Slot) -> None:
        """Its request is in: it is answered now, and no newcomer takes its place."""
        slot.reading = False

    def _forget(self, slot: _Slot) -> None:
        mine = self._by_peer.get(slot.peer)
        if mine is not None:
            mine.pop(slot, None)
            if not mine:
                del self._by_peer[slot.peer]

    def free(self, slot: _Slot) -> None:
        self._forget(slot)
        self._all.pop(slot, None)


def total_for_file_limit() -> int:
    """A quarter of the open-file limit, at most ``TOTAL_MAX``: the rest stays for panes and the API."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(PER_PEER, min(TOTAL_MAX, soft // 4)) if soft != resource.RLIM_INFINITY else TOTAL_MAX


def peer_pid(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process that connected."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


class ReportSocket:
    """A Unix-socket HTTP endpoint for ``POST /report``, sessions found by the caller's ancestry."""

    def __init__(
        self,
        path: Path,
        roots: Callable[[], Mapping[int, str]],
        handle: Handler,
        launches: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.path = path
        self.roots = roots
        self.handle = handle
        #: returns once the launches under way have their processes known (a starting pane's
        #: first hook can come before its host has said which process it started)
        self.launches = launches
        self._servers: list[asyncio.base_events.Server] = []
        self.slots = PeerSlots(total=total_for_file_limit())
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
            with suppress(OSError), os.fdopen(os.open(saved, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(str(port))  # 0600 like every file of a state folder others may pass through
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

    def peer_of(self, sock: socket.socket) -> Peer:
        """Whose a new connection is: on the socket the caller's pane (else its uid), from the
        kernel's peer credentials; over TCP nobody's yet (the request names its session)."""
        if sock.family != socket.AF_UNIX:
            return TCP_UNNAMED
        try:
            pid, uid = peer_pid(sock)
        except OSError:
            return ("unix", "uid", "?")
        sid = session_of(pid, self.roots()) if pid > 0 else None
        return ("unix", "session", sid) if sid is not None else ("unix", "uid", str(uid))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        slot = self.slots.take(self.peer_of(writer.get_extra_info("socket")), writer.close)
        if slot is None:  # no room: each connection this peer (or, past the total, anyone) holds is being answered
            writer.close()
            return
        try:
            await self._serve_one(reader, writer, slot)
        finally:
            self.slots.free(slot)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, slot: _Slot) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=16 * 1024)
        try:
            sock = writer.get_extra_info("socket")
            request = self._one_request(conn, reader, sock, slot)
            status, answer = await asyncio.wait_for(request, READ_TIMEOUT_S)
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

    async def _who(
        self, sock: socket.socket, request: h11.Request
    ) -> tuple[str | None, tuple[int, dict[str, Any]] | None]:
        """:meth:`decide` for this request; a caller of no pane is looked at again once the
        launches under way have their processes, so a pane's first hook is not refused."""
        target, method = request.target.decode("latin-1"), request.method.decode("latin-1")
        pid, named = await self._caller(sock, request)
        sid, refusal = self.decide(pid, target, method, named)
        if refusal is NOT_YOURS and self.launches is not None:
            with suppress(TimeoutError):
                await asyncio.wait_for(self.launches(), LAUNCH_WAIT_S)
            pid, named = await self._caller(sock, request)
            sid, refusal = self.decide(pid, target, method, named)
        return sid, refusal

    async def _one_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, sock: socket.socket, slot: _Slot
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
                sid, refusal = await self._who(sock, event)
                if refusal is not None:  # refused before the body is read
                    self.slots.answered(slot)
                    return refusal
                if slot.peer == TCP_UNNAMED and not self.slots.move(slot, ("tcp", "session", sid or "")):
                    return 503, {"detail": "too many connections from this session"}
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    return 413, {"detail": f"report larger than {MAX_BODY} bytes"}
            elif isinstance(event, h11.EndOfMessage):
                assert sid is not None
                self.slots.answered(slot)
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
    """``<state_dir>/report/report.sock`` — a stable name, so that agents that outlive a server
    (tmux) reach the next one — unless a live server answers there (then a name of this server's
    own), or the path is longer than a Unix socket address may be (then a private temporary folder).
    It has a folder of its own: a sandboxed agent sees that folder and nothing else of the state
    folder (``sandbox``), and a restarted server's new socket appears in it."""
    path = Path(state_dir) / "report" / "report.sock"
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            path = path.parent / f"report-{os.getpid()}-{secrets.token_hex(3)}.sock"
        except OSError:
            pass  # stale: the server that made it is gone
        finally:
            probe.close()
    if len(os.fsencode(path)) < 100:
        return path
    folder = tempfile.mkdtemp(prefix="panewatch-")
    with suppress(OSError):  # as passable as the state folder is (0711 for agents of other users)
        os.chmod(folder, 0o700 | stat.S_IMODE(os.stat(state_dir).st_mode) & 0o011)
    return Path(folder) / "report.sock"


#: The Claude Code hook command: its payload to the pane's own report socket, never failing the agent.
REPORT_COMMAND = (
    'curl -sS -m 2 -o /dev/null -X POST --unix-socket "$PANEWATCH_REPORT_SOCKET"'
    ' -H "Content-Type: application/json" --data-binary @-'
    ' "http://panewatch/report?session=$PANEWATCH_SESSION" >/dev/null 2>&1 || true'
)
