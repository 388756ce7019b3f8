"""What the process table says while the agent works, waits for you, or idles.

The seed sampled macOS ``ps -o stat=,time=`` and found every state ``S``. Linux says more:
``/proc/PID/stat`` (state letter, CPU ticks), ``/proc/PID/wchan`` (the kernel function a
sleeping task waits in) and ``/proc/PID/syscall`` (the system call it is blocked in, or
``running``). The sampler reads them twice a second in a thread of its own; the table groups
the samples by the true state at that moment. Of the main thread only, except CPU, which the
kernel sums over the whole thread group.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .eval_log import Record, Recorder
from .eval_score import Segment

INTERVAL_S = 0.5
CLK_TCK = os.sysconf("SC_CLK_TCK")

#: x86-64 system call numbers seen in waiting agents (others are shown as numbers).
SYSCALLS_X86_64 = {
    0: "read",
    1: "write",
    7: "poll",
    23: "select",
    35: "nanosleep",
    61: "wait4",
    202: "futex",
    230: "clock_nanosleep",
    232: "epoll_wait",
    270: "pselect6",
    271: "ppoll",
    281: "epoll_pwait",
    441: "epoll_pwait2",
}


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def sample(pid: int) -> dict[str, object] | None:
    """One reading of ``pid``; None once it is gone."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) "
    state, utime, stime, threads = fields[0], int(fields[11]), int(fields[12]), int(fields[17])
    syscall = _read(f"/proc/{pid}/syscall") or "?"
    first = syscall.split()[0] if syscall else "?"
    return {
        "state": state,
        "cpu": utime + stime,
        "threads": threads,
        "wchan": _read(f"/proc/{pid}/wchan") or "?",
        "syscall": first,
    }


def syscall_name(first: str) -> str:
    """``0`` → ``read (0)``; ``running`` and unknowns as they are."""
    if first.lstrip("-").isdigit():
        n = int(first)
        return f"{SYSCALLS_X86_64[n]} ({n})" if n in SYSCALLS_X86_64 and os.uname().machine == "x86_64" else str(n)
    return first


class ProcSampler(threading.Thread):
    """Samples one pid every ``interval`` seconds until stopped or the process is gone."""

    def __init__(self, pid: int, recorder: Recorder, interval: float = INTERVAL_S) -> None:
        super().__init__(name=f"eval-proc-{pid}", daemon=True)
        self.pid, self.recorder, self.interval = pid, recorder, interval
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(5)

    def run(self) -> None:
        while not self._halt.is_set():
            t = time.monotonic()
            reading = sample(self.pid)
            if reading is None:
                return
            self.recorder.add("proc", t, **reading)
            self._halt.wait(self.interval)


@dataclass
class StateRow:
    """The samples taken while the truth said one state."""

    state: str
    samples: int
    letters: Counter[str]
    wchans: Counter[str]
    syscalls: Counter[str]
    cpu_percent: float | None  # of one core, averaged over the intervals inside this state


def _state_at(truth: Sequence[Segment], t: float) -> str | None:
    for seg in truth:
        if seg.start <= t < seg.end:
            return seg.state
    return None


def group_by_truth(samples: Sequence[Record], truth: Sequence[Segment]) -> list[StateRow]:
    """Per true state: letter shares, wchan and syscall counts, CPU share of a core."""
    rows: dict[str, StateRow] = {}
    busy: dict[str, tuple[float, float]] = {}  # state -> (cpu seconds, wall seconds)
    prev: Record | None = None
    for s in samples:
        state = _state_at(truth, s["t"])
        if state is None:
            prev = s
            continue
        row = rows.setdefault(state, StateRow(state, 0, Counter(), Counter(), Counter(), None))
        row.samples += 1
        row.letters[s["state"]] += 1
        row.wchans[s["wchan"]] += 1
        row.syscalls[syscall_name(s["syscall"])] += 1
        if prev is not None and _state_at(truth, prev["t"]) == state and s["t"] > prev["t"]:
            cpu, wall = busy.get(state, (0.0, 0.0))
            busy[state] = (cpu + (s["cpu"] - prev["cpu"]) / CLK_TCK, wall + s["t"] - prev["t"])
        prev = s
    for state, (cpu, wall) in busy.items():
        if wall > 0:
            rows[state].cpu_percent = 100 * cpu / wall
    order = {"working": 0, "idle": 1, "blocked": 2}
    return sorted(rows.values(), key=lambda r: order.get(r.state, 9))
