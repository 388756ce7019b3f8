"""Labelled captures of Codex, Gemini and Aider: Claude's capture method, any CLI's mock.

Same rule as ``panewatch_lab.capture``: each capture runs in a fresh HOME, PTY and mock; a
file is written only when, at the moment of the cut, the emulated screen shows what the plan
says *and* the mock's JSON-lines log agrees (``mock.turn``), and again on a replay of exactly
the cut bytes. The classifier under test is never consulted.

    panewatch lab capture-agent --agent gemini [--only KIND...] [--sizes 32x120,24x80,50x160]
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from panewatch_lab.agent_labs import AgentLab, get_lab
from panewatch_lab.agent_scenario import last_turn
from panewatch_lab.capture import Captured, CaptureRefused, Failure, check_screen, replay
from panewatch_lab.capture_plan import CapturePlan, CaptureSpec, MockTruth, Step, load_plan
from panewatch_lab.loopback import LoopbackServer
from panewatch_lab.pty_session import PtySession

CUT_TIMEOUT = 6.0
DEFAULT_SIZES = [(32, 120), (24, 80), (50, 160)]


def check_turn(truth: MockTruth, records: list[dict[str, Any]], now: float) -> list[str]:
    """What the mock's log contradicts in the label (empty: it agrees)."""
    turn = last_turn(records)
    problems = []
    if turn.state != truth.turn:
        problems.append(f"mock: the turn is {turn.state!r}, the label needs {truth.turn!r}")
    if truth.step is not None and turn.step != truth.step:
        problems.append(f"mock: the last request was answered by step {turn.step!r}, not {truth.step!r}")
    if truth.within is not None and (turn.ended is None or now - turn.ended > truth.within):
        problems.append(f"mock: the reply did not end within {truth.within}s")
    if truth.older is not None and (turn.ended is None or now - turn.ended < truth.older):
        problems.append(f"mock: the reply ended less than {truth.older}s ago")
    return problems


def _shows(pattern: str) -> Callable[[str], bool]:
    rx = re.compile(pattern, re.MULTILINE)
    return lambda text: rx.search(text) is not None


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


def run_step(session: PtySession, mock: LoopbackServer, step: Step, lab: AgentLab) -> None:
    if step.send is not None:
        type_text(session, step.send, lab.enter_delay)
    elif step.wait is not None:
        if not session.wait_for(_shows(step.wait), step.timeout):
            raise CaptureRefused(f"never showed {step.wait!r} within {step.timeout}s", session.screen.lines())
    elif step.pause is not None:
        time.sleep(step.pause)
    elif step.wait_mock is not None:
        deadline = time.monotonic() + step.timeout
        while last_turn(mock.records()).state != step.wait_mock:
            if time.monotonic() > deadline:
                raise CaptureRefused(f"the mock never reached turn {step.wait_mock!r}", session.screen.lines())
            time.sleep(0.05)
    elif step.key is not None:
        assert step.gone is not None
        shown = _shows(step.gone)
        if not session.wait_for(shown, step.timeout):
            raise CaptureRefused(f"never showed {step.gone!r} to answer", session.screen.lines())
        for _ in range(3):
            time.sleep(step.settle)
            session.send(step.key)
            if session.wait_for(lambda text: not shown(text), 3.0):
                return
        raise CaptureRefused(f"key {step.key!r} never took: {step.gone!r} stayed", session.screen.lines())


