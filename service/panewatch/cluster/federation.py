"""The engine façade over many nodes: local sessions served here, the others forwarded.

``ClusterEngine`` offers what the API uses of ``Engine``; a session on another node is read
from the cluster's key-value bucket and acted on by a NATS request to its owner, which runs the
very same guarded call on its own engine (reclassify before writing, a blocked pane takes only
a confirmed answer). Guards therefore run once, where the agent is. A request to an unreachable
node fails fast with ``Unavailable`` (HTTP 503) instead of waiting.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

from ..engine import Engine
from ..errors import Conflict, InvalidRequest, PanewatchError, Unavailable, UnknownSession
from ..events import Created, Deleted, Event, EventHub, EventStream, Output, Snapshot, StateChanged
from ..session import SessionSpec
from ..states import Decision, Source, State
from .link import ClusterError, NodeLink, NodeUnreachable, RemoteError

log = logging.getLogger("panewatch.cluster")

#: How long a remote screen or terminal stream lasts without its watcher renewing it.
LEASE_S = 6.0


def _decision(extra: dict[str, Any]) -> Decision:
    d = extra.get("decision") or {}
    try:
        return Decision(
            State(d.get("state", "idle")), Source(d.get("source", "screen")), str(d.get("why", "")), rule=d.get("rule")
        )
    except ValueError:
        return Decision(State.idle, Source.screen, str(d.get("why", "")))


def _raise_remote(exc: RemoteError) -> None:
    """Turn the owner's refusal back into the same domain error a local call raises."""
    if exc.status == 404:
        raise UnknownSession(exc.detail)
    if exc.status == 409:
        raise Conflict(exc.detail, _decision(exc.extra))
    if exc.status == 503:
        raise Unavailable(exc.detail)
    raise InvalidRequest(exc.detail)


