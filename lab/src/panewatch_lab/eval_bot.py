"""The user bot: types tasks and answers prompts through the service's guarded endpoints.

Tasks go through ``POST /api/sessions/{id}/send`` and answers through ``.../answer``, so the
evaluation exercises the guarded writes a dashboard uses: ``send`` is refused while the
service thinks the pane is blocked, ``answer`` while it thinks it is not. A refusal is itself a
finding (the service disagreed with the truth at that moment): it is recorded, and the bot then
types the same keys straight into the PTY so the run goes on. ``--answer-via direct`` skips the
endpoints altogether. Delays are drawn from the bot's own seeded generator.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from .eval_log import Recorder
from .eval_service import ServiceHarness


@dataclass(frozen=True)
class Timing:
    """Seconds the bot waits: before answering a prompt, before typing the next task."""

    answer: tuple[float, float] = (3.0, 8.0)
    task: tuple[float, float] = (3.0, 10.0)


def parse_range(text: str) -> tuple[float, float]:
    """``3,8`` → (3.0, 8.0)."""
    lo, _, hi = text.partition(",")
    a, b = float(lo), float(hi or lo)
    if a < 0 or b < a:
        raise ValueError(f"bad range {text!r}: use LO,HI seconds with 0 <= LO <= HI")
    return a, b


async def sleep_until(t: float) -> None:
    delay = t - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


async def wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(step)
    return True


class Bot:
    def __init__(
        self,
        http: httpx.AsyncClient,
        harness: ServiceHarness,
        sid: str,
        recorder: Recorder,
        seed: int,
        timing: Timing,
        via: str = "service",
        option_keys: str = "{n}",
    ) -> None:
        self.http, self.harness, self.sid, self.recorder = http, harness, sid, recorder
        self.rng = random.Random(f"panewatch-evaluate-bot-{seed}")
        self.timing, self.via, self.option_keys = timing, via, option_keys

    def answer_delay(self) -> float:
        return self.rng.uniform(*self.timing.answer)

    def task_delay(self) -> float:
        return self.rng.uniform(*self.timing.task)

    async def _direct(self, data: bytes, enter: bool) -> None:
        await self.harness.write_direct(self.sid, data)
        if enter:
            await asyncio.sleep(0.08)  # a TUI reads "text\r" in one chunk as a paste (as runtime.send does)
            await self.harness.write_direct(self.sid, b"\r")

    async def send(self, text: str) -> None:
        """Type a task and Enter; recorded at the moment Enter was written (the task's start)."""
        t0 = time.monotonic()
        status, detail = 0, ""
        if self.via == "service":
            r = await self.http.post(f"/api/sessions/{self.sid}/send", json={"text": text})
            status, detail = r.status_code, r.json()
        if status != 200:
            await self._direct(text.encode(), enter=True)
        self.recorder.add(
            "bot",
            time.monotonic(),
            action="send",
            text=text,
            started=round(t0, 4),
            via=self.via if status in (0, 200) else "direct after refusal",
            status=status,
            refusal=detail if status == 409 else None,
        )

    async def answer(self, option: int = 1) -> dict[str, object]:
        """Pick ``option`` of the prompt on screen; returns what the service said."""
        t0 = time.monotonic()
        status, body = 0, {}
        if self.via == "service":
            r = await self.http.post(f"/api/sessions/{self.sid}/answer", json={"option": option, "confirm": True})
            status, body = r.status_code, r.json()
        if status != 200:
            await self._direct(self.option_keys.replace("{n}", str(option)).encode(), enter=False)
        record = {
            "action": "answer",
            "option": option,
            "started": round(t0, 4),
            "status": status,
            "via": self.via if status in (0, 200) else "direct after refusal",
            "took": body.get("took") if status == 200 else None,
            "waited_s": body.get("waited_s"),
            "refusal": body if status == 409 else None,
        }
        self.recorder.add("bot", time.monotonic(), **record)
        return record

    async def retry_answer(self, option: int = 1) -> None:
        """The prompt stayed after an answer: type the keys again, straight into the PTY."""
        await self._direct(self.option_keys.replace("{n}", str(option)).encode(), enter=False)
        self.recorder.add("bot", time.monotonic(), action="retry", option=option)
