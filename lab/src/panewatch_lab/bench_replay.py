"""Real-traffic load: N panes replaying the real CLIs' recorded sessions into one engine.

Why: the spinner agents of the scale scenario send ~55-byte frames; real agents repaint
their input box, whole dialogs (Claude, ~400 B a frame) or their whole screen (Gemini). The
lab's captures (``fixtures/<agent>/<version>/*.raw``, with their true state in ``truth.toml``)
are the bytes the real CLIs wrote, so they are replayed as they are, frame by frame.

What is real and what is not: bytes and frame sizes are the captures' own. The captures carry
no per-chunk timestamps, so the pacing is modelled: a frame every ``frame_s`` (100 ms, the
CLIs' spinner tick) while a capture plays; after a ``working`` capture its last frames keep
cycling (the spinner goes on) for 1–4 s; after an ``idle`` or ``blocked`` one the pane is
silent for 3–10 s (the recorded evaluation run's task and answer delays,
``benchmarks/evaluation/claude-2.1.332.md``). Every pane starts at a random offset in a
random order of captures (seeded), and each capture starts with a terminal reset (``ESC c``).
The figure printed beside it is the bytes per second per pane this gives.

The engine runs as the service runs it (``wiring.build_engine``: the configured mode and
backend, the bundled manifests) on the in-memory host, in this process, without the HTTP
layer: this process's CPU time is the server's, and the replay driver's own cost is
measured separately with ``--driver-only`` (the same schedule into a sink that drops the
bytes), so it can be subtracted. Printed as one JSON object on stdout::

    python -m panewatch_lab.bench_replay --panes 200 --backend ghostty --mode change
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import random
import re
import secrets
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from panewatch.api import create_app
from panewatch.config import Settings
from panewatch.engine import Actor, ActorKind, Engine, SessionSpec
from panewatch.engine.events import Event, StateChanged
from panewatch.fixtures import find_folders, load_folder
from panewatch.hosts.memory import MemoryHandle, MemoryHost
from panewatch.procs.procinfo import Program
from panewatch.wiring import build_store, options_of

from .loopback import free_port

FRAME_S = 0.1
LAG_PERIOD_S = 0.010
SYNC = b"\x1b[?2026h"
#: Where a repaint starts when the CLI does not mark frames (cursor up or home).
REPAINT = re.compile(rb"\x1b\[\d*A|\x1b\[H|\x1b\[1;1H")
RESET = b"\x1bc"
BENCH = Actor(kind=ActorKind.policy, id="bench-replay", name="the replay benchmark")
#: The foreground process group each agent's captures run under (memory panes have no /proc):
#: a replayed pane's capture changes agent (Codex after Claude), and its manifest follows the
#: foreground program, as in a real terminal where one agent is started after another.
AGENT_PGIDS: dict[str, int] = {}
PROGRAMS: dict[int, Program] = {}


def agent_pgid(agent: str) -> int:
    """The made-up foreground group of ``agent``'s captures (one per agent, made on first use:
    every agent with captures, not a list that a new agent's captures would fall out of)."""
    if agent not in AGENT_PGIDS:
        pgid = AGENT_PGIDS[agent] = 90_001 + len(AGENT_PGIDS)
        PROGRAMS[pgid] = Program(pgid, agent, agent)
    return AGENT_PGIDS[agent]


@dataclass(frozen=True)
class Capture:
    agent: str
    name: str
    state: str
    frames: list[bytes]

    @property
    def size(self) -> int:
        return sum(map(len, self.frames))


def split_frames(data: bytes, min_bytes: int = 32, max_bytes: int = 8192) -> list[bytes]:
    """Cut a capture where the CLI starts a repaint: synchronized-update marks (Claude,
    Codex), else cursor-up/home repaints (Ink, Gemini); pieces under ``min_bytes`` join the
    next, pieces over ``max_bytes`` are cut (4 KiB-ish PTY reads)."""
    cuts = [m.start() for m in re.finditer(re.escape(SYNC), data)]
    if len(cuts) < 3:
        cuts = [m.start() for m in REPAINT.finditer(data)]
    frames, start = [], 0
    for cut in [*cuts, len(data)]:
        if cut - start >= min_bytes or cut == len(data):
            piece = data[start:cut]
            while len(piece) > max_bytes:
                frames.append(piece[:max_bytes])
                piece = piece[max_bytes:]
            if piece:
                frames.append(piece)
            start = cut
    return frames


