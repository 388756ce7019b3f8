"""The evaluation's real-CLI side: the mock model API, the CLI's HOME, the tasks, the bot's turns.

Truth for the real CLI cannot come from the CLI itself, so it is pieced together from things
the classifier under test never reads (``eval_analysis.claude_truth`` has the definitions):
the mock API's log (when a reply ending in ``tool_use`` or ``end_turn`` finished), the bot's
own keystrokes, and an independent screen (Ghostty when installed, not the service's pyte)
watched for each dialog's question together with its footer, exactly as the lab notes quote
them. The bot answers a dialog only once that watch sees it, 3–8 s later (far past the
~150 ms in which 2.1.332 drops keys), and checks that it went away.
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .claude_env import claude_argv, prepare_home
from .eval_bot import Bot, sleep_until, wait_for
from .eval_detectors import ScreenWatch
from .eval_log import JsonlTail, Recorder
from .loopback import free_port

API_KEY = "sk-ant-api03-lab-0123456789abcdefghijklmnopqrstuvwxyz"

#: Scenario tasks (``lab/scenarios/basic.toml``), in the order the bot types them.
TASKS = ("hello", "bash", "think", "write", "prose", "edit", "ask", "bash", "ls", "hello")

#: A dialog is on screen when its question and its own footer are (wording from notes/lab.md).
DIALOGS: dict[str, tuple[str, ...]] = {
    "dialog:Bash": ("Do you want to proceed?", "Esc to cancel · Tab to amend"),
    "dialog:Write": ("Do you want to create ", "Esc to cancel · Tab to amend"),
    "dialog:Edit": ("Do you want to make this edit to ", "Esc to cancel · Tab to amend"),
    "dialog:AskUserQuestion": ("Which fruit should I use?", "Enter to select · ↑/↓ to navigate"),
}
WATCH_TEXTS: dict[str, tuple[str, ...]] = {**DIALOGS, "idle": ("? for shortcuts",)}


def cli_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    m = re.match(r"\s*(\d+\.\d+\.\d+\S*)", out)
    return m.group(1) if m else "unknown"


class MockApi:
    """``python -m panewatch_lab.mock_api`` on a free loopback port, logging to a file."""

    def __init__(self, log: Path, scenario: str = "basic") -> None:
        self.log, self.scenario = log, scenario
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "panewatch_lab.mock_api",
                "--port",
                str(self.port),
                "--scenario",
                self.scenario,
                "--log",
                str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise RuntimeError(f"the mock API did not start: {err}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class MockFollower:
    """Copies the mock's log into the recorder as it grows (``mock`` records, its own ``mono``)."""

    def __init__(self, path: Path, recorder: Recorder) -> None:
        self.path, self.recorder = path, recorder
        self._tail = JsonlTail(path)
        self.records: list[dict[str, Any]] = []

    def poll(self) -> None:
        for r in self._tail.read():
            keep = {k: r[k] for k in ("event", "id", "path", "step", "status", "stop_reason", "stream") if k in r}
            conv = r.get("conversation")
            if conv:
                keep["conversation"] = {k: conv.get(k) for k in ("kind", "task", "after", "error")}
            if r.get("event") == "reply":
                keep["tools"] = [c.get("name") for c in r.get("content", []) if c.get("type") == "tool_use"]
            self.recorder.add("mock", r["mono"], **keep)
            self.records.append(r)

    async def run(self, every: float = 0.05) -> None:
        while True:
            self.poll()
            await asyncio.sleep(every)

    def asked_tool_after(self, t: float) -> str | None:
        """The tool of the latest main-conversation ``tool_use`` reply that finished after ``t``."""
        tool = None
        for r in self.records:
            if (
                r["mono"] > t
                and r.get("event") == "reply"
                and r.get("stop_reason") == "tool_use"
                and r.get("status") == "complete"
            ):
                tools = [c.get("name") for c in r.get("content", []) if c.get("type") == "tool_use"]
                tool = tools[0] if tools else tool
        return tool

    def turn_ended_after(self, t: float) -> float | None:
        """When a main-conversation reply ending the turn finished after ``t``."""
        for r in self.records:
            if (
                r["mono"] > t
                and r.get("event") == "reply"
                and r.get("stop_reason") == "end_turn"
                and r.get("status") == "complete"
                and not str(r.get("step", "")).startswith("side")
            ):
                return r["mono"]
        return None


