"""One node's connection to the cluster: NATS, two JetStream key-value buckets, a heartbeat.

Who talks to whom (README "Cluster" has the picture in words):

- every node keeps its own sessions' current info in the ``panewatch_sessions`` bucket under
  ``<node>.<session>``; a node that joins (or comes back after NATS went away) reads the whole
  picture from the bucket instead of asking every node, and the bucket's revisions let it drop
  an update older than one it already has;
- every node writes ``<node>`` in the ``panewatch_nodes`` bucket once a second (the heartbeat);
  a node whose heartbeat is older than ``dead_after_s`` is *unreachable* for the others;
- actions on a session (send, answer, screen, ...) are NATS requests on ``pw.<node>.req``,
  answered by the owning node, which applies the same guards as for a local client;
- screen frames flow on ``pw.<node>.screen.<session>`` only while some node holds a lease.

NATS going away never stops a node from serving its own sessions: nats-py reconnects by itself,
and on reconnection the node writes its sessions again and re-reads everyone else's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import KeyValueConfig, StorageType
from nats.js.client import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from nats.js.kv import KeyValue

log = logging.getLogger("panewatch.cluster")

SESSIONS_BUCKET = "panewatch_sessions"
NODES_BUCKET = "panewatch_nodes"
NODE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")

#: Called with (node, session id, info or None when deleted, revision).
SessionListener = Callable[[str, str, dict[str, Any] | None, int], None]
#: Called with (node, alive) when a node's liveness changes.
NodeListener = Callable[[str, bool], None]
#: Serves one request addressed to this node: (op, args) -> JSON-ready result.
Responder = Callable[[str, dict[str, Any]], Awaitable[Any]]


class ClusterError(Exception):
    """The node cannot join the cluster as configured (bad URL, credentials, name clash)."""


class RemoteError(Exception):
    """The owning node refused a request; ``status`` is the HTTP status it would have given."""

    def __init__(self, status: int, detail: str, extra: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra or {}


class NodeUnreachable(Exception):
    """The owning node is not heartbeating, or did not answer in time."""


@dataclass
class Peer:
    """What this node knows of another node: its heartbeat and its sessions."""

    name: str
    seen: float = 0.0  # local monotonic time of the last heartbeat received
    alive: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    sessions: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # sid -> (rev, info)


@dataclass(frozen=True)
class LinkOptions:
    url: str
    node: str
    creds: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    heartbeat_s: float = 1.0
    dead_after_s: float = 3.0
    request_timeout_s: float = 3.0
    connect_timeout_s: float = 3.0


def redact(url: str) -> str:
    """The URL without a user or password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url.rpartition("@")[2]


def _ssl_context(opts: LinkOptions) -> ssl.SSLContext | None:
    if not (opts.tls_ca or opts.tls_cert):
        return None
    ctx = ssl.create_default_context(cafile=opts.tls_ca)
    if opts.tls_cert:
        ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
    return ctx