def load_captures(roots: list[Path], rows: int, cols: int) -> list[Capture]:
    """Every capture of size ``rows``×``cols`` under ``roots`` (folders with a truth file)."""
    out = []
    for root in roots:
        for folder in find_folders(root) if root.is_dir() else []:
            for fx in load_folder(folder):
                if (fx.truth.rows, fx.truth.cols) == (rows, cols):
                    frames = split_frames(fx.read())
                    frames[0] = RESET + frames[0]
                    out.append(Capture(fx.agent, fx.name, str(fx.truth.state), frames))
    return out


@dataclass
class Player:
    """One pane's place in its loop of captures."""

    handle: Any
    order: list[Capture]
    rng: random.Random
    index: int = 0
    frame: int = 0
    dwell_until: float = 0.0
    spin: list[bytes] = field(default_factory=list)
    sent: int = 0
    replayed: bool = False  # a pane of the engine (False with --driver-only)
    total: int = 0  # bytes emitted so far
    marks: deque[tuple[int, float]] | None = None  # (total after an emit, when): dashboards only

    @property
    def capture(self) -> Capture:
        return self.order[self.index % len(self.order)]


class Replay:
    """Drives every pane from one timer (a heap of next-frame times), as cheaply as it can,
    and notes when each capture's last frame went out (the truth for the delay figures)."""

    def __init__(self, players: list[Player], frame_s: float) -> None:
        self.players, self.frame_s = players, frame_s
        self.truth: dict[int, list[tuple[float, str]]] = {i: [] for i in range(len(players))}
        self.bytes = 0

    def emit(self, i: int, now: float) -> float:
        """Send pane ``i``'s next frame; when its next one is due."""
        p = self.players[i]
        cap = p.capture
        if now < p.dwell_until:  # the spinner goes on after a working capture
            data = p.spin[p.sent % len(p.spin)]
            p.sent += 1
            self._emit(p, data, now)
            return now + self.frame_s
        if p.frame == 0 and p.replayed:
            p.handle.fg_pgid = agent_pgid(cap.agent)  # the capture's agent holds the terminal now
        data = cap.frames[p.frame]
        self._emit(p, data, now)
        p.frame += 1
        if p.frame < len(cap.frames):
            return now + self.frame_s
        self.truth[i].append((time.monotonic(), cap.state))
        p.frame, p.index = 0, p.index + 1
        if cap.state == "working":
            p.spin = [f for f in cap.frames[-6:] if len(f) < 2048] or cap.frames[-1:]
            p.dwell_until = now + p.rng.uniform(1.0, 4.0)
            return now + self.frame_s
        p.spin = []
        p.dwell_until = 0.0
        return now + p.rng.uniform(3.0, 10.0)

    def _emit(self, p: Player, data: bytes, now: float) -> None:
        p.handle.emit(data)
        self.bytes += len(data)
        if p.marks is not None:
            p.total += len(data)
            p.marks.append((p.total, now))

    async def run(self, stop: asyncio.Event, offsets: list[float]) -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        heap = [(t0 + off, i) for i, off in enumerate(offsets)]
        heapq.heapify(heap)
        while not stop.is_set():
            now = loop.time()
            while heap and heap[0][0] <= now:
                _, i = heapq.heappop(heap)
                heapq.heappush(heap, (self.emit(i, now), i))
            delay = max(0.0, heap[0][0] - loop.time()) if heap else 0.1
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay) if delay > 0.05 else await asyncio.sleep(delay)
            except TimeoutError:
                pass


class NullHandle:
    """``--driver-only``: the replay's own cost, bytes dropped."""

    def emit(self, data: bytes) -> None:
        pass


#: A screen WebSocket of the service: ``/ws/sessions/{sid}/screen``.
SCREEN_WS = re.compile(r"^/ws/sessions/([^/]+)/screen$")
#: How every screen frame's JSON starts (``ScreenFrame.type`` is its first field).
FRAME_START = '{"type":"screen"'


class StampFrames:
    """ASGI wrapper of the service's app: each screen frame sent on a watched session's screen
    WebSocket gets ``bench_t`` (when the newest output it shows arrived, None: none newer than the
    frame before). It reads the engine through its public ``fed()`` and changes nothing in it: the
    frames are the ones the service sends, with one key added to their JSON on the way out."""

    def __init__(self, app: Any, engine: Engine, players: dict[str, Player]) -> None:
        self.app, self.engine, self.players = app, engine, players

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        found = SCREEN_WS.match(scope.get("path", "")) if scope["type"] == "websocket" else None
        player = self.players.get(found.group(1)) if found else None
        if found is None or player is None:
            await self.app(scope, receive, send)
            return
        sid, engine = found.group(1), self.engine
        shown = engine.fed(sid)

        async def stamped(message: dict[str, Any]) -> None:
            nonlocal shown
            text = message.get("text") if message["type"] == "websocket.send" else None
            if text is not None and text.startswith(FRAME_START):
                fed, marks = engine.fed(sid), player.marks or ()
                newest = next(((end, t) for end, t in reversed(marks) if end <= fed), None)
                at = newest[1] if newest is not None and newest[0] > shown else None
                shown = fed
                message = {**message, "text": '{"bench_t":' + json.dumps(at) + "," + text[1:]}
            await send(message)

        await self.app(scope, receive, stamped)


