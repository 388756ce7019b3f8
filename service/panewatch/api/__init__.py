"""HTTP and WebSocket API: small routers over the engine's façade, errors mapped once.

The contract (paths, names) is what users, scripts and the dashboard build on; the README
documents each endpoint. Routers use only :class:`panewatch.engine.Engine`'s public methods.
"""

from .app import create_app, web_dir

__all__ = ["create_app", "web_dir"]
