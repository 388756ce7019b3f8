"""``EngineAPI`` over many nodes: local sessions served here, the others forwarded.

``ClusterEngine`` implements the same contract as the local ``Engine``; a session on another
node is read from the cluster's key-value bucket and acted on by a NATS request to its owner,
which runs the very same guarded call on its own engine (reclassify before writing, a blocked
pane takes only a confirmed answer), with the actor who asked. Guards therefore run once, where
the agent is. A request to an unreachable node fails fast with ``Unavailable`` (HTTP 503).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..engine import (
    Actor,
    AgentList,
    AnswerResult,
    Cancelled,
    Changes,
    ConversationView,
    Deletion,
    Engine,
    EngineStats,
    EventStream,
    Explanation,
    Prompt,
    ReportDesk,
    ScreenFrame,
    ScreenView,
    Sent,
    SessionInfo,
    SessionSpec,
    TerminalChannel,
    watch_terminal,
)
from ..engine.events import Created, Deleted, Event, EventHub, Output, Renamed, Snapshot, StateChanged
from ..errors import Conflict, InvalidRequest, StartupRefused, Unavailable, UnknownSession
from ..states import Decision, Source, State
from ..worktrees import WorktreeBusy, WorktreeDirty
from ._serving import LEASE_S, Serving
from .link import ClusterError, NodeLink, NodeUnreachable, RemoteError

__all__ = ["ClusterEngine"]

log = logging.getLogger("panewatch.cluster")


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
    if exc.status == 409 and "decision" in exc.extra:
        raise Conflict(exc.detail, _decision(exc.extra))
    if exc.status == 409 and isinstance(files := exc.extra.get("files"), list):
        raise WorktreeDirty.told(exc.detail, [str(f) for f in files])
    if exc.status == 409:
        raise WorktreeBusy(exc.detail)
    if exc.status == 503:
        raise Unavailable(exc.detail)
    raise InvalidRequest(exc.detail)


class ClusterEngine:
    """Every node's sessions behind ``EngineAPI``."""

    def __init__(self, local: Engine, link: NodeLink) -> None:
        self._local = local
        self.link = link
        self.node = link.node
        self.hub = EventHub()
        self.serving = Serving(local, link, self._tag)
        self._remote_states: dict[str, State] = {}
        self._remote_names: dict[
            str, str
        ] = {}  # remote session -> the name our views last showed  # remote session -> the state our views last showed
        self._unsubscribe = local.subscribe(self._on_local_event)
        link.session_listeners.append(self._on_remote_session)
        link.node_listeners.append(self._on_node)

    @property
    def local(self) -> Engine:
        """This node's own engine (``EngineAPI.local``)."""
        return self._local

    @property
    def reports(self) -> ReportDesk:
        """Only this node's sessions report here (their hooks talk to their own node)."""
        return self.local.reports

    # -- lifecycle -------------------------------------------------------------------------
    async def prepare(self) -> None:
        """Join the cluster (before the server listens); StartupRefused says why it cannot."""
        try:
            await self.link.start()
        except ClusterError as exc:
            raise StartupRefused(str(exc)) from None

    async def start(self) -> None:
        await self.local.start()
        if not self.link.started:
            await self.prepare()
        for info in self.local.infos():
            self.link.publish(info.id, self._wire(info))

    async def stop(self) -> None:
        self.serving.stop()
        await self.link.stop()
        self._unsubscribe()
        await self.local.stop()

    async def reachable_at(self, url: str | None = None, env: Mapping[str, str] | None = None) -> None:
        await self.local.reachable_at(url, env)

    # -- where a session lives ---------------------------------------------------------------
    def _tag(self, info: SessionInfo) -> SessionInfo:
        return info.model_copy(update={"node": self.node})

    def _wire(self, info: SessionInfo) -> dict[str, Any]:
        return self._tag(info).model_dump(mode="json")

    def _owner(self, sid: str) -> str | None:
        """None for a local session, else the owning node's name; UnknownSession if nowhere."""
        if sid in self.local:
            return None
        for peer in self.link.peers.values():
            if sid in peer.sessions:
                return peer.name
        raise UnknownSession(f"no session {sid!r} on any node")

    def _remote_info(self, node: str, info: dict[str, Any]) -> SessionInfo | None:
        """Another node's session as this node shows it; None for a record that is not a
        session's info (a node of another version, a damaged bucket), which is left out."""
        try:
            view = SessionInfo.model_validate({**info, "node": node})
        except ValidationError as exc:
            log.warning("left out session %r of node %s: not a session's info (%s)", info.get("id"), node, exc)
            return None
        if self.link.owner_alive(node):
            return view
        return view.model_copy(
            update={
                "state": State.unreachable,
                "source": Source.cluster,
                "rule": node,
                "why": f"node {node} is unreachable; last known state {info.get('state')}",
            }
        )

    async def _ask(self, node: str, op: str, args: dict[str, Any]) -> Any:
        try:
            return await self.link.request(node, op, args)
        except NodeUnreachable as exc:
            raise Unavailable(str(exc)) from None
        except RemoteError as exc:
            _raise_remote(exc)

    @staticmethod
    def _by(actor: Actor) -> dict[str, Any]:
        return actor.model_dump(mode="json")

    # -- read models -----------------------------------------------------------------------
    def _all(self) -> list[SessionInfo]:
        out = [self._tag(info) for info in self.local.infos()]
        for peer in self.link.peers.values():
            for _, info in peer.sessions.values():
                if (view := self._remote_info(peer.name, info)) is not None:
                    out.append(view)
        return out

    async def list(self) -> list[SessionInfo]:
        return self._all()

    async def count(self) -> int:
        return len(self._all())

    def _snapshot(self) -> Snapshot:
        return Snapshot(self._all())

    async def get(self, sid: str) -> SessionInfo:
        node = self._owner(sid)
        if node is None:
            return self._tag(self.local.info(sid))
        view = self._remote_info(node, self.link.peers[node].sessions[sid][1])
        if view is None:
            raise UnknownSession(f"session {sid!r} of node {node} cannot be read here")
        return view

    async def screen(self, sid: str, *, styles: bool = False) -> ScreenView:
        node = self._owner(sid)
        if node is None:
            return await self.local.screen(sid, styles=styles)
        return ScreenView.model_validate(await self._ask(node, "screen", {"sid": sid, "styles": styles}))

    async def prompt(self, sid: str) -> Prompt | None:
        node = self._owner(sid)
        if node is None:
            return await self.local.prompt(sid)
        found = await self._ask(node, "prompt", {"sid": sid})
        return None if found is None else Prompt.model_validate(found)

    async def explain(self, sid: str) -> Explanation:
        node = self._owner(sid)
        if node is None:
            return await self.local.explain(sid)
        return Explanation.model_validate(await self._ask(node, "explain", {"sid": sid}))

    async def conversation(self, sid: str) -> ConversationView:
        node = self._owner(sid)
        if node is None:
            return await self.local.conversation(sid)
        return ConversationView.model_validate(await self._ask(node, "conversation", {"sid": sid}))

    async def agents(self) -> AgentList:
        """This node's manifests (every node loads its own)."""
        return await self.local.agents()

    async def transcript(self, sid: str) -> tuple[Path, int] | None:
        """Recordings are served by the node that keeps them (None here for another node's)."""
        return await self.local.transcript(sid)

    async def stats(self) -> EngineStats:
        """This node's figures (each node serves its own ``/metrics``)."""
        return await self.local.stats()

    # -- actions ---------------------------------------------------------------------------
    async def create(self, spec: SessionSpec, *, actor: Actor, node: str | None = None) -> SessionInfo:
        if node in (None, "", self.node):
            return self._tag(await self.local.create(spec, actor=actor))
        if node not in self.link.peers:
            raise InvalidRequest(f"unknown node {node!r} (known: {', '.join(sorted(self.link.peers)) or 'none'})")
        args = {"spec": asdict(spec), "actor": self._by(actor)}
        return SessionInfo.model_validate(await self._ask(node, "create", args))

    async def delete(self, sid: str, *, actor: Actor, discard: bool = False) -> Deletion:
        node = self._owner(sid)
        if node is None:
            return await self.local.delete(sid, actor=actor, discard=discard)
        asked = {"sid": sid, "actor": self._by(actor), "discard": discard}
        return Deletion.model_validate(await self._ask(node, "delete", asked))

    async def changes(self, sid: str) -> Changes:
        node = self._owner(sid)
        if node is None:
            return await self.local.changes(sid)
        return Changes.model_validate(await self._ask(node, "changes", {"sid": sid}))

    async def resume(self, sid: str, *, actor: Actor) -> SessionInfo:
        node = self._owner(sid)
        if node is None:
            return self._tag(await self.local.resume(sid, actor=actor))
        return SessionInfo.model_validate(await self._ask(node, "resume", {"sid": sid, "actor": self._by(actor)}))

    async def resize(self, sid: str, rows: int, cols: int, *, actor: Actor) -> SessionInfo:
        node = self._owner(sid)
        if node is None:
            return self._tag(await self.local.resize(sid, rows, cols, actor=actor))
        args = {"sid": sid, "rows": rows, "cols": cols, "actor": self._by(actor)}
        return SessionInfo.model_validate(await self._ask(node, "resize", args))

    async def send(self, sid: str, text: str, *, actor: Actor, enter: bool = True) -> Sent:
        node = self._owner(sid)
        if node is None:
            return await self.local.send(sid, text, actor=actor, enter=enter)
        args = {"sid": sid, "text": text, "enter": enter, "actor": self._by(actor)}
        return Sent.model_validate(await self._ask(node, "send", args))

    async def answer(
        self,
        sid: str,
        *,
        actor: Actor,
        option: int | str | None = None,
        keys: str | None = None,
        request: str | None = None,
        prompt_id: str | None = None,
    ) -> AnswerResult:
        node = self._owner(sid)
        if node is None:
            return await self.local.answer(
                sid, actor=actor, option=option, keys=keys, request=request, prompt_id=prompt_id
            )
        # the prompt id is checked where the pane is, right before its owner writes
        args = {"sid": sid, "option": option, "keys": keys, "request": request, "prompt_id": prompt_id}
        return AnswerResult.model_validate(await self._ask(node, "answer", {**args, "actor": self._by(actor)}))

    async def rename(self, sid: str, name: str, *, actor: Actor) -> SessionInfo:
        node = self._owner(sid)
        if node is None:
            return self._tag(await self.local.rename(sid, name, actor=actor))
        args = {"sid": sid, "name": name, "actor": self._by(actor)}
        return SessionInfo.model_validate(await self._ask(node, "rename", args))

    async def cancel(self, sid: str, *, actor: Actor) -> Cancelled:
        """An ACP session's turn cancelled (session/cancel), wherever the session runs."""
        node = self._owner(sid)
        if node is None:
            return await self.local.cancel(sid, actor=actor)
        return Cancelled.model_validate(await self._ask(node, "cancel", {"sid": sid, "actor": self._by(actor)}))

    async def write_keys(self, sid: str, data: bytes, *, actor: Actor) -> None:
        node = self._owner(sid)
        if node is None:
            await self.local.write_keys(sid, data, actor=actor)
            return
        args = {"sid": sid, "data": base64.b64encode(data).decode(), "actor": self._by(actor)}
        await self._ask(node, "write_keys", args)

    # -- streams ---------------------------------------------------------------------------
    async def events(self, *, size: int = 1000, heartbeat: float | None = 15.0) -> EventStream:
        return self.hub.stream(self._snapshot, size=size, heartbeat=heartbeat)

    async def screens(self, sid: str, *, interval: float = 0.1, styles: bool = False) -> AsyncIterator[ScreenFrame]:
        node = self._owner(sid)
        if node is None:
            return await self.local.screens(sid, interval=interval, styles=styles)
        return self._frames(node, sid, {"interval": interval, "styles": styles})

    async def terminal(self, sid: str, *, actor: Actor) -> TerminalChannel:
        """A local session's terminal; another node's pane watched read-only from its frames."""
        node = self._owner(sid)
        if node is None:
            return await self.local.terminal(sid, actor=actor)
        return watch_terminal(self._frames(node, sid, {"interval": 0.1, "styles": True}))

    async def conversations(self, sid: str, *, interval: float = 0.1) -> AsyncIterator[ConversationView]:
        node = self._owner(sid)
        if node is None:
            return await self.local.conversations(sid, interval=interval)
        return self._views(node, sid)

    async def _frames(self, node: str, sid: str, args: dict[str, Any]) -> AsyncIterator[ScreenFrame]:
        async for item in self._remote_stream(node, "screen", sid, args):
            yield ScreenFrame.model_validate(item)

    async def _views(self, node: str, sid: str) -> AsyncIterator[ConversationView]:
        async for item in self._remote_stream(node, "conversation", sid, {}):
            yield ConversationView.model_validate(item)

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
        return await self.serving.respond(op, args)

    # -- events ----------------------------------------------------------------------------
    def _on_local_event(self, event: Event) -> None:
        if isinstance(event, Output):
            return
        if isinstance(event, Deleted):
            self.link.publish(event.session, None)
        elif isinstance(event, (Created, Renamed, StateChanged)):
            sid = event.session if isinstance(event, StateChanged) else event.session.id
            if sid in self.local:
                self.link.publish(sid, self._wire(self.local.info(sid)))
        if isinstance(event, Created):
            event = Created(self._tag(event.session), event.actor)
        elif isinstance(event, Renamed):
            event = Renamed(self._tag(event.session), event.actor)
        self.hub.publish(event)

    def _on_remote_session(self, node: str, sid: str, info: dict[str, Any] | None, revision: int) -> None:
        if info is None:
            self._remote_names.pop(sid, None)
            if self._remote_states.pop(sid, None) is not None:
                self.hub.publish(Deleted(sid))
            return
        view = self._remote_info(node, info)
        if view is None:
            return
        before = self._remote_states.get(sid)
        self._remote_states[sid] = view.state
        named = self._remote_names.get(sid)
        self._remote_names[sid] = view.name
        if before is None:
            self.hub.publish(Created(view))
            return
        if named is not None and named != view.name:
            self.hub.publish(Renamed(view))
        if before != view.state:
            self.hub.publish(self._changed(view, before))

    @staticmethod
    def _changed(view: SessionInfo, before: State | None) -> StateChanged:
        return StateChanged(
            view.id,
            view.state,
            before,
            view.source,
            view.rule,
            view.why,
            view.since or time.time(),
            exit_code=view.exit_code,
            error=view.error,
            request=view.request,
        )

    def _on_node(self, node: str, alive: bool) -> None:
        """A node went quiet or came back: each of its sessions changes state in every view."""
        peer = self.link.peers.get(node)
        if peer is None:
            return
        for sid, (_, info) in list(peer.sessions.items()):
            view = self._remote_info(node, info)
            if view is None:
                continue
            before = self._remote_states.get(sid)
            self._remote_states[sid] = view.state
            if before != view.state:
                self.hub.publish(self._changed(view, before))
