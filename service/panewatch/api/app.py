"""The ASGI app: the engine from the settings, its lifespan, the routers, the error mapping."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from .. import __version__
from ..config import Settings
from ..engine import Engine
from ..manifest import ManifestStore
from ..wiring import build_engine
from . import errors, routes_report, routes_service, routes_sessions, routes_ws
from .routes_service import web_dir

__all__ = ["create_app", "web_dir"]


def create_app(settings: Settings | None = None, *, store: ManifestStore | None = None,
               engine: Engine | None = None) -> FastAPI:
    """The ASGI app. ``settings.token`` must be set (``serve`` generates one when absent)."""
    settings = settings or Settings()
    if not settings.token:
        raise ValueError("create_app needs settings.token")
    engine = engine or build_engine(settings, store=store)

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
    for module in (routes_service, routes_sessions, routes_report, routes_ws):
        app.include_router(module.router)
    return app