class Dashboards:
    """``--dashboards``: the service's HTTP app on loopback in this process (same engine), and
    WebSocket clients watching its screens in a process of their own (``bench_dashboards``).
    Each screen frame gets ``bench_t``: when the newest output it shows arrived (None: it shows
    no output newer than the frame before), so a frame's delay is how old the newest output on
    the watcher's screen is when the frame arrives: emulation falling behind, the loop's lag and
    the socket's queue all add to it. (Not the oldest output since the last frame: output that
    changes nothing visible makes no frame, and would be counted until the next one.)"""

    def __init__(self, engine: Engine, settings: Settings, players: dict[str, Player]) -> None:
        import uvicorn

        self.engine, self.players = engine, players
        for p in players.values():
            p.marks = deque(maxlen=512)
        self.port = free_port()
        app = StampFrames(create_app(settings, engine=engine), engine, players)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.task: asyncio.Future[None] | None = None
        self.client: asyncio.subprocess.Process | None = None

    async def start(self, token: str, dashboards: int, watch: int, until: float) -> None:
        self.task = asyncio.ensure_future(self.server.serve())
        while not self.server.started:
            await asyncio.sleep(0.05)
        argv = ["--port", str(self.port), f"--token={token}", f"--until={until}"]  # (a token may start with -)
        argv += ["--dashboards", str(dashboards), "--watch", str(watch), "--sessions", *self.players]
        self.client = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "panewatch_lab.bench_dashboards", *argv, stdout=asyncio.subprocess.PIPE
        )

    async def result(self, t0: float, t1: float) -> dict[str, Any]:
        assert self.client is not None
        out, _ = await asyncio.wait_for(self.client.communicate(), 120)
        self.server.should_exit = True
        if self.task is not None:
            await self.task
        got = json.loads(out.decode().strip().splitlines()[-1])
        delays = [d for at, d in got["delays"] if t0 <= at <= t1]
        return {
            "dashboards_sockets": got["sockets"],
            "dashboards_opened": got["opened"],
            "frames_per_s": len(delays) / max(t1 - t0, 1e-9),
            "frame_p50": pct(delays, 50),
            "frame_p99": pct(delays, 99),
            "frame_max": max(delays) if delays else float("nan"),
            "client_cpu_s": got["client_cpu_s"],
            "client_errors": got["errors"],
        }


def runq_wait_s() -> float:
    """Seconds this process was runnable but waiting for a CPU (``/proc/self/schedstat``): on a
    shared machine, the part of the loop's lag that is other processes', not this one's."""
    try:
        with open("/proc/self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return float("nan")


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))]