class ClusterEngine:
    """Every node's sessions behind the local engine's façade."""

    def __init__(self, local: Engine, link: NodeLink) -> None:
        self.local = local
        self.link = link
        self.node = link.node
        self.hub = EventHub()
        self._streams: dict[str, tuple[asyncio.Task[Any], list[float]]] = {}  # watch id -> (task, [expiry])
        self._remote_states: dict[str, str] = {}  # remote session -> the state our views last showed
        self._unsubscribe = local.subscribe(self._on_local_event)
        link.session_listeners.append(self._on_remote_session)
        link.node_listeners.append(self._on_node)

    def __getattr__(self, name: str) -> Any:
        """What the cluster does not change (agents, stats, report tokens...) is the local engine's."""
        return getattr(self.local, name)

    # -- lifecycle -------------------------------------------------------------------------
    async def join(self) -> None:
        """Join the cluster (before the server listens); StartupRefused says why it cannot."""
        from ..wiring import StartupRefused

        try:
            await self.link.start()
        except ClusterError as exc:
            raise StartupRefused(str(exc)) from None

    async def start(self) -> None:
        await self.local.start()
        if not self.link.started:
            await self.join()
        for info in self.local.list():
            self.link.publish(info["id"], self._tag(info))

    async def stop(self) -> None:
        for task, _ in self._streams.values():
            task.cancel()
        await self.link.stop()
        self._unsubscribe()
        await self.local.stop()

    def report_token(self, sid: str) -> str:
        """Only this node's sessions report here (their hooks talk to their own node)."""
        return self.local.report_token(sid)

    # -- where a session lives ---------------------------------------------------------------
    def _tag(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, "node": self.node}

    def _owner(self, sid: str) -> str | None:
        """None for a local session, else the owning node's name; UnknownSession if nowhere."""
        if sid in self.local:
            return None
        for peer in self.link.peers.values():
            if sid in peer.sessions:
                return peer.name
        raise UnknownSession(f"no session {sid!r} on any node")

    def _remote_info(self, node: str, info: dict[str, Any]) -> dict[str, Any]:
        out = {**info, "node": node}
        if not self.link.owner_alive(node):
            out.update(
                state=str(State.unreachable),
                source="cluster",
                rule=node,
                why=f"node {node} is unreachable; last known state {info.get('state')}",
            )
        return out

    async def _ask(self, node: str, op: str, args: dict[str, Any]) -> Any:
        try:
            return await self.link.request(node, op, args)
        except NodeUnreachable as exc:
            raise Unavailable(str(exc)) from None
        except RemoteError as exc:
            _raise_remote(exc)

    # -- read models -----------------------------------------------------------------------
    def list(self) -> list[dict[str, Any]]:
        out = [self._tag(info) for info in self.local.list()]
        for peer in self.link.peers.values():
            out += [self._remote_info(peer.name, info) for _, info in peer.sessions.values()]
        return out

    def snapshot(self) -> Snapshot:
        return Snapshot(self.list())

    def __contains__(self, sid: object) -> bool:
        return sid in self.local or any(sid in p.sessions for p in self.link.peers.values())

    def __len__(self) -> int:
        return len(self.list())

    async def get(self, sid: str) -> dict[str, Any]:
        node = self._owner(sid)
        if node is None:
            return self._tag(self.local.get(sid))
        for peer in self.link.peers.values():
            if sid in peer.sessions:
                return self._remote_info(peer.name, peer.sessions[sid][1])
        raise UnknownSession(f"no session {sid!r} on any node")

    info = get

    async def screen(self, sid: str, *, styles: bool = False) -> dict[str, Any]:
        node = self._owner(sid)
        if node is None:
            return self.local.screen(sid, styles=styles)
        return dict(await self._ask(node, "screen", {"sid": sid, "styles": styles}))

    async def explain(self, sid: str) -> dict[str, Any]:
        node = self._owner(sid)
        if node is None:
            return self.local.explain(sid)
        return dict(await self._ask(node, "explain", {"sid": sid}))

    # -- actions ---------------------------------------------------------------------------
    async def create(self, spec: SessionSpec, node: str | None = None) -> dict[str, Any]:
        if node in (None, "", self.node):
            return self._tag(self.local.create(spec))
        if node not in self.link.peers:
            raise InvalidRequest(f"unknown node {node!r} (known: {', '.join(sorted(self.link.peers)) or 'none'})")
        return dict(await self._ask(node, "create", {"spec": spec.__dict__}))

    async def delete(self, sid: str) -> dict[str, Any]:
        node = self._owner(sid)
        if node is None:
            return await self.local.delete(sid)
        return dict(await self._ask(node, "delete", {"sid": sid}))

    async def send(self, sid: str, text: str, *, enter: bool = True) -> Decision:
        node = self._owner(sid)
        if node is None:
            return await self.local.send(sid, text, enter=enter)
        return _decision({"decision": await self._ask(node, "send", {"sid": sid, "text": text, "enter": enter})})

    async def answer(
        self, sid: str, *, option: int | str | None = None, keys: str | None = None, request: str | None = None
    ) -> Any:
        node = self._owner(sid)
        if node is None:
            return await self.local.answer(sid, option=option, keys=keys, request=request)
        from ..engine import AnswerResult

        r = await self._ask(node, "answer", {"sid": sid, "option": option, "keys": keys, "request": request})
        return AnswerResult(bool(r["took"]), State(r["state"]), r.get("rule"), float(r["waited"]), str(r["keys"]))

    async def resize(self, sid: str, rows: int, cols: int) -> dict[str, Any]:
        node = self._owner(sid)
        if node is None:
            return self._tag(self.local.resize(sid, rows, cols))
        return dict(await self._ask(node, "resize", {"sid": sid, "rows": rows, "cols": cols}))

    async def cancel(self, sid: str) -> Any:
        """An ACP session's turn cancelled (session/cancel), wherever the session runs."""
        node = self._owner(sid)
        if node is None:
            return self.local.cancel(sid)
        return await self._ask(node, "cancel", {"sid": sid})

    async def conversation(self, sid: str) -> Any:
        node = self._owner(sid)
        if node is None:
            return self.local.conversation(sid)
        return await self._ask(node, "conversation", {"sid": sid})

    def conversations(self, sid: str) -> AsyncIterator[dict[str, Any]]:
        node = self._owner(sid)
        if node is None:
            return self.local.conversations(sid)
        return self._remote_stream(node, "conversation", sid, {})

    async def write_keys(self, sid: str, data: bytes) -> None:
        node = self._owner(sid)
        if node is None:
            self.local.write_keys(sid, data)
            return
        await self._ask(node, "write_keys", {"sid": sid, "data": base64.b64encode(data).decode()})

    # -- streams ---------------------------------------------------------------------------
    def events(self, *, size: int = 1000, heartbeat: float | None = 15.0) -> EventStream:
        return self.hub.stream(self.snapshot, size=size, heartbeat=heartbeat)

    def screens(self, sid: str, *, interval: float = 0.1, styles: bool = False) -> AsyncIterator[dict[str, Any]]:
        node = self._owner(sid)
        if node is None:
            return self.local.screens(sid, interval=interval, styles=styles)
        return self._remote_stream(node, "screen", sid, {"interval": interval, "styles": styles})

    def output(self, sid: str, *, limit: int = 1 << 20) -> AsyncIterator[bytes]:
        node = self._owner(sid)
        if node is None:
            return self.local.output(sid, limit=limit)
        return self._remote_bytes(node, sid)

    async def _remote_bytes(self, node: str, sid: str) -> AsyncIterator[bytes]:
        async for item in self._remote_stream(node, "output", sid, {}):
            yield base64.b64decode(item["b"])

    async def _remote_stream(self, node: str, kind: str, sid: str, args: dict[str, Any]) -> AsyncIterator[Any]:
        """Items the owner publishes for us while we keep renewing the lease."""
        watch = uuid.uuid4().hex[:12]
        subject = f"pw.{node}.stream.{watch}"
        sub = await self.link.subscribe_raw(subject)
        request = {"sid": sid, "kind": kind, "watch": watch, "subject": subject, "args": args}
        renewed = 0.0
        try:
            while True:
                if time.monotonic() - renewed > LEASE_S / 3:
                    await self._ask(node, "watch", request)
                    renewed = time.monotonic()
                try:
                    msg = await sub.next_msg(timeout=LEASE_S / 3)
                except Exception:  # a quiet screen: renew and wait again
                    continue
                yield json.loads(msg.data)
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # the connection may be gone already
                pass

    # -- serving the other nodes -------------------------------------------------------------
    async def respond(self, op: str, args: dict[str, Any]) -> Any:
        """One request from another node, run on the local engine with its usual guards."""
        try:
            return await self._run(op, args)
        except Conflict as exc:
            raise RemoteError(409, str(exc), {"decision": exc.decision.as_dict()}) from None
        except PanewatchError as exc:
            raise RemoteError(exc.status, str(exc)) from None

    async def _run(self, op: str, args: dict[str, Any]) -> Any:
        local, sid = self.local, str(args.get("sid", ""))
        if op == "screen":
            return local.screen(sid, styles=bool(args.get("styles")))
        if op == "explain":
            return local.explain(sid)
        if op == "create":
            return self._tag(local.create(SessionSpec(**args["spec"])))
        if op == "delete":
            return await local.delete(sid)
        if op == "send":
            return (await local.send(sid, str(args["text"]), enter=bool(args.get("enter", True)))).as_dict()
        if op == "answer":
            r = await local.answer(sid, option=args.get("option"), keys=args.get("keys"), request=args.get("request"))
            return {"took": r.took, "state": str(r.state), "rule": r.rule, "waited": r.waited, "keys": r.keys}
        if op == "resize":
            return self._tag(local.resize(sid, int(args["rows"]), int(args["cols"])))
        if op == "cancel":
            return local.cancel(sid)
        if op == "conversation":
            return local.conversation(sid)
        if op == "write_keys":
            local.write_keys(sid, base64.b64decode(str(args["data"])))
            return {"written": True}
        if op == "watch":
            return self._lease(args)
        raise InvalidRequest(f"unknown cluster operation {op!r}")

    def _lease(self, args: dict[str, Any]) -> dict[str, Any]:
        watch = str(args["watch"])
        known = self._streams.get(watch)
        if known is not None:
            known[1][0] = time.monotonic() + LEASE_S
            return {"watching": watch}
        sid, kind = str(args["sid"]), str(args["kind"])
        if kind == "screen":
            extra = args.get("args") or {}
            source: AsyncIterator[Any] = self.local.screens(
                sid, interval=float(extra.get("interval", 0.1)), styles=bool(extra.get("styles"))
            )
        elif kind == "conversation":
            source = self.local.conversations(sid)
        else:
            source = self._b64(self.local.output(sid))
        expiry = [time.monotonic() + LEASE_S]
        task = asyncio.get_running_loop().create_task(self._pump(watch, str(args["subject"]), source, expiry))
        self._streams[watch] = (task, expiry)
        return {"watching": watch}

    @staticmethod
    async def _b64(source: AsyncIterator[bytes]) -> AsyncIterator[dict[str, str]]:
        async for chunk in source:
            yield {"b": base64.b64encode(chunk).decode()}

    # `list` alone means the method above here (annotations resolve in the class body)
    async def _pump(self, watch: str, subject: str, source: AsyncIterator[Any], expiry: builtins.list[float]) -> None:
        """Publish a stream's items while its lease holds; a watcher that went away costs nothing.
        The stream is iterated by a task of its own and only cancelled when the lease ends: a
        time-out around each item would cancel the generator in the middle of its first frame."""

        async def forward() -> None:
            async for item in source:
                await self.link.publish_raw(subject, item)

        task = asyncio.ensure_future(forward())
        try:
            while not task.done() and time.monotonic() < expiry[0]:
                await asyncio.wait({task}, timeout=max(0.05, min(1.0, expiry[0] - time.monotonic())))
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError, UnknownSession):
                await task
            self._streams.pop(watch, None)

    # -- events ----------------------------------------------------------------------------
    def _on_local_event(self, event: Event) -> None:
        if isinstance(event, Output):
            return
        if isinstance(event, Deleted):
            self.link.publish(event.session, None)
        elif isinstance(event, (Created, StateChanged)):
            sid = event.session["id"] if isinstance(event, Created) else event.session
            if sid in self.local:
                self.link.publish(sid, self._tag(self.local.get(sid)))
        if isinstance(event, Created):
            event = Created(self._tag(event.session))
        self.hub.publish(event)

    def _on_remote_session(self, node: str, sid: str, info: dict[str, Any] | None, revision: int) -> None:
        if info is None:
            if self._remote_states.pop(sid, None) is not None:
                self.hub.publish(Deleted(sid))
            return
        view = self._remote_info(node, info)
        before = self._remote_states.get(sid)
        self._remote_states[sid] = view["state"]
        if before is None:
            self.hub.publish(Created(view))
        elif before != view["state"]:
            self.hub.publish(self._changed(sid, view, before))

    @staticmethod
    def _changed(sid: str, view: dict[str, Any], before: str | None) -> StateChanged:
        return StateChanged(
            sid,
            State(view["state"]),
            State(before) if before else None,
            str(view.get("source") or ""),
            view.get("rule"),
            str(view.get("why") or ""),
            float(view.get("since") or time.time()),
            exit_code=view.get("exit_code"),
            error=view.get("error"),
        )

    def _on_node(self, node: str, alive: bool) -> None:
        """A node went quiet or came back: each of its sessions changes state in every view."""
        peer = self.link.peers.get(node)
        if peer is None:
            return
        for sid, (_, info) in list(peer.sessions.items()):
            view = self._remote_info(node, info)
            before = self._remote_states.get(sid)
            self._remote_states[sid] = view["state"]
            if before != view["state"]:
                self.hub.publish(self._changed(sid, view, before))
