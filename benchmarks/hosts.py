"""Pane hosts side by side: N spinner agents on the tmux host vs the PTY host, and adoption time.

Both hosts deliver every byte to the same sink (a pyte screen per pane, as the engine keeps), so
the difference is the host's own cost. CPU counts this process *plus* tmux: the tmux server and
its one control-mode client (user+system time from /proc over the window, as a share of one
core). Memory per session: the tmux server's and control client's RSS divided by N (this
process's screens are the same on both hosts). Adoption: a second TmuxHost takes over M live
panes (screen, cursor, live stream), timed from its start() to the last adopt().

    nice .venv/bin/python benchmarks/hosts.py --agents 200 --seconds 20 --adopt 100

``--server`` measures the acceptance figure itself: a real ``panewatch serve`` per host (engine,
sweeps, the dashboard's terminal history, the registry) with N spinner sessions created over the
API; CPU of the server process, plus the tmux server on the tmux host.

    nice .venv/bin/python benchmarks/hosts.py --server --agents 200 --seconds 20 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from panewatch.hosts.base import LaunchSpec
from panewatch.hosts.tmux import TmuxHost
from panewatch.procs.ptyproc import PtyProcess
from panewatch.screen import Screen
from panewatch_lab.serve_proc import ServeProcess, env_without_panewatch

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


class ScreenSink:
    def __init__(self, rows: int, cols: int) -> None:
        self.screen = Screen(rows, cols)
        self.bytes = 0
        self.exits: list[tuple[int | None, str]] = []

    def on_output(self, data: bytes) -> None:
        self.bytes += len(data)
        self.screen.feed(data)

    def on_exit(self, code: int | None, reason: str) -> None:
        self.exits.append((code, reason))

    def on_status(self, state: str, detail: str) -> None:
        pass


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


def self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def agent_argv(hz: float) -> list[str]:
    return [sys.executable, "-m", "panewatch_lab.fake_agent", "--spin-only"]  # 10 Hz spinner


def agent_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_")}
    env.update(TERM="xterm-256color", COLORTERM="truecolor")
    return env


async def measure(seconds: float, tmux_pids: list[int], sinks: list[ScreenSink]) -> dict[str, float]:
    t0, c0, b0 = time.monotonic(), self_cpu(), sum(s.bytes for s in sinks)
    tm0 = [cpu_seconds(p) for p in tmux_pids]
    await asyncio.sleep(seconds)
    wall = time.monotonic() - t0
    own = (self_cpu() - c0) / wall * 100
    each = [(cpu_seconds(p) - c) / wall * 100 for p, c in zip(tmux_pids, tm0, strict=True)]
    tm = sum(each)
    rate = (sum(s.bytes for s in sinks) - b0) / wall
    return {
        "own_cpu_pct": round(own, 1),
        "tmux_cpu_pct": round(tm, 1),
        "total_cpu_pct": round(own + tm, 1),
        "tmux_split_pct": [round(x, 1) for x in each],
        "bytes_per_s": round(rate),
        # CPU per byte delivered: fair when starved agents wrote less in one run than the other
        "cpu_s_per_mb": round((own + tm) / 100 / (rate / 1e6), 2) if rate else None,
    }


async def run_pty(n: int, seconds: float, warm: float, hz: float) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    sinks = [ScreenSink(32, 120) for _ in range(n)]
    procs = [
        PtyProcess(
            agent_argv(hz),
            rows=32,
            cols=120,
            env=agent_env(),
            on_output=s.on_output,
            on_exit=lambda code: None,
            loop=loop,
        )
        for s in sinks
    ]
    await asyncio.sleep(warm)
    out = await measure(seconds, [], sinks)
    for p in procs:
        await p.terminate(0.5)
        p.close()
    return out


async def run_tmux(n: int, seconds: float, warm: float, hz: float, adopt: int, state: Path) -> dict[str, float]:
    host = TmuxHost(state)
    await host.start()
    sinks = [ScreenSink(32, 120) for _ in range(n)]
    panes = []
    for i, sink in enumerate(sinks):
        spec = LaunchSpec(session=f"b{i:04d}", argv=agent_argv(hz), cwd=os.getcwd(), env=agent_env(), rows=32, cols=120)
        panes.append(host.spawn(spec, sink))
    await asyncio.sleep(warm)
    client_pid = host.control.pid  # type: ignore[union-attr]
    pids = [host.server_pid, client_pid]
    out = await measure(seconds, pids, sinks)  # type: ignore[arg-type]
    out["pauses"] = host.pauses
    out["tmux_rss_mb_per_session"] = round((rss_mb(host.server_pid) + rss_mb(client_pid)) / n, 3)  # type: ignore[arg-type]
    refs = [(p.ref, p.session) for p in panes[:adopt]]
    for p in panes:
        p.close()
    await host.stop()

    # adoption by a second host: start, then every pane (screen + cursor + live stream)
    t0 = time.perf_counter()
    second = TmuxHost(state)
    await second.start()
    new_sinks = [ScreenSink(32, 120) for _ in refs]
    adopted = await asyncio.gather(*(second.adopt(ref, sid, s) for (ref, sid), s in zip(refs, new_sinks, strict=True)))
    out["adopt_s"] = round(time.perf_counter() - t0, 3)
    out["adopted"] = sum(a is not None for a in adopted)
    out["adopted_with_screen"] = sum(any(line.strip() for line in s.screen.lines()) for s in new_sinks)
    await second.stop()
    await second.kill_server()
    return out


def run_server(kind: str, n: int, seconds: float, warm: float, state: Path, backend: str | None) -> dict[str, Any]:
    """``panewatch serve --pane-host KIND`` with n spinner sessions: server (+ tmux server) CPU."""
    env = env_without_panewatch()
    if backend:
        env["PANEWATCH_BACKEND"] = backend
    server = ServeProcess(secrets.token_urlsafe(16), ["--pane-host", kind, "--state-dir", str(state)], env=env)
    try:
        server.start(timeout=30)
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=30) as c:
            for i in range(n):
                r = c.post("/api/sessions", json={"command": agent_argv(10), "name": f"spin-{i}"})
                r.raise_for_status()
            time.sleep(warm)
            tmux_pid = None
            if kind == "tmux":
                out = subprocess.run(
                    ["tmux", "-S", str(state / "tmux.sock"), "display", "-p", "#{pid}"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                tmux_pid = int(out.strip())

            def read() -> tuple[float, float, float]:
                done = sum(s["bytes_read"] for s in c.get("/api/sessions").json()["sessions"])
                return time.monotonic(), done, cpu_seconds(server.pid) + (cpu_seconds(tmux_pid) if tmux_pid else 0)

            own0 = cpu_seconds(server.pid)
            t0, b0, c0 = read()
            time.sleep(seconds)
            own1 = cpu_seconds(server.pid)
            t1, b1, c1 = read()
        wall, rate = t1 - t0, (b1 - b0) / (t1 - t0)
        total = (c1 - c0) / wall * 100
        own = min((own1 - own0) / wall * 100, total)  # read a moment apart: never more than the total
        return {
            "server_cpu_pct": round(own, 1),
            "tmux_cpu_pct": round(total - own, 1) if tmux_pid else 0.0,
            "total_cpu_pct": round(total, 1),
            "bytes_per_s": round(rate),
            "cpu_s_per_mb": round(total / 100 / (rate / 1e6), 2) if rate else None,
            "load": round(os.getloadavg()[0], 1),
        }
    finally:
        server.stop(grace=30)
        if kind == "tmux":
            subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], capture_output=True, check=False)


def server_rounds(args: argparse.Namespace) -> int:
    runs = []
    for n in range(args.rounds):
        pair = {}
        for kind in ("pty", "tmux"):
            with tempfile.TemporaryDirectory(prefix="pwb-") as tmp:
                pair[kind] = run_server(kind, args.agents, args.seconds, args.warm, Path(tmp) / "s", args.backend)
            print(f"round {n + 1} {kind:4}: {json.dumps(pair[kind])}", flush=True)
        runs.append(pair)
    ratios = sorted(
        r["tmux"]["cpu_s_per_mb"] / r["pty"]["cpu_s_per_mb"]
        for r in runs
        if r["pty"]["cpu_s_per_mb"] and r["tmux"]["cpu_s_per_mb"]
    )
    ratio = statistics.median(ratios) if ratios else float("nan")
    print(
        f"panewatch serve, {args.agents} spinner sessions, {len(runs)} round(s), load average "
        f"{os.getloadavg()[0]:.1f}: server + tmux server CPU per MB read, tmux host / pty host: median "
        f"{ratio:.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratios)}; target <= 1.5x)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "ratio": ratio}, indent=2))
    return 0


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=200)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--warm", type=float, default=8.0, help="seconds after starting the agents, not measured")
    p.add_argument(
        "--hz", type=float, default=10.0, help="spinner frames per second per agent (the lab's fake agent: 10)"
    )
    p.add_argument("--adopt", type=int, default=100, help="panes a second tmux host adopts")
    p.add_argument("--rounds", type=int, default=1, help="pty then tmux, this many times (medians printed)")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--server", action="store_true", help="measure real `panewatch serve` processes instead")
    p.add_argument("--backend", help="--server: the servers' screen backend (default: theirs, auto)")
    args = p.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is not installed (apt-get install tmux)", file=sys.stderr)
        return 2
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    if args.server:
        return server_rounds(args)
    runs: list[tuple[dict, dict]] = []
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="pwb-") as tmp:
            pty = await run_pty(args.agents, args.seconds, args.warm, args.hz)
            print(f"round {n + 1} pty : {json.dumps(pty)}", flush=True)
            tmux = await run_tmux(
                args.agents, args.seconds, args.warm, args.hz, min(args.adopt, args.agents), Path(tmp) / "s"
            )
            print(f"round {n + 1} tmux: {json.dumps(tmux)}", flush=True)
        runs.append((pty, tmux))
    pty, tmux = runs[len(runs) // 2] if len(runs) % 2 else runs[-1]
    ratios = sorted(t["cpu_s_per_mb"] / p["cpu_s_per_mb"] for p, t in runs if p["cpu_s_per_mb"] and t["cpu_s_per_mb"])
    ratio = statistics.median(ratios) if ratios else float("nan")
    adopt = statistics.median(t["adopt_s"] for _, t in runs)
    print(
        f"{args.agents} agents at {args.hz:g} Hz, {len(runs)} round(s), load average {os.getloadavg()[0]:.1f}: "
        f"CPU per MB delivered, tmux host / pty host: median {ratio:.2f}x (rounds: "
        f"{', '.join(f'{r:.2f}' for r in ratios)}; target <= 1.5x); tmux memory "
        f"{tmux['tmux_rss_mb_per_session']} MB/session; adopting {tmux['adopted']} panes: median {adopt} s "
        "(target < 2 s)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "ratio": ratio, "adopt_s": adopt}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
