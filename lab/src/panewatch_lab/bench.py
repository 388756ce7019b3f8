"""``panewatch bench``: detection latency, many agents, output floods, emulator throughput.

Every figure is measured in one run on this machine and printed beside its baseline from
the same run (sweep vs change, with vs without a flood, pyte vs Ghostty), because on a
shared VM only ratios are stable. Nothing here is a pass/fail test: the tests only check
that the benchmark runs and prints every figure.

The server under test is always a separate process, so its CPU time is read from
``/proc/<pid>/stat`` without counting the agents or this client:

1. latency — ``python -m panewatch serve`` in sweep mode, then in change mode; the lab's fake
   agents (``fake_agent --auto``) note the wall time at which they finished drawing each screen,
   and a WebSocket client on ``/ws/state`` notes when the matching state event arrives;
2. scale — N fake agents that only spin (10 Hz, ~70 B frames); server CPU, RSS per session, sweep
   duration and event-loop lag (``bench_probe``: the same app plus a probe route);
3. flood — ``yes`` in one pane while M agents change state: their delay with and without
   the flood, ``GET /api/sessions`` latency, bytes emulated per second;
4. throughput — MB/s of each emulator on synthetic agent output and real captures;
5. replay — N panes replaying the real CLIs' captures (``bench_replay``: the engine as the
   service builds it, on the in-memory host, in a process of its own): CPU, RSS per pane,
   state-change delay, event-loop lag, per backend and mode, beside the replay driver's own
   cost in the same run;
6. dashboards — the replay with the HTTP app on and WebSocket dashboards (``bench_dashboards``,
   a process of their own) watching its screens: frame delay, server CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the clients are imported when a scenario runs: `panewatch --help` stays quick
    import httpx

from panewatch import backends

from .bench_streams import run_throughput
from .serve_proc import SERVE, ServeProcess, env_without_panewatch

CLK_TCK = os.sysconf("SC_CLK_TCK")
FLOOD_LINE = "flood " + "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 2


# -- small figures ---------------------------------------------------------------------------


def pct(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank); NaN when there is nothing to rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[k]


def ms(value: float) -> str:
    return "—" if value != value else f"{value * 1000:.0f} ms"


def ratio(a: float, b: float) -> str:
    return "—" if not b or a != a or b != b else f"{a / b:.2f}×"


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (not its children)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def proc_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


# -- the server under test ---------------------------------------------------------------------


class Server:
    """A service process (``serve_proc``) with an API client, for a scenario's duration."""

    def __init__(self, token: str, extra: Sequence[str], env: Mapping[str, str], module: Sequence[str] = SERVE) -> None:
        self.token = token
        # in a session of its own: a signal to the bench's process group (a Ctrl-C) is not
        # delivered to it; stop() ends it
        self.process = ServeProcess(token, extra, env=env, module=module, new_session=True)
        self.port = self.process.port
        self.client: httpx.AsyncClient | None = None

    @property
    def url(self) -> str:
        return self.process.url

    async def start(self, timeout: float = 30.0) -> None:
        import httpx

        await asyncio.to_thread(self.process.start, timeout)
        self.client = httpx.AsyncClient(
            base_url=self.url, timeout=30.0, headers={"Authorization": f"Bearer {self.token}"}
        )

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        await asyncio.to_thread(self.process.stop)

    def cpu(self) -> float:
        return proc_cpu_seconds(self.process.pid)

    def rss(self) -> int:
        return proc_rss_bytes(self.process.pid)

    async def create(self, command: list[str], name: str) -> str:
        assert self.client is not None
        r = await self.client.post(
            "/api/sessions",
            json={"agent": "claude", "command": command, "hooks": False, "rows": 32, "cols": 120, "name": name},
        )
        r.raise_for_status()
        return str(r.json()["id"])

    async def delete(self, sid: str) -> None:
        assert self.client is not None
        (await self.client.delete(f"/api/sessions/{sid}")).raise_for_status()

    async def probe(self, reset: bool = False) -> dict[str, Any]:
        assert self.client is not None
        r = await self.client.get("/bench/probe", params={"reset": str(reset).lower()})
        r.raise_for_status()
        return r.json()


@contextlib.asynccontextmanager
async def running(server: Server) -> AsyncIterator[Server]:
    try:
        await server.start()
        yield server
    finally:
        await server.stop()


