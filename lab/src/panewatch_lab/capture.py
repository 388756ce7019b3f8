"""Capture labelled raw screens of the real CLI: drive it through a plan, check, then cut.

Each capture runs the CLI in a fresh HOME and a real PTY of one size, against its own mock
API, and follows the plan's steps. The label is trusted only if, at the moment of the cut,
the emulated screen shows what the plan says *and* the mock's log agrees — and again when
the cut bytes are replayed on a fresh screen, which is exactly what the fixture tests do. A
key sent while a dialog is still being drawn can be dropped, so labels come from what the
screen shows, never from what the script meant to do.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from panewatch.screen import Screen
from panewatch_lab.capture_plan import CapturePlan, CaptureSpec, MockTruth, Step
from panewatch_lab.claude_env import prepare_home
from panewatch_lab.mock_server import MockServer
from panewatch_lab.pty_session import PtySession

API_KEY = "sk-ant-api03-lab-0123456789abcdefghijklmnopqrstuvwxyz"
#: How long the moment of capture may take to show what the label says once the steps ran.
CUT_TIMEOUT = 5.0

#: (turn state, answering step, mono time the reply ended) of the last main request in a mock's log.
TurnOf = Callable[[Sequence[dict[str, Any]]], tuple[str, str | None, float | None]]


class Witness(Protocol):
    """A running mock whose log is the second witness (``MockServer``, ``LoopbackServer``)."""

    def records(self) -> list[dict[str, Any]]: ...


class CaptureRefused(Exception):
    """The screen or the mock's log did not show what the label says: nothing is written."""

    def __init__(self, reason: str, screen: Sequence[str] = (), exit_status: int | None = None) -> None:
        if exit_status is not None:
            reason += f" (the CLI exited with {exit_status})"
        super().__init__(reason)
        self.reason, self.screen = reason, list(screen)


@dataclass(frozen=True)
class Captured:
    spec: CaptureSpec
    rows: int
    cols: int
    data: bytes
    seconds: float

    @property
    def file(self) -> str:
        return f"{self.spec.name}-{self.rows}x{self.cols}.raw"


# -- the two witnesses ---------------------------------------------------------------------
def mock_turn(records: Sequence[dict[str, Any]]) -> tuple[str, str | None, float | None]:
    """(turn state, answering step, mono time the reply ended) of the last main request."""
    main = [
        r
        for r in records
        if r["event"] == "request"
        and r.get("path") == "/v1/messages"
        and (r.get("conversation") or {}).get("kind") == "main"
    ]
    if not main:
        return "none", None, None
    last = main[-1]
    rid, step = last["id"], last.get("step")
    reply = next((r for r in records if r["event"] == "reply" and r.get("id") == rid), None)
    if reply is None:
        started = any(r["event"] == "first_token" and r.get("id") == rid for r in records)
        return ("streaming" if started else "waiting"), step, None
    if reply.get("status") == "cancelled":
        return "cancelled", step, reply["mono"]
    return ("tool" if reply.get("stop_reason") == "tool_use" else "done"), step, reply["mono"]


def check_mock(
    truth: MockTruth, records: Sequence[dict[str, Any]], now: float, turn_of: TurnOf = mock_turn
) -> list[str]:
    """What the mock's log contradicts in the label (empty: it agrees)."""
    turn, step, ended = turn_of(records)
    problems = []
    if turn != truth.turn:
        problems.append(f"mock: the turn is {turn!r}, the label needs {truth.turn!r}")
    if truth.step is not None and step != truth.step:
        problems.append(f"mock: the last request was answered by step {step!r}, not {truth.step!r}")
    if truth.within is not None and (ended is None or now - ended > truth.within):
        age = "never" if ended is None else f"{now - ended:.1f}s ago"
        problems.append(f"mock: the reply ended {age}, the label needs at most {truth.within}s")
    if truth.older is not None and (ended is None or now - ended < truth.older):
        age = "never" if ended is None else f"{now - ended:.1f}s ago"
        problems.append(f"mock: the reply ended {age}, the label needs at least {truth.older}s")
    return problems


