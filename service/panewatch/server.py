"""Running the service: uvicorn on the configured address, a login URL printed like Jupyter's."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import sys

import uvicorn
from fastapi import FastAPI

from .access.conn_guard import Door, guarded_protocol, limits, raise_file_limit
from .access.identity import TokenError, protect_process, resolve_token
from .api import create_app
from .config import Settings
from .errors import StartupRefused
from .hosting import StartupError, open_hosting
from .logs import setup_logging

log = logging.getLogger("panewatch")


#: The name the login URL gives a server on IPv4 loopback: browsers resolve every ``*.localhost``
#: to loopback by themselves, and as a site of its own it keeps the login cookie away from pages
#: other local programs serve on ``localhost`` or ``127.0.0.1`` (all ports of a host are one site).
LOOPBACK_NAME = "panewatch.localhost"


def login_url(host: str, port: int, token: str, scheme: str = "http") -> str:
    """The dashboard's address for a browser: ``panewatch.localhost`` wherever the server listens
    on 127.0.0.1 (a loopback or every-address bind), else the address it is bound to."""
    shown = LOOPBACK_NAME if host in ("0.0.0.0", "::", "", "127.0.0.1", "localhost") else host
    if ":" in shown:
        shown = f"[{shown}]"
    return f"{scheme}://{shown}:{port}/?token={token}"


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine ("" and 0.0.0.0 do not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def plain_http_refusal(settings: Settings) -> str | None:
    """Why ``serve`` will not start as configured, in one line: plain http on an address other
    than loopback puts the token, the login cookie and every answer on the network readable."""
    if settings.tls_cert is not None or settings.insecure_http or is_loopback(settings.host):
        return None
    return (
        f"refusing to serve plain http on {settings.host or 'every address'}: anyone on that network could read "
        "the token, the login cookie and every answer; give --tls-cert and --tls-key, or keep the loopback "
        "default behind a TLS tunnel (tailscale serve), or pass --insecure-http if you mean it"
    )


async def _listen(app: FastAPI, settings: Settings, files: int) -> tuple[asyncio.Future[None], int] | None:
    """Start uvicorn on ``app``: its serving task and the port it listens on; None when it was
    told to stop in the moment it started; SystemExit when it could not listen."""
    # a deadline for every request head, a cap on connections that have sent none (conn_guard)
    waiting, backlog = limits(files)
    door = Door(waiting, settings.header_timeout_s)
    # log_config=None: uvicorn keeps the handlers setup_logging gave its loggers (--log-json)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        ws_ping_interval=20,
        lifespan="on",
        access_log=False,
        http=guarded_protocol(door),
        backlog=backlog,
        # uvicorn's TLS: https on the port itself (a tunnel in front of loopback needs none)
        ssl_certfile=str(settings.tls_cert) if settings.tls_cert else None,
        ssl_keyfile=str(settings.tls_key) if settings.tls_key else None,
    )
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if task.done():
        await task
        raise SystemExit(f"panewatch: could not listen on {settings.host}:{settings.port}")
    sockets = [sock for listening in server.servers for sock in listening.sockets]
    if not sockets:
        await task
        return None
    return task, sockets[0].getsockname()[1]


async def run(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Serve until cancelled or signalled; ``settings.port`` 0 binds a free port."""
    before, files = raise_file_limit()  # first: every connection, pane and WebSocket is a descriptor
    if files != before:
        log.debug("open-file limit raised from %d to %d", before, files)
    if settings.token or settings.token_file:  # --token/--token-file win over the kept one
        try:
            settings, _ = resolve_token(settings)  # warns when agents can read the token
        except TokenError as exc:
            raise SystemExit(f"panewatch: {exc}") from None
    if not protect_process():
        log.warning("could not make the server non-dumpable: agents of this user can read its memory")
    # the host, the state folder, the registry and the kept token, before anything listens
    hosting = open_hosting(
        state_dir=settings.state_dir,
        pane_host=settings.pane_host,
        token=settings.token,
        settings=settings,
        agent_users=settings.agent_users,
    )
    if hosting.note:
        log.warning(hosting.note)
    generated = settings.token is None
    if generated:  # kept 0600 in the state folder: a restart does not log the dashboard out
        assert hosting.token is not None
        settings = settings.model_copy(update={"token": hosting.token})
    app = create_app(settings, hosting=hosting)
    # join the cluster before listening: a refusal (name clash, wrong credentials) is one
    # line and exit 2, never a half-joined node or a lifespan traceback
    await app.state.engine.prepare()
    listening = await _listen(app, settings, files)
    if listening is None:  # told to stop (a signal) in the moment it started: nothing to print
        return
    task, port = listening
    scheme = "https" if settings.tls_cert else "http"
    if not settings.public_url:
        await app.state.engine.reachable_at(url=f"{scheme}://127.0.0.1:{port}")
    url = login_url(settings.host, port, settings.token or "", scheme)
    print(f"Panewatch {app.version} serving on {scheme}://{settings.host}:{port}", flush=True)
    print(
        f"Open the dashboard: {url}"
        if generated
        else f"Open the dashboard: {login_url(settings.host, port, '<your token>', scheme)}",
        flush=True,
    )
    if ready is not None:
        ready.set()
    await task


def serve(settings: Settings) -> int:
    setup_logging(json_lines=settings.log_json)
    refused = plain_http_refusal(settings)
    if refused:
        print(f"panewatch: {refused}", file=sys.stderr, flush=True)
        return 2
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
