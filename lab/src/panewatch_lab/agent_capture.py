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
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from panewatch_lab.agent_labs import LABS, AgentLab, get_lab
from panewatch_lab.agent_scenario import last_turn
from panewatch_lab.capture import (
    Captured,
    CaptureRefused,
    Failure,
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
#: How long a launch may take to show its ready screen: opencode took 60-90 s under load (2 cores,
#: load 12), where it starts in ~5 s on an idle machine.
READY_TIMEOUT = 180.0


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


def capture_chain(
    lab: AgentLab, plan: CapturePlan, chain: Sequence[CaptureSpec], binary: str, rows: int, cols: int
) -> tuple[list[Captured], Failure | None]:
    """One launch in a fresh HOME, PTY and mock, cut once per capture of ``chain`` in order (each
    cut holds every byte since the start); the captures taken and the first refusal, if any
    (the chain stops there: what follows it depended on it)."""
    head = chain[0]
    taken: list[Captured] = []
    started = time.monotonic()
    with scratch(f"panewatch-{lab.agent}-{head.kind}-", head) as work:
        project = work / "project"
        try:
            with LoopbackServer(lab.mock(plan.scenario)) as mock:
                env = lab.prepare(work / "home", project, mock.url)
                argv = start_up(lab, head, work / "home", project, env, lab.argv(binary, project))
                with PtySession(argv, env=env, cwd=str(project), rows=rows, cols=cols) as session:
                    spec = head
                    try:
                        wait_ready(session, head.ready or plan.ready, READY_TIMEOUT)
                        for spec in chain:
                            for step in spec.steps:
                                run_step(
                                    session,
                                    mock,
                                    step,
                                    lambda text: type_text(session, text, lab.enter_delay),
                                    agent_turn,
                                )
                            data = cut(session, mock, spec, CUT_TIMEOUT, agent_turn)
                            taken.append(Captured(spec, rows, cols, data, time.monotonic() - started))
                            started = time.monotonic()
                    except CaptureRefused as exc:
                        return taken, Failure(spec, rows, cols, exc)
        finally:
            if lab.cleanup is not None:
                lab.cleanup(work / "home")
    return taken, None


def capture_one(lab: AgentLab, plan: CapturePlan, spec: CaptureSpec, binary: str, rows: int, cols: int) -> Captured:
    """One capture (with the captures it continues, from ``plan``); ``CaptureRefused`` if refused.
    ``spec`` need not be one of the plan's own (a test's variant of one)."""
    by_kind = {c.kind: c for c in plan.capture}
    chain = [spec]
    while chain[0].after is not None:
        chain.insert(0, by_kind[chain[0].after])
    taken, failure = capture_chain(lab, plan, chain, binary, rows, cols)
    if failure is not None:
        raise failure.error
    return taken[-1]


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
    """Every chain holding one of ``specs`` at every size, ``jobs`` launches at a time; a chain
    refused part-way is tried again (``attempts`` in all) for the captures it has not taken."""

    def one(chain: list[CaptureSpec], rows: int, cols: int) -> tuple[list[Captured], list[Failure]]:
        done: dict[str, Captured] = {}
        failure: Failure | None = None
        for attempt in range(1, attempts + 1):
            taken, failure = capture_chain(lab, plan, chain, binary, rows, cols)
            for c in taken:
                if c.spec.kind not in done:
                    done[c.spec.kind] = c
                    if report is not None:
                        report(c, attempt)
            if failure is not None and report is not None:
                report(failure, attempt)
            if failure is None or all(s.kind in done for s in chain):
                failure = None
                break
        missing = [s for s in chain if s.kind not in done]
        failed = [
            Failure(
                s,
                rows,
                cols,
                failure.error
                if failure is not None and s is failure.spec
                else CaptureRefused(f"not reached: the chain was refused at {failure.spec.name if failure else '?'}"),
            )
            for s in missing
        ]
        return list(done.values()), failed

    work = [(chain, rows, cols) for chain in plan.chains(list(specs)) for rows, cols in sizes]
    done: list[Captured] = []
    failed: list[Failure] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for taken, refused in pool.map(lambda w: one(*w), work):
            done += taken
            failed += refused
    return done, failed


def main(argv: Sequence[str] | None = None, prog: str = "panewatch lab capture-agent") -> int:
    from panewatch.fixtures import default_root

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog=prog, description="labelled raw captures of Codex, Gemini or Aider")
    p.add_argument("--agent", required=True, choices=sorted(LABS))
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
            print(f"{spec.name:<28} {'(after ' + spec.after + ') ' if spec.after else ''}{spec.note}")
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
