"""Running the service: uvicorn on the configured address, a login URL printed like Jupyter's."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import uvicorn

from .api import create_app
from .config import Settings
from .hosting import StartupError, open_hosting
from .identity import TokenError, protect_process, resolve_token
from .logs import setup_logging
from .wiring import StartupRefused

log = logging.getLogger("panewatch")


def login_url(host: str, port: int, token: str) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/?token={token}"


async def run(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Serve until cancelled or signalled; ``settings.port`` 0 binds a free port."""
    if settings.token or settings.token_file:  # --token/--token-file win over the kept one
        try:
            settings, _ = resolve_token(settings)  # warns when agents can read the token
        except TokenError as exc:
            raise SystemExit(f"panewatch: {exc}") from None
    if not protect_process():
        log.warning("could not make the server non-dumpable: agents of this user can read its memory")
    # the host, the state folder, the registry and the kept token, before anything listens
    hosting = open_hosting(state_dir=settings.state_dir, pane_host=settings.pane_host, token=settings.token)
    if hosting.note:
        log.warning(hosting.note)
    generated = settings.token is None
    if generated:  # kept 0600 in the state folder: a restart does not log the dashboard out
        assert hosting.token is not None
        settings = settings.model_copy(update={"token": hosting.token})
    app = create_app(settings, hosting=hosting)
    # join the cluster before listening: a refusal (name clash, wrong credentials) is one
    # line and exit 2, never a half-joined node or a lifespan traceback
    join = getattr(app.state.engine, "join", None)
    if join is not None:
        await join()
    # log_config=None: uvicorn keeps the handlers setup_logging gave its loggers (--log-json)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        ws_ping_interval=20,
        lifespan="on",
        access_log=False,
    )
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if task.done():
        await task
        raise SystemExit(f"panewatch: could not listen on {settings.host}:{settings.port}")
    port = server.servers[0].sockets[0].getsockname()[1]
    if not settings.public_url:
        app.state.engine.service_url = f"http://127.0.0.1:{port}"
    url = login_url(settings.host, port, settings.token or "")
    print(f"Panewatch {app.version} serving on http://{settings.host}:{port}", flush=True)
    print(
        f"Open the dashboard: {url}"
        if generated
        else f"Open the dashboard: {login_url(settings.host, port, '<your token>')}",
        flush=True,
    )
    if ready is not None:
        ready.set()
    await task


def serve(settings: Settings) -> int:
    setup_logging(json_lines=settings.log_json)
    try:
        asyncio.run(run(settings))
    except KeyboardInterrupt:
        pass
    except (StartupError, StartupRefused) as exc:
        print(f"panewatch: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(serve(Settings()))
