"""Dashboards for the real-traffic replay: WebSocket clients watching screens, in a process of
their own (so that the server's CPU is the server's).

Why: a user with the dashboard open watches several agents' screens at once, each over the
screen WebSocket the page uses (``/ws/sessions/{id}/screen``); many of them against a server
carrying hundreds of real-traffic panes is the load the frames must keep up under. Dashboard
``d`` watches sessions ``d*watch .. d*watch+watch-1`` (wrapping), one socket per screen, as
the page opens them.

Each frame of the benchmark's server carries ``bench_t``: when the newest output it shows
reached the server (``time.monotonic``, one clock for every process of the machine), so
arrival − ``bench_t`` is how old the newest output on a watcher's screen is when it arrives. Prints one JSON object: every (arrival, delay) pair, frames and this process's CPU::

    python -m panewatch_lab.bench_dashboards --port 8123 --token T --sessions a b c --until 12345.6
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from typing import Any


async def watch(url: str, until: float, out: list[tuple[float, float]], counts: dict[str, int]) -> None:
    """One screen socket until ``until``: note each frame's delay."""
    from websockets.asyncio.client import connect

    async with connect(url, max_size=None, ping_interval=None, open_timeout=30) as ws:
        counts["open"] += 1
        while (left := until - time.monotonic()) > 0:
            try:
                message = await asyncio.wait_for(ws.recv(), timeout=left)
            except TimeoutError:
                break
            now = time.monotonic()
            frame = json.loads(message)
            counts["frames"] += 1
            stamp = frame.get("bench_t")
            if stamp is not None:
                out.append((now, now - stamp))


async def run(a: argparse.Namespace) -> dict[str, Any]:
    cpu0 = time.process_time()
    delays: list[tuple[float, float]] = []
    counts = {"open": 0, "frames": 0}
    tasks = []
    for d in range(a.dashboards):
        for j in range(a.watch):
            sid = a.sessions[(d * a.watch + j) % len(a.sessions)]
            url = f"ws://127.0.0.1:{a.port}/ws/sessions/{sid}/screen?token={a.token}"
            tasks.append(asyncio.ensure_future(watch(url, a.until, delays, counts)))
    results = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    return {
        "sockets": len(tasks),
        "opened": counts["open"],
        "frames": counts["frames"],
        "delays": delays,
        "errors": errors[:5],
        "client_cpu_s": time.process_time() - cpu0,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m panewatch_lab.bench_dashboards")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--sessions", nargs="+", required=True)
    p.add_argument("--dashboards", type=int, default=20)
    p.add_argument("--watch", type=int, default=10, help="screens per dashboard")
    p.add_argument("--until", type=float, required=True, help="time.monotonic() to stop at")
    a = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        print(json.dumps(asyncio.run(run(a))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
