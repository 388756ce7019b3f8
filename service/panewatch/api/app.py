"""The ASGI app: the engine from the settings, its lifespan, the door (``HttpGuard``), the report
socket, the routers, the error mapping."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from .. import __version__
from ..access.auth import Gate, Origins
from ..access.devices import Devices
from ..access.http_guard import HostAllowList, HttpGuard
from ..access.identity import resolve_token, state_dir
from ..access.login import Logins
from ..access.report_socket import ReportSocket, socket_path
from ..access.users import Users
from ..config import Settings
from ..engine import EngineAPI, NodeEngine
from ..engine.events import Deleted
from ..errors import UnknownSession
from ..hosting import Hosting
from ..manifest import ManifestStore
from ..registry import Registry
from ..sinks.answer_figures import AnswerFigures
from ..sinks.ledger import Ledger
from ..sinks.push import Pusher, default_subject, load_or_create_vapid
from ..wiring import build_service_engine
from . import (
    errors,
    routes_acp,
    routes_devices,
    routes_ledger,
    routes_policy,
    routes_push,
    routes_report,
    routes_service,
    routes_sessions,
    routes_terminal,
    routes_users,
    routes_ws,
)
from .deps import refusal
from .routes_service import web_dir

__all__ = ["create_app", "web_dir"]

#: The routers, one per area.
ROUTED = (
    routes_service, routes_sessions, routes_acp, routes_report, routes_ws, routes_push, routes_devices, routes_ledger,
    routes_policy, routes_terminal, routes_users,
)  # fmt: skip


def _lifespan(
    engine: EngineAPI, report_socket: ReportSocket, pusher: Pusher
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the report socket (its path reaches agents), then the engine; stop in reverse
    (pushes under way are cancelled last: they are HTTP requests with their own timeouts)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await report_socket.start()
        env = {"PANEWATCH_REPORT_SOCKET": str(report_socket.path)}
        if report_socket.url:  # the same endpoint over loopback TCP (Claude's native http hooks)
            env["PANEWATCH_REPORT_URL"] = report_socket.url
        await engine.reachable_at(env=env)
        await engine.start()
        try:
            yield
        finally:
            try:
                await engine.stop()
            finally:
                await report_socket.close()
                await pusher.aclose()

    return lifespan


def _prompt_reader(engine: NodeEngine) -> Callable[[str], dict[str, Any] | None]:
    """``engine.prompt_now`` for the pusher, in one loop turn: None for a session that is gone."""

    def read(sid: str) -> dict[str, Any] | None:
        try:
            found = engine.prompt_now(sid)
        except UnknownSession:
            return None
        return None if found is None else found.model_dump(mode="json")

    return read


def _reach(settings: Settings, engine: NodeEngine, registry: Registry, private: Path) -> tuple[Devices, Pusher, Ledger]:
    """Paired devices, Web Push and the ledger, whose tables live in the registry file (0600 in
    the state folder); a revoked device's subscriptions go with it. Each node pushes its own
    sessions' prompts and keeps its own sessions' decisions: both listen to this node's engine
    (the ledger before it starts, so the sessions restored then are known by their agents)."""
    ledger = Ledger(registry.db, days=settings.ledger_days)
    engine.subscribe(ledger.on_event)
    devices = Devices(registry.db)
    pusher = Pusher(
        db=registry.db,
        vapid=load_or_create_vapid(private),
        subject=settings.push_subject or default_subject(settings.public_url),
        notifier=engine.notifier,
        prompt_of=_prompt_reader(engine),
        allow_loopback=settings.push_allow_loopback,
        ack_s=settings.push_ack_s,
        ttl_s=settings.push_ttl_s,
        kinds=tuple(settings.push_kinds),
        chain=tuple(settings.push_escalate),
    )
    devices.on_revoke.append(pusher.drop_device)
    return devices, pusher, ledger


def create_app(
    settings: Settings | None = None,
    *,
    store: ManifestStore | None = None,
    engine: EngineAPI | None = None,
    hosting: Hosting | None = None,
) -> FastAPI:
    """The ASGI app. ``settings.token`` (or ``token_file``) must be set (``serve`` sets one);
    ``hosting`` (from ``serve``) brings the chosen pane host, the state folder and the session registry."""
    settings = settings or Settings()
    if not settings.token and settings.token_file:
        settings, _ = resolve_token(settings)
    if not settings.token:
        raise ValueError("create_app needs settings.token")
    private = hosting.state_dir if hosting else state_dir(settings)
    if engine is None:
        engine = build_service_engine(
            settings,
            store=store,
            host=hosting.host if hosting else None,
            registry=hosting.registry if hosting else None,
            private=private,
        )
    logins = Logins(settings.token, settings.login_ttl_s, revoked_file=private / "revoked-logins.json")
    here = engine.local  # this node's own engine (a cluster's: the one it wraps)
    registry = hosting.registry if hosting else Registry.in_state_dir(private)
    devices, pusher, ledger = _reach(settings, here, registry, private)
    answers = AnswerFigures()  # who answers, how long agents wait: /metrics
    here.subscribe(answers.on_event)
    # hooks report here: the kernel names the calling process, its ancestry the pane
    desk = engine.reports
    report_socket = ReportSocket(socket_path(private), desk.agent_roots, routes_report.taker(desk), desk.launches)

    app = FastAPI(
        title="Panewatch",
        version=__version__,
        lifespan=_lifespan(engine, report_socket, pusher),
        description="Is this agent waiting for me? Sessions, screens, states and guarded writes.",
    )
    app.state.engine = engine
    app.state.policy = here.policy  # this node's approval policy (its kill switch)
    app.state.settings = settings
    app.state.report_socket = report_socket  # (its per-peer counts, for tests and debugging)
    app.state.devices = devices
    app.state.users = users = Users(registry.db)  # whose each device is, and its role
    here.subscribe(lambda event: users.forget(event.session) if isinstance(event, Deleted) else None)
    pusher.may_see = users.device_may_see  # a session restricted to other users is not pushed to them
    app.state.push = pusher
    app.state.ledger = ledger
    app.state.answers = answers
    app.state.gate = Gate(
        settings.token, logins, Origins(settings.allowed_origins, settings.public_url), devices, users
    )
    _route(app, settings)
    return app


def _route(app: FastAPI, settings: Settings) -> None:
    """The door, the error mapping and the routers."""
    errors.install(app)
    # Host, credentials, roles and body size are checked before routing (and before any body byte is read)
    app.add_middleware(
        HttpGuard,
        hosts=HostAllowList(settings.allowed_hosts, settings.public_url, settings.host),
        authorize=refusal,
        limit_for=lambda path: routes_report.REPORT_MAX_BYTES if path == "/report" else settings.max_body_bytes,
    )
    for module in ROUTED:
        app.include_router(module.router)
    # every route in the order the router tries them: the roles' one mapping is keyed by their paths
    app.state.routes = [route for module in ROUTED for route in module.router.routes]
