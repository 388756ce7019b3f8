"""Helpers for tests that drive an engine through its façade."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from panewatch.clock import ManualClock
from panewatch.engine import Actor, ActorKind, Engine, EngineOptions, SessionInfo, SessionSpec
from panewatch.engine.events import Event, Output
from panewatch.hosts.memory import MemoryHandle, MemoryHost
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.procs.procinfo import Program

#: Who acts in the tests that call the engine directly.
TESTER = Actor(kind=ActorKind.user, id="test", name="the test")


def bash(script: str) -> list[str]:
    return ["bash", "--norc", "--noprofile", "-c", script]


def fast(**options: Any) -> EngineOptions:
    """Engine options for tests: a 50 ms sweep unless said otherwise."""
    return EngineOptions(**{"sweep_ms": 50, **options})


async def screen_text(engine: Engine, sid: str) -> str:
    return "\n".join((await engine.screen(sid)).rows)


async def wait_state(engine: Engine, sid: str, state: str, timeout: float = 8.0) -> SessionInfo:
    deadline = time.monotonic() + timeout
    while True:
        info = await engine.get(sid)
        if info.state == state:
            return info
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{sid} stayed {info.state} ({info.source} {info.rule}), "
                f"wanted {state}:\n{await screen_text(engine, sid)}"
            )
        await asyncio.sleep(0.02)


async def wait_text(engine: Engine, sid: str, text: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in (shown := await screen_text(engine, sid)):
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


# --- the engine on the in-memory host, with a hand-moved clock -----------------------------------


class Rig:
    """An engine whose agents the test plays through the memory host's handles, and whose time
    moves only with ``clock.advance``; ``programs`` says which program a process group runs."""

    def __init__(self, engine: Engine, host: MemoryHost, clock: ManualClock, programs: dict[int, Program]) -> None:
        self.engine, self.host, self.clock, self.programs = engine, host, clock, programs

    async def create(self, agent: str | None = "claude", command: str = "agent", **kw) -> tuple[str, MemoryHandle]:
        info = await self.engine.create(
            SessionSpec(agent=agent, command=[command], rows=12, cols=60, **kw), actor=TESTER
        )
        return info.id, self.host.handles[info.id]

    async def settle(self, seconds: float = 0.1) -> None:
        """Let host callbacks run (one loop turn), then move the clock (sweeps run)."""
        await asyncio.sleep(0)
        self.clock.advance(seconds)
        await asyncio.sleep(0)


@asynccontextmanager
async def memory_rig(
    clock: ManualClock | None = None, *, store: ManifestStore | None = None, **engine_options: Any
) -> AsyncIterator[Rig]:
    """A started engine with the bundled manifests on the memory host, stopped on the way out;
    ``engine_options`` go to the engine (a notifier on the same ``clock``, a screen backend)."""
    clock, host, programs = clock or ManualClock(), MemoryHost(), {}
    options = {
        key: engine_options.pop(key) for key in list(engine_options) if key in EngineOptions.__dataclass_fields__
    }
    engine = Engine(
        store or ManifestStore.from_dirs(bundled_manifest_dir()),
        host=host,
        clock=clock,
        wall=clock.time,
        options=EngineOptions(**{"sweep_ms": 100, **options}),
        programs=programs.get,
        **engine_options,
    )
    await engine.start()
    try:
        yield Rig(engine, host, clock, programs)
    finally:
        await engine.stop()