class NodeLink:
    """This node's side of the cluster; the federation façade is built on it."""

    def __init__(self, opts: LinkOptions, responder: Responder) -> None:
        if not NODE_NAME.match(opts.node):
            raise ClusterError(f"node name {opts.node!r}: use 1-40 letters, digits, '-' or '_'")
        self.opts = opts
        self.node = opts.node
        self.instance = uuid.uuid4().hex
        self._responder = responder
        self.peers: dict[str, Peer] = {}
        self.session_listeners: list[SessionListener] = []
        self.node_listeners: list[NodeListener] = []
        self.connected = False
        self.started = False  # joined once (connected may come and go after that)
        self._nc: Client | None = None
        self._sessions: KeyValue | None = None
        self._nodes: KeyValue | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._watch_tasks: list[asyncio.Task[Any]] = []
        self._local: dict[str, dict[str, Any]] = {}  # our own sessions, as last published
        self._dirty: set[str] = set()  # our sessions to write (again) to the bucket
        self._flush_wanted = asyncio.Event()
        self._last_error: Exception | None = None

    # -- joining ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, check the node name is free, then serve; raises ClusterError, leaving nothing
        half-joined (no heartbeat, no subscription) when it cannot."""
        self._nc = Client()
        try:
            # nats-py retries a refused first connection for ever when reconnection is on:
            # bound it, so a wrong URL or credentials is one clear error at start
            # nats-py annotates both timeouts as int but only hands them to asyncio (floats work)
            options: dict[str, Any] = {
                "servers": [self.opts.url],
                "name": f"panewatch-{self.node}",
                "user_credentials": self.opts.creds,
                "tls": _ssl_context(self.opts),
                "connect_timeout": self.opts.connect_timeout_s,
                "max_reconnect_attempts": -1,
                "reconnect_time_wait": 0.5,
                "allow_reconnect": True,
                "disconnected_cb": self._on_disconnected,
                "reconnected_cb": self._on_reconnected,
                "error_cb": self._on_error,
            }
            await asyncio.wait_for(self._nc.connect(**options), self.opts.connect_timeout_s + 1)
        except Exception as exc:  # nats-py raises several unrelated types for a refused connect
            await self._nc.close()
            reason = str(self._last_error or exc) or type(exc).__name__
            raise ClusterError(f"cannot join the cluster at {redact(self.opts.url)}: {reason}") from None
        try:
            js = self._nc.jetstream()
            self._sessions = await self._bucket(js, SESSIONS_BUCKET, ttl=None)
            self._nodes = await self._bucket(js, NODES_BUCKET, ttl=None)
            await self._claim_name()
            await self._nc.subscribe(f"pw.{self.node}.req", cb=self._on_request)
        except ClusterError:
            await self._nc.close()
            raise
        except Exception as exc:
            await self._nc.close()
            raise ClusterError(
                f"cannot use the cluster at {redact(self.opts.url)}: {exc or type(exc).__name__}"
            ) from None
        self.connected = self.started = True
        loop = asyncio.get_running_loop()
        self._tasks += [
            loop.create_task(self._heartbeat()),
            loop.create_task(self._flusher()),
            loop.create_task(self._liveness()),
        ]
        self._start_watchers()
        log.info("joined the cluster at %s as node %s", redact(self.opts.url), self.node)

    @staticmethod
    async def _bucket(js: JetStreamContext, name: str, ttl: float | None) -> KeyValue:
        try:
            return await js.key_value(name)
        except BucketNotFoundError:
            return await js.create_key_value(KeyValueConfig(bucket=name, history=1, ttl=ttl, storage=StorageType.FILE))

    async def _claim_name(self) -> None:
        """Refuse to join under a name another live instance heartbeats with."""
        assert self._nodes is not None
        try:
            entry = await self._nodes.get(self.node)
        except KeyNotFoundError:
            entry = None
        if entry is not None and entry.value:
            beat = json.loads(entry.value)
            age = time.time() - float(beat.get("at", 0))
            if beat.get("instance") != self.instance and age < self.opts.dead_after_s:
                raise ClusterError(
                    f"node name {self.node!r} is already in use by a live node "
                    f"(heartbeat {age:.1f} s ago); pick another --node"
                )
        await self._beat()

    async def stop(self) -> None:
        self.connected = False  # leaving on purpose is not a lost connection
        for task in self._tasks + self._watch_tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._watch_tasks, return_exceptions=True)
        self._tasks.clear()
        self._watch_tasks.clear()
        if self._nc is not None and not self._nc.is_closed:
            try:
                await self._nc.drain()
            except Exception:  # already gone: nothing more to release
                await self._nc.close()
        self.connected = False

    # -- our own sessions ------------------------------------------------------------------
    def publish(self, sid: str, info: dict[str, Any] | None) -> None:
        """Record our session's current info (None: deleted); written to the bucket promptly,
        and again after a reconnection, so the bucket converges whatever was lost."""
        if info is None:
            self._local.pop(sid, None)
        else:
            self._local[sid] = info
        self._dirty.add(sid)
        self._flush_wanted.set()

    async def _flusher(self) -> None:
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted.clear()
            if not self.connected or self._sessions is None:
                continue
            batch, self._dirty = self._dirty, set()
            for sid in batch:
                key = f"{self.node}.{sid}"
                info = self._local.get(sid)
                try:
                    if info is None:
                        await self._sessions.delete(key)
                    else:
                        await self._sessions.put(key, json.dumps(info, separators=(",", ":")).encode())
                except Exception as exc:  # NATS away: keep it dirty, the reconnection rewrites it
                    self._dirty.add(sid)
                    log.debug("cluster write of %s deferred: %s", sid, exc)

    async def _rewrite_all(self) -> None:
        """After a reconnection: our sessions as they are now, and none that we deleted."""
        assert self._sessions is not None
        try:
            keys = await self._sessions.keys()
        except Exception:  # nats-py raises NoKeysError (or a timeout) for an empty bucket
            keys = []
        for key in keys:
            node, _, sid = key.partition(".")
            if node == self.node and sid not in self._local:
                self._dirty.add(sid)
        self._dirty.update(self._local)
        self._flush_wanted.set()

    # -- heartbeat and liveness ------------------------------------------------------------
    async def _beat(self) -> None:
        assert self._nodes is not None
        body = {"at": time.time(), "instance": self.instance, "node": self.node}
        await self._nodes.put(self.node, json.dumps(body).encode())

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.opts.heartbeat_s)
            if self.connected:
                try:
                    await self._beat()
                except Exception as exc:
                    log.debug("heartbeat not written: %s", exc)

    async def _liveness(self) -> None:
        """Mark peers unreachable when their heartbeat stops arriving (local clock only)."""
        while True:
            await asyncio.sleep(min(0.5, self.opts.heartbeat_s))
            now = time.monotonic()
            for peer in list(self.peers.values()):
                alive = now - peer.seen < self.opts.dead_after_s and self.connected
                if alive != peer.alive:
                    peer.alive = alive
                    log.info("node %s is %s", peer.name, "back" if alive else "unreachable")
                    for listener in list(self.node_listeners):
                        listener(peer.name, alive)

    # -- everyone else's sessions ----------------------------------------------------------
    def _start_watchers(self) -> None:
        for task in self._watch_tasks:
            task.cancel()
        loop = asyncio.get_running_loop()
        self._watch_tasks = [
            loop.create_task(self._watch(self._sessions, self._on_session_entry)),
            loop.create_task(self._watch(self._nodes, self._on_node_entry)),
        ]

    async def _watch(self, kv: KeyValue | None, handle: Callable[[Any], None]) -> None:
        assert kv is not None
        watcher = await kv.watchall()
        try:
            async for entry in watcher:
                if entry is not None:
                    handle(entry)
        finally:
            try:
                await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves stop() unannotated
            except Exception:  # the connection may already be gone
                pass

    def _peer(self, name: str) -> Peer:
        peer = self.peers.get(name)
        if peer is None:
            peer = self.peers[name] = Peer(name)
        return peer

    def _on_node_entry(self, entry: Any) -> None:
        name = entry.key
        if name == self.node or not entry.value:
            return
        peer = self._peer(name)
        try:
            peer.info = json.loads(entry.value)
        except ValueError:
            return
        # a heartbeat written long ago (a node that died before we joined) is not a sign of life
        if time.time() - float(peer.info.get("at", 0)) < self.opts.dead_after_s:
            peer.seen = time.monotonic()

    def _on_session_entry(self, entry: Any) -> None:
        node, _, sid = entry.key.partition(".")
        if node == self.node or not sid:
            return
        peer = self._peer(node)
        known = peer.sessions.get(sid)
        if known is not None and entry.revision <= known[0]:
            return  # an update we already have (a watcher restarted after a reconnection)
        deleted = entry.operation in ("DEL", "PURGE") or not entry.value
        info: dict[str, Any] | None = None
        if deleted:
            peer.sessions.pop(sid, None)
        else:
            try:
                info = json.loads(entry.value)
            except ValueError:
                return
            peer.sessions[sid] = (entry.revision, info)
        for listener in list(self.session_listeners):
            listener(node, sid, info, entry.revision)

    # -- requests --------------------------------------------------------------------------
    def owner_alive(self, node: str) -> bool:
        peer = self.peers.get(node)
        return bool(peer and peer.alive)

    async def request(self, node: str, op: str, args: dict[str, Any], timeout: float | None = None) -> Any:
        """Ask ``node`` to run ``op``; raises NodeUnreachable fast when it is not heartbeating."""
        if not self.connected or self._nc is None:
            raise NodeUnreachable("this node is not connected to the cluster")
        if not self.owner_alive(node):
            raise NodeUnreachable(f"node {node!r} is unreachable (no heartbeat)")
        body = json.dumps({"op": op, "args": args, "from": self.node}).encode()
        try:
            msg = await self._nc.request(f"pw.{node}.req", body, timeout=timeout or self.opts.request_timeout_s)
        except Exception as exc:
            raise NodeUnreachable(f"node {node!r} did not answer: {type(exc).__name__}") from None
        reply = json.loads(msg.data)
        if "error" in reply:
            err = reply["error"]
            raise RemoteError(int(err.get("status", 500)), str(err.get("detail", "")), err.get("extra"))
        return reply.get("ok")

    async def _on_request(self, msg: Msg) -> None:
        try:
            body = json.loads(msg.data)
            result = await self._responder(str(body["op"]), dict(body.get("args") or {}))
            reply: dict[str, Any] = {"ok": result}
        except RemoteError as exc:
            reply = {"error": {"status": exc.status, "detail": exc.detail, "extra": exc.extra}}
        except (ValueError, KeyError, TypeError) as exc:
            reply = {"error": {"status": 422, "detail": f"bad cluster request: {exc}"}}
        if msg.reply:
            await msg.respond(json.dumps(reply, separators=(",", ":")).encode())

    # -- raw pub/sub (screen frames) -------------------------------------------------------
    async def publish_raw(self, subject: str, data: dict[str, Any]) -> None:
        if self.connected and self._nc is not None:
            try:
                await self._nc.publish(subject, json.dumps(data, separators=(",", ":")).encode())
            except Exception as exc:
                log.debug("publish on %s dropped: %s", subject, exc)

    async def subscribe_raw(self, subject: str) -> Any:
        if self._nc is None:
            raise NodeUnreachable("this node is not connected to the cluster")
        return await self._nc.subscribe(subject)

    # -- connection events -----------------------------------------------------------------
    async def _on_disconnected(self) -> None:
        if self.connected:
            log.warning("lost the cluster connection; serving local sessions only until it is back")
        self.connected = False

    async def _on_reconnected(self) -> None:
        self.connected = True
        log.info("cluster connection back: rewriting our sessions and re-reading everyone's")
        try:
            await self._beat()
        except Exception as exc:
            log.debug("heartbeat after reconnection failed: %s", exc)
        self._start_watchers()
        await self._rewrite_all()

    async def _on_error(self, exc: Exception) -> None:
        self._last_error = exc
        log.debug("cluster connection error: %s", exc)