class ClaudeDriver:
    agent = "claude"

    def __init__(self, binary: str, workdir: Path, recorder: Recorder, rows: int, cols: int, tasks: list[str]) -> None:
        self.binary, self.workdir, self.recorder, self.rows, self.cols = binary, workdir, recorder, rows, cols
        self.tasks = tasks
        self.project = workdir / "project"
        self.mock = MockApi(workdir / "mock.jsonl")
        self.follower = MockFollower(self.mock.log, recorder)
        self.version = "unknown"
        self.env: dict[str, str] = {}
        self.present: frozenset[str] = frozenset()
        self.changed_at = 0.0
        self.watch = ScreenWatch(WATCH_TEXTS, rows, cols)

    def on_watch(self, t: float, present: frozenset[str]) -> None:
        """Called from the detector thread; two plain assignments the bot polls."""
        self.changed_at = t
        self.present = present

    def dialog(self, since: float = 0.0) -> str | None:
        """The dialog on screen now for the tool the model last asked for (after ``since``)."""
        tool = self.follower.asked_tool_after(since)
        name = f"dialog:{tool}"
        return name if tool and name in self.present else None

    def any_dialog(self) -> bool:
        return any(n.startswith("dialog:") for n in self.present)

    async def prepare(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.mock.log.unlink(missing_ok=True)
        self.version = await asyncio.to_thread(cli_version, self.binary)
        await asyncio.to_thread(self.mock.start)
        self.env = prepare_home(self.workdir / "home", self.project, API_KEY, self.mock.url)

    def meta(self) -> dict[str, Any]:
        return {
            "cli": self.binary,
            "cli_version": self.version,
            "task_names": self.tasks,
            "watch_backend": self.watch.backend,
            "dialogs": DIALOGS,
        }

    def session_body(self) -> dict[str, Any]:
        return {
            "agent": "claude",
            "command": claude_argv(self.binary),
            "cwd": str(self.project),
            "env": self.env,
            "rows": self.rows,
            "cols": self.cols,
            "name": "evaluate-claude",
        }

    def _reset_files(self, task: str) -> None:
        """What the user does between tasks so each dialog is the first-time one."""
        if task == "write":
            (self.project / "notes.txt").unlink(missing_ok=True)
        if task == "edit":
            (self.project / "edit-me.txt").write_text("hello world\n")

    async def drive(self, bot: Bot, tasks: int, tail_s: float) -> None:
        del tasks  # the task list was fixed at construction
        follower = asyncio.create_task(self.follower.run())
        try:
            if not await wait_for(lambda: "idle" in self.present, 60):
                raise RuntimeError("the CLI never showed its prompt")
            turn_end = self.changed_at
            for name in self.tasks:
                self._reset_files(name)
                await sleep_until(turn_end + bot.task_delay())
                await wait_for(lambda: "idle" in self.present and not self.any_dialog(), 30)
                sent = time.monotonic()
                await bot.send(f"task:{name}")
                ended = await self._turn(bot, sent)
                if ended is None:
                    self.recorder.add("bot", time.monotonic(), action="timeout", task=name)
                    return
                turn_end = ended
                await wait_for(lambda: "idle" in self.present, 15)
            await sleep_until(turn_end + tail_s)
            self.follower.poll()
        finally:
            follower.cancel()

    async def _turn(self, bot: Bot, sent: float, timeout: float = 90.0) -> float | None:
        """Answer every dialog of one turn; when the turn ended (None: it never did)."""
        deadline = sent + timeout
        while time.monotonic() < deadline:
            self.follower.poll()
            ended = self.follower.turn_ended_after(sent)
            if ended is not None:
                return ended
            dialog = self.dialog(sent)
            if dialog is None:
                await asyncio.sleep(0.02)
                continue
            shown = self.changed_at
            await sleep_until(shown + bot.answer_delay())
            await bot.answer(1)
            gone = await wait_for(lambda d=dialog: d not in self.present, 5)
            if not gone:
                await bot.retry_answer(1)
                gone = await wait_for(lambda d=dialog: d not in self.present, 10)
            self.recorder.add(
                "bot", time.monotonic(), action="verified", dialog=dialog, gone=gone, shown=round(shown, 4)
            )
            deadline = max(deadline, time.monotonic() + 60)
        return None

    def close(self) -> None:
        self.mock.stop()
