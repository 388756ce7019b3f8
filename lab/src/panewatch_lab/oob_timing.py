"""Measure when an agent's out-of-band status arrives against what its screen shows.

Runs the real CLI against its mock through a few turns, replays the timed output chunks on a
fresh screen, classifies the screen with the bundled manifest after every chunk, and pairs
each OSC 7501 status change with the moment the screen's verdict reached the same state. The
numbers decide where the status stands in the signal order (``panewatch.panes.signals``).

    python -m panewatch_lab.oob_timing --agent codex [--turns 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.screen import Screen
from panewatch_lab.agent_capture import type_text
from panewatch_lab.agent_labs import get_lab
from panewatch_lab.agent_scenario import last_turn
from panewatch_lab.loopback import LoopbackServer
from panewatch_lab.pty_session import PtySession


def run(agent: str, turns: int, rows: int = 32, cols: int = 120) -> list[tuple[float, str, str]]:
    """(time, kind, state) events: ``status`` changes and ``screen`` verdict changes."""
    lab = get_lab(agent)
    binary = lab.find()
    if binary is None:
        raise SystemExit(f"no {agent} CLI in the lab prefix")
    work = Path(tempfile.mkdtemp(prefix=f"panewatch-oob-{agent}-"))
    try:
        (work / "p").mkdir()
        with LoopbackServer(lab.mock(None)) as mock:
            env = lab.prepare(work / "h", work / "p", mock.url)
            with PtySession(lab.argv(binary, work / "p"), env=env, cwd=str(work / "p"), rows=rows, cols=cols) as s:
                s.wait_for("Ask Codex", 40)
                time.sleep(1.0)
                for _ in range(turns):
                    for task, answer in (("task:hello\r", None), ("task:bash\r", "y"), ("task:sleep\r", None)):
                        before = last_turn(mock.records()).requests
                        type_text(s, task, lab.enter_delay)
                        if answer:
                            s.wait_for("Would you like to run", 20)
                            time.sleep(0.6)
                            s.send(answer)
                        deadline = time.monotonic() + 30
                        while time.monotonic() < deadline:
                            t = last_turn(mock.records())
                            if t.requests > before and t.state == "done":
                                break
                            time.sleep(0.05)
                        time.sleep(1.0)
                chunks = [c for c in s.chunks if c.direction == "out"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    manifest = ManifestStore.from_dirs(bundled_manifest_dir()).get(agent)
    assert manifest is not None
    screen = Screen(rows, cols)
    events: list[tuple[float, str, str]] = []
    last_status, last_screen = None, None
    for chunk in chunks:
        screen.feed(chunk.data)
        status = screen.oob.status
        if status is not None and status is not last_status:
            if last_status is None or status.state != last_status.state:
                events.append((chunk.mono, "status", status.state))
            last_status = status
        verdict = manifest.classify(screen.lines(), screen.title, screen.cursor.row)
        if verdict.state != last_screen:
            events.append((chunk.mono, "screen", verdict.state))
            last_screen = verdict.state
    return events


def lags(events: list[tuple[float, str, str]]) -> dict[str, list[float]]:
    """Per state: screen time minus status time for each status change (ms; > 0: status first)."""
    out: dict[str, list[float]] = {}
    for i, (at, kind, state) in enumerate(events):
        if kind != "status":
            continue
        later = [t for t, k, st in events[i:] if k == "screen" and st == state]
        earlier = [t for t, k, st in events[:i] if k == "screen" and st == state]
        # the screen may already be there (it changed before the status), or get there after
        prev_screen = next((st for t, k, st in reversed(events[:i]) if k == "screen"), None)
        if prev_screen == state and earlier:
            out.setdefault(state, []).append(round((earlier[-1] - at) * 1000, 1))
        elif later:
            out.setdefault(state, []).append(round((later[0] - at) * 1000, 1))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m panewatch_lab.oob_timing", description=__doc__.split("\n\n")[0])
    p.add_argument("--agent", default="codex", choices=["codex"])
    p.add_argument("--turns", type=int, default=2)
    args = p.parse_args(argv)
    events = run(args.agent, args.turns)
    result = lags(events)
    print(f"{args.agent}: screen verdict minus OSC 7501 status, ms (> 0: the status came first)")
    for state, values in sorted(result.items()):
        print(
            f"  {state:<8} n={len(values):<3} median {statistics.median(values):8.1f}  "
            f"min {min(values):8.1f}  max {max(values):8.1f}  {values}"
        )
    statuses = sum(1 for _, k, _ in events if k == "status")
    screens = sum(1 for _, k, _ in events if k == "screen")
    print(f"  status changes {statuses}, screen verdict changes {screens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
