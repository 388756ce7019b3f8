"""Serving the other nodes: their requests run on the local engine, with its usual guards and
the actor who asked; the screen and conversation streams they watch, while their lease holds.

The operations are the local engine's own ``EngineAPI`` methods, one table entry each, so a
request another node sends is exactly a call a local client could make.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from typing import Any

from pydantic import BaseModel

from ..engine import Actor, Engine, HostKind, SessionInfo, SessionSpec, WorktreeSpec
from ..errors import Conflict, InvalidRequest, PanewatchError, UnknownSession
from ..worktrees import WorktreeDirty
from .link import NodeLink, RemoteError

#: How long a remote screen or conversation stream lasts without its watcher renewing it.
LEASE_S = 6.0

Args = dict[str, Any]


def _sid(args: Args) -> str:
    return str(args.get("sid", ""))


def _actor(args: Args) -> Actor:
    return Actor.model_validate(args.get("actor"))


def _json(value: BaseModel | None) -> Any:
    return None if value is None else value.model_dump(mode="json")


class Serving:
    """Answers this node's share of the cluster's requests."""

    def __init__(self, local: Engine, link: NodeLink, tag: Callable[[SessionInfo], SessionInfo]) -> None:
        self.local, self.link, self._tag = local, link, tag
        self._streams: dict[str, tuple[asyncio.Task[Any], list[float]]] = {}  # watch id -> (task, [expiry])
        self._ops: dict[str, Callable[[Args], Awaitable[Any]]] = {
            "screen": self._screen,
            "explain": lambda a: self._model(self.local.explain(_sid(a))),
            "prompt": lambda a: self._model(self.local.prompt(_sid(a))),
            "conversation": lambda a: self._model(self.local.conversation(_sid(a))),
            "create": self._create,
            "delete": lambda a: self._model(
                self.local.delete(_sid(a), actor=_actor(a), discard=a.get("discard") is True)
            ),
            "changes": lambda a: self._model(self.local.changes(_sid(a))),
            "resume": lambda a: self._info(self.local.resume(_sid(a), actor=_actor(a))),
            "rename": lambda a: self._info(self.local.rename(_sid(a), str(a["name"]), actor=_actor(a))),
            "resize": self._resize,
            "send": self._send,
            "answer": self._answer,
            "cancel": lambda a: self._model(self.local.cancel(_sid(a), actor=_actor(a))),
            "write_keys": self._write_keys,
            "watch": self._watch,
        }

    async def respond(self, op: str, args: Args) -> Any:
        """One request from another node; a refusal goes back as the status a local call gets."""
        handler = self._ops.get(op)
        try:
            if handler is None:
                raise InvalidRequest(f"unknown cluster operation {op!r}")
            return await handler(args)
        except Conflict as exc:
            raise RemoteError(409, str(exc), {"decision": exc.decision.as_dict()}) from None
        except WorktreeDirty as exc:
            raise RemoteError(409, str(exc), {"files": exc.files}) from None
        except PanewatchError as exc:
            raise RemoteError(exc.status, str(exc)) from None

    def stop(self) -> None:
        for task, _ in self._streams.values():
            task.cancel()

    # -- the operations ------------------------------------------------------------------------
    @staticmethod
    async def _model(call: Awaitable[BaseModel | None]) -> Any:
        return _json(await call)

    async def _info(self, call: Awaitable[SessionInfo]) -> Any:
        return _json(self._tag(await call))

    async def _screen(self, args: Args) -> Any:
        return _json(await self.local.screen(_sid(args), styles=bool(args.get("styles"))))

    async def _create(self, args: Args) -> Any:
        spec = dict(args["spec"])
        spec["host"] = HostKind(spec["host"]) if spec.get("host") else None
        spec["worktree"] = WorktreeSpec(**spec["worktree"]) if spec.get("worktree") else None
        return await self._info(self.local.create(SessionSpec(**spec), actor=_actor(args)))

    async def _resize(self, args: Args) -> Any:
        rows, cols = int(args["rows"]), int(args["cols"])
        return await self._info(self.local.resize(_sid(args), rows, cols, actor=_actor(args)))

    async def _send(self, args: Args) -> Any:
        text, enter = str(args["text"]), bool(args.get("enter", True))
        return _json(await self.local.send(_sid(args), text, actor=_actor(args), enter=enter))

    async def _answer(self, args: Args) -> Any:
        result = await self.local.answer(
            _sid(args),
            actor=_actor(args),
            option=args.get("option"),
            keys=args.get("keys"),
            request=args.get("request"),
            prompt_id=args.get("prompt_id"),
        )
        return {**result.model_dump(mode="json"), "keys": result.keys}

    async def _write_keys(self, args: Args) -> Any:
        await self.local.write_keys(_sid(args), base64.b64decode(str(args["data"])), actor=_actor(args))
        return {"written": True}

    # -- streams ---------------------------------------------------------------------------------
    async def _watch(self, args: Args) -> Any:
        watch = str(args["watch"])
        known = self._streams.get(watch)
        if known is not None:
            known[1][0] = time.monotonic() + LEASE_S
            return {"watching": watch}
        sid, kind, extra = _sid(args), str(args["kind"]), args.get("args") or {}
        source: AsyncIterator[BaseModel]
        if kind == "screen":
            interval, styles = float(extra.get("interval", 0.1)), bool(extra.get("styles"))
            source = await self.local.screens(sid, interval=interval, styles=styles)
        elif kind == "conversation":
            source = await self.local.conversations(sid)
        else:
            raise InvalidRequest(f"unknown stream {kind!r} (screen or conversation)")
        expiry = [time.monotonic() + LEASE_S]
        task = asyncio.get_running_loop().create_task(self._pump(watch, str(args["subject"]), source, expiry))
        self._streams[watch] = (task, expiry)
        return {"watching": watch}

    async def _pump(self, watch: str, subject: str, source: AsyncIterator[BaseModel], expiry: list[float]) -> None:
        """Publish a stream's items while its lease holds; a watcher that went away costs nothing.
        The stream is iterated by a task of its own and only cancelled when the lease ends: a
        time-out around each item would cancel the generator in the middle of its first frame."""

        async def forward() -> None:
            async for item in source:
                await self.link.publish_raw(subject, item.model_dump(mode="json"))

        task = asyncio.ensure_future(forward())
        try:
            while not task.done() and time.monotonic() < expiry[0]:
                await asyncio.wait({task}, timeout=max(0.05, min(1.0, expiry[0] - time.monotonic())))
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError, UnknownSession):
                await task
            self._streams.pop(watch, None)
