"""HTTP and WebSocket API: sessions, screens, states, guarded writes and hook reports.

The contract (paths, names) is what users, scripts and the dashboard build on; the README
documents each endpoint. WebSocket senders never hold up the PTY readers: the runtime only
sets a flag when a screen changes, and each client's sender sends the latest screen when its
socket is ready, so a stuck browser costs nothing but its own frames.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import (FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response,
                               StreamingResponse)
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.websockets import WebSocketState

from . import __version__
from . import metrics
from . import terminal_ws
from . import transcript as transcripts
from .auth import COOKIE, origin_allowed, presented_token, token_matches
from .config import Settings
from .hooks import UnknownPayload
from .manifest import ManifestStore, bundled_manifest_dir
from .notify import Notifier
from .runtime import Conflict, NotFound, Runtime, SessionError
from .session import Session, SessionSpec

log = logging.getLogger("panewatch.api")

REPORT_MAX_BYTES = 64 * 1024


def web_dir() -> Path:
    """``web/`` shipped in the wheel, or the repository's."""
    here = Path(__file__).resolve().parent
    packaged = here / "web"
    return packaged if packaged.is_dir() else here.parent.parent / "web"


# --- request and response bodies ---------------------------------------------------------


class NewSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str | None = Field(None, description="manifest name; gives the launch command when `command` is absent")
    command: list[str] | None = Field(None, min_length=1, description="argv; wins over the agent's command")
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    rows: int = Field(32, ge=2, le=500)
    cols: int = Field(120, ge=10, le=1000)
    hooks: bool = Field(True, description="add Claude Code hooks reporting to /report")
    name: str | None = Field(None, max_length=80)

    @model_validator(mode="after")
    def _agent_or_command(self) -> NewSession:
        if not self.agent and not self.command:
            raise ValueError("give an agent, a command, or both")
        return self


class SendBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(max_length=100_000)
    enter: bool = Field(True, description="press Enter after the text")


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    option: int | None = Field(None, ge=1, le=99)
    keys: str | None = Field(None, min_length=1, max_length=1000)
    confirm: bool = Field(False, description="must be true: the user confirmed this answer")

    @model_validator(mode="after")
    def _one_of(self) -> AnswerBody:
        if (self.option is None) == (self.keys is None):
            raise ValueError("give exactly one of option or keys")
        if not self.confirm:
            raise ValueError("confirm must be true: answers are only sent once the user confirmed them")
        return self


class ResizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: int = Field(ge=2, le=500)
    cols: int = Field(ge=10, le=1000)


# --- helpers ------------------------------------------------------------------------------


def screen_view(session: Session) -> dict[str, Any]:
    cursor = session.screen.cursor
    return {
        "rows": session.screen.lines(),
        "cursor": {"row": cursor.row, "col": cursor.col, "hidden": cursor.hidden},
        "size": {"rows": session.screen.rows, "cols": session.screen.cols},
        "state": session.decision.state,
        "rule": session.decision.rule,
        "source": session.decision.source,
        "title": session.screen.title,
    }


def _conflict(exc: Conflict) -> JSONResponse:
    d = exc.decision
    return JSONResponse(status_code=409, content={
        "detail": str(exc), "state": d.state, "source": d.source, "rule": d.rule, "why": d.why})


