"""The evaluation's fake-agent side: the launch, the truth it writes, and the bot's turns.

The fake agent appends its true state to a side file right after drawing the screen that shows
it; ``TruthFollower`` turns each line into a ``truth`` record (on the agent's own monotonic
clock, which is the machine's) and hands it to the bot, which reacts to the truth — never to a
detector under test.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .eval_bot import Bot, sleep_until, wait_for
from .eval_log import JsonlTail, Recorder


@dataclass(frozen=True)
class FakeOptions:
    seed: int = 7
    speed: float = 1.0
    prompt_prob: float = 0.4
    question_prob: float = 0.3


class TruthFollower:
    """Reads the fake agent's state file as it grows."""

    def __init__(self, path: Path, recorder: Recorder) -> None:
        self.path, self.recorder = path, recorder
        self._tail = JsonlTail(path)
        self.state: str | None = None
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def poll(self) -> None:
        for record in self._tail.read():
            extra = {k: record[k] for k in ("tool", "task") if k in record}
            self.recorder.add("truth", record["mono"], v=record["state"], **extra)
            self.state = record["state"]
            self.queue.put_nowait(record)

    async def run(self, every: float = 0.02) -> None:
        while True:
            self.poll()
            await asyncio.sleep(every)


class FakeDriver:
    agent = "fake"
    watch = None
    on_watch = None

    def __init__(self, opts: FakeOptions, workdir: Path, recorder: Recorder, rows: int, cols: int) -> None:
        self.opts, self.workdir, self.recorder, self.rows, self.cols = opts, workdir, recorder, rows, cols
        self.state_file = workdir / "truth.jsonl"
        self.truth = TruthFollower(self.state_file, recorder)

    async def prepare(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.state_file.unlink(missing_ok=True)

    def meta(self) -> dict[str, Any]:
        return {
            "speed": self.opts.speed,
            "prompt_prob": self.opts.prompt_prob,
            "question_prob": self.opts.question_prob,
        }

    def session_body(self) -> dict[str, Any]:
        o = self.opts
        command = [
            sys.executable,
            "-m",
            "panewatch_lab.fake_agent",
            "--seed",
            str(o.seed),
            "--speed",
            str(o.speed),
            "--prompt-prob",
            str(o.prompt_prob),
            "--question-prob",
            str(o.question_prob),
            "--state-file",
            str(self.state_file),
        ]
        return {
            "agent": "fake",
            "command": command,
            "cwd": str(self.workdir),
            "rows": self.rows,
            "cols": self.cols,
            "name": f"evaluate-fake-{o.seed}",
        }

    async def _next(self, timeout: float) -> dict[str, Any]:
        return await asyncio.wait_for(self.truth.queue.get(), timeout)

    async def drive(self, bot: Bot, tasks: int, tail_s: float) -> None:
        """``tasks`` turns: type a task, answer every prompt, wait for the turn to end."""
        follower = asyncio.create_task(self.truth.run())
        try:
            first = await self._next(30)
            while first["state"] != "idle":
                first = await self._next(30)
            turn_end = first["mono"]
            for i in range(tasks):
                await sleep_until(turn_end + bot.task_delay())
                await bot.send(f"task {i + 1}")
                while True:
                    record = await self._next(120 / self.opts.speed + 60)
                    if record["state"] == "blocked":
                        await sleep_until(record["mono"] + bot.answer_delay())
                        await bot.answer(1)
                        if not await wait_for(lambda: self.truth.state != "blocked", 5):
                            await bot.retry_answer(1)
                            await wait_for(lambda: self.truth.state != "blocked", 10)
                    elif record["state"] == "idle":
                        turn_end = record["mono"]
                        break
            await sleep_until(turn_end + tail_s)
            self.truth.poll()
        finally:
            follower.cancel()

    def close(self) -> None:
        pass
