"""``panewatch lab evaluate``: the seed's supervisor experiment, against a real Panewatch server.

An agent (the lab's fake one, or the real Claude Code CLI talking to the mock model API) runs
as a session of a real Panewatch server on loopback. A user bot types tasks and answers its
prompts through the service's guarded endpoints. Every 50 ms the evaluation records what each
of the seed's detectors says about the same bytes, and it records every state the service
itself announces on ``WS /ws/state``. The truth comes from outside the detectors (the fake
agent's side file; for the real CLI, the mock API's log, the bot's keys and an independent
screen). Out come the seed's table, the seed's figures beside ours, a process-state table, a
timeline picture and the raw log, all under ``benchmarks/evaluation/``.

    panewatch lab evaluate --agent fake --seed 7 --tasks 30
    panewatch lab evaluate --agent claude --tasks 10
    panewatch lab evaluate --analyze benchmarks/evaluation/fake-seed7.jsonl.gz   # re-render
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from panewatch import __version__
from panewatch.manifest import CompiledManifest

from . import eval_log, eval_plot
from .eval_analysis import Analysis, analyze
from .eval_bot import Bot, Timing, parse_range
from .eval_claude import TASKS as CLAUDE_TASKS
from .eval_claude import ClaudeDriver
from .eval_detectors import QUIET_THRESHOLDS, DetectorThread, ShadowDetectors
from .eval_fake import FakeDriver, FakeOptions
from .eval_log import Record, Recorder
from .eval_proc import ProcSampler
from .eval_report import render
from .eval_service import ServiceHarness, watch_states

PROG = "panewatch lab evaluate"
#: Relative to the working directory (a checkout's top), never to where the lab is installed.
DEFAULT_OUT = Path("benchmarks") / "evaluation"


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--agent", choices=("fake", "claude"), help="what runs in the pane")
    p.add_argument("--seed", type=int, default=7, help="fake agent's plan and the bot's delays")
    p.add_argument("--tasks", type=int, help="tasks the bot types (default: 30 fake, 10 claude)")
    p.add_argument("--claude-tasks", help=f"comma-separated scenario tasks (default: {','.join(CLAUDE_TASKS)})")
    p.add_argument("--claude", metavar="BIN", help="the CLI (default: $PANEWATCH_CLAUDE_BIN, .lab-npm, PATH)")
    p.add_argument("--speed", type=float, default=1.0, help="fake agent: divide its durations by this")
    p.add_argument("--prompt-prob", type=float, default=0.4, help="fake agent: chance a tool call asks first")
    p.add_argument("--question-prob", type=float, default=0.3, help="fake agent: chance a reply ends in a question")
    p.add_argument(
        "--answer-delay",
        type=parse_range,
        default=(3.0, 8.0),
        metavar="LO,HI",
        help="seconds from a prompt drawn to the bot's answer",
    )
    p.add_argument(
        "--task-delay",
        type=parse_range,
        default=(3.0, 10.0),
        metavar="LO,HI",
        help="seconds from a turn's end to the next task",
    )
    p.add_argument(
        "--answer-via",
        choices=("service", "direct"),
        default="service",
        help="POST /send and /answer (guarded), or keys straight into the PTY",
    )
    p.add_argument("--sweep-ms", type=int, default=700, help="the service's sweep, and the seed's sweep detector")
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--cols", type=int, default=120)
    p.add_argument("--tail", type=float, default=3.0, help="seconds of idle recorded after the last turn")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for NAME.md, NAME.png, NAME.jsonl.gz")
    p.add_argument("--name", help="file stem (default: fake-seed<SEED> or claude-<version>)")
    p.add_argument("--no-png", action="store_true", help="skip the timeline picture")
    p.add_argument("--no-log", action="store_true", help="do not keep the raw log")
    p.add_argument("--analyze", type=Path, metavar="LOG", help="re-render the tables of a saved raw log; no run")
    return p


async def run(args: argparse.Namespace, command: str, workdir: Path) -> list[Record]:
    """One live run; the records of everything observed."""
    rec = Recorder()
    driver: Any
    if args.agent == "fake":
        driver = FakeDriver(
            FakeOptions(args.seed, args.speed, args.prompt_prob, args.question_prob), workdir, rec, args.rows, args.cols
        )
        tasks = args.tasks or 30
    else:
        from .claude_env import find_claude

        binary = args.claude or find_claude()
        if binary is None:
            raise SystemExit(
                f"{PROG}: no claude CLI (npm install --prefix .lab-npm "
                "@anthropic-ai/claude-code@2.1.332, or set PANEWATCH_CLAUDE_BIN)"
            )
        names = args.claude_tasks.split(",") if args.claude_tasks else list(CLAUDE_TASKS)
        count = args.tasks or len(names)
        names = [names[i % len(names)] for i in range(count)]
        driver = ClaudeDriver(binary, workdir, rec, args.rows, args.cols, names)
        tasks = count
    harness = ServiceHarness(rec, lambda data: ticker.put(data), sweep_ms=args.sweep_ms)
    store = harness.engine.store

    def manifest_now() -> CompiledManifest:
        found = store.get(driver.agent)
        assert found is not None, f"no manifest for {driver.agent}"
        return found

    manifest = manifest_now()
    detectors = ShadowDetectors(manifest_now, args.rows, args.cols, sweep_s=args.sweep_ms / 1000)
    ticker = DetectorThread(detectors, rec, watch=driver.watch, on_watch=driver.on_watch)
    await driver.prepare()
    await asyncio.to_thread(harness.start)
    ticker.start()
    ready = asyncio.Event()
    ws_task = asyncio.create_task(watch_states(harness, rec, ready))
    sampler: ProcSampler | None = None
    started_wall = time.time()
    try:
        await asyncio.wait_for(ready.wait(), 15)
        headers = {"Authorization": f"Bearer {harness.token}"}
        async with httpx.AsyncClient(base_url=harness.url, headers=headers, timeout=60) as http:
            r = await http.post("/api/sessions", json=driver.session_body())
            r.raise_for_status()
            info = r.json()
            rec.add(
                "meta",
                time.monotonic(),
                agent=driver.agent,
                command=command,
                session=info["id"],
                pid=info["pid"],
                seed=args.seed,
                tasks=tasks,
                sweep_ms=args.sweep_ms,
                quiet=list(QUIET_THRESHOLDS),
                rows=args.rows,
                cols=args.cols,
                answer_via=args.answer_via,
                answer_delay=list(args.answer_delay),
                task_delay=list(args.task_delay),
                started=datetime.fromtimestamp(started_wall, UTC).isoformat(timespec="seconds"),
                panewatch=__version__,
                python=platform.python_version(),
                platform=f"{platform.system()} {platform.release()} {platform.machine()}",
                backend=harness.settings.backend,
                manifest_version=manifest.manifest.version,
                git=await asyncio.to_thread(git_state),
                **driver.meta(),
            )
            sampler = ProcSampler(info["pid"], rec)
            sampler.start()
            bot = Bot(
                http,
                harness,
                info["id"],
                rec,
                args.seed,
                Timing(args.answer_delay, args.task_delay),
                via=args.answer_via,
                option_keys=manifest.manifest.option_keys,
            )
            try:
                await driver.drive(bot, tasks, args.tail)
            finally:
                rec.add("end", time.monotonic(), wall=round(time.time(), 3), bytes=ticker.bytes)
                sampler.stop()
                await http.delete(f"/api/sessions/{info['id']}")
    finally:
        ws_task.cancel()
        ticker.stop()
        await asyncio.to_thread(harness.close)
        driver.close()
    return rec.records()


def git_state() -> str:
    """``<commit>`` plus the files that differed from it when the run started (a shared tree):
    of the checkout the working directory is in."""
    try:
        root = (
            subprocess.run(
                ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
            or "."
        )
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "manifests", "service", "lab"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    changed = [line[3:] for line in dirty if line[:2].strip() == "M"]
    return head + (f" + uncommitted changes to {', '.join(changed)}" if changed else "")


def write_outputs(a: Analysis, out: Path, name: str, *, png: bool, log: list[Record] | None) -> list[Path]:
    """NAME.md (keeping any hand-written notes block), NAME.png, NAME.jsonl.gz."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    md_path = out / f"{name}.md"
    picture = out / f"{name}.png"
    has_png = False
    if png:
        has_png = eval_plot.plot(a, picture, f"{name}: the truth against each detector")
        if has_png:
            written.append(picture)
        else:
            print(f"{PROG}: no picture (pip install './lab[plot]' for matplotlib)", file=sys.stderr)
    log_path = out / f"{name}.jsonl.gz"
    if log is not None:
        eval_log.save(log, log_path)
        written.append(log_path)
    previous = md_path.read_text(encoding="utf-8") if md_path.exists() else ""
    md_path.write_text(
        render(
            a,
            picture.name if has_png or picture.exists() else None,
            log_path.name if log is not None or log_path.exists() else None,
            previous,
        ),
        encoding="utf-8",
    )
    written.insert(0, md_path)
    return written


