"""The service as ``panewatch serve`` runs it, plus a probe route the benchmark reads.

The scale and flood scenarios need figures only the server process has: how long each
sweep took, how late a 10 ms timer fires on its event loop, how many bytes were emulated,
how large the biggest backlog is. The product has no such route (``/metrics`` belongs to
ops), so the benchmark runs this module instead of ``serve``: the same app from
``create_app`` on the same uvicorn settings, in a process of its own so that its CPU
time can be read from ``/proc/<pid>/stat`` without counting the benchmark's clients.

    python -m panewatch_lab.bench_probe --port 8800 --token T --mode change --backend ghostty
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import uvicorn

from panewatch.access.identity import state_dir
from panewatch.api import create_app
from panewatch.config import Settings
from panewatch.engine import Engine
from panewatch.engine.events import Event, Output
from panewatch.wiring import build_engine

LAG_PERIOD_S = 0.010


class Probe:
    """Figures gathered since the last reset."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.max_pending = 0
        self.sweeps_at_reset = 0

    async def sample_lag(self) -> None:
        """Schedule a 10 ms sleep over and over and keep how late each wake-up is."""
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(LAG_PERIOD_S)
            self.lags.append(max(0.0, loop.time() - start - LAG_PERIOD_S))
            if len(self.lags) > 100_000:
                del self.lags[:50_000]

    def watch_backlog(self, engine: Engine) -> None:
        """Note the largest backlog (bytes read, not yet emulated) right after every read, where
        it peaks: sampled from a timer it is always seen after the feed has drained it."""

        def on_event(event: Event) -> None:
            if isinstance(event, Output):
                self.max_pending = max(self.max_pending, engine.backlog(event.session))

        engine.subscribe(on_event)


def build_app(settings: Settings, probe: Probe) -> tuple[Any, Engine]:
    engine = build_engine(settings, private=state_dir(settings))  # as create_app builds it
    app = create_app(settings, engine=engine)

    @app.get("/bench/probe", include_in_schema=False)
    async def read_probe(reset: bool = False) -> dict[str, Any]:
        stats = await engine.stats()
        since_reset = stats.sweeps - probe.sweeps_at_reset
        sweep_seconds = stats.sweep_seconds[-since_reset:] if since_reset > 0 else []
        out = {
            "sweeps": stats.sweeps,
            "sweep_seconds": sweep_seconds,
            "lags": list(probe.lags),
            "emulated_bytes": stats.bytes_emulated,
            "classifications": stats.classifications,
            "sessions": stats.sessions,
            "max_pending": max(probe.max_pending, stats.backlog),
            "bytes_read": stats.bytes_read_by_session,
        }
        if reset:
            probe.sweeps_at_reset = stats.sweeps
            probe.lags.clear()
            probe.max_pending = 0
        return out

    return app, engine


async def run(settings: Settings) -> None:
    probe = Probe()
    app, engine = build_app(settings, probe)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        ws_ping_interval=20,
        lifespan="on",
        access_log=False,
    )
    server = uvicorn.Server(config)
    probe.watch_backlog(engine)
    lag_task = asyncio.ensure_future(probe.sample_lag())
    try:
        await server.serve()
    finally:
        lag_task.cancel()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m panewatch_lab.bench_probe")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--mode", choices=["sweep", "change"], default="sweep")
    p.add_argument("--sweep-ms", type=int, default=700)
    p.add_argument("--settle-ms", type=int, default=40)
    p.add_argument("--cap-ms", type=int, default=150)
    p.add_argument("--backend", default="pyte")
    a = p.parse_args(argv)
    settings = Settings(
        host="127.0.0.1",
        port=a.port,
        token=a.token,
        mode=a.mode,
        sweep_ms=a.sweep_ms,
        settle_ms=a.settle_ms,
        cap_ms=a.cap_ms,
        backend=a.backend,
    )
    try:
        asyncio.run(run(settings))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
