"""Helpers for tests that drive an engine through its façade."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from panewatch.engine import Engine
from panewatch.events import Event, Output


def bash(script: str) -> list[str]:
    return ["bash", "--norc", "--noprofile", "-c", script]


def screen_text(engine: Engine, sid: str) -> str:
    return "\n".join(engine.screen(sid)["rows"])


async def wait_state(engine: Engine, sid: str, state: str, timeout: float = 8.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = engine.get(sid)
        if info["state"] == state:
            return info
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{sid} stayed {info['state']} ({info['source']} {info['rule']}), "
                f"wanted {state}:\n{screen_text(engine, sid)}"
            )
        await asyncio.sleep(0.02)


async def wait_text(engine: Engine, sid: str, text: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in (shown := screen_text(engine, sid)):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} never showed:\n{shown}")
        await asyncio.sleep(0.02)
    return shown


class Tap:
    """Every byte an engine's panes produced, by session (an event subscriber, as tools use)."""

    def __init__(self, engine: Engine) -> None:
        self.bytes: dict[str, bytearray] = {}
        self.events: list[Event] = []
        self.stop = engine.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        if isinstance(event, Output):
            self.bytes.setdefault(event.session, bytearray()).extend(event.data)
        else:
            self.events.append(event)

    def raw(self, sid: str) -> bytes:
        return bytes(self.bytes.get(sid, b""))