async def measure(a: argparse.Namespace) -> dict[str, Any]:
    captures = load_captures([Path(p) for p in a.captures], a.rows, a.cols)
    if not captures:
        raise SystemExit(f"no {a.rows}x{a.cols} captures under {', '.join(a.captures)}")
    rng = random.Random(a.seed)
    token = secrets.token_urlsafe(16)
    settings = Settings(mode=a.mode, backend=a.backend, token=token, state_dir=Path(tempfile.mkdtemp()))
    engine, host = None, None
    sids: list[str] = []
    if not a.driver_only:
        host = MemoryHost()
        # memory panes' pids are not processes of this machine: the agents' own groups are
        engine = Engine(build_store(settings), host=host, options=options_of(settings), programs=PROGRAMS.get)
        await engine.start()
    rss0 = rss_bytes()  # the engine without panes: what each pane adds is measured
    if engine is None or host is None:
        handles: list[Any] = [NullHandle() for _ in range(a.panes)]
    else:
        handles = []
        for _ in range(a.panes):
            spec = SessionSpec(agent=None, command=["agent"], rows=a.rows, cols=a.cols)
            info = await engine.create(spec, actor=BENCH)
            sids.append(info.id)
            handles.append(host.handles[info.id])
    players = []
    for h in handles:
        order = captures[:]
        rng.shuffle(order)
        players.append(Player(h, order, random.Random(rng.random()), replayed=isinstance(h, MemoryHandle)))
    replay = Replay(players, a.frame_s)
    # the truth is per capture; the manifest is picked by the capture's agent
    index = {sid: i for i, sid in enumerate(sids)}
    events: dict[int, list[tuple[float, str]]] = {i: [] for i in range(a.panes)}

    def on_event(event: Event) -> None:
        if isinstance(event, StateChanged) and event.session in index:
            events[index[event.session]].append((time.monotonic(), str(event.state)))

    if engine is not None:
        engine.subscribe(on_event)
    stop = asyncio.Event()
    offsets = [rng.uniform(0, a.warmup) for _ in range(a.panes)]
    dash = None
    if a.dashboards and engine is not None:
        dash = Dashboards(engine, settings, dict(zip(sids, players, strict=True)))
        await dash.start(token, a.dashboards, a.watch, time.monotonic() + a.warmup + a.seconds + 1.0)
    lags: list[float] = []

    async def sample_lag() -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            start = loop.time()
            await asyncio.sleep(LAG_PERIOD_S)
            lags.append(max(0.0, loop.time() - start - LAG_PERIOD_S))

    driver = asyncio.ensure_future(replay.run(stop, offsets))
    lagger = asyncio.ensure_future(sample_lag())
    await asyncio.sleep(a.warmup)
    lags.clear()
    bytes0, t0, c0, w0 = replay.bytes, time.monotonic(), time.process_time(), time.perf_counter()
    q0 = runq_wait_s()
    stats0 = (await engine.stats()).classifications if engine else 0
    await asyncio.sleep(a.seconds)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    waited = runq_wait_s() - q0
    t1 = time.monotonic()
    stats1 = (await engine.stats()).classifications if engine else 0
    rss = rss_bytes()
    frames = await dash.result(t0, t1) if dash is not None else {}
    stop.set()
    for failed in await asyncio.gather(driver, lagger, return_exceptions=True):
        if isinstance(failed, BaseException):  # a dead driver measures an idle engine: say so
            raise RuntimeError("the replay driver failed") from failed
    delays, missed, changes = _delays(replay.truth, events, t0, t1)
    if engine is not None:
        await engine.stop()
    return {
        "panes": a.panes,
        "backend": engine.backend if engine else "-",
        "mode": a.mode if engine else "-",
        "driver_only": a.driver_only,
        "seconds": wall,
        "cpu": cpu / wall,
        "runq_wait": waited / wall,
        "rss_per_pane": (rss - rss0) / a.panes,
        "rss": rss,
        "bytes_per_s_per_pane": (replay.bytes - bytes0) / wall / a.panes,
        "change_p50": pct(delays, 50),
        "change_p99": pct(delays, 99),
        "change_max": max(delays) if delays else float("nan"),
        "changes": changes,
        "missed": missed,
        "lag_p99": pct(lags, 99),
        "lag_max": max(lags) if lags else float("nan"),
        "classifications_per_s": (stats1 - stats0) / wall,
        "captures": len(captures),
        "agents": sorted({c.agent for c in captures}),
        "dashboards": a.dashboards if dash is not None else 0,
        "watch": a.watch,
        **frames,
    }


def _delays(
    truth: dict[int, list[tuple[float, str]]], events: dict[int, list[tuple[float, str]]], t0: float, t1: float
) -> tuple[list[float], int, int]:
    """For every capture that ended in the window with a state other than the pane's previous
    truth: from its last frame to the first event of that state after its first frame — zero if
    the state was reported before the last frame. Missed: no such event before the next capture
    ended."""
    delays, missed, changes = [], 0, 0
    for i, ends in truth.items():
        prev_state, prev_end = None, None
        for k, (end, state) in enumerate(ends):
            nxt = ends[k + 1][0] if k + 1 < len(ends) else float("inf")
            if prev_state is not None and state != prev_state and t0 <= end <= t1 - 1.0:
                changes += 1
                after = prev_end or 0.0
                hit = next((t for t, s in events[i] if s == state and after < t <= nxt), None)
                if hit is None:
                    missed += 1
                else:
                    delays.append(max(0.0, hit - end))
            prev_state, prev_end = state, end
    return delays, missed, changes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m panewatch_lab.bench_replay")
    p.add_argument("--panes", type=int, default=200)
    p.add_argument("--backend", default="auto")
    p.add_argument("--mode", choices=["sweep", "change"], default="change")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--frame-s", type=float, default=FRAME_S, dest="frame_s")
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--cols", type=int, default=120)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--driver-only", action="store_true", dest="driver_only")
    p.add_argument("--captures", nargs="+", default=["fixtures"])
    p.add_argument("--dashboards", type=int, default=0, help="WebSocket dashboards watching screens (HTTP app on)")
    p.add_argument("--watch", type=int, default=10, help="screens each dashboard watches")
    a = p.parse_args(argv)
    out = asyncio.run(measure(a))
    print(json.dumps(out, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
