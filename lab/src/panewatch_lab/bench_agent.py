"""A scripted agent for ``panewatch bench``: Claude-like screens, and the truth of when it drew them.

The benchmark measures "prompt drawn → state event", so the agent itself must say when a
screen was complete: right after writing the last byte of a phase (working, blocked, idle)
it appends ``{"state": ..., "at": <wall clock>, "n": <phase count>}`` to ``--state-file``.
Between phase changes it animates a spinner at ``--hz`` (~55-byte frames that repaint one
row, "esc to interrupt" included), as Claude Code does while it works.

Phases are drawn the way Ink draws them — cursor up over the previous frame, ``ESC[J``,
then the new rows — and their wording matches the bundled ``claude`` manifest's rules.
Standard library only and a fixed seed: it starts fast, and 200 copies cost little.

    python -m panewatch_lab.bench_agent --state-file /tmp/truth.jsonl --seed 3
    python -m panewatch_lab.bench_agent --spin-only --hz 10
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import TextIO

RULE = "─" * 60
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

#: The rows below the conversation in each phase (the last one is where the cursor rests).
WORKING = ["", RULE, "❯ ", RULE, "  esc to interrupt"]
BLOCKED = [
    RULE,
    " Bash command",
    "   touch notes.txt",
    " Do you want to proceed?",
    " ❯ 1. Yes",
    "   2. Yes, and don't ask again this session",
    "   3. No, and tell Claude what to do differently",
    " Esc to cancel · Tab to amend",
]
IDLE = ["", RULE, "❯ ", RULE, "  ? for shortcuts"]


class Painter:
    """Draws phases Ink-style and spinner frames in place; writes straight to the terminal."""

    def __init__(self, fd: int = 1) -> None:
        self.fd = fd
        self.height = 0  # rows of the current phase's frame
        self.frame = 0
        self.started = time.monotonic()

    def write(self, text: str) -> None:
        data = text.encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def phase(self, rows: list[str]) -> None:
        erase = f"\r\x1b[{self.height - 1}A\x1b[J" if self.height > 1 else "\r\x1b[J"
        self.write(erase + "\r\n".join(rows))
        self.height = len(rows)

    def spinner_text(self) -> str:
        self.frame += 1
        secs = int(time.monotonic() - self.started)
        return f"{SPINNER[self.frame % len(SPINNER)]} Thinking… ({secs}s · esc to interrupt)"

    def working(self) -> None:
        self.phase([self.spinner_text(), *WORKING])

    def spin(self) -> None:
        """One spinner frame: save the cursor, rewrite the spinner row, restore (~55 bytes)."""
        self.write(f"\x1b7\x1b[{len(WORKING)}A\r\x1b[2K{self.spinner_text()}\x1b8")


class Truth:
    """The side file of true states, one JSON line per phase change, written when drawn."""

    def __init__(self, path: str | None) -> None:
        self.file: TextIO | None = open(path, "a", buffering=1) if path else None  # noqa: SIM115
        self.n = 0

    def record(self, state: str) -> None:
        at = time.time()  # the last byte of the phase is in the terminal now
        self.n += 1
        if self.file is not None:
            self.file.write(json.dumps({"state": state, "at": at, "n": self.n, "pid": os.getpid()}) + "\n")


def run(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    paint = Painter()
    truth = Truth(args.state_file)
    paint.write("\x1b[2J\x1b[H" + "".join(f"● history line {i}: the agent did some work\r\n" for i in range(8)))
    period = 1.0 / args.hz if args.hz > 0 else 0.0
    paint.working()
    truth.record("working")
    if args.spin_only:
        while True:
            time.sleep(period or 1.0)
            if period:
                paint.spin()
    deadline = time.monotonic() + args.duration if args.duration else float("inf")
    while time.monotonic() < deadline:
        # work, animating the spinner
        until = time.monotonic() + rng.uniform(*args.work)
        while time.monotonic() < until:
            time.sleep(min(period or 0.1, max(0.0, until - time.monotonic())))
            if period and time.monotonic() < until:
                paint.spin()
        state = "idle" if rng.random() < args.idle_prob else "blocked"
        paint.phase(BLOCKED if state == "blocked" else ["● Done: notes.txt written.", *IDLE])
        truth.record(state)
        time.sleep(rng.uniform(*args.hold))
        paint.working()
        truth.record("working")
    paint.write("\r\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m panewatch_lab.bench_agent", description=__doc__.split("\n\n")[0])
    p.add_argument("--state-file", help="append the true state here, one JSON line per change")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hz", type=float, default=10.0, help="spinner frames per second while working (0: none)")
    p.add_argument("--work", type=float, nargs=2, default=(0.4, 1.2), metavar=("MIN", "MAX"),
                   help="seconds of work between prompts")
    p.add_argument("--hold", type=float, nargs=2, default=(0.4, 1.0), metavar=("MIN", "MAX"),
                   help="seconds a prompt (or the idle box) stays before work resumes")
    p.add_argument("--idle-prob", type=float, default=0.2, help="chance a work spell ends idle, not blocked")
    p.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: never)")
    p.add_argument("--spin-only", action="store_true", help="work forever: only the spinner")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        run(parse_args(argv))
    except (KeyboardInterrupt, BrokenPipeError, OSError):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