def check_screen(spec: CaptureSpec, lines: Sequence[str]) -> list[str]:
    """What the screen contradicts in the label (empty: it shows what the label says)."""
    text = "\n".join(lines)
    missing = [f"screen lacks {p!r}" for p in spec.screen if not re.search(p, text, re.MULTILINE)]
    present = [f"screen shows {p!r}" for p in spec.not_screen if re.search(p, text, re.MULTILINE)]
    return missing + present


def replay(data: bytes, rows: int, cols: int) -> Screen:
    """The fixture as its tests will see it: a fresh screen of the capture's size."""
    screen = Screen(rows, cols)
    screen.feed(data)
    return screen


# -- driving -------------------------------------------------------------------------------
def shows(pattern: str) -> Callable[[str], bool]:
    rx = re.compile(pattern, re.MULTILINE)
    return lambda text: rx.search(text) is not None


def _wait_mock(mock: Witness, turn: str, timeout: float, turn_of: TurnOf) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if turn_of(mock.records())[0] == turn:
            return True
        time.sleep(0.05)
    return False


def run_step(
    session: PtySession,
    mock: Witness,
    step: Step,
    send: Callable[[str], None] | None = None,
    turn_of: TurnOf = mock_turn,
) -> None:
    """Do one step or raise ``CaptureRefused`` saying which never happened; ``send`` types a
    step's text (default: one write)."""
    if step.send is not None:
        (send or session.send)(step.send)
    elif step.wait is not None:
        if not session.wait_for(shows(step.wait), step.timeout):
            raise CaptureRefused(
                f"never showed {step.wait!r} within {step.timeout}s", session.screen.lines(), session.exit_status
            )
    elif step.pause is not None:
        time.sleep(step.pause)
    elif step.wait_mock is not None:
        if not _wait_mock(mock, step.wait_mock, step.timeout, turn_of):
            raise CaptureRefused(f"the mock never reached turn {step.wait_mock!r}", session.screen.lines())
    elif step.key is not None:
        assert step.gone is not None
        shown = shows(step.gone)
        if not session.wait_for(shown, step.timeout):
            raise CaptureRefused(f"never showed {step.gone!r} to answer", session.screen.lines(), session.exit_status)
        for _ in range(3):
            time.sleep(step.settle)  # keys within ~150 ms of a dialog's first bytes are dropped
            session.send(step.key)
            if session.wait_for(lambda text: not shown(text), 3.0):
                return
        raise CaptureRefused(f"key {step.key!r} never took: {step.gone!r} stayed", session.screen.lines())


def cut(
    session: PtySession, mock: Witness, spec: CaptureSpec, timeout: float = CUT_TIMEOUT, turn_of: TurnOf = mock_turn
) -> bytes:
    """The output bytes at the first moment both witnesses agree with the label, re-checked
    on a replay of exactly those bytes; ``CaptureRefused`` if that moment never comes."""
    deadline = time.monotonic() + timeout
    while True:
        data, lines, mid_frame = session.snapshot()
        problems = ["the screen is mid-frame"] if mid_frame else []
        problems += check_screen(spec, lines) + check_mock(spec.mock, mock.records(), time.monotonic(), turn_of)
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


def capture_one(
    plan: CapturePlan, spec: CaptureSpec, binary: str, rows: int, cols: int, cut_timeout: float = CUT_TIMEOUT
) -> Captured:
    """One capture in a fresh HOME, PTY and mock; ``CaptureRefused`` if its label does not hold."""
    started = time.monotonic()
    with scratch(f"panewatch-capture-{spec.kind}-", spec) as work:
        project = work / "project"
        with MockServer(plan.scenario) as mock:
            env = prepare_home(
                work / "home", project, API_KEY, mock.url, trusted=spec.trusted, key_approved=spec.key_approved
            )
            argv = [binary, "--permission-mode", spec.mode]
            with PtySession(argv, env=env, cwd=str(project), rows=rows, cols=cols) as session:
                wait_ready(session, spec.ready or plan.ready, 30)
                for step in spec.steps:
                    run_step(session, mock, step)
                data = cut(session, mock, spec, cut_timeout)
        return Captured(spec, rows, cols, data, time.monotonic() - started)


