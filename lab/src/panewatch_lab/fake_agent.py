"""A stand-in for Claude Code that draws the same kinds of screens and says what it really is.

Tests of the classifier need an agent that is fast, deterministic and honest: this one
writes its true state (``working``/``blocked``/``idle``) to a side file at every change,
while drawing what Claude Code 2.1.332 draws (wording in ``wording/claude-2.1.332.toml``):
a spinner redrawn with ``\\r`` at 10 Hz above the input box, silent tool calls, permission
prompts whose words are placed with ``CSI n G`` and whose rows are stepped with ``CSI 1 B``
(no ``\\n`` at all), erased Ink-style (cursor up + ``ESC[J``) once answered, and an idle
prompt. It blocks in ``readline()`` on its terminal for tasks and answers, like the real CLI
waits on input.

With ``--auto`` nobody needs to type: it gives itself the next task and answers its own
prompts after ``--hold`` seconds, which is how ``panewatch bench`` runs dozens of them; with
``--spin-only`` it works forever, only its spinner moving (the benchmark's scale scenario).

    python -m panewatch_lab.fake_agent --seed 7 --state-file /tmp/truth.jsonl --speed 4
    python -m panewatch_lab.fake_agent --auto --hold 0.8 1.6 --speed 6 --state-file /tmp/truth.jsonl

Self-contained on purpose (standard library only): it runs wherever a PTY does.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import sys
import termios
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

WORDING = Path(__file__).with_name("wording") / "claude-2.1.332.toml"
PR_SET_NAME = 15
PROCESS_NAME = b"fake-agent"

# 256-colour SGR as the real CLI emits them with TERM=xterm-256color.
ACCENT, GREY, DIM_RULE, SELECT, RESET, BOLD, NORMAL = (
    "\x1b[38;5;174m",
    "\x1b[38;5;246m",
    "\x1b[38;5;239m",
    "\x1b[38;5;153m",
    "\x1b[39m",
    "\x1b[1m",
    "\x1b[22m",
)


# -- the plan: everything random is decided here, from the seed ------------------------------
@dataclass
class Step:
    """One tool call of a turn: which tool, whether it asks first, how long it runs silently."""

    tool: dict[str, Any]
    asks: bool
    run_seconds: float
    think_seconds: float


@dataclass
class Turn:
    """What the agent does with one task."""

    think_seconds: float
    verb: str = ""
    steps: list[Step] = field(default_factory=list)
    reply: str = ""
    asks_follow_up: bool = False
    done_verb: str = ""


def plan_turn(
    rng: random.Random, wording: dict[str, Any], speed: float, prompt_prob: float, question_prob: float
) -> Turn:
    """Draw one turn from ``rng`` (same seed, same arguments: same turns)."""
    turn = Turn(think_seconds=rng.uniform(0.5, 3.0) / speed, verb=rng.choice(wording["spinner_verbs"]))
    for _ in range(rng.randint(1, 3)):
        tool = rng.choice(wording["tools"])
        roll = rng.random()  # drawn even for read-only tools, so the sequence does not depend on them
        asks = not tool.get("read_only", False) and roll < prompt_prob
        turn.steps.append(
            Step(
                tool=tool,
                asks=asks,
                run_seconds=rng.uniform(0.5, 6.0) / speed,
                think_seconds=rng.uniform(0.3, 2.0) / speed,
            )
        )
    turn.reply = rng.choice(wording["replies"])
    turn.asks_follow_up = rng.random() < question_prob
    turn.done_verb = rng.choice(wording["done_verbs"])
    return turn


# -- drawing ---------------------------------------------------------------------------------
def place_words(text: str, col: int, cols: int = 10_000) -> list[str]:
    """Lay ``text`` out from 1-based column ``col``, wrapped before column ``cols``, one string
    per row. Every word after the first in a row is placed by ``CSI n G``, so the bytes hold
    no spaces between words (as Claude Code's do)."""
    rows: list[list[str]] = [[]]
    x = col
    for word in text.split(" "):
        if not word:
            x += 1
            continue
        if rows[-1] and x + len(word) > cols:
            rows.append([])
            x = col
        rows[-1].append(word if not rows[-1] else f"\x1b[{x}G{word}")
        x += len(word) + 1
    return ["".join(r) for r in rows]


class Terminal:
    """Ink-style output: transcript lines scroll away, a live region at the bottom is redrawn.

    The live region's rows are stepped with ``\\r`` + ``CSI 1 B``; the room they need is made
    beforehand by a separate write, so the region itself never contains a line feed.
    """

    def __init__(self, out: TextIO, cols: int) -> None:
        self.out, self.cols, self.live_rows = out, cols, 0

    def write(self, data: str) -> None:
        self.out.write(data)
        self.out.flush()

    def _erase(self) -> str:
        if self.live_rows == 0:
            return ""
        up = f"\x1b[{self.live_rows - 1}A" if self.live_rows > 1 else ""
        self.live_rows = 0
        return f"\r{up}\x1b[J"

    def show(self, static: list[str], live: list[str]) -> None:
        """Erase the live region, print ``static`` lines into the transcript, draw ``live``."""
        self.write(self._erase() + "".join(f"{line}\r\n" for line in static))
        if len(live) > 1:  # make room below, then come back up
            self.write("\r\n" * (len(live) - 1) + f"\x1b[{len(live) - 1}A")
        self.write("\r" + "\r\x1b[1B".join(live))
        self.live_rows = len(live)

    def redraw_first(self, text: str) -> None:
        """Redraw the live region's first row in place (the spinner above the input box): up to
        it, ``\\r``, the text, erase-line, and back down to the row the cursor rests on."""
        up = self.live_rows - 1
        if up > 0:
            self.write(f"\x1b[{up}A\r{text}\x1b[K\r\x1b[{up}B")
        else:
            self.write(f"\r{text}\x1b[K")
            self.live_rows = 1


def idle_chrome(w: dict[str, Any], cols: int) -> list[str]:
    rule = f"{DIM_RULE}{w['rule'] * cols}{RESET}"
    return [rule, w["input_prefix"].rstrip(), rule, f"{GREY}{w['idle_footer']}{RESET}"]


def working_rows(w: dict[str, Any], cols: int, spinner: str) -> list[str]:
    """While it works the CLI keeps its input box, under the spinner, with the working footer."""
    rule = f"{DIM_RULE}{w['rule'] * cols}{RESET}"
    return [spinner, "", rule, w["input_prefix"].rstrip(), rule, f"{GREY}{w['working_footer']}{RESET}"]


def spinner_frame(w: dict[str, Any], n: int, verb: str, started: float) -> str:
    glyph = w["spinner_frames"][n % len(w["spinner_frames"])]
    secs = int(time.monotonic() - started)
    return f"{glyph} {verb}… ({secs}s · ↓ {40 + 7 * n} tokens · {w['working_hint']})"


def prompt_rows(w: dict[str, Any], tool: dict[str, Any], cwd: str, cols: int) -> list[str]:
    """The permission dialog, row by row, each row positioned by cursor moves only."""
    spec = w["prompts"][tool["name"]]
    fields = {"cwd": cwd, "command": "", "description": "", "file": "", "content": "", **tool}
    fill = lambda s: s.format(**fields)  # noqa: E731

    def text(line: str, style: str = "", col: int = 2) -> list[str]:
        return [f"\x1b[{col - 1}C{style}{row}{RESET}{NORMAL}" for row in place_words(line, col, cols)]

    dashed = f"{DIM_RULE}{w['dashed_rule'] * cols}{RESET}"
    rows = [f"{DIM_RULE}{w['rule'] * cols}{RESET}", *text(spec["header"], BOLD)]
    for line in spec["body"]:
        rows += text(fill(line), GREY)
    rows += [dashed, *text(fill(spec["code"])), dashed, *text(fill(spec["question"]))]
    for i, option in enumerate(spec["options"], 1):
        marker = f"{SELECT}❯{RESET}" if i == 1 else " "
        colour = SELECT if i == 1 else RESET
        wrapped = place_words(fill(option), 7, cols)
        rows.append(f"\x1b[1C{marker}\x1b[4G{GREY}{i}. {colour}{wrapped[0]}{RESET}")
        rows += [f"\x1b[6C{colour}{row}{RESET}" for row in wrapped[1:]]
    rows += ["\x1b[K", *text(spec["footer"], GREY)]
    return rows


def tool_line(tool: dict[str, Any]) -> str:
    arg = tool.get("command") or tool.get("file") or ""
    return f"{ACCENT}●{RESET} {BOLD}{tool['name']}{NORMAL}({arg})"


# -- the agent -------------------------------------------------------------------------------
class Agent:
    """Reads tasks, plays the seeded turns, draws them and records the truth."""

    def __init__(self, args: argparse.Namespace, wording: dict[str, Any]) -> None:
        self.args, self.w = args, wording
        self.rng = random.Random(args.seed)
        self.term = Terminal(sys.stdout, _columns())
        self.state_file = Path(args.state_file).open("a", buffering=1) if args.state_file else None  # noqa: SIM115 -- open for the agent's life
        self.state = ""
        self.cwd = os.getcwd()
        # --auto's own delays come from a second generator, so the plan is the same with or without it
        self.auto_rng = random.Random(f"auto-{args.seed}")

    def hold(self) -> None:
        """--auto: leave the prompt or the idle box on screen as long as a user would."""
        time.sleep(self.auto_rng.uniform(*self.args.hold))

    def set_state(self, state: str, **detail: Any) -> None:
        """Record the true state, right after the screen that shows it was written."""
        if state == self.state and not detail:
            return
        self.state = state
        if self.state_file is not None:
            record = {"state": state, "mono": time.monotonic(), "wall": time.time(), "pid": os.getpid(), **detail}
            self.state_file.write(json.dumps(record) + "\n")

    def working(self, spinner: str) -> list[str]:
        """The live region while working, under this spinner frame."""
        return working_rows(self.w, self.term.cols, spinner)

    def spin(self, seconds: float, verb: str, started: float) -> None:
        """Redraw the spinner at 10 Hz for ``seconds``."""
        end, n = time.monotonic() + seconds, 0
        while True:
            self.term.redraw_first(spinner_frame(self.w, n, verb, started))
            n += 1
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(0.1, left))

    def ask(self, tool: dict[str, Any]) -> bool:
        """Show the permission prompt and block until answered; True if allowed."""
        # Keys typed before the dialog existed are lost, as with the real CLI.
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
        self.term.show([], prompt_rows(self.w, tool, self.cwd, self.term.cols))
        self.set_state("blocked", tool=tool["name"])
        if self.args.auto:  # it answers "1. Yes" itself
            self.hold()
            allowed = True
        else:
            allowed = self.read_answer(len(self.w["prompts"][tool["name"]]["options"]))
        self.term.show([], [])  # erase the dialog: cursor up + ESC[J
        if allowed:
            self.set_state("working")
        return allowed

    @staticmethod
    def read_answer(options: int) -> bool:
        """Block until a line chooses an option; True for an allowing one, False for the last (No)."""
        while True:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            answer = line.strip()
            if answer in ("", "1") or (answer.isdigit() and 1 < int(answer) < options):
                return True
            if answer in (str(options), "\x1b", "n", "no"):
                return False

    def run_turn(self, task: str, turn: Turn) -> None:
        started, verb = time.monotonic(), turn.verb
        self.term.show([f"{self.w['input_prefix']}{task}", ""], self.working(spinner_frame(self.w, 0, verb, started)))
        self.set_state("working", task=task)
        self.spin(turn.think_seconds, verb, started)
        for step in turn.steps:
            frame = spinner_frame(self.w, 0, verb, started)
            self.term.show([tool_line(step.tool)], self.working(frame))
            if step.asks:
                if not self.ask(step.tool):
                    self.term.show([f"  ⎿  {self.w['interrupted']}", ""], idle_chrome(self.w, self.term.cols))
                    return
                self.term.show([], self.working(frame))
            # The tool runs silently: its line and one spinner frame stay, nothing is written.
            time.sleep(step.run_seconds)
            self.spin(step.think_seconds, verb, started)
        reply = turn.reply + (f" {self.w['follow_up_question']}" if turn.asks_follow_up else "")
        done = f"{ACCENT}✻{RESET} {turn.done_verb} for {int(time.monotonic() - started)}s"
        self.term.show([f"{ACCENT}●{RESET} {reply}", "", done, ""], idle_chrome(self.w, self.term.cols))

    def spin_forever(self) -> None:
        """--spin-only: one turn that never ends, the spinner redrawn at 10 Hz."""
        self.term.show(
            [f"{self.w['input_prefix']}keep working", ""],
            self.working(spinner_frame(self.w, 0, self.w["spinner_verbs"][0], time.monotonic())),
        )
        self.set_state("working")
        self.spin(float("inf"), self.w["spinner_verbs"][0], time.monotonic())

    def next_task(self, done: int) -> str:
        if self.args.auto:
            self.hold()
            return f"task {done + 1}\n"
        return sys.stdin.readline()

    def run(self) -> int:
        if self.args.spin_only:
            self.spin_forever()
        self.term.show([], idle_chrome(self.w, self.term.cols))
        self.set_state("idle")
        done = 0
        while self.args.max_tasks is None or done < self.args.max_tasks:
            task = self.next_task(done)
            if not task:
                return 0
            turn = plan_turn(self.rng, self.w, self.args.speed, self.args.prompt_prob, self.args.question_prob)
            try:
                self.run_turn(task.strip(), turn)
            except EOFError:
                return 0
            self.set_state("idle")
            done += 1
        return 0


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except OSError:
        return 80