def default_name(a: Analysis) -> str:
    if a.meta.get("agent") == "claude":
        return f"claude-{a.meta.get('cli_version', 'unknown')}"
    return f"fake-seed{a.meta.get('seed', 0)}"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser(prog).parse_args(argv)
    if args.analyze is not None:
        records = eval_log.load(args.analyze)
        a = analyze(records)
        name = args.name or args.analyze.name.removesuffix(".gz").removesuffix(".jsonl")
        for path in write_outputs(a, args.out, name, png=not args.no_png, log=None):
            print(path)
        return 0
    if args.agent is None:
        parser(prog).error("give --agent fake|claude (or --analyze LOG)")
    command = f"{prog} {shlex.join(argv)}".strip()
    previous = signal.signal(signal.SIGTERM, _interrupt)  # a killed run still stops its agent and mock API
    try:
        with tempfile.TemporaryDirectory(prefix="panewatch-evaluate-") as tmp:
            records = asyncio.run(run(args, command, Path(tmp)))
    finally:
        signal.signal(signal.SIGTERM, previous)
    a = analyze(records)
    name = args.name or default_name(a)
    for path in write_outputs(a, args.out, name, png=not args.no_png, log=None if args.no_log else records):
        print(path)
    service = a.row("service").score
    print(
        f"service: {len(service.prompts) - service.missed}/{len(service.prompts)} prompts caught, "
        f"false alarms {service.false_alarms('working')[0]} working / {service.false_alarms('idle')[0]} idle"
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(prog="python -m panewatch_lab.evaluate"))
