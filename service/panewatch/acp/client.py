"""The ACP client side of one session: the agent's process, the handshake, prompt turns,
permission requests, and the exact state they give.

States come from the protocol and nothing else:

- ``working`` from the launch until ``session/new`` answers, and from ``session/prompt`` until
  its response;
- ``blocked`` exactly while a ``session/request_permission`` is pending (the tool call's title,
  kind and the options are the prompt);
- ``idle`` once the session is ready, and after a turn's ``stopReason`` (said in ``why``);
- ``exited`` when the process ends, with its exit code and the tail of its stderr.

Every ``why`` starts with the protocol message that decided it (``session/prompt``,
``session/request_permission: …``, ``stopReason end_turn``), so events can name it.

Whatever the agent gets wrong (lines that are not JSON, JSON that is not JSON-RPC, a request
for something this client does not offer, a permission with nothing to choose) is answered
per the protocol when it can be, noted in the conversation and kept as ``error``; an agent
that never finishes the handshake is ended after a timeout. Nothing an agent sends raises
into the server, and no turn stays ``working`` because of it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ..states import State
from . import protocol as p
from ._types import (
    AUTH_REQUIRED,
    DEFAULT_TIMEOUTS,
    EOF_GRACE,
    MAX_FAULTS,
    AcpError,
    Busy,
    Child,
    ChildFactory,
    Gone,
    Listener,
    NotOffered,
    Phase,
    Timeouts,
    Withdrawn,
    panewatch_version,
    short_error,
    tool_detail,
)
from .conversation import Conversation, PendingPermission
from .files import FileAccess
from .jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, Fault, MalformedResponse, Peer, PeerGone, RpcError
from .stdio import StdioChild, StdioWriteRefused

__all__ = ["AcpClient", "AcpError", "Busy", "Gone", "Listener", "NotOffered", "Timeouts", "Withdrawn"]

log = logging.getLogger("panewatch.acp")


class AcpClient:
    """One ACP session over one agent process. Every method runs on the event loop."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str] | None,
        listener: Listener,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        child_factory: ChildFactory = StdioChild,
    ) -> None:
        self.argv = list(argv)
        self.cwd = os.path.realpath(cwd)
        self.listener = listener
        self.timeouts = timeouts
        self.conversation = Conversation()
        self.files = FileAccess(self.cwd)
        self.phase = Phase.starting
        self.state, self.why = State.working, "initialize: starting the agent"
        self.session_id: str | None = None
        self.agent_info: p.AgentInfo | None = None
        self.error: str | None = None  # the last fault or failure, for the session's info
        self.exit_code: int | None = None
        self.stop_reason: str | None = None
        self.turns = 0
        self.faults: collections.Counter[str] = collections.Counter()
        self.noise: collections.deque[str] = collections.deque(maxlen=20)  # non-JSON stdout lines
        self._fatal: str | None = None  # why the client ended the agent
        self._turn: asyncio.Task[None] | None = None
        self._answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._rpc_ids: dict[str, Any] = {}  # permission key -> the agent's JSON-RPC id
        self._asked = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self.peer = Peer(
            self._send, on_request=self._on_request, on_notification=self._on_notification, on_fault=self._on_fault
        )
        self.child: Child = child_factory(
            self.argv,
            cwd=self.cwd,
            env=env,
            on_stdout=self.peer.feed,
            on_stdout_eof=self._on_stdout_eof,
            on_exit=self._on_exit,
        )
        self._spawn(self._handshake())

    # -- plumbing ------------------------------------------------------------------------
    def _send(self, data: bytes) -> None:
        try:
            self.child.write(data)
        except StdioWriteRefused as exc:
            raise PeerGone(str(exc)) from None

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _set(self, state: State, why: str, event: str) -> None:
        self.state, self.why = state, why
        self.listener.on_state(state, why, event)

    def _note(self, text: str) -> None:
        self.conversation.note(text)
        self.listener.on_change()

    def _fail(self, reason: str) -> None:
        """End the agent for ``reason``; its exit then reports ``exited`` with it."""
        if self._fatal is None:
            self._fatal = reason
            self.error = reason
            log.warning("ending the ACP agent: %s", reason)
            self._note(reason)
        self._spawn(self.child.terminate())

    @property
    def pid(self) -> int | None:
        return self.child.pid

    @property
    def alive(self) -> bool:
        return self.phase != Phase.exited

    # -- handshake -----------------------------------------------------------------------
    async def _handshake(self) -> None:
        step = "initialize"
        try:
            raw = await self.peer.request(
                "initialize",
                {
                    "protocolVersion": p.PROTOCOL_VERSION,
                    "clientCapabilities": p.client_capabilities(),
                    "clientInfo": {"name": "panewatch", "title": "Panewatch", "version": panewatch_version()},
                },
                timeout=self.timeouts.initialize,
            )
            init = p.InitializeResponse.model_validate(raw)
            if init.protocol_version != p.PROTOCOL_VERSION:
                self._fail(
                    f"the agent speaks ACP version {init.protocol_version}; this client speaks {p.PROTOCOL_VERSION}"
                )
                return
            self.agent_info = init.agent_info
            step = "session/new"
            raw = await self.peer.request(
                "session/new", {"cwd": self.cwd, "mcpServers": []}, timeout=self.timeouts.new_session
            )
            self.session_id = p.NewSessionResponse.model_validate(raw).session_id
        except TimeoutError:
            limit = self.timeouts.initialize if step == "initialize" else self.timeouts.new_session
            self._fail(f"the agent did not answer {step} within {limit:g} s")
            return
        except PeerGone:
            return  # the exit says why
        except RpcError as exc:
            if exc.code == AUTH_REQUIRED:
                self._fail(f"the agent needs authentication before {step}: {exc.message}")
            else:
                self._fail(f"{step} failed: {exc.message} ({exc.code})")
            return
        except (MalformedResponse, ValidationError) as exc:
            self._fail(f"malformed answer to {step}: {short_error(exc)}")
            return
        if self.phase == Phase.exited:
            return
        self.phase = Phase.ready
        who = self.agent_info.title or self.agent_info.name if self.agent_info else "agent"
        version = f" {self.agent_info.version}" if self.agent_info and self.agent_info.version else ""
        self._note(f"connected to {who}{version}")
        self._set(State.idle, f"session/new: ready, {who}{version}", "session/new")

    # -- turns ---------------------------------------------------------------------------
    def prompt(self, text: str) -> None:
        """Start a turn with ``text`` (``session/prompt``); refused unless the agent is idle."""
        self._check_alive()
        if self.phase == Phase.starting:
            raise Busy("the agent is still starting (initialize / session/new)")
        if self.conversation.permissions:
            raise Busy("a permission request is pending; answer it (or cancel the turn) first")
        if self._turn is not None:
            raise Busy("a turn is running; wait for it to end or cancel it")
        # sent here, not in the task: a cancel right after must reach the agent after the prompt
        try:
            reply = self.peer.call(
                "session/prompt", {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
            )
        except PeerGone as exc:
            raise Gone(f"the agent is not reading its input: {exc}") from None
        self.conversation.user(text)
        self.phase = Phase.turn
        self.turns += 1
        self.stop_reason = None
        self._set(State.working, "session/prompt", "session/prompt")
        self.listener.on_change()
        self._turn = self._spawn(self._run_turn(reply))

    async def _run_turn(self, reply: asyncio.Future[Any]) -> None:
        me = asyncio.current_task()
        why: str
        event = "session/prompt"
        try:
            raw = await reply
            stop = p.PromptResponse.model_validate(raw).stop_reason
            self.stop_reason = stop
            why, event = f"stopReason {stop}", "stopReason"
        except PeerGone:
            return
        except RpcError as exc:
            why = f"session/prompt failed: {exc.message} ({exc.code})"
            self.error = why
        except (MalformedResponse, ValidationError) as exc:
            why = f"session/prompt: malformed answer: {short_error(exc)}"
            self.error = why
        if self._turn is not me or self.phase == Phase.exited:
            return  # the client already ended this turn (cancel timeout) or the agent is gone
        self._end_turn(why, event)

    def _end_turn(self, why: str, event: str) -> None:
        self._turn = None
        self._withdraw_all("withdrawn: the turn ended")
        self.phase = Phase.ready
        self._note(why)
        self._set(State.idle, why, event)

    def cancel(self) -> None:
        """Cancel the running turn (``session/cancel``); pending permissions are answered
        ``cancelled`` as the protocol requires. The turn ends when the agent says so."""
        self._check_alive()
        turn = self._turn
        if turn is None:
            raise Busy("no turn is running; nothing to cancel")
        try:
            self.peer.notify("session/cancel", {"sessionId": self.session_id})
        except PeerGone as exc:
            raise Gone(f"the agent is not reading its input: {exc}") from None
        for perm in list(self.conversation.permissions):
            self._conclude(perm.key, p.CANCELLED, "cancelled")
        self._set(State.working, "session/cancel: sent; waiting for the agent to end the turn", "session/cancel")
        self.listener.on_change()

        async def deadline() -> None:
            await asyncio.sleep(self.timeouts.cancel)
            if self._turn is turn and self.phase == Phase.turn:
                self.error = f"the agent did not end the turn within {self.timeouts.cancel:g} s of session/cancel"
                self._end_turn(f"session/cancel: turn ended by the client: {self.error}", "session/cancel")

        self._spawn(deadline())

    # -- permissions ---------------------------------------------------------------------
    def _ask(self, params: Any, rid: Any) -> Any:
        try:
            req = p.RequestPermission.model_validate(params)
        except ValidationError as exc:
            self._protocol_error(f"a malformed session/request_permission: {short_error(exc)}")
            raise RpcError(INVALID_PARAMS, f"invalid session/request_permission: {short_error(exc)}") from None
        if req.session_id != self.session_id:
            self._protocol_error(f"a permission request for unknown session {req.session_id!r}")
            raise RpcError(INVALID_PARAMS, f"unknown session {req.session_id!r}")
        title = req.tool_call.title or self._tool_title(req.tool_call.tool_call_id)
        if not req.options:
            self._protocol_error(f"a permission request with no options to choose from ({title})")
            raise RpcError(INVALID_PARAMS, "a permission request needs at least one option")
        self._asked += 1
        key = f"p{self._asked}"
        detail = tool_detail(req.tool_call)
        perm = PendingPermission(
            key,
            req.tool_call.tool_call_id,
            title,
            req.tool_call.kind or "other",
            [{"option_id": o.option_id, "name": o.name, "kind": o.kind} for o in req.options],
            detail,
        )
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[key] = fut
        self._rpc_ids[key] = rid
        self.conversation.update(
            {"sessionUpdate": "tool_call_update", **req.tool_call.model_dump(by_alias=True, exclude_none=True)}
        )
        self.conversation.ask(perm)
        self._set(State.blocked, f"session/request_permission: {perm.summary()}", "session/request_permission")
        self.listener.on_change()
        return self._wait_answer(key, fut)

    async def _wait_answer(self, key: str, fut: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        try:
            return await fut
        finally:
            self._answers.pop(key, None)
            self._rpc_ids.pop(key, None)

    def _tool_title(self, tool_call_id: str) -> str:
        for e in reversed(self.conversation.entries):
            if e.tool_call_id == tool_call_id and e.title:
                return e.title
        return "a tool call"

    def pending(self) -> PendingPermission | None:
        perms = self.conversation.permissions
        return perms[0] if perms else None

    def answer(self, option_id: str, request: str | None = None) -> tuple[PendingPermission, dict[str, str]]:
        """Pick ``option_id`` for the pending permission (``request``: the one the user saw;
        default the oldest). ``Withdrawn`` when it is no longer pending."""
        if self.phase == Phase.exited:
            raise Withdrawn("the agent has exited; its permission requests are withdrawn")
        perms = self.conversation.permissions
        if not perms:
            raise Withdrawn("no permission request is pending (answered, cancelled or withdrawn)")
        perm = perms[0] if request is None else next((q for q in perms if q.key == request), None)
        if perm is None:
            raise Withdrawn(f"permission request {request!r} is no longer pending")
        option = next((o for o in perm.options if o["option_id"] == option_id), None)
        if option is None:
            offered = ", ".join(o["option_id"] for o in perm.options)
            raise NotOffered(f"option {option_id!r} was not offered (offered: {offered})")
        self._conclude(perm.key, p.selected(option_id), f"answered {option['name']} [{option_id}]")
        if not self.conversation.permissions:
            how = f"session/request_permission: answered {option['name']} [{option_id}]"
            self._set(State.working, how, "session/request_permission")
        self.listener.on_change()
        return perm, option

    def _conclude(self, key: str, outcome: dict[str, Any], how: str) -> None:
        fut = self._answers.get(key)
        if fut is not None and not fut.done():
            fut.set_result(outcome)
        self.conversation.resolve(key, how)

    def _withdraw_all(self, how: str) -> None:
        for perm in list(self.conversation.permissions):
            self._conclude(perm.key, p.CANCELLED, how)

    # -- what the agent sends ------------------------------------------------------------
    def _on_request(self, method: str, params: Any, rid: Any) -> Any:
        if method == "session/request_permission":
            return self._ask(params, rid)
        if method == "fs/read_text_file":
            req = self._valid(p.ReadTextFile, params, method)
            return self._read_file(req)
        if method == "fs/write_text_file":
            req = self._valid(p.WriteTextFile, params, method)
            return self._write_file(req)
        if method.startswith("terminal/"):
            self._note(f"refused {method}: this client does not offer terminals")
            raise RpcError(METHOD_NOT_FOUND, f"{method} is not offered: the client advertised terminal: false")
        self._note(f"refused {method}: not a method this client offers")
        raise RpcError(METHOD_NOT_FOUND, f"method not found: {method}")

    def _valid(self, model: type[Any], params: Any, method: str) -> Any:
        try:
            req = model.model_validate(params)
        except ValidationError as exc:
            self._protocol_error(f"a malformed {method}: {short_error(exc)}")
            raise RpcError(INVALID_PARAMS, f"invalid {method}: {short_error(exc)}") from None
        if req.session_id != self.session_id:
            raise RpcError(INVALID_PARAMS, f"unknown session {req.session_id!r}")
        return req

    async def _read_file(self, req: p.ReadTextFile) -> dict[str, Any]:
        try:
            return {"content": await self.files.read(req.path, req.line, req.limit)}
        except RpcError as exc:
            self._note(f"refused fs/read_text_file: {exc.message}")
            raise

    async def _write_file(self, req: p.WriteTextFile) -> dict[str, Any]:
        try:
            await self.files.write(req.path, req.content)
        except RpcError as exc:
            self._note(f"refused fs/write_text_file: {exc.message}")
            raise
        return {}

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "session/update":
            try:
                note = p.SessionNotification.model_validate(params)
            except ValidationError as exc:
                self._protocol_error(f"a malformed session/update: {short_error(exc)}")
                return
            if note.session_id != self.session_id:
                return
            if self.conversation.update(note.update):
                self.listener.on_change()
        elif method == "$/cancel_request":
            rid = params.get("requestId") if isinstance(params, dict) else None
            for key, known in list(self._rpc_ids.items()):
                if known == rid:
                    self._conclude(key, p.CANCELLED, "withdrawn by the agent")
                    if not self.conversation.permissions and self.phase == Phase.turn:
                        withdrew = "$/cancel_request: the agent withdrew its permission request"
                        self._set(State.working, withdrew, "$/cancel_request")
                    self.listener.on_change()
        else:
            log.debug("ignored ACP notification %s", method)

    def _protocol_error(self, text: str) -> None:
        self.error = text
        self.faults["invalid"] += 1
        self._note(f"agent error: {text}")

    def _on_fault(self, fault: Fault) -> None:
        self.faults[fault.kind] += 1
        if fault.kind == "noise":
            self.noise.append(fault.sample)
            if self.faults["noise"] == 1:
                self._note(f"the agent writes lines that are not JSON-RPC to stdout (ignored): {fault.sample[:120]}")
            return
        self.error = f"{fault.detail}: {fault.sample[:120]}"
        self._note(f"agent error: {self.error}")
        if sum(n for kind, n in self.faults.items() if kind != "noise") > MAX_FAULTS and self._fatal is None:
            self._fail(f"more than {MAX_FAULTS} protocol faults: the agent is not speaking ACP")

    def _on_stdout_eof(self) -> None:
        """stdout closed: usually the agent is exiting (its exit then says how); one that
        lives on without its connection is ended after a moment."""
        self.peer.eof()

        async def linger() -> None:
            await asyncio.sleep(EOF_GRACE)
            if self.phase != Phase.exited and self._fatal is None:
                self._fail("the agent closed its stdout (the ACP connection) but kept running")

        self._spawn(linger())

    def _on_exit(self, code: int) -> None:
        self.exit_code = code
        self.phase = Phase.exited
        self.peer.eof()
        self._withdraw_all("withdrawn: the agent exited")
        turn, self._turn = self._turn, None
        if turn is not None and not turn.done():
            turn.cancel()
        tail = self.child.stderr_text(600).strip()
        last = tail.splitlines()[-1][:300] if tail else ""
        reason = self._fatal or (f"exit code {code}" + (f"; stderr: {last}" if last else ""))
        self.why = reason
        self.state = State.exited
        self._note(f"exited ({code}): {reason}" if self._fatal else f"exited: {reason}")
        self.listener.on_exit(code, reason)

    def _check_alive(self) -> None:
        if self.phase == Phase.exited:
            raise Gone("the agent has exited")

    # -- end -----------------------------------------------------------------------------
    async def terminate(self, grace: float = 2.0) -> int | None:
        code = await self.child.terminate(grace)
        for task in list(self._tasks):
            task.cancel()
        await self.peer.close()
        return code

    def close(self) -> None:
        self.child.close()

    def info(self) -> dict[str, Any]:
        return {
            "agent": self.agent_info.model_dump() if self.agent_info else None,
            "session_id": self.session_id,
            "phase": self.phase,
            "turns": self.turns,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "faults": dict(self.faults),
            "stdout_noise": list(self.noise)[-5:],
            "stderr_tail": self.child.stderr_text(2000),
        }