def cut(session: PtySession, mock: LoopbackServer, spec: CaptureSpec, timeout: float = CUT_TIMEOUT) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        data, lines, mid_frame = session.snapshot()
        problems = ["the screen is mid-frame"] if mid_frame else []
        problems += check_screen(spec, lines) + check_turn(spec.mock, mock.records(), time.monotonic())
        if session.exit_status is not None:
            problems.append(f"the CLI exited with {session.exit_status}")
        if not problems:
            break
        if time.monotonic() > deadline:
            raise CaptureRefused("; ".join(problems), lines)
        time.sleep(0.05)
    screen = replay(data, session.rows, session.cols)
    problems = check_screen(spec, screen.lines()) + (["the replay ends mid-frame"] if screen.mid_frame else [])
    if problems:
        raise CaptureRefused("replayed bytes: " + "; ".join(problems), screen.lines())
    return data


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
    work = Path(tempfile.mkdtemp(prefix=f"panewatch-{lab.agent}-{spec.kind}-"))
    try:
        project = work / "project"
        project.mkdir()
        for name, content in spec.files.items():
            (project / name).write_text(content)
        with LoopbackServer(lab.mock(plan.scenario)) as mock:
            env = lab.prepare(work / "home", project, mock.url)
            argv = start_up(lab, spec, work / "home", project, env, lab.argv(binary, project))
            with PtySession(argv, env=env, cwd=str(project), rows=rows, cols=cols) as session:
                ready = spec.ready or plan.ready
                if not session.wait_for(_shows(ready), 40):
                    raise CaptureRefused(f"the CLI never got ready ({ready!r})", session.screen.lines())
                for step in spec.steps:
                    run_step(session, mock, step, lab)
                data = cut(session, mock, spec)
        return Captured(spec, rows, cols, data, time.monotonic() - started)
    finally:
        shutil.rmtree(work, ignore_errors=True)


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
    def one(spec: CaptureSpec, rows: int, cols: int) -> Captured | Failure:
        error = CaptureRefused("not tried")
        for attempt in range(1, attempts + 1):
            try:
                result: Captured | Failure = capture_one(lab, plan, spec, binary, rows, cols)
            except CaptureRefused as exc:
                error = exc
                result = Failure(spec, rows, cols, exc)
            if report is not None:
                report(result, attempt)
            if isinstance(result, Captured):
                return result
        return Failure(spec, rows, cols, error)

    work = [(spec, rows, cols) for spec in specs for rows, cols in sizes]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda w: one(*w), work))
    return ([r for r in results if isinstance(r, Captured)], [r for r in results if isinstance(r, Failure)])


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for part in text.split(","):
        rows, _, cols = part.strip().partition("x")
        sizes.append((int(rows), int(cols)))
    return sizes


def main(argv: Sequence[str] | None = None, prog: str = "panewatch lab capture-agent") -> int:
    from panewatch.fixtures import FixtureTruth, default_root
    from panewatch_lab.fixture_writer import write_folder

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog=prog, description="labelled raw captures of Codex, Gemini or Aider")
    p.add_argument("--agent", required=True, choices=["codex", "gemini", "aider"])
    p.add_argument("--only", nargs="+", metavar="KIND")
    p.add_argument("--sizes", type=parse_sizes, default=DEFAULT_SIZES, help="RxC,... (default 32x120,24x80,50x160)")
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

    def report(result: Captured | Failure, attempt: int) -> None:
        size = f"{result.rows}x{result.cols}"
        if isinstance(result, Captured):
            print(
                f"  ok       {result.spec.name:<26} {size:>7}  {len(result.data):>8} B  {result.seconds:4.1f} s",
                file=sys.stderr,
            )
        else:
            print(
                f"  refused  {result.spec.name:<26} {size:>7}  (try {attempt}) {result.error.reason}", file=sys.stderr
            )

    done, failed = capture_all(
        lab, plan, binary, args.sizes, specs, jobs=args.jobs, attempts=args.attempts, report=report
    )
    files = [
        (
            FixtureTruth(file=c.file, state=c.spec.state, rows=c.rows, cols=c.cols, kind=c.spec.kind, note=c.spec.note),
            c.data,
        )
        for c in done
    ]
    if files:
        truth = write_folder(out, args.agent, version, how, files, replace_all=not args.only and not failed)
        print(f"wrote {len(files)} capture(s); {out / 'truth.toml'} lists {len(truth.fixture)}")
    for f in failed:
        print(
            f"REFUSED {f.spec.name} {f.rows}x{f.cols}: {f.error.reason}\n"
            + "\n".join(f"    │{line}" for line in f.error.screen)
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
