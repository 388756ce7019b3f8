"""``panewatch lab ...``: the mock API, the fake agent and captures of the real CLI.

Each subcommand is one entry of ``COMMANDS`` (name → help, runner); the runner gets the
arguments after the subcommand's name and returns the exit code, so a new lab tool is one
module and one line here.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

EXIT_USAGE = 2
DEFAULT_SIZES = "32x120,24x80,50x160"


def cmd_mock_api(argv: list[str]) -> int:
    from panewatch_lab import mock_api

    mock_api.main(argv, prog="panewatch lab mock-api")
    return 0


def cmd_fake_agent(argv: list[str]) -> int:
    from panewatch_lab import fake_agent

    return fake_agent.main(argv, prog="panewatch lab fake-agent")


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``32x120,24x80`` → [(32, 120), (24, 80)] (rows x cols)."""
    sizes = []
    for part in text.split(","):
        rows, sep, cols = part.strip().lower().partition("x")
        if not sep or not rows.isdigit() or not cols.isdigit():
            raise argparse.ArgumentTypeError(f"bad size {part!r}: use ROWSxCOLS, e.g. 32x120")
        if not (10 <= int(rows) <= 500 and 40 <= int(cols) <= 1000):
            raise argparse.ArgumentTypeError(f"size {part!r} out of range (rows 10..500, cols 40..1000)")
        sizes.append((int(rows), int(cols)))
    return sizes


def capture_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="panewatch lab capture",
        description="Run the real Claude Code CLI against the mock API in real PTYs and write labelled raw "
        "captures plus truth.toml. A capture whose screen or mock log does not show what its label "
        "says is refused (not written); the exit code is then 1.",
    )
    p.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes(DEFAULT_SIZES),
        metavar="RxC,...",
        help=f"terminal sizes (default {DEFAULT_SIZES})",
    )
    p.add_argument(
        "--out", metavar="DIR", help="fixture folder (default: fixtures/<agent>/<CLI version> in the working directory)"
    )
    p.add_argument(
        "--only",
        nargs="+",
        metavar="KIND",
        help="capture only these kinds (`bash` or `blocked-bash`); other entries of an existing truth.toml are kept",
    )
    p.add_argument("--plan", default="claude", help="capture plan: a TOML path or a name in panewatch_lab/captures/")
    p.add_argument("--claude", metavar="BIN", help="the CLI (default: $PANEWATCH_CLAUDE_BIN, .lab-npm, PATH)")
    p.add_argument("--jobs", type=int, default=4, help="captures run at once (default 4)")
    p.add_argument("--attempts", type=int, default=2, help="tries per capture before it is refused (default 2)")
    p.add_argument("--list", action="store_true", help="list the plan's kinds and exit")
    return p


def cmd_capture(argv: list[str]) -> int:
    from panewatch.fixtures import default_root
    from panewatch_lab.capture import capture_all, file_captures, print_try
    from panewatch_lab.capture_plan import load_plan
    from panewatch_lab.claude_env import PINNED_VERSION, claude_version, find_claude

    args = capture_parser().parse_args(argv)
    plan = load_plan(args.plan)
    if args.list:
        for spec in plan.capture:
            print(f"{spec.name:<28} {spec.note}")
        return 0
    specs = plan.capture
    if args.only:
        wanted = set(args.only)
        unknown = wanted - {s.kind for s in specs} - {s.name for s in specs}
        if unknown:
            print(f"panewatch lab capture: unknown kind(s) {sorted(unknown)}; see --list", file=sys.stderr)
            return EXIT_USAGE
        specs = [s for s in specs if s.kind in wanted or s.name in wanted]
    binary = args.claude or find_claude()
    if binary is None:
        print(
            "panewatch lab capture: no claude CLI (npm install --prefix .lab-npm "
            f"@anthropic-ai/claude-code@{PINNED_VERSION}, or set PANEWATCH_CLAUDE_BIN)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    version = claude_version(binary)
    if version is None:
        print(f"panewatch lab capture: {binary} --version said no version", file=sys.stderr)
        return EXIT_USAGE
    if version != PINNED_VERSION:
        print(
            f"panewatch lab capture: note: {binary} is {version}, the lab is pinned to {PINNED_VERSION}",
            file=sys.stderr,
        )
    out = Path(args.out) if args.out else default_root() / plan.agent / version
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sizes = ",".join(f"{r}x{c}" for r, c in args.sizes)
    how = (
        f"{shlex.join(['panewatch', 'lab', 'capture', *argv])} ({when}; claude {version}; "
        f"plan {args.plan}, sizes {sizes})"
    )

    print(
        f"capturing {len(specs)} kind(s) x {len(args.sizes)} size(s) from {binary} ({version}) into {out}",
        file=sys.stderr,
    )
    done, failed = capture_all(
        plan, binary, args.sizes, specs, jobs=args.jobs, attempts=args.attempts, report=print_try
    )
    return file_captures(out, plan.agent, version, how, done, failed, only=bool(args.only))


def cmd_evaluate(argv: list[str]) -> int:
    from panewatch_lab import evaluate

    return evaluate.main(argv, prog="panewatch lab evaluate")


def _agent_capture(argv: list[str]) -> int:
    from panewatch_lab import agent_capture

    return agent_capture.main(argv, prog="panewatch lab capture-agent")


def _canary(argv: list[str]) -> int:
    from panewatch_lab import canary

    return canary.main(argv, prog="panewatch lab canary")


#: name → (help, runner).
COMMANDS: dict[str, tuple[str, Callable[[list[str]], int]]] = {
    "mock-api": (
        "mock Anthropic Messages API driven by a scenario (--port P [--scenario FILE] [--log FILE])",
        cmd_mock_api,
    ),
    "fake-agent": ("deterministic stand-in for Claude Code that writes its true state (see --help)", cmd_fake_agent),
    "capture": ("labelled raw captures of the real CLI at several terminal sizes, plus truth.toml", cmd_capture),
    "capture-agent": (
        "labelled raw captures of Codex, Gemini or Aider against their mocks (--agent A)",
        lambda argv: _agent_capture(argv),
    ),
    "canary": (
        "install a CLI version, capture its screens, check the bundled manifest (--agent A --version V)",
        lambda argv: _canary(argv),
    ),
    "evaluate": (
        "the seed's detector table: a live agent in a real server vs its ground truth (--agent fake|claude)",
        cmd_evaluate,
    ),
}


def usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: panewatch lab COMMAND [ARGS...]", "", __doc__.splitlines()[0], "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (help_, _) in COMMANDS.items()]
    lines += ["", "`panewatch lab COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else EXIT_USAGE
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"panewatch lab: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return COMMANDS[name][1](rest)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:  # argparse's --help and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)


if __name__ == "__main__":
    sys.exit(main())