def serve_server(mode: str, sweep_ms: int, settle_ms: int, cap_ms: int, backend: str) -> Server:
    """``python -m panewatch serve`` exactly as a user runs it (change-mode timings by env)."""
    env = {
        **os.environ,
        "PANEWATCH_SETTLE_MS": str(settle_ms),
        "PANEWATCH_CAP_MS": str(cap_ms),
        "PANEWATCH_BACKEND": backend,
    }
    env.pop("PANEWATCH_CONFIG", None)
    # the pty host (the tmux host has its own benchmark, benchmarks/hosts.py) and a state folder
    # of its own: a benchmark never adopts, nor leaves agents in, the user's sessions
    env.setdefault("PANEWATCH_PANE_HOST", "pty")
    env.setdefault("PANEWATCH_STATE_DIR", tempfile.mkdtemp(prefix="panewatch-bench-"))
    return Server(secrets.token_urlsafe(16), ["--mode", mode, "--sweep-ms", str(sweep_ms)], env)


def probe_server(mode: str, sweep_ms: int, settle_ms: int, cap_ms: int, backend: str) -> Server:
    """The same app plus a probe route (``bench_probe``), its settings on the command line only."""
    extra = ["--mode", mode, "--sweep-ms", str(sweep_ms), "--settle-ms", str(settle_ms), "--cap-ms", str(cap_ms)]
    extra += ["--backend", backend]
    return Server(secrets.token_urlsafe(16), extra, env_without_panewatch(), module=("panewatch_lab.bench_probe",))


#: The lab's fake agent on its own: at this speed a turn's thinking and silent tool runs last
#: ~0.3-1 s between screens, and every tool call that can ask does (prompts are what is measured).
AGENT_SPEED, AGENT_PROMPT_PROB = 5.0, 1.0


def agent_command(
    state_file: Path | None, seed: int, *, spin_only: bool = False, hold: tuple[float, float] = (0.8, 1.6)
) -> list[str]:
    """The fake agent (Claude's screens, 10 Hz spinner) typing its own tasks and answering its
    own prompts after ``hold`` seconds, noting in ``state_file`` when each screen was drawn."""
    cmd = [
        sys.executable,
        "-m",
        "panewatch_lab.fake_agent",
        "--seed",
        str(seed),
        "--auto",
        "--hold",
        str(hold[0]),
        str(hold[1]),
        "--speed",
        str(AGENT_SPEED),
        "--prompt-prob",
        str(AGENT_PROMPT_PROB),
        "--question-prob",
        "0",
    ]
    if state_file is not None:
        cmd += ["--state-file", str(state_file)]
    return [*cmd, "--spin-only"] if spin_only else cmd


# -- state events and the agents' truth --------------------------------------------------------


@dataclass
class EventLog:
    """State events as received by a ``/ws/state`` client: (arrival wall time, state) per session."""

    by_session: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    async def follow(self, server: Server) -> None:
        from websockets.asyncio.client import connect

        ready = asyncio.Event()

        async def reader() -> None:
            uri = f"ws://127.0.0.1:{server.port}/ws/state?token={server.token}"
            async with connect(uri, max_size=None, ping_interval=None) as ws:
                ready.set()
                async for message in ws:
                    now = time.time()
                    event = json.loads(message)
                    if event.get("type") == "state":
                        self.by_session.setdefault(event["session"], []).append((now, event["state"]))

        self.task = asyncio.ensure_future(reader())
        await asyncio.wait_for(ready.wait(), 10)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task


def read_truth(path: Path) -> list[tuple[float, str]]:
    """The agent's state changes (wall time the screen was drawn, state); a record repeating
    the state it was already in (a new task while working) is no change to detect."""
    out: list[tuple[float, str]] = []
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError):
                record = json.loads(line)
                if not out or out[-1][1] != record["state"]:
                    out.append((float(record["wall"]), str(record["state"])))
    return out


@dataclass
class Delays:
    """Drawn-to-event delays of the agents' state changes inside a time window."""

    prompts: list[float] = field(default_factory=list)  # changes to blocked
    changes: list[float] = field(default_factory=list)  # every change
    missed: int = 0  # changes no event ever reported
    total: int = 0


