"""A real Panewatch server for the evaluation, and the ways the evaluation watches it.

The server is the production one (``create_app`` + uvicorn on a loopback port, the engine's
sweep, signals and guarded writes), run in a thread with its own event loop so that nothing
the evaluation does can delay it. The evaluation looks at it three ways:

* as a client of ``WS /ws/state`` (``watch_states``): the service's verdicts, timed on arrival;
* through the engine's ``Output`` events (subscribed before any session exists), so the shadow
  detectors see every byte the service saw, in the order it saw them;
* through the engine's ``Reported`` events: each hook payload the CLI posts to ``/report`` and
  the state it made (None: ignored).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import websockets

from panewatch.access.identity import state_dir
from panewatch.api import create_app
from panewatch.config import Settings
from panewatch.engine import Actor, ActorKind, Engine
from panewatch.engine.events import Event, Output, Reported
from panewatch.wiring import build_engine

from . import MANIFEST_DIR
from .eval_log import Recorder
from .loopback import Loopback

#: Who types when the evaluation bypasses the guarded endpoints.
EVALUATOR = Actor(kind=ActorKind.policy, id="eval", name="the evaluation's keyboard")


class ServiceHarness:
    """``with ServiceHarness(recorder, tap) as svc: svc.url, svc.token, svc.engine``."""

    def __init__(self, recorder: Recorder, tap: Callable[[bytes], None], *, sweep_ms: int = 700) -> None:
        self.recorder = recorder
        self.token = secrets.token_urlsafe(24)
        self._loopback = Loopback()
        self.port: int = self._loopback.port
        self.settings = Settings(token=self.token, port=self.port, sweep_ms=sweep_ms, manifests=MANIFEST_DIR)
        self.engine: Engine = build_engine(self.settings, private=state_dir(self.settings))  # as create_app would
        self.app = create_app(self.settings, engine=self.engine)
        self._tap = tap
        self.engine.subscribe(self._on_event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _on_event(self, event: Event) -> None:
        if isinstance(event, Output):
            self._tap(event.data)
        elif isinstance(event, Reported):
            payload = event.payload
            self.recorder.add(
                "hook",
                time.monotonic(),
                session=event.session,
                event=payload.get("hook_event_name") or "report",
                notification=payload.get("notification_type"),
                tool=payload.get("tool_name"),
                state=event.state,
            )

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loopback.loop

    def start(self, timeout: float = 15.0) -> ServiceHarness:
        self._loopback.start(self.app, timeout)
        return self

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` on the server's loop (where the engine lives); its result as a future."""
        assert self.loop is not None
        done: Future[Any] = Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return done

    async def write_direct(self, sid: str, data: bytes) -> None:
        """Bypass the guarded endpoints: type into the pane as a keyboard would."""
        await asyncio.wrap_future(self.submit(lambda: self.engine.keys(sid, data, EVALUATOR)))

    def close(self) -> None:
        self._loopback.close()

    def __enter__(self) -> ServiceHarness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _record_state(recorder: Recorder, t: float, session: str, state: dict[str, Any], **extra: Any) -> None:
    """A session's state as the service announced it (in the snapshot or as a change): one record shape."""
    recorder.add(
        "service", t, session=session, v=state["state"], source=state.get("source"), rule=state.get("rule"), **extra
    )


async def watch_states(harness: ServiceHarness, recorder: Recorder, ready: asyncio.Event) -> None:
    """Record every state the service announces on ``/ws/state``, timed on arrival."""
    headers = {"Authorization": f"Bearer {harness.token}"}
    async with websockets.connect(harness.ws_url + "/ws/state", additional_headers=headers) as ws:
        async for message in ws:
            t = time.monotonic()
            event = json.loads(message)
            kind = event.get("type")
            if kind == "snapshot":
                ready.set()
                for s in event.get("sessions", []):
                    _record_state(recorder, t, s["id"], s, snapshot=True)
            elif kind == "state":
                _record_state(recorder, t, event["session"], event, why=event.get("why"), at=event.get("at"))
            elif kind == "notification":
                recorder.add("notification", t, session=event.get("session"), state=event.get("state"))
