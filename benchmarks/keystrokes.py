"""Server CPU per keystroke typed in the dashboard's terminal, beside a no-op message.

Issue 25 measured ~45 µs of server CPU per 1-byte write. This script starts ``panewatch serve``
(real uvicorn, a real PTY running ``cat`` with echo off, so the pane draws nothing back), opens the
pane's ``/ws/sessions/{id}/term`` and sends, in alternating phases of the same run, N no-op
resizes (the same size: parsed, dispatched and dropped — the baseline of a WebSocket message) and
N one-byte inputs. Each phase ends with a ``release`` message whose reply says every message
before it was handled. The figure is the server's user + system CPU per message from
``/proc/<pid>/stat``; the server's log goes to a file, and its lines per phase are counted.

Run: ``nice .venv/bin/python benchmarks/keystrokes.py [-n 5000] [--rounds 3] [--pane-host tmux|pty] [--profile FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import websockets


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (load-independent, unlike wall time)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def phase(ws: websockets.ClientConnection, replies: asyncio.Queue[dict], message: str, n: int) -> None:
    """Send ``message`` n times, then wait until the server has handled them all."""
    for _ in range(n):
        await ws.send(message)
    await ws.send(json.dumps({"type": "release"}))
    while (await asyncio.wait_for(replies.get(), 60)).get("type") != "released":
        pass


async def run(args: argparse.Namespace) -> None:
    port, token = free_port(), secrets.token_hex(16)
    tmp = Path(tempfile.mkdtemp(prefix="pw-keys-"))
    log_path = tmp / "server.log"
    env = {**os.environ, "PANEWATCH_TOKEN": token}
    with open(log_path, "wb") as log_file:
        server = subprocess.Popen(
            [
                sys.executable,
                *(["-m", "cProfile", "-o", args.profile] if args.profile else []),
                "-m",
                "panewatch",
                "serve",
                "--port",
                str(port),
                "--state-dir",
                str(tmp / "state"),
                "--pane-host",
                args.pane_host,
            ],
            env=env,
            stdout=log_file,
            stderr=log_file,
        )
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30, headers=headers) as http:
            for _ in range(300):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
            r = await http.post("/api/sessions", json={"command": ["sh", "-c", "stty -echo; exec cat >/dev/null"]})
            r.raise_for_status()
            sid = r.json()["id"]
            info = r.json()
            noop = json.dumps({"type": "resize", "rows": info["rows"], "cols": info["cols"]})
            key = json.dumps({"type": "input", "data": "a"})
            async with websockets.connect(
                f"ws://127.0.0.1:{port}/ws/sessions/{sid}/term", additional_headers=headers, max_size=None
            ) as ws:
                replies: asyncio.Queue[dict] = asyncio.Queue()

                async def drain() -> None:
                    async for frame in ws:
                        if isinstance(frame, str):
                            replies.put_nowait(json.loads(frame))

                drainer = asyncio.create_task(drain())
                await phase(ws, replies, noop, 200)  # warm up both paths
                await phase(ws, replies, key, 200)
                per: dict[str, list[float]] = {"no-op resize": [], "1-byte input": []}
                lines: dict[str, list[int]] = {"no-op resize": [], "1-byte input": []}
                for _ in range(args.rounds):
                    for label, message in (("no-op resize", noop), ("1-byte input", key)):
                        before_lines = log_path.read_bytes().count(b"\n")
                        c0 = cpu_s(server.pid)
                        await phase(ws, replies, message, args.n)
                        per[label].append((cpu_s(server.pid) - c0) / args.n * 1e6)
                        await asyncio.sleep(1.2)  # a summary line per second of typing comes after the burst
                        lines[label].append(log_path.read_bytes().count(b"\n") - before_lines)
                drainer.cancel()
            await http.delete(f"/api/sessions/{sid}")
    finally:
        server.send_signal(signal.SIGINT if args.profile else signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    base = statistics.median(per["no-op resize"])
    keys = statistics.median(per["1-byte input"])
    print(f"server CPU per WebSocket message ({args.pane_host} host; median of {args.rounds} rounds of {args.n}):")
    for label in per:
        runs = ", ".join(f"{v:.1f}" for v in per[label])
        print(f"  {label:13s} {statistics.median(per[label]):6.1f} µs  ({runs}); log lines per round {lines[label]}")
    print(f"  a keystroke's own cost: {keys - base:.1f} µs above the no-op message")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5000, help="messages per phase")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pane-host", choices=["tmux", "pty"], default="tmux", help="where the pane runs")
    ap.add_argument("--profile", metavar="FILE", help="run the server under cProfile, its stats to FILE")
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