@contextmanager
def scratch(prefix: str, spec: CaptureSpec) -> Iterator[Path]:
    """A fresh folder for one capture (``home`` is the CLI's, ``project`` holds the spec's
    files), removed afterwards: no capture sees another's config or files."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        project = work / "project"
        project.mkdir()
        for name, content in spec.files.items():
            (project / name).write_text(content)
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def wait_ready(session: PtySession, ready: str, timeout: float) -> None:
    """Wait until the CLI shows ``ready`` (its prompt, or the dialog a start-up condition brings)."""
    if not session.wait_for(shows(ready), timeout):
        raise CaptureRefused(f"the CLI never got ready ({ready!r})", session.screen.lines())


@dataclass(frozen=True)
class Failure:
    spec: CaptureSpec
    rows: int
    cols: int
    error: CaptureRefused


def capture_all(
    plan: CapturePlan,
    binary: str,
    sizes: Sequence[tuple[int, int]],
    specs: Sequence[CaptureSpec],
    jobs: int = 4,
    attempts: int = 2,
    report: Callable[[Captured | Failure, int], None] | None = None,
) -> tuple[list[Captured], list[Failure]]:
    """Every spec at every size, ``jobs`` at a time; each gets ``attempts`` tries."""
    return capture_each(
        lambda spec, rows, cols: capture_one(plan, spec, binary, rows, cols), sizes, specs, jobs, attempts, report
    )


def capture_each(
    capture: Callable[[CaptureSpec, int, int], Captured],
    sizes: Sequence[tuple[int, int]],
    specs: Sequence[CaptureSpec],
    jobs: int,
    attempts: int,
    report: Callable[[Captured | Failure, int], None] | None = None,
) -> tuple[list[Captured], list[Failure]]:
    """``capture`` (spec, rows, cols) for every spec at every size, ``jobs`` at a time, with
    ``attempts`` tries each: (the captures taken, the ones refused every time)."""

    def one(spec: CaptureSpec, rows: int, cols: int) -> Captured | Failure:
        error = CaptureRefused("not tried")
        for attempt in range(1, attempts + 1):
            try:
                result: Captured | Failure = capture(spec, rows, cols)
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


# -- the commands' side --------------------------------------------------------------------
def print_try(result: Captured | Failure, attempt: int) -> None:
    """One line on stderr per try, as it ends (a ``report`` for ``capture_all``)."""
    size = f"{result.rows}x{result.cols}"
    if isinstance(result, Captured):
        print(
            f"  ok       {result.spec.name:<26} {size:>7}  {len(result.data):>7} B  {result.seconds:4.1f} s",
            file=sys.stderr,
        )
    else:
        print(f"  refused  {result.spec.name:<26} {size:>7}  (try {attempt}) {result.error.reason}", file=sys.stderr)


def file_captures(
    out: Path, agent: str, version: str, how: str, done: Sequence[Captured], failed: Sequence[Failure], only: bool
) -> int:
    """Write what was captured into the fixture folder ``out`` (its truth.toml replaced whole
    unless ``only`` some kinds were asked for or some were refused), show each refusal with
    its screen; the command's exit code."""
    from panewatch.fixtures import FixtureTruth
    from panewatch_lab.fixture_writer import write_folder

    files = [
        (
            FixtureTruth(file=c.file, state=c.spec.state, rows=c.rows, cols=c.cols, kind=c.spec.kind, note=c.spec.note),
            c.data,
        )
        for c in done
    ]
    if files:
        truth = write_folder(out, agent, version, how, files, replace_all=not only and not failed)
        print(f"wrote {len(files)} capture(s); {out / 'truth.toml'} lists {len(truth.fixture)}")
    for f in failed:
        print(
            f"REFUSED {f.spec.name} {f.rows}x{f.cols}: {f.error.reason}\n"
            + "\n".join(f"    │{line}" for line in f.error.screen)
        )
    return 1 if failed else 0
