"""Hostile panes against a real server: /healthz p99, other panes' state-change delay, RSS.

Issue #13 reproduced three panes that stalled or bloated the whole service: the 115-byte
combining/REP bomb, a 16 MiB unterminated CSI and a 4.4 MB flood of distinct characters.
This script starts ``panewatch serve`` (real uvicorn, real PTYs), runs a few normal panes,
one of which flips between a shell ``Password:`` prompt (blocked) and idle every second, and
measures in two phases of the same run: a baseline with the normal panes only, then with
the three hostile panes beside them. It finally DELETEs the hostile panes and compares the
server's RSS with the RSS before they were created.

Run: ``nice .venv/bin/python benchmarks/server_hostile.py [--backend auto|pyte|ghostty]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time

import httpx

PROMPT = ("while :; do printf '\\r\\n%s Password: ' \"$(date +%s.%N)\"; sleep 1; "
          "printf 'ok\\r\\n'; sleep 1; done")
NORMAL = {
    "prompt": ["sh", "-c", PROMPT],
    "ticker": ["sh", "-c", "while :; do echo tick $(date +%s); sleep 0.3; done"],
    "idle-shell": ["sh", "-c", "echo ready; sleep 600"],
}
PY = sys.executable
#: Two plain floods (what chatty agents or `cat bigfile` do; the hostile phase has two flooding
#: panes too): the same-run yardstick for how
#: much any pane that floods costs the others, hostile or not.
PLAIN_FLOOD = {f"plain-flood-{i}": ["sh", "-c", "yes 'plain flood line of ordinary text'"] for i in (1, 2)}
HOSTILE = {
    "bomb-115B": ["sh", "-c", "printf 'a\\314\\201'; for i in $(seq 16); do printf '\\033[9999b'; done; sleep 600"],
    "csi-16MiB": [PY, "-c", "import sys,time; o=sys.stdout.buffer; o.write(b'\\x1b['+b'1'*(16<<20)+b'mafter');"
                  " o.flush(); time.sleep(600)"],
    "distinct-4.4MB": [PY, "-c", "import sys,time; o=sys.stdout.buffer; cps=[c for c in range(0x4e00,0x9fff)]"
                       "+[c for c in range(0xac00,0xd7a3)]; s=''.join(map(chr,cps)).encode();"
                       " n=0\nwhile n<4_400_000: o.write(s[:4_400_000-n]); n+=len(s)\n"
                       "o.flush(); time.sleep(600)"],
}


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (load-independent, unlike wall time)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def healthz(client: httpx.AsyncClient, stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        r = await client.get("/healthz")
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200
        await asyncio.sleep(0.01)


async def prompt_delays(client: httpx.AsyncClient, sid: str, stop: asyncio.Event, out: list[float]) -> None:
    """Delay from the prompt pane printing ``<ts> Password:`` to the API reading it blocked."""
    last = None
    while not stop.is_set():
        info = (await client.get(f"/api/sessions/{sid}")).json()
        if info["state"] == "blocked" and last != "blocked":
            seen = time.time()
            lines = (await client.get(f"/api/sessions/{sid}/screen")).json()["rows"]
            stamps = [line.split()[0] for line in lines if "Password:" in line]
            if stamps:
                out.append((seen - float(stamps[-1])) * 1000)
        last = info["state"]
        await asyncio.sleep(0.02)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def phase(client, sid, seconds) -> tuple[list[float], list[float]]:
    stop = asyncio.Event()
    lat: list[float] = []
    delays: list[float] = []
    tasks = [asyncio.create_task(healthz(client, stop, lat)), asyncio.create_task(prompt_delays(client, sid, stop, delays))]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return lat, delays


async def run(args: argparse.Namespace) -> None:
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "PANEWATCH_TOKEN": token}
    prefix = ["-m", "cProfile", "-o", args.profile] if args.profile else []
    server = subprocess.Popen([sys.executable, *prefix, "-m", "panewatch", "serve", "--port", str(port), "--sweep-ms",
                               str(args.sweep_ms), "--backend", args.backend],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60,
                                     headers={"Authorization": f"Bearer {token}"}) as client:
            for _ in range(200):
                try:
                    if (await client.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            ids = {}
            for name, argv in NORMAL.items():
                r = await client.post("/api/sessions", json={"agent": "shell", "command": argv, "name": name,
                                                             "rows": 32, "cols": 120})
                ids[name] = r.json()["id"]
            await asyncio.sleep(2)
            load_before = os.getloadavg()[0]
            cpu0 = cpu_s(server.pid)
            base_lat, base_delay = await phase(client, ids["prompt"], args.seconds)
            cpu1 = cpu_s(server.pid)
            flood = {}
            for name, argv in PLAIN_FLOOD.items():
                r = await client.post("/api/sessions", json={"agent": "shell", "command": argv, "name": name,
                                                             "rows": 32, "cols": 120})
                flood[name] = r.json()["id"]
            cpu4 = cpu_s(server.pid)
            flood_lat, flood_delay = await phase(client, ids["prompt"], args.seconds)
            cpu5 = cpu_s(server.pid)
            flood_read = sum([(await client.get(f"/api/sessions/{sid}")).json()["bytes_read"] for sid in flood.values()])
            for sid in flood.values():
                await client.delete(f"/api/sessions/{sid}")
            await asyncio.sleep(2)
            rss_before = rss_mb(server.pid)
            hostile = {}
            for name, argv in HOSTILE.items():
                r = await client.post("/api/sessions", json={"agent": "shell", "command": argv, "name": name,
                                                             "rows": 32, "cols": 120})
                hostile[name] = r.json()["id"]
            cpu2 = cpu_s(server.pid)
            hot_lat, hot_delay = await phase(client, ids["prompt"], args.seconds)
            cpu3 = cpu_s(server.pid)
            load_after = os.getloadavg()[0]
            rss_peak = rss_mb(server.pid)
            after = {}
            for name, sid in hostile.items():
                info = (await client.get(f"/api/sessions/{sid}")).json()
                lines = (await client.get(f"/api/sessions/{sid}/screen")).json()["rows"]
                after[name] = (info["bytes_read"], next((ln for ln in reversed(lines) if ln.strip()), "")[:40])
            for sid in hostile.values():
                await client.delete(f"/api/sessions/{sid}")
            await asyncio.sleep(3)
            rss_after = rss_mb(server.pid)
    finally:
        server.send_signal(signal.SIGINT if args.profile else signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()

    print(f"backend {args.backend}, sweep {args.sweep_ms} ms, {args.seconds:.0f} s per phase;"
          f" machine load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} cores")
    print(f"{'':34} {'baseline':>10} {'plain flood':>12} {'hostile':>10}")
    rows = [
        ("server CPU (% of one core)", [100 * (cpu1 - cpu0) / args.seconds, 100 * (cpu5 - cpu4) / args.seconds,
                                        100 * (cpu3 - cpu2) / args.seconds], ".0f"),
        ("/healthz requests", [len(base_lat), len(flood_lat), len(hot_lat)], "d"),
        ("/healthz p50 (ms)", [pct(v, .5) for v in (base_lat, flood_lat, hot_lat)], ".1f"),
        ("/healthz p99 (ms)", [pct(v, .99) for v in (base_lat, flood_lat, hot_lat)], ".1f"),
        ("/healthz max (ms)", [max(v) for v in (base_lat, flood_lat, hot_lat)], ".1f"),
        ("prompt pane: prompts seen", [len(v) for v in (base_delay, flood_delay, hot_delay)], "d"),
        ("prompt pane: delay median (ms)", [statistics.median(v) if v else float("nan")
                                            for v in (base_delay, flood_delay, hot_delay)], ".0f"),
        ("prompt pane: delay max (ms)", [max(v, default=float("nan")) for v in (base_delay, flood_delay, hot_delay)],
         ".0f"),
    ]
    for label, (a, b, c), fmt in rows:
        print(f"{label:34} {a:10{fmt}} {b:12{fmt}} {c:10{fmt}}")
    print(f"plain flood panes read {flood_read:,} bytes")
    print(f"server RSS: {rss_before:.1f} MB before the hostile panes, {rss_peak:.1f} MB with them,"
          f" {rss_after:.1f} MB after DELETE ({rss_after - rss_before:+.1f} MB)")
    for name, (nbytes, last) in after.items():
        print(f"  {name:16} read {nbytes:>10,} bytes; last line {last!r}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="auto", choices=["auto", "pyte", "ghostty"], help="default: the server's own default")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--sweep-ms", type=int, default=100)
    p.add_argument("--profile", metavar="FILE", help="run the server under cProfile, stats to FILE")
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
