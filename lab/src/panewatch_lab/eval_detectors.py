"""The seed's detectors, run on a copy of the bytes the service reads, off its event loop.

The service's session hands every PTY chunk to a listener (``Session.output_listeners``); the
listener only timestamps the chunk and queues it, so the server loop pays nothing for the
evaluation. A thread of its own feeds a second emulated screen and, every ``tick`` seconds,
asks each detector whether the agent needs the user, recording only changes:

* ``screen_50ms`` — the manifest's rules on the emulated screen, at every tick;
* ``screen_sweep`` — the same rules, read only every ``sweep`` seconds (the seed's 700 ms pass);
* ``tail`` — the same rules on the last 8 KB of bytes with escapes stripped (``panewatch.tail``);
* ``question`` — some screen line ends in ``?``;
* ``quiet_N`` — no output for at least N seconds.

A ``ScreenWatch`` (the real CLI's run) is fed the same chunks on an independent emulator and
records when given texts are on screen: how a dialog's drawing is timed without the rules
under test.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from panewatch.backends import ScreenLike, available, make_screen
from panewatch.manifest import CompiledManifest
from panewatch.tail import TAIL_BYTES, strip_tail

from .eval_log import Recorder

QUIET_THRESHOLDS: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0)
TICK_S = 0.05
RAW_KEEP = 64 * 1024


@dataclass(frozen=True)
class DetectorInfo:
    key: str
    label: str
    kind: str  # "state" (blocked/working/idle) or "flag" (needs you: true/false)
    short: str = ""  # for the picture's row labels


def detector_infos(sweep_s: float = 0.7, quiet: Sequence[float] = QUIET_THRESHOLDS) -> list[DetectorInfo]:
    """The seed's rows, in the seed's order (the service's own row is added by the report)."""
    return [
        DetectorInfo("screen_50ms", "Screen rules, every 50 ms", "state", "rules, 50 ms"),
        DetectorInfo(
            "screen_sweep",
            f"Screen rules, {sweep_s * 1000:.0f} ms sweep",
            "state",
            f"rules, {sweep_s * 1000:.0f} ms sweep",
        ),
        DetectorInfo("tail", "Same rules on the stripped 8 KB tail", "state", "rules on 8 KB tail"),
        DetectorInfo("question", 'A screen line ending in "?"', "flag", "line ends in ?"),
        *(DetectorInfo(quiet_key(q), f"Output quiet ≥ {q:g} s", "flag", f"quiet ≥ {q:g} s") for q in quiet),
    ]


def quiet_key(seconds: float) -> str:
    return f"quiet_{seconds:g}"


class ShadowDetectors:
    """Every seed detector over one stream of bytes (not thread-safe: one feeder)."""

    def __init__(
        self,
        manifest: CompiledManifest | Callable[[], CompiledManifest],
        rows: int,
        cols: int,
        *,
        sweep_s: float = 0.7,
        quiet: Sequence[float] = QUIET_THRESHOLDS,
        backend: str = "pyte",
    ) -> None:
        # a callable is asked at every read: the service's own store, so that a manifest edited
        # during a run (the service reloads it) changes both sides' rules at once
        self._manifest = manifest
        # no reply callback: the service's own screen answers the agent's queries
        self.screen: ScreenLike = make_screen(backend, rows, cols)
        self.raw = bytearray()
        self.sweep_s = sweep_s
        self.quiet = tuple(quiet)
        self.last_output: float | None = None
        self.started: float | None = None
        self.next_sweep: float | None = None
        self.sweep_state = "idle"

    def feed(self, t: float, data: bytes) -> None:
        self.screen.feed(data)
        self.raw += data
        if len(self.raw) > RAW_KEEP:
            del self.raw[: len(self.raw) - RAW_KEEP]
        self.last_output = t

    @property
    def manifest(self) -> CompiledManifest:
        return self._manifest() if callable(self._manifest) else self._manifest

    def read(self, t: float) -> dict[str, str | bool]:
        """What each detector says at time ``t``."""
        manifest = self.manifest
        if self.started is None:
            self.started = t
            self.next_sweep = t + self.sweep_s
        lines = self.screen.lines()
        cursor = self.screen.cursor
        on_screen = manifest.classify(lines, self.screen.title, cursor.row).state
        assert self.next_sweep is not None
        if t >= self.next_sweep - 1e-6:
            self.sweep_state = on_screen
            while self.next_sweep <= t + 1e-6:
                self.next_sweep += self.sweep_s
        quiet_for = t - (self.last_output if self.last_output is not None else self.started)
        out: dict[str, str | bool] = {
            "screen_50ms": on_screen,
            "screen_sweep": self.sweep_state,
            "tail": manifest.classify(strip_tail(bytes(self.raw), TAIL_BYTES)).state,
            "question": any(line.rstrip().endswith("?") for line in lines),
        }
        for q in self.quiet:
            out[quiet_key(q)] = quiet_for >= q
        return out


class ScreenWatch:
    """Which named texts are on an independent emulated screen (Ghostty when installed)."""

    def __init__(self, texts: Mapping[str, Sequence[str]], rows: int, cols: int, backend: str | None = None) -> None:
        self.backend = backend or ("ghostty" if "ghostty" in available() else "pyte")
        self.screen = make_screen(self.backend, rows, cols)
        self.texts = {name: tuple(parts) for name, parts in texts.items()}
        self.present: frozenset[str] = frozenset()

    def feed(self, data: bytes) -> frozenset[str] | None:
        """Feed a chunk; the new set of names present when it changed, else None.

        A name is present when all its texts are on screen at once."""
        self.screen.feed(data)
        text = self.screen.text()
        now = frozenset(n for n, parts in self.texts.items() if all(p in text for p in parts))
        if now == self.present:
            return None
        self.present = now
        return now


class DetectorThread(threading.Thread):
    """Consumes tapped chunks, ticks the detectors, records changes in the recorder."""

    def __init__(
        self,
        detectors: ShadowDetectors,
        recorder: Recorder,
        *,
        tick: float = TICK_S,
        watch: ScreenWatch | None = None,
        on_watch: Callable[[float, frozenset[str]], None] | None = None,
    ) -> None:
        super().__init__(name="eval-detectors", daemon=True)
        self.detectors, self.recorder, self.tick, self.watch, self.on_watch = detectors, recorder, tick, watch, on_watch
        self.chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
        self._stop_at: float | None = None
        self._last: dict[str, str | bool] = {}
        self.bytes = 0

    def put(self, data: bytes) -> None:
        """The tap: called on the server's loop for every chunk; must stay this cheap."""
        self.chunks.put((time.monotonic(), data))

    def stop(self) -> None:
        self._stop_at = time.monotonic()
        self.join(10)

    def _consume(self, t: float, data: bytes) -> None:
        self.bytes += len(data)
        self.detectors.feed(t, data)
        if self.watch is not None:
            changed = self.watch.feed(data)
            if changed is not None:
                self.recorder.add("watch", t, v=sorted(changed))
                if self.on_watch is not None:
                    self.on_watch(t, changed)

    def run(self) -> None:
        next_tick = time.monotonic()
        while self._stop_at is None:
            try:
                t, data = self.chunks.get(timeout=max(0.0, next_tick - time.monotonic()))
                self._consume(t, data)
                continue
            except queue.Empty:
                pass
            now = time.monotonic()
            if now < next_tick:
                continue
            for key, value in self.detectors.read(now).items():
                if self._last.get(key) != value:
                    self._last[key] = value
                    self.recorder.add("det", now, d=key, v=value)
            next_tick += self.tick
            if next_tick < now:  # fell behind (a busy machine): skip, do not burst
                self.recorder.add("lag", now, behind=round(now - next_tick, 3))
                next_tick = now + self.tick
