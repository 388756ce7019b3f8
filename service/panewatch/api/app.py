"""The ASGI app: the engine from the settings, its lifespan, the door (``HttpGuard``), the report
socket, the routers, the error mapping."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from .. import __version__
from ..auth import Gate
from ..config import Settings
from ..engine import Engine
from ..hosting import Hosting
from ..http_guard import HostAllowList, HttpGuard
from ..identity import resolve_token, state_dir
from ..login import Logins
from ..manifest import ManifestStore
from ..report_socket import ReportSocket, socket_path
from ..wiring import build_service_engine
from . import errors, routes_acp, routes_report, routes_service, routes_sessions, routes_terminal, routes_ws
from .deps import refusal
from .routes_service import web_dir

__all__ = ["create_app", "web_dir"]


def _lifespan(engine: Engine, report_socket: ReportSocket) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the report socket (its path reaches agents), then the engine; stop in reverse."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await report_socket.start()
        engine.agent_vars["PANEWATCH_REPORT_SOCKET"] = str(report_socket.path)
        if report_socket.url:  # the same endpoint over loopback TCP (Claude's native http hooks)
            engine.agent_vars["PANEWATCH_REPORT_URL"] = report_socket.url
        await engine.start()
        try:
            yield
        finally:
            try:
                await engine.stop()
            finally:
                await report_socket.close()

    return lifespan


def create_app(
    settings: Settings | None = None,
    *,
    store: ManifestStore | None = None,
    engine: Engine | None = None,
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
    if engine is None:  # (an Engine with no sessions is falsy: it has a length)
        engine = build_service_engine(
            settings,
            store=store,
            host=hosting.host if hosting else None,
            registry=hosting.registry if hosting else None,
            private=private,
        )
    logins = Logins(settings.token, settings.login_ttl_s, revoked_file=private / "revoked-logins.json")
    # hooks report here: the kernel names the calling process, its ancestry the pane
    report_socket = ReportSocket(socket_path(private), engine.agent_roots, routes_report.taker(engine))

    app = FastAPI(
        title="Panewatch",
        version=__version__,
        lifespan=_lifespan(engine, report_socket),
        description="Is this agent waiting for me? Sessions, screens, states and guarded writes.",
    )
    app.state.engine = engine
    app.state.settings = settings
    app.state.gate = Gate(settings.token, logins)
    errors.install(app)
    # Host, credentials and body size are checked before routing (and before any body byte is read)
    app.add_middleware(
        HttpGuard,
        hosts=HostAllowList(settings.allowed_hosts, settings.public_url, settings.host),
        authorize=refusal,
        limit_for=lambda path: routes_report.REPORT_MAX_BYTES if path == "/report" else settings.max_body_bytes,
    )
    for module in (routes_service, routes_sessions, routes_acp, routes_report, routes_ws):
        app.include_router(module.router)
    routes_terminal.install(app)  # the dashboard's terminals: /ws/sessions/{id}/term
    return app