def set_process_name(name: bytes = PROCESS_NAME) -> None:
    """Name the process (``/proc/PID/comm``) so process-table checks see an agent, not python."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def parse_args(argv: list[str] | None = None, prog: str = "python -m panewatch_lab.fake_agent") -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--state-file", help="append the true state here, one JSON line per change")
    p.add_argument("--speed", type=float, default=1.0, help="divide every duration by this")
    p.add_argument("--prompt-prob", type=float, default=0.4, help="chance a non-read-only tool call asks first")
    p.add_argument("--question-prob", type=float, default=0.3, help="chance a reply ends with a question")
    p.add_argument("--max-tasks", type=int, default=None, help="exit after this many tasks")
    p.add_argument("--wording", default=str(WORDING), help="TOML file with the on-screen wording")
    p.add_argument("--plan", type=int, metavar="N", help="print the first N turns as JSON and exit")
    p.add_argument(
        "--auto",
        action="store_true",
        help="type its own tasks and answer its own prompts (1. Yes) after --hold seconds; no input read",
    )
    p.add_argument(
        "--hold",
        type=float,
        nargs=2,
        default=(0.8, 1.6),
        metavar=("MIN", "MAX"),
        help="--auto: seconds a prompt or the idle box stays before it answers or starts the next task",
    )
    p.add_argument("--spin-only", action="store_true", help="work forever: only the spinner moves (10 Hz)")
    args = p.parse_args(argv)
    if args.speed <= 0:
        p.error("--speed must be positive")
    if not 0 <= args.hold[0] <= args.hold[1]:
        p.error("--hold needs 0 <= MIN <= MAX")
    return args


def main(argv: list[str] | None = None, prog: str = "python -m panewatch_lab.fake_agent") -> int:
    args = parse_args(argv, prog)
    with open(args.wording, "rb") as fh:
        wording = tomllib.load(fh)
    if args.plan is not None:
        rng = random.Random(args.seed)
        for _ in range(args.plan):
            turn = plan_turn(rng, wording, args.speed, args.prompt_prob, args.question_prob)
            print(json.dumps(asdict(turn)))
        return 0
    set_process_name()
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    if saved is not None:  # canonical mode without echo: lines arrive whole, the agent draws them
        attrs = termios.tcgetattr(fd)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
    try:
        return Agent(args, wording).run()
    except KeyboardInterrupt:
        return 130
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSANOW, saved)


if __name__ == "__main__":
    sys.exit(main())