def match_delays(truth: dict[str, list[tuple[float, str]]], events: EventLog, start: float, end: float) -> Delays:
    """For each change an agent drew in [start, end): the first event of that state for that
    session after the previous change was drawn. None before the next change is a miss."""
    out = Delays()
    for sid, records in truth.items():
        got = events.by_session.get(sid, [])
        for i in range(1, len(records)):
            at, state = records[i]
            if not start <= at < end:
                continue
            prev_at = records[i - 1][0]
            next_at = records[i + 1][0] if i + 1 < len(records) else float("inf")
            out.total += 1
            hit = next((t for t, s in got if s == state and t >= prev_at and t < next_at + 0.05), None)
            if hit is None:
                out.missed += 1
                continue
            delay = max(0.0, hit - at)
            out.changes.append(delay)
            if state == "blocked":
                out.prompts.append(delay)
    return out


def delay_row(d: Delays) -> dict[str, float | int]:
    return {
        "median": statistics.median(d.prompts) if d.prompts else float("nan"),
        "p99": pct(d.prompts, 99),
        "max": max(d.prompts, default=float("nan")),
        "all_median": statistics.median(d.changes) if d.changes else float("nan"),
        "all_p99": pct(d.changes, 99),
        "all_max": max(d.changes, default=float("nan")),
        "prompts": len(d.prompts),
        "changes": d.total,
        "missed": d.missed,
    }


# -- 1. latency ------------------------------------------------------------------------------