def create_app(settings: Settings | None = None, *, store: ManifestStore | None = None,
               runtime: Runtime | None = None) -> FastAPI:
    """The ASGI app. ``settings.token`` must be set (``serve`` generates one when absent)."""
    settings = settings or Settings()
    if not settings.token:
        raise ValueError("create_app needs settings.token")
    token: str = settings.token
    store = store or ManifestStore.from_dirs(bundled_manifest_dir(), settings.manifests)
    notifier = Notifier(cooldown=settings.cooldown_s, webhook=settings.notify_webhook,
                        command=settings.notify_command)
    runtime = runtime or Runtime(
        store, sweep_ms=settings.sweep_ms, mode=settings.mode, settle_ms=settings.settle_ms,
        cap_ms=settings.cap_ms, change_bytes=settings.change_bytes, report_freshness=settings.report_freshness_s, notifier=notifier,
        service_url=settings.public_url or f"http://127.0.0.1:{settings.port}", backend=settings.backend,
        transcripts=settings.transcripts, transcript_max_bytes=settings.transcript_max_bytes,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPI(title="Panewatch", version=__version__, lifespan=lifespan,
                  description="Is this agent waiting for me? Sessions, screens, states and guarded writes.")
    app.state.runtime = runtime
    app.state.settings = settings
    app.state.store = store
    terminal_ws.install(app)  # /ws/sessions/{sid}/term, GET /api/sessions/{sid}/prompt

    def require_token(request: Request) -> None:
        presented = presented_token(request)
        if presented is None:
            raise HTTPException(401, "missing token: send Authorization: Bearer <token>",
                                headers={"WWW-Authenticate": "Bearer"})
        if not token_matches(presented, token):
            raise HTTPException(403, "wrong token")

    def session_or_404(sid: str) -> Session:
        try:
            return runtime.get(sid)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    auth = [Depends(require_token)]

    # -- health, page ----------------------------------------------------------------------
    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, Any]:
        return {"ok": True, "version": __version__, "sessions": len(runtime.sessions)}

    @app.get("/metrics", tags=["service"], response_class=Response,
             responses={200: {"content": {metrics.CONTENT_TYPE: {}}}})
    async def metrics_text(request: Request) -> Response:
        """Prometheus text format; needs the token unless ``metrics_public`` is set."""
        if not settings.metrics_public:
            require_token(request)
        return Response(metrics.exposition(runtime, __version__), media_type=metrics.CONTENT_TYPE)

    @app.get("/", include_in_schema=False)
    async def index(request: Request, token_q: str | None = Query(None, alias="token")) -> Response:
        if token_q is not None:
            if not token_matches(token_q, token):
                return HTMLResponse("<h1>Wrong token</h1><p>Open the login URL that "
                                    "<code>panewatch serve</code> printed.</p>", status_code=403)
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict", max_age=30 * 86400)
            return response
        presented = presented_token(request)
        if presented is None:
            return HTMLResponse("<h1>Log in</h1><p>Open the login URL that <code>panewatch serve</code> "
                                "printed (it ends in <code>?token=…</code>).</p>", status_code=401)
        if not token_matches(presented, token):
            response = HTMLResponse("<h1>Wrong token</h1>", status_code=403)
            response.delete_cookie(COOKIE)
            return response
        return FileResponse(web_dir() / "index.html", headers={"Cache-Control": "no-store"})

    @app.get("/static/{path:path}", include_in_schema=False)
    async def static(path: str) -> Response:
        root = web_dir().resolve()
        target = (root / path).resolve()
        if root not in target.parents or not target.is_file():
            raise HTTPException(404, "no such file")
        return FileResponse(target, headers={"Cache-Control": "no-cache"})

    # -- agents ----------------------------------------------------------------------------
    @app.get("/api/agents", dependencies=auth, tags=["agents"])
    async def agents() -> dict[str, Any]:
        out = []
        for name in store.agents():
            m = store.get(name)
            assert m is not None
            out.append({"agent": name, "version": m.manifest.version, "description": m.manifest.description,
                        "processes": m.manifest.processes, "command": m.manifest.command,
                        "hooks": m.manifest.hooks, "rules": [r.rule.name for r in m.rules]})
        return {"agents": out, "errors": [e.as_dict() for e in store.errors.values()]}

    # -- sessions --------------------------------------------------------------------------
    @app.post("/api/sessions", status_code=201, dependencies=auth, tags=["sessions"])
    async def create_session(body: NewSession) -> dict[str, Any]:
        spec = SessionSpec(agent=body.agent, command=body.command, cwd=body.cwd, env=body.env,
                           rows=body.rows, cols=body.cols, hooks=body.hooks, name=body.name)
        try:
            session = runtime.create(spec)
        except SessionError as exc:
            raise HTTPException(422, str(exc)) from None
        return session.info()

    @app.get("/api/sessions", dependencies=auth, tags=["sessions"])
    async def list_sessions() -> dict[str, Any]:
        return {"sessions": runtime.snapshot()}

    @app.get("/api/sessions/{sid}", dependencies=auth, tags=["sessions"])
    async def get_session(sid: str) -> dict[str, Any]:
        return session_or_404(sid).info()

    @app.delete("/api/sessions/{sid}", dependencies=auth, tags=["sessions"])
    async def delete_session(sid: str) -> dict[str, Any]:
        session_or_404(sid)
        session = await runtime.delete(sid)
        return {"deleted": sid, "exit_code": session.exit_code}

    @app.get("/api/sessions/{sid}/screen", dependencies=auth, tags=["screens"])
    async def get_screen(sid: str) -> dict[str, Any]:
        session = session_or_404(sid)
        runtime.classify(session)
        return screen_view(session)

    @app.get("/api/sessions/{sid}/explain", dependencies=auth, tags=["screens"])
    async def explain(sid: str) -> dict[str, Any]:
        session = session_or_404(sid)
        decision = runtime.classify(session)
        manifest = session.manifest(store)
        lines = session.screen.lines()
        traces = manifest.explain(lines, session.screen.title, session.screen.cursor.row) if manifest else []
        return {
            "agent": manifest.agent if manifest else None,
            "manifest_version": manifest.manifest.version if manifest else None,
            "screen_verdict": {"state": session.verdict.state, "rule": session.verdict.rule,
                               "why": session.verdict.why, "evidence": session.verdict.evidence},
            "decision": {"state": decision.state, "source": decision.source, "rule": decision.rule,
                         "why": decision.why},
            "signals": {
                "report": None if session.report is None else {
                    "state": session.report.state, "event": session.report.event,
                    "age_s": round(runtime.clock() - session.report.at, 3)},
                "foreground": session.fg.name if session.fg else None,
                "shell_back": session.shell_back(),
            },
            "rules": [{"name": t.name, "state": t.state, "region": t.region, "matched": t.matched,
                       "evidence": t.evidence, "reason": t.reason} for t in traces],
            "rows": lines,
        }

    @app.post("/api/sessions/{sid}/send", dependencies=auth, tags=["writes"],
              responses={409: {"description": "the pane is blocked now: answer it instead"}})
    async def send(sid: str, body: SendBody) -> Any:
        session_or_404(sid)
        try:
            decision = await runtime.send(sid, body.text, enter=body.enter)
        except Conflict as exc:
            log.info("send refused: %s", exc, extra={"session": sid})
            return _conflict(exc)
        return {"sent": True, "state_before": decision.state}

    @app.post("/api/sessions/{sid}/answer", dependencies=auth, tags=["writes"],
              responses={409: {"description": "the pane is not blocked now"}})
    async def answer(sid: str, body: AnswerBody) -> Any:
        session_or_404(sid)
        try:
            result = await runtime.answer(sid, option=body.option, keys=body.keys)
        except Conflict as exc:
            log.info("answer refused: %s", exc, extra={"session": sid})
            return _conflict(exc)
        return {"took": result.took, "state": result.state, "rule": result.rule, "waited_s": result.waited}

    @app.post("/api/sessions/{sid}/resize", dependencies=auth, tags=["sessions"])
    async def resize(sid: str, body: ResizeBody) -> dict[str, Any]:
        session_or_404(sid)
        session = runtime.resize(sid, body.rows, body.cols)
        return session.info()

    @app.get("/api/sessions/{sid}/transcript", dependencies=auth, tags=["sessions"], response_class=Response,
             responses={200: {"content": {transcripts.MEDIA_TYPE: {}}}, 404: {"description": "not recorded"}})
    async def transcript(sid: str) -> Response:
        """The session's asciicast v2 recording (also of a deleted session whose file is kept)."""
        live = runtime.sessions.get(sid)
        found = await transcripts.recorded(live.transcript if live else None, settings.transcripts, sid)
        if found is None:
            raise HTTPException(404, f"no recording of session {sid!r} (recordings: --transcripts DIR)")
        path, size = found
        return StreamingResponse(transcripts.file_chunks(path, size), media_type=transcripts.MEDIA_TYPE, headers={
            "Content-Length": str(size), "Content-Disposition": f'attachment; filename="{sid}.cast"'})

    # -- hook reports ----------------------------------------------------------------------
    @app.post("/report", status_code=202, tags=["hooks"])
    async def report(request: Request, session: str | None = Query(None)) -> dict[str, Any]:
        """A Claude Code hook payload, or ``{"state": ...}``, authorised by the session's own token."""
        presented = presented_token(request)
        if presented is None:
            raise HTTPException(401, "missing report token (Authorization: Bearer $PANEWATCH_REPORT_TOKEN)",
                                headers={"WWW-Authenticate": "Bearer"})
        sid = session or request.headers.get("x-panewatch-session")
        if not sid:
            raise HTTPException(422, "name the session: ?session=$PANEWATCH_SESSION")
        target = session_or_404(sid)
        if not token_matches(presented, target.report_token):
            raise HTTPException(403, "wrong report token for this session")
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > REPORT_MAX_BYTES:
            raise HTTPException(413, f"report larger than {REPORT_MAX_BYTES} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > REPORT_MAX_BYTES:
                raise HTTPException(413, f"report larger than {REPORT_MAX_BYTES} bytes")
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise HTTPException(422, "the body is not JSON") from None
        if not isinstance(payload, dict):
            raise HTTPException(422, "the body must be a JSON object")
        try:
            result = runtime.report(sid, payload)
        except UnknownPayload as exc:
            raise HTTPException(422, str(exc)) from None
        if result is None:
            return {"accepted": False, "reason": "event not used for state",
                    "event": payload.get("hook_event_name")}
        return {"accepted": True, "state": result.state, "event": result.event,
                "session_state": target.decision.state}

    # -- WebSockets ------------------------------------------------------------------------
    async def ws_admit(ws: WebSocket) -> bool:
        """Accept, then close at once with 4401/4403 if refused: a browser sees no reason for a
        rejected handshake, but it does see a close code, and the page needs it to stop retrying."""
        presented = presented_token(ws, allow_query=True)
        refusal = None
        if not origin_allowed(ws, settings.allowed_origins):
            refusal = (4403, "origin not allowed")
        elif presented is None:
            refusal = (4401, "missing token")
        elif not token_matches(presented, token):
            refusal = (4403, "wrong token")
        await ws.accept()
        if refusal:
            await ws.close(code=refusal[0], reason=refusal[1])
            return False
        return True

    @app.websocket("/ws/state")
    async def ws_state(ws: WebSocket) -> None:
        if not await ws_admit(ws):
            return
        sub = runtime.events.subscribe()

        async def sender() -> None:
            await ws.send_json({"type": "snapshot", "sessions": runtime.snapshot(), "at": time.time()})
            while True:
                if not sub.queue.empty():
                    # queued events go out back to back: wait_for costs loop turns per event,
                    # and under an output flood each turn is a feed slice (measured: bench)
                    event = sub.queue.get_nowait()
                else:
                    try:
                        event = await asyncio.wait_for(sub.get(), timeout=15.0)
                    except asyncio.TimeoutError:
                        event = {"type": "ping", "at": time.time()}
                if sub.overflowed:  # this client fell behind: start it over from a snapshot
                    sub.overflowed = False
                    event = {"type": "snapshot", "sessions": runtime.snapshot(), "at": time.time()}
                await ws.send_json(event)

        try:
            await _run_until_closed(ws, sender())
        finally:
            sub.close()

    @app.websocket("/ws/sessions/{sid}/screen")
    async def ws_screen(ws: WebSocket, sid: str) -> None:
        if not await ws_admit(ws):
            return
        session = runtime.sessions.get(sid)
        if session is None:
            await ws.close(code=4404, reason=f"no session {sid!r}")
            return
        with_styles = ws.query_params.get("styles") in ("1", "true")
        changed = asyncio.Event()
        interval = settings.screen_interval_ms / 1000
        session.watchers.add(changed.set)

        async def sender() -> None:
            last: list[str] | None = None
            last_styles: list[Any] | None = None
            last_meta: tuple[Any, ...] | None = None
            while True:
                view = screen_view(session)
                styles = session.screen.styles() if with_styles else None
                meta = (view["cursor"], view["state"], view["rule"], view["title"], view["size"])
                rows = view["rows"]
                if last is None or len(last) != len(rows):
                    frame = {"type": "screen", "full": True, **view}
                    if styles is not None:
                        frame["styles"] = styles
                    await ws.send_json(frame)
                else:
                    diff = {str(i): row for i, (old, row) in enumerate(zip(last, rows)) if old != row}
                    frame = {"type": "screen", "full": False, "changed": diff,
                             **{k: v for k, v in view.items() if k != "rows"}}
                    if styles is not None and last_styles is not None:
                        frame["changed_styles"] = {str(i): st for i, (old, st) in enumerate(zip(last_styles, styles))
                                                   if old != st or str(i) in diff}
                    if diff or meta != last_meta or frame.get("changed_styles"):
                        await ws.send_json(frame)
                last, last_styles, last_meta = rows, styles, meta
                await asyncio.sleep(interval)  # at most one frame per interval, always the latest
                await changed.wait()
                changed.clear()

        try:
            await _run_until_closed(ws, sender())
        finally:
            session.watchers.discard(changed.set)

    return app


async def _run_until_closed(ws: WebSocket, sender: Any) -> None:
    """Run ``sender`` until the client goes away (reading is how a close is noticed)."""

    async def receiver() -> None:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return

    send_task = asyncio.ensure_future(sender)
    recv_task = asyncio.ensure_future(receiver())
    try:
        done, pending = await asyncio.wait({send_task, recv_task}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for task in pending:
            with suppress(asyncio.CancelledError, Exception):
                await task
        for task in done:
            exc = task.exception()
            if exc and not isinstance(exc, (WebSocketDisconnect, RuntimeError, ConnectionError)):
                log.warning("websocket ended with %r", exc)
    finally:
        if ws.client_state == WebSocketState.CONNECTED:
            with suppress(Exception):
                await ws.close()
