"""The ASGI app: the engine from the settings, its lifespan, the routers, the error mapping."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from .. import __version__
from ..config import Settings
from ..engine import Engine
from ..hosting import Hosting
from ..keeper import Keeper
from ..manifest import ManifestStore
from ..wiring import build_service_engine
from . import errors, routes_acp, routes_report, routes_service, routes_sessions, routes_ws
from .routes_service import web_dir

__all__ = ["create_app", "web_dir"]


def create_app(settings: Settings | None = None, *, store: ManifestStore | None = None,
               engine: Engine | None = None, hosting: Hosting | None = None) -> FastAPI:
    """The ASGI app. ``settings.token`` must be set (``serve`` generates one when absent);
    ``hosting`` (from ``serve``) brings the chosen pane host and the session registry."""
    settings = settings or Settings()
    if not settings.token:
        raise ValueError("create_app needs settings.token")
    if engine is None:  # (an Engine with no sessions is falsy: it has a length)
        engine = build_service_engine(settings, store=store, host=hosting.host if hosting else None,
                                      keeper=Keeper(hosting.registry) if hosting else None)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        try:
            yield
        finally:
            await engine.stop()

    app = FastAPI(title="Panewatch", version=__version__, lifespan=lifespan,
                  description="Is this agent waiting for me? Sessions, screens, states and guarded writes.")
    app.state.engine = engine
    app.state.settings = settings
    errors.install(app)
    for module in (routes_service, routes_sessions, routes_acp, routes_report, routes_ws):
        app.include_router(module.router)
    return app
