"""What the sandbox costs a spawn: each host (pty, tmux) with and without it, side by side.

An agent that prints ``ready`` and sleeps is started N times one after another, then N at once
(the "20 sessions starting at once" of issue 25). Per mode it reports: the event loop's lag (the
longest a 5 ms timer was late) while the spawns run (``spawn`` is awaited: a host's blocking
work runs in a worker; issue 26), the time from ``spawn()`` to the agent's first
output (median, p90 and max; at once: until the last of the N), and the CPU a session costs from
start to reaped end — this process, its reaped children (pty host), and the tmux server with the
children it reaped (tmux host): bwrap, its init, the Python helper that hands the agent the
terminal, and the agent. bwrap does not wait for its namespace's init, whose CPU (the helper's,
the agent's) would so be counted nowhere: this process is made a child subreaper, so orphans come
to it and it reaps them (their CPU then lands in its children's). Rounds alternate the modes, so
a loaded machine loads them alike.

    nice .venv/bin/python benchmarks/sandbox_spawn.py --sessions 20 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from panewatch.hosts.base import LaunchSpec, PaneHandle, PaneHost
from panewatch.hosts.pty import PtyHost
from panewatch.hosts.tmux import TmuxHost, tmux_usable
from panewatch.procs.sandbox import Policy, Sandbox

TICKS = os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36
AGENT = ("/bin/sh", "-c", "echo ready; exec sleep 60")


class LagProbe:
    """The event loop's lag: how late a 5 ms timer fires at worst, while it runs."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + 0.005
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, loop.time() - due)

    def __enter__(self) -> LagProbe:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


class FirstOutput:
    """Records when the agent's ``ready`` arrives and when it exits."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ready = loop.create_future()
        self.exited = loop.create_future()
        self.seen = bytearray()

    def on_output(self, data: bytes) -> None:
        self.seen += data
        if b"ready" in self.seen and not self.ready.done():
            self.ready.set_result(time.perf_counter())

    def on_exit(self, code: int | None, reason: str) -> None:
        if not self.exited.done():
            self.exited.set_result(code)

    def on_status(self, state: str, detail: str) -> None:
        pass


def _tmux_cpu(host: PaneHost) -> float:
    """The tmux server's CPU seconds, its own and its reaped children's (the panes)."""
    pid = getattr(host, "server_pid", None)
    if not pid:
        return 0.0
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    fields = raw[raw.rfind(b")") + 2 :].split()
    return sum(int(x) for x in fields[11:15]) / TICKS


def _cpu(host: PaneHost) -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + _tmux_cpu(host)


async def _make(kind: str, contained: bool, folder: Path) -> PaneHost:
    state = folder / f"{kind}-{'c' if contained else 'p'}"
    state.mkdir(parents=True)
    sandbox = Sandbox(Policy(state)) if contained else None
    host: PaneHost = TmuxHost(state, sandbox=sandbox) if kind == "tmux" else PtyHost(sandbox=sandbox)
    await host.start()
    if sandbox is not None and not sandbox.active:
        raise SystemExit(f"bubblewrap cannot make a sandbox here: {sandbox.lost}")
    return host


def _reap_orphans() -> int:
    """Wait for every child that has exited (orphans a subreaper inherits); how many."""
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped += 1


async def _end(handles: list[PaneHandle], sinks: list[FirstOutput]) -> None:
    for handle in handles:
        await handle.terminate(grace=1.0)
    await asyncio.gather(*(s.exited for s in sinks))
    for handle in handles:
        handle.close()
    await _settle()


async def _settle() -> None:
    """Reap until no orphan comes for a while (orphaned inits end a moment after their pane; a
    killed tmux server brings its panes' CPU along): each mode's CPU stays its own."""
    quiet = 0
    while quiet < 3:
        quiet = quiet + 1 if _reap_orphans() == 0 else 0
        await asyncio.sleep(0.05)


async def one_mode(kind: str, contained: bool, sessions: int, folder: Path, label: str) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    await _settle()  # what the previous mode left (its tmux server) is not this mode's
    host = await _make(kind, contained, folder)
    first: list[float] = []
    cwd = os.getcwd()
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/")}
    cpu0 = _cpu(host)
    with LagProbe() as one_lag:
        for i in range(sessions):  # one after another
            sink = FirstOutput(loop)
            t0 = time.perf_counter()
            handle = await host.spawn(LaunchSpec(f"{label}s{i}", AGENT, cwd, env, 10, 40), sink)
            first.append(await sink.ready - t0)
            await _end([handle], [sink])
    await asyncio.sleep(0.2)  # tmux reaps its last pane (its CPU lands in the server's cstime)
    per_session_cpu = (_cpu(host) - cpu0) / sessions
    sinks = [FirstOutput(loop) for _ in range(sessions)]  # all at once
    t0 = time.perf_counter()
    with LagProbe() as burst_lag:
        spawns = (host.spawn(LaunchSpec(f"{label}b{i}", AGENT, cwd, env, 10, 40), s) for i, s in enumerate(sinks))
        handles = list(await asyncio.gather(*spawns))
        last = max(await asyncio.gather(*(s.ready for s in sinks))) - t0
    await _end(handles, sinks)
    await host.stop()
    if isinstance(host, TmuxHost):
        await host.kill_server()
    first.sort()
    return {
        "lag_ms": one_lag.worst * 1000,
        "first_p50_ms": statistics.median(first) * 1000,
        "first_p90_ms": first[int(len(first) * 0.9) - 1] * 1000,
        "first_max_ms": first[-1] * 1000,
        "cpu_ms": per_session_cpu * 1000,
        "burst_lag_ms": burst_lag.worst * 1000,
        "burst_last_ms": last * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("cannot become a child subreaper: the sandbox's CPU would be missed")
    kinds = ["pty"] + (["tmux"] if tmux_usable() is None else [])
    print(f"{args.sessions} sessions per mode, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    print(
        f"{'round':>5} {'host':4} {'mode':9} {'loop lag':>11} {'1st output p50':>14} {'p90':>7} {'max':>7}"
        f" {'CPU/session':>11} {'at once: lag':>14} {'last ready':>10}"
    )
    with tempfile.TemporaryDirectory(prefix="pw-spawn-") as tmp:
        for r in range(1, args.rounds + 1):
            for kind in kinds:
                for contained in (False, True):
                    mode = "contained" if contained else "plain"
                    got = await one_mode(kind, contained, args.sessions, Path(tmp) / str(r), f"r{r}{mode[0]}")
                    print(
                        f"{r:>5} {kind:4} {mode:9} {got['lag_ms']:>8.1f} ms {got['first_p50_ms']:>11.1f} ms"
                        f" {got['first_p90_ms']:>4.0f} ms {got['first_max_ms']:>4.0f} ms {got['cpu_ms']:>8.1f} ms"
                        f" {got['burst_lag_ms']:>11.1f} ms {got['burst_last_ms']:>7.0f} ms",
                        flush=True,
                    )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
