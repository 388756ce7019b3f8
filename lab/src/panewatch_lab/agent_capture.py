"""Labelled captures of Codex, Gemini and Aider: Claude's capture method, any CLI's mock.

Same rule as ``panewatch_lab.capture``: each capture runs in a fresh HOME, PTY and mock; a
file is written only when, at the moment of the cut, the emulated screen shows what the plan
says *and* the mock's JSON-lines log agrees (``mock.turn``), and again on a replay of exactly
the cut bytes. The classifier under test is never consulted.

    panewatch lab capture-agent --agent gemini [--only KIND...] [--sizes 32x120,24x80,50x160]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from panewatch_lab.agent_labs import AgentLab, get_lab
from panewatch_lab.agent_scenario import last_turn
from panewatch_lab.capture import (
    Captured,
    CaptureRefused,
    Failure,
    capture_each,
    cut,
    file_captures,
    print_try,
    run_step,
    scratch,
    wait_ready,
)
from panewatch_lab.capture_plan import CapturePlan, CaptureSpec, load_plan
from panewatch_lab.cli import DEFAULT_SIZES, parse_sizes
from panewatch_lab.loopback import LoopbackServer
from panewatch_lab.pty_session import PtySession

CUT_TIMEOUT = 6.0


def agent_turn(records: Sequence[dict[str, Any]]) -> tuple[str, str | None, float | None]:
    """``capture.mock_turn`` for the agent mocks' log (its main requests are ``kind = "main"``)."""
    turn = last_turn(list(records))
    return turn.state, turn.step, turn.ended


def type_text(session: PtySession, text: str, enter_delay: float) -> None:
    """Text, then Enter on its own once the text is echoed on screen.

    An Enter in the same write is taken as part of a paste by Ink apps, and an Enter that
    arrives before the app re-rendered the typed text reads the old, empty input (React state
    not yet committed) and does nothing: about one send in ten under load with a fixed 80 ms."""
    body, enter = (text[:-1], True) if text.endswith("\r") else (text, False)
    if body:
        tail = body.strip().splitlines()[-1][-20:] if body.strip() else ""
        session.send(body)
        if enter and tail:
            session.wait_for(tail, 3.0)
            session.wait_quiet(0.05, 1.0)
    if enter:
        if body:
            time.sleep(enter_delay)
        session.send("\r")


def start_up(
    lab: AgentLab, spec: CaptureSpec, home: Path, project: Path, env: dict[str, str], argv: list[str]
) -> list[str]:
    """Make the capture's start-up conditions true (a first start's dialogs); the argv to run."""
    conditions = frozenset(spec.start)
    unknown = conditions - lab.conditions - {"git-repo"}
    if unknown:
        raise CaptureRefused(f"the {lab.agent} lab cannot start with {sorted(unknown)}", [])
    if "git-repo" in conditions:
        subprocess.run(["git", "init", "-q", str(project)], check=True, env=env, capture_output=True)
    return lab.start_up(conditions, home, project, env, argv)


def capture_one(lab: AgentLab, plan: CapturePlan, spec: CaptureSpec, binary: str, rows: int, cols: int) -> Captured:
    started = time.monotonic()
    with scratch(f"panewatch-{lab.agent}-{spec.kind}-", spec) as work:
        project = work / "project"
        with LoopbackServer(lab.mock(plan.scenario)) as mock:
            env = lab.prepare(work / "home", project, mock.url)
            argv = start_up(lab, spec, work / "home", project, env, lab.argv(binary, project))
            with PtySession(argv, env=env, cwd=str(project), rows=rows, cols=cols) as session:
                wait_ready(session, spec.ready or plan.ready, 40)
                for step in spec.steps:
                    run_step(session, mock, step, lambda text: type_text(session, text, lab.enter_delay), agent_turn)
                data = cut(session, mock, spec, CUT_TIMEOUT, agent_turn)
        return Captured(spec, rows, cols, data, time.monotonic() - started)


def capture_all(
    lab: AgentLab,
    plan: CapturePlan,
    binary: str,
    sizes: Sequence[tuple[int, int]],
    specs: Sequence[CaptureSpec],
    jobs: int = 2,
    attempts: int = 2,
    report: Callable[[Captured | Failure, int], None] | None = None,
) -> tuple[list[Captured], list[Failure]]:
    return capture_each(
        lambda spec, rows, cols: capture_one(lab, plan, spec, binary, rows, cols), sizes, specs, jobs, attempts, report
    )


def main(argv: Sequence[str] | None = None, prog: str = "panewatch lab capture-agent") -> int:
    from panewatch.fixtures import default_root

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog=prog, description="labelled raw captures of Codex, Gemini or Aider")
    p.add_argument("--agent", required=True, choices=["codex", "gemini", "aider"])
    p.add_argument("--only", nargs="+", metavar="KIND")
    p.add_argument(
        "--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES), help="RxC,... (default 32x120,24x80,50x160)"
    )
    p.add_argument("--out", help="fixture folder (default fixtures/<agent>/<version>)")
    p.add_argument("--bin", help="the CLI (default: the lab prefix)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--attempts", type=int, default=2)
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    lab = get_lab(args.agent)
    plan = load_plan(args.agent)
    if args.list:
        for spec in plan.capture:
            print(f"{spec.name:<28} {spec.note}")
        return 0
    specs = [s for s in plan.capture if not args.only or s.kind in args.only or s.name in args.only]
    binary = args.bin or lab.find()
    if binary is None:
        print(
            f"{prog}: no {args.agent} CLI; install it: {shlex.join(lab.install_command(lab.pinned, lab.default_prefix()))}",
            file=sys.stderr,
        )
        return 2
    version = lab.version(binary) or "unknown"
    out = Path(args.out) if args.out else default_root() / args.agent / version
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    how = f"{shlex.join(['panewatch', 'lab', 'capture-agent', *argv])} ({when}; {args.agent} {version})"

    done, failed = capture_all(
        lab, plan, binary, args.sizes, specs, jobs=args.jobs, attempts=args.attempts, report=print_try
    )
    return file_captures(out, args.agent, version, how, done, failed, only=bool(args.only))


if __name__ == "__main__":
    sys.exit(main())