async def scenario_latency(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for mode in ("sweep", "change"):
        server = serve_server(mode, opts.sweep_ms, opts.settle_ms, opts.cap_ms, opts.backend)
        async with running(server):
            events = EventLog()
            await events.follow(server)
            files = {}
            for i in range(opts.agents):
                path = tmp / f"latency-{mode}-{i}.jsonl"
                sid = await server.create(agent_command(path, i), f"bench-{i}")
                files[sid] = path
            await asyncio.sleep(1.0)  # agents start, the first screens settle
            start, cpu0 = time.time(), server.cpu()
            await asyncio.sleep(opts.seconds)
            end, cpu1 = time.time(), server.cpu()
            await asyncio.sleep(max(1.0, opts.sweep_ms / 1000 * 2))  # let late events arrive
            await events.close()
            truth = {sid: read_truth(p) for sid, p in files.items()}
        row = delay_row(match_delays(truth, events, start, end))
        row["cpu_s"] = cpu1 - cpu0
        row["cpu_share"] = (cpu1 - cpu0) / (end - start)
        row["window_s"] = end - start
        results[mode] = row
    return results


def print_latency(r: dict[str, Any], opts: argparse.Namespace) -> None:
    print(
        f"\n## 1. Prompt drawn → /ws/state event  ({opts.agents} agents, {opts.seconds:.0f} s per mode, "
        f"backend {opts.backend}; change mode settle {opts.settle_ms} ms, cap {opts.cap_ms} ms)"
    )
    print(
        f"{'mode':<22}{'median':>9}{'p99':>9}{'max':>9}{'prompts':>9}{'missed':>8}"
        f"{'all changes p99':>17}{'server CPU':>12}{'CPU/wall':>10}"
    )
    for mode, label in (("sweep", f"sweep {opts.sweep_ms} ms"), ("change", "change-driven")):
        x = r[mode]
        print(
            f"{label:<22}{ms(x['median']):>9}{ms(x['p99']):>9}{ms(x['max']):>9}{x['prompts']:>9}"
            f"{x['missed']:>5}/{x['changes']:<3}{ms(x['all_p99']):>16}{x['cpu_s']:>10.2f} s"
            f"{x['cpu_share'] * 100:>9.1f}%"
        )
    s, c = r["sweep"], r["change"]
    print(
        f"change/sweep: median {ratio(c['median'], s['median'])}, max {ratio(c['max'], s['max'])}, "
        f"CPU {ratio(c['cpu_s'], s['cpu_s'])}"
    )


# -- 2. scale --------------------------------------------------------------------------------


async def scenario_scale(opts: argparse.Namespace, backend: str) -> list[dict[str, Any]]:
    rows = []
    server = probe_server(opts.scale_mode, opts.sweep_ms, opts.settle_ms, opts.cap_ms, backend)
    async with running(server):
        await asyncio.sleep(1.0)
        rss0 = server.rss()
        count = 0
        for n in opts.sizes:
            while count < n:
                await server.create(agent_command(None, count, spin_only=True), f"spin-{count}")
                count += 1
            await asyncio.sleep(opts.warmup)
            await server.probe(reset=True)
            t0, cpu0 = time.monotonic(), server.cpu()
            await asyncio.sleep(opts.window)
            t1, cpu1 = time.monotonic(), server.cpu()
            p = await server.probe(reset=True)
            rss = server.rss()
            rows.append(
                {
                    "backend": backend,
                    "agents": n,
                    "cpu_share": (cpu1 - cpu0) / (t1 - t0),
                    "rss_per_session": (rss - rss0) / n,
                    "rss_mb": rss / 2**20,
                    "sweep_p99": pct(p["sweep_seconds"], 99),
                    "sweep_max": max(p["sweep_seconds"], default=0.0),
                    "lag_p99": pct(p["lags"], 99),
                    "lag_max": max(p["lags"], default=0.0),
                }
            )
    return rows


def print_scale(rows: list[dict[str, Any]], opts: argparse.Namespace) -> None:
    print(f"\n## 2. Many agents, 10 Hz spinners ({opts.scale_mode} mode, {opts.window:.0f} s window each)")
    print(
        f"{'backend':<9}{'agents':>7}{'server CPU (1 core)':>21}{'RSS/session':>13}{'RSS':>9}"
        f"{'sweep p99':>11}{'sweep max':>11}{'loop lag p99':>14}{'lag max':>9}"
    )
    for r in rows:
        print(
            f"{r['backend']:<9}{r['agents']:>7}{r['cpu_share'] * 100:>20.1f}%{r['rss_per_session'] / 2**20:>10.2f} MB"
            f"{r['rss_mb']:>6.0f} MB{ms(r['sweep_p99']):>11}{ms(r['sweep_max']):>11}{ms(r['lag_p99']):>14}"
            f"{ms(r['lag_max']):>9}"
        )
    by = {(r["backend"], r["agents"]): r for r in rows}
    for n in opts.sizes:
        if ("pyte", n) in by and ("ghostty", n) in by:
            print(
                f"ghostty/pyte CPU at {n} agents: {ratio(by[('ghostty', n)]['cpu_share'], by[('pyte', n)]['cpu_share'])}"
            )


# -- 3. flood --------------------------------------------------------------------------------


async def _api_latencies(server: Server, stop: asyncio.Event, out: list[float]) -> None:
    assert server.client is not None
    while not stop.is_set():
        t = time.perf_counter()
        (await server.client.get("/api/sessions")).raise_for_status()
        out.append(time.perf_counter() - t)
        await asyncio.sleep(0.05)


async def _window(server: Server, seconds: float) -> dict[str, Any]:
    stop, api = asyncio.Event(), []  # type: ignore[var-annotated]
    task = asyncio.ensure_future(_api_latencies(server, stop, api))
    await server.probe(reset=True)
    p0 = await server.probe()
    start, cpu0 = time.time(), server.cpu()
    await asyncio.sleep(seconds)
    end, cpu1 = time.time(), server.cpu()
    p1 = await server.probe(reset=True)
    stop.set()
    await task
    return {
        "start": start,
        "end": end,
        "api": api,
        "cpu_share": (cpu1 - cpu0) / (end - start),
        "emulated_per_s": (p1["emulated_bytes"] - p0["emulated_bytes"]) / (end - start),
        "lag_p99": pct(p1["lags"], 99),
        "lag_max": max(p1["lags"], default=0.0),
        "max_pending": p1["max_pending"],
        "bytes_read": p1["bytes_read"],
    }


async def scenario_flood(opts: argparse.Namespace, tmp: Path, backend: str) -> dict[str, Any]:
    server = probe_server(opts.flood_mode, opts.sweep_ms, opts.settle_ms, opts.cap_ms, backend)
    async with running(server):
        events = EventLog()
        await events.follow(server)
        files = {}
        for i in range(opts.flood_agents):
            path = tmp / f"flood-{backend}-{i}.jsonl"
            files[await server.create(agent_command(path, 100 + i), f"agent-{i}")] = path
        await asyncio.sleep(opts.warmup)
        quiet = await _window(server, opts.flood_seconds)
        flood_sid = await server.create(["yes", FLOOD_LINE], "flood")
        await asyncio.sleep(0.5)
        flood = await _window(server, opts.flood_seconds)
        flood_read = flood["bytes_read"].get(flood_sid, 0)
        await server.delete(flood_sid)
        await asyncio.sleep(max(1.0, opts.sweep_ms / 1000 * 2))
        await events.close()
        truth = {sid: read_truth(p) for sid, p in files.items()}
    out: dict[str, Any] = {"backend": backend, "flood_bytes_read": flood_read}
    for name, w in (("quiet", quiet), ("flood", flood)):
        d = match_delays(truth, events, w["start"], w["end"])
        out[name] = {
            **delay_row(d),
            "api_median": statistics.median(w["api"]) if w["api"] else float("nan"),
            "api_p99": pct(w["api"], 99),
            "api_max": max(w["api"], default=float("nan")),
            "cpu_share": w["cpu_share"],
            "emulated_per_s": w["emulated_per_s"],
            "lag_p99": w["lag_p99"],
            "lag_max": w["lag_max"],
            "max_pending": w["max_pending"],
        }
    return out


def print_flood(results: list[dict[str, Any]], opts: argparse.Namespace) -> None:
    print(
        f"\n## 3. One pane flooding (`yes`, {len(FLOOD_LINE) + 2} B lines) while {opts.flood_agents} agents "
        f"change state ({opts.flood_mode} mode, {opts.flood_seconds:.0f} s per window)"
    )
    print(
        f"{'backend':<9}{'window':<7}{'change median':>14}{'p99':>8}{'max':>8}{'missed':>8}{'API p99':>9}"
        f"{'API max':>9}{'loop lag p99':>13}{'emulated':>12}{'max backlog':>12}{'CPU':>7}"
    )
    for r in results:
        for name in ("quiet", "flood"):
            x = r[name]
            print(
                f"{r['backend']:<9}{name:<7}{ms(x['all_median']):>14}{ms(x['all_p99']):>8}{ms(x['all_max']):>8}"
                f"{x['missed']:>4}/{x['changes']:<3}{ms(x['api_p99']):>9}{ms(x['api_max']):>9}"
                f"{ms(x['lag_p99']):>13}{x['emulated_per_s'] / 1e6:>8.2f} MB/s{x['max_pending'] / 1024:>9.0f} KB"
                f"{x['cpu_share'] * 100:>6.0f}%"
            )
        q, f = r["quiet"], r["flood"]
        print(
            f"{r['backend']}: the flood adds {ms(f['all_p99'] - q['all_p99'])} to the p99 change delay "
            f"(max {ms(f['all_max'] - q['all_max'])}); API p99 {ratio(f['api_p99'], q['api_p99'])}; "
            f"the flood pane emulated {r['flood_bytes_read'] / 1e6:.1f} MB"
        )


# -- 4. throughput ---------------------------------------------------------------------------


def print_throughput(rows: list[Any], opts: argparse.Namespace) -> None:
    streams = list(dict.fromkeys(r.stream for r in rows))
    engines = list(dict.fromkeys(r.engine for r in rows))
    by = {(r.engine, r.stream): r.mb_per_s for r in rows}
    print(f"\n## 4. Screen feed throughput, MB/s (120×32, 4 KiB chunks, ≥{opts.min_seconds:g} s each)")
    print(f"{'engine':<20}" + "".join(f"{s:>22}" for s in streams))
    for e in engines:
        print(f"{e:<20}" + "".join(f"{by.get((e, s), float('nan')):>22.2f}" for s in streams))
    base = "pyte + wrapper"
    for e in engines:
        if e != base and ("ghostty" in e or e == "pyte (bare)"):
            print(
                f"{e} / {base}: " + ", ".join(f"{s} {ratio(by.get((e, s), 0), by.get((base, s), 0))}" for s in streams)
            )


# -- the command ------------------------------------------------------------------------------

# -- 5. replay -------------------------------------------------------------------------------


def _replay_once(
    opts: argparse.Namespace, panes: int, backend: str, mode: str, driver_only: bool, extra: Sequence[str] = ()
) -> dict[str, Any]:
    argv = [
        sys.executable,
        "-m",
        "panewatch_lab.bench_replay",
        "--panes",
        str(panes),
        "--backend",
        backend,
        "--mode",
        mode,
        "--seconds",
        str(opts.replay_seconds),
        "--warmup",
        str(opts.replay_warmup),
        "--captures",
        *map(str, opts.replay_captures),
    ]
    if driver_only:
        argv.append("--driver-only")
    argv += extra
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_")}
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=env,
        timeout=120 + 4 * (opts.replay_seconds + opts.replay_warmup) + panes / 10,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"replay {panes} {backend} {mode} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _replay_runs(
    opts: argparse.Namespace, what: str, panes: int, runs: Sequence[tuple[str, str]], extra: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The driver alone first (the baseline each row's CPU is read against), then each
    (backend, mode) of ``runs``: ``panes`` replayed panes, one process each."""
    rows = [_replay_once(opts, panes, "pyte", "change", driver_only=True)]
    for backend, mode in runs:
        rows.append(_replay_once(opts, panes, backend, mode, driver_only=False, extra=extra))
        print(f"  {what} {panes} panes {backend} {mode}: done", file=sys.stderr, flush=True)
    return rows


def scenario_replay(opts: argparse.Namespace, backend_list: list[str]) -> list[dict[str, Any]]:
    """Each size: the driver alone (baseline), then every backend in every mode, one process each."""
    runs = [(backend, mode) for backend in backend_list for mode in opts.replay_modes]
    return [row for n in opts.replay_sizes for row in _replay_runs(opts, "replay", n, runs)]


def print_replay(rows: list[dict[str, Any]], opts: argparse.Namespace) -> None:
    print(
        f"\n## 5. Real-traffic replay (the CLIs' captures, frame by frame; {opts.replay_seconds:.0f} s window "
        f"after {opts.replay_warmup:.0f} s; one process per row, engine without HTTP)"
    )
    print(
        f"{'backend':<9}{'mode':<8}{'panes':>6}{'CPU (1 core)':>13}{'minus driver':>13}{'RSS/pane':>11}"
        f"{'B/s/pane':>9}{'change p50':>11}{'p99':>8}{'max':>8}{'missed':>9}{'lag p99':>9}{'lag max':>9}{'reads/s':>9}"
        f"{'waited':>8}"
    )
    print("(waited: share of the window the process was runnable but waiting for a CPU: other processes' time)")
    driver = {r["panes"]: r for r in rows if r["driver_only"]}
    for r in rows:
        base = driver.get(r["panes"], {}).get("cpu", 0.0)
        label = ("driver", "alone") if r["driver_only"] else (r["backend"], r["mode"])
        net = "" if r["driver_only"] else f"{(r['cpu'] - base) * 100:.1f}%"
        print(
            f"{label[0]:<9}{label[1]:<8}{r['panes']:>6}{r['cpu'] * 100:>12.1f}%{net:>13}"
            f"{r['rss_per_pane'] / 2**20:>8.2f} MB{r['bytes_per_s_per_pane']:>9.0f}"
            f"{ms(r['change_p50']):>11}{ms(r['change_p99']):>8}{ms(r['change_max']):>8}"
            f"{r['missed']:>5}/{r['changes']:<3}{ms(r['lag_p99']):>9}{ms(r['lag_max']):>9}"
            f"{r['classifications_per_s']:>9.0f}{r.get('runq_wait', math.nan) * 100:>7.0f}%"
        )
    by = {(r["backend"], r["mode"], r["panes"]): r for r in rows if not r["driver_only"]}
    for n in opts.replay_sizes:
        parts = []
        for b in {r["backend"] for r in rows if not r["driver_only"]}:
            if (b, "change", n) in by and (b, "sweep", n) in by:
                parts.append(f"{b} change/sweep CPU {ratio(by[(b, 'change', n)]['cpu'], by[(b, 'sweep', n)]['cpu'])}")
        for mode in opts.replay_modes:
            if ("ghostty", mode, n) in by and ("pyte", mode, n) in by:
                parts.append(
                    f"{mode} ghostty/pyte CPU {ratio(by[('ghostty', mode, n)]['cpu'], by[('pyte', mode, n)]['cpu'])}"
                )
        if parts:
            print(f"{n} panes: " + "; ".join(sorted(parts)))


# -- 6. dashboards ---------------------------------------------------------------------------


def scenario_dashboards(opts: argparse.Namespace, backend_list: list[str]) -> list[dict[str, Any]]:
    """The replay with the HTTP app on and WebSocket dashboards watching screens (change mode,
    the default); the driver alone first, as in the replay."""
    extra = ["--dashboards", str(opts.dashboards), "--watch", str(opts.dash_watch)]
    runs = [(backend, "change") for backend in backend_list]
    return _replay_runs(opts, "dashboards", opts.dash_panes, runs, extra)


def print_dashboards(rows: list[dict[str, Any]], opts: argparse.Namespace) -> None:
    print(
        f"\n## 6. Dashboards: {opts.dash_panes} replayed panes, {opts.dashboards} WebSocket dashboards × "
        f"{opts.dash_watch} screens (change mode; {opts.replay_seconds:.0f} s window; clients in a process of their own)"
    )
    print(
        f"{'backend':<9}{'panes':>6}{'sockets':>8}{'CPU (1 core)':>13}{'minus driver':>13}{'frames/s':>9}"
        f"{'frame p50':>10}{'p99':>8}{'max':>8}{'change p99':>11}{'lag p99':>9}{'client CPU':>11}"
    )
    base = next((r["cpu"] for r in rows if r["driver_only"]), 0.0)
    for r in rows:
        if r["driver_only"]:
            print(f"{'driver':<9}{r['panes']:>6}{'-':>8}{r['cpu'] * 100:>12.1f}%")
            continue
        client = r["client_cpu_s"] / max(r["seconds"] + opts.replay_warmup + 1.0, 1e-9)
        print(
            f"{r['backend']:<9}{r['panes']:>6}{r['dashboards_opened']:>8}{r['cpu'] * 100:>12.1f}%"
            f"{(r['cpu'] - base) * 100:>12.1f}%{r['frames_per_s']:>9.0f}{ms(r['frame_p50']):>10}"
            f"{ms(r['frame_p99']):>8}{ms(r['frame_max']):>8}{ms(r['change_p99']):>11}{ms(r['lag_p99']):>9}"
            f"{client * 100:>10.1f}%"
        )


SCENARIOS = ("latency", "scale", "flood", "throughput", "cluster", "replay", "dashboards")


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="panewatch bench", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--only",
        nargs="+",
        choices=SCENARIOS,
        default=list(SCENARIOS),
        metavar="SCENARIO",
        help=f"scenarios to run (default all: {', '.join(SCENARIOS)})",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in ~30 s")
    p.add_argument(
        "--backend",
        default=backends.choose("auto")[0],
        help="screen backend of the latency servers (default: the service's, Ghostty where installed)",
    )
    p.add_argument(
        "--backends", nargs="+", default=None, help="backends for scale and flood (default: every installed one)"
    )
    p.add_argument("--agents", type=int, default=10, help="latency: agents changing state (default 10)")
    p.add_argument("--seconds", type=float, default=25.0, help="latency: measured seconds per mode (default 25)")
    p.add_argument("--sweep-ms", type=int, default=700, dest="sweep_ms")
    p.add_argument("--settle-ms", type=int, default=40, dest="settle_ms")
    p.add_argument("--cap-ms", type=int, default=150, dest="cap_ms")
    p.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200], help="scale: agent counts")
    p.add_argument("--scale-mode", choices=["sweep", "change"], default="sweep", dest="scale_mode")
    p.add_argument("--window", type=float, default=8.0, help="scale: measured seconds per size")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds after starting agents before measuring")
    p.add_argument("--flood-agents", type=int, default=50, dest="flood_agents")
    p.add_argument("--flood-seconds", type=float, default=12.0, dest="flood_seconds")
    p.add_argument("--flood-mode", choices=["sweep", "change"], default="change", dest="flood_mode")
    p.add_argument("--feed-kb", type=int, default=1000, dest="feed_kb", help="throughput: KB per synthetic stream")
    p.add_argument(
        "--min-seconds",
        type=float,
        default=1.0,
        dest="min_seconds",
        help="throughput: least time per engine and stream",
    )
    p.add_argument(
        "--captures-kb",
        type=int,
        default=0,
        dest="captures_kb",
        help="throughput: feed only the first KB of the real captures (default 0: all of them)",
    )
    p.add_argument(
        "--captures",
        type=Path,
        nargs="+",
        default=[Path("fixtures"), Path("notes/raw")],
        metavar="DIR",
        help="throughput: folders whose *.raw captures are one stream (default: fixtures notes/raw of "
        "the working directory; missing ones are skipped)",
    )
    p.add_argument(
        "--replay-sizes",
        type=int,
        nargs="+",
        default=[200, 500, 1000],
        dest="replay_sizes",
        help="replay: pane counts (default 200 500 1000)",
    )
    p.add_argument(
        "--replay-modes", nargs="+", choices=["change", "sweep"], default=["change", "sweep"], dest="replay_modes"
    )
    p.add_argument("--replay-seconds", type=float, default=10.0, dest="replay_seconds")
    p.add_argument(
        "--replay-warmup",
        type=float,
        default=4.0,
        dest="replay_warmup",
        help="replay: seconds over which panes start (random offsets) before measuring",
    )
    p.add_argument(
        "--replay-captures",
        type=Path,
        nargs="+",
        default=[Path("fixtures")],
        dest="replay_captures",
        metavar="DIR",
        help="replay: folders of captures with truth.toml (default fixtures/)",
    )
    p.add_argument("--dash-panes", type=int, default=200, dest="dash_panes", help="dashboards: replayed panes")
    p.add_argument("--dashboards", type=int, default=20, help="dashboards: WebSocket dashboards (default 20)")
    p.add_argument("--dash-watch", type=int, default=10, dest="dash_watch", help="dashboards: screens each watches")
    p.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="replay: also draw CPU and state-change p99 against panes (needs matplotlib: pip install './lab[plot]')",
    )
    from .bench_cluster import add_arguments

    add_arguments(p)
    return p


def apply_quick(opts: argparse.Namespace) -> None:
    opts.agents, opts.seconds = min(opts.agents, 3), min(opts.seconds, 4.0)
    opts.sizes, opts.window, opts.warmup = [min(min(opts.sizes), 3)], min(opts.window, 2.0), min(opts.warmup, 1.0)
    opts.flood_agents, opts.flood_seconds = min(opts.flood_agents, 3), min(opts.flood_seconds, 3.0)
    opts.feed_kb, opts.min_seconds = min(opts.feed_kb, 40), min(opts.min_seconds, 0.05)
    opts.captures_kb = min(opts.captures_kb or 1000, 1000)
    opts.replay_sizes = [min(min(opts.replay_sizes), 4)]
    opts.replay_seconds, opts.replay_warmup = min(opts.replay_seconds, 3.0), min(opts.replay_warmup, 1.0)
    opts.dash_panes, opts.dashboards, opts.dash_watch = min(opts.dash_panes, 4), min(opts.dashboards, 2), 2
    opts.cluster_sessions, opts.cluster_seconds = min(opts.cluster_sessions, 2), min(opts.cluster_seconds, 3.0)
    opts.cluster_nodes, opts.cluster_per_node = min(opts.cluster_nodes, 2), min(opts.cluster_per_node, 10)


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    if opts.quick:
        apply_quick(opts)
    scale_backends = opts.backends or backends.available()
    out: dict[str, Any] = {}
    print(
        f"panewatch bench — {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"backends {', '.join(backends.available())}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="panewatch-bench-") as tmpdir:
        tmp = Path(tmpdir)
        if "latency" in opts.only:
            out["latency"] = await scenario_latency(opts, tmp)
            print_latency(out["latency"], opts)
        if "scale" in opts.only:
            out["scale"] = [row for b in scale_backends for row in await scenario_scale(opts, b)]
            print_scale(out["scale"], opts)
        if "flood" in opts.only:
            out["flood"] = [await scenario_flood(opts, tmp, b) for b in scale_backends]
            print_flood(out["flood"], opts)
    if "throughput" in opts.only:
        rows = run_throughput(opts.feed_kb * 1000, opts.min_seconds, opts.captures, opts.captures_kb * 1000)
        out["throughput"] = [r.__dict__ for r in rows]
        print_throughput(rows, opts)
    if "replay" in opts.only:
        out["replay"] = scenario_replay(opts, scale_backends)
        print_replay(out["replay"], opts)
        if opts.plot:
            from .bench_plot import plot_replay

            drawn = plot_replay(
                out["replay"], Path(opts.plot), f"panewatch bench --only replay ({os.cpu_count()} CPUs)"
            )
            print(
                f"picture: {opts.plot}"
                if drawn
                else "picture: not drawn (matplotlib missing: pip install './lab[plot]')"
            )
    if "dashboards" in opts.only:
        out["dashboards"] = scenario_dashboards(opts, scale_backends)
        print_dashboards(out["dashboards"], opts)
    if "cluster" in opts.only:
        from .bench_cluster import print_cluster, scenario_cluster

        out["cluster"] = await scenario_cluster(opts)
        print_cluster(out["cluster"], opts)
    if opts.json:
        Path(opts.json).write_text(json.dumps(out, indent=1, default=float))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    return cmd_bench(opts)


def cmd_bench(opts: argparse.Namespace) -> int:
    asyncio.run(run(opts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
