"""Do the pyte backend's fast draw paths still pay? (issue 26, item 7; figures in notes/pyte-fast-paths.md)

Each variant turns some of ``screen/_draw.py``'s fast paths off by sending their text to pyte's own
``draw`` (``_pyte_draw``, which draws the same cells: tests/test_screen_pyte.py):

- ``all``: as shipped;
- ``no-plain``: one-cell text (ASCII and narrow) through pyte (``_draw_plain``);
- ``no-wide``: text with two-cell characters through pyte (``_draw_runs``, ``_draw_cells``);
- ``no-runs``: text with two-cell characters drawn whole by ``_draw_cells``, not split into runs
  (``_draw_runs``: one-cell runs on ``_draw_plain``, two-cell runs on ``_draw_cells``);
- ``none``: every fast path off.

Two measures, the variants alternating round by round so that the machine's load falls on all alike:

1. ``feed``: every capture under ``fixtures/`` fed to a fresh pyte ``Screen`` of its size in 4 KiB
   reads (the ``lines()`` read after each, as the scheduler does), CPU seconds per round; then
   the same for 2 MiB of CJK prose (two-cell text, which the captures barely have), and for 2 MiB
   of distinct CJK ideographs (a hostile flood, past every per-character cache);
2. ``replay``: ``panewatch_lab.bench_replay`` (the engine, N panes replaying the captures frame by
   frame, pyte, change mode) in a process per variant, its CPU share.

    .venv/bin/python benchmarks/pyte_fast_paths.py [--rounds 5] [--replay-rounds 2] [--panes 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from panewatch.fixtures import find_folders, load_folder
from panewatch.screen import Screen, _draw

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("all", "no-plain", "no-wide", "no-runs", "none")
_SHIPPED = {name: getattr(_draw.DrawingScreen, name) for name in ("_draw_plain", "_draw_runs", "_draw_cells")}


def use(variant: str) -> None:
    """Turn the fast paths of ``variant`` off (the others as shipped)."""
    off = {
        "all": (),
        "no-plain": ("_draw_plain",),
        "no-wide": ("_draw_runs", "_draw_cells"),
        "no-runs": ("_draw_runs",),
        "none": tuple(_SHIPPED),
    }[variant]
    for name, method in _SHIPPED.items():
        if name == "_draw_runs" and variant == "no-runs":  # mixed text drawn whole by _draw_cells
            setattr(_draw.DrawingScreen, name, lambda self, data: self._draw_cells(data))
        elif name in off:
            setattr(_draw.DrawingScreen, name, lambda self, data, *_a, **_k: self._pyte_draw(data))
        else:
            setattr(_draw.DrawingScreen, name, method)


def captures() -> list[tuple[int, int, bytes]]:
    return [
        (fx.truth.rows, fx.truth.cols, fx.read())
        for folder in find_folders(ROOT / "fixtures")
        for fx in load_folder(folder)
    ]


def cjk_stream() -> list[tuple[int, int, bytes]]:
    """An agent answering in Chinese: 2 MiB of lines of CJK prose with ASCII words and colours
    (none of the captures has much two-cell text)."""
    line = "\x1b[1m修改\x1b[0m 文件 src/main.rs 中的函数，然后运行测试 cargo test：全部通过。" * 2 + "\r\n"
    data = line.encode() * (2 * 2**20 // len(line.encode()))
    return [(32, 120, data)]


def feed_once(data: list[tuple[int, int, bytes]]) -> tuple[float, list[list[str]]]:
    started = time.thread_time()
    screens = []
    for rows, cols, raw in data:
        s = Screen(rows, cols)
        for i in range(0, len(raw), 4096):
            s.feed(raw[i : i + 4096])
            s.lines()
        screens.append(s.lines())
    return time.thread_time() - started, screens


def cjk_flood() -> list[tuple[int, int, bytes]]:
    """2 MiB of distinct CJK ideographs (U+4E00..U+9FFF over and over, with a line feed every
    100): hostile output, past every per-character cache."""
    text = "".join(chr(c) + ("\r\n" if c % 100 == 0 else "") for c in range(0x4E00, 0xA000))
    data = text.encode() * (2 * 2**20 // len(text.encode()))
    return [(32, 120, data)]


def measure_feed(rounds: int, what: str, variants: list[str]) -> dict[str, list[float]]:
    data = {"captures": captures, "cjk": cjk_stream, "cjk-flood": cjk_flood}[what]()
    total = sum(len(raw) for _, _, raw in data)
    print(f"feed {what}: {len(data)} streams, {total / 2**20:.1f} MiB, {rounds} rounds", flush=True)
    times: dict[str, list[float]] = {v: [] for v in variants}
    reference = None
    for _ in range(rounds):
        for variant in variants:
            use(variant)
            took, screens = feed_once(data)
            if reference is None:
                reference = screens
            assert screens == reference, f"{variant} draws other rows than the shipped paths"
            times[variant].append(took)
    use("all")
    for variant in variants:
        med = statistics.median(times[variant])
        print(f"  {variant:<9} median {med:6.2f} CPU s  {total / 2**20 / med:6.2f} MiB/s  rounds {times[variant]}")
    return times


def replay_once(variant: str, panes: int, seconds: float) -> dict[str, float]:
    argv = [sys.executable, __file__, "--child", variant, "--", "--panes", str(panes), "--backend", "pyte"]
    argv += ["--mode", "change", "--seconds", str(seconds), "--warmup", "3", "--captures", str(ROOT / "fixtures")]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    row: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def measure_replay(rounds: int, panes: int, seconds: float) -> None:
    print(f"replay: {panes} panes, pyte, change mode, {seconds:.0f} s window, {rounds} rounds", flush=True)
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            rows[variant].append(replay_once(variant, panes, seconds))
    for variant in VARIANTS:
        cpu = [r["cpu"] * 100 for r in rows[variant]]
        p99 = [r["change_p99"] * 1000 for r in rows[variant]]
        waited = [r["runq_wait"] * 100 for r in rows[variant]]
        print(
            f"  {variant:<9} CPU {statistics.median(cpu):5.1f}% {[round(c, 1) for c in cpu]}"
            f"  change p99 {statistics.median(p99):6.0f} ms  waited {[round(w) for w in waited]}%"
        )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", nargs="*", choices=VARIANTS, default=list(VARIANTS))
    p.add_argument(
        "--feed", nargs="*", choices=["captures", "cjk", "cjk-flood"], default=["captures", "cjk", "cjk-flood"]
    )
    p.add_argument("--replay-rounds", type=int, default=2)
    p.add_argument("--panes", type=int, default=200)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--child", choices=VARIANTS)
    a, rest = p.parse_known_args()
    if a.child:
        use(a.child)
        from panewatch_lab import bench_replay

        return bench_replay.main([x for x in rest if x != "--"])
    for what in a.feed:
        measure_feed(a.rounds, what, a.variants)
    if a.replay_rounds:
        measure_replay(a.replay_rounds, a.panes, a.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
