"""Recordings of sessions as asciicast v2 files, and their replay into a screen.

Why: with every byte a pane printed (and every resize) on disk, any moment of any session can
be looked at again and turned into a fixture (``panewatch classify x.cast --at 12.5``).

Recording never blocks the event loop: lines are buffered in memory and written by a worker
thread, one write in flight per recording. A recording is capped at ``max_bytes``: the event
that would cross the cap is dropped, one final marker event (``"m"``) says so, and nothing
more is recorded; the session info shows ``truncated``.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..backends import ScreenLike
from ..screen import Screen

log = logging.getLogger("panewatch.sinks.transcript")

MEDIA_TYPE = "application/x-asciicast"
#: A flush is started this long after the first unwritten line, or at once past FLUSH_BYTES.
FLUSH_S = 0.25
FLUSH_BYTES = 64 * 1024
#: Room kept under the cap for the final marker event.
MARKER_RESERVE = 256


def _line(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False) + "\n").encode()


class Transcript:
    """The asciicast v2 recording of one session: ``output`` is an output listener (raw PTY bytes)."""

    def __init__(
        self,
        path: Path,
        *,
        rows: int,
        cols: int,
        max_bytes: int,
        loop: asyncio.AbstractEventLoop,
        title: str = "",
        command: Sequence[str] = (),
        session: str | None = None,
        resume: bool = False,
    ) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.session = session
        self.loop = loop
        self.bytes = 0  # size of the file once everything buffered is written
        self.written = 0  # bytes in the file now (whole lines)
        self._in_flight = 0
        self.truncated = False
        self.closed = False
        self.error: str | None = None
        self._start = loop.time()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._buf: list[bytes] = []
        self._buffered = 0
        self._timer: asyncio.TimerHandle | None = None
        self._writing: asyncio.Future[None] | None = None
        self._file: IO[bytes] | None = None
        header: dict[str, Any] = {
            "version": 2,
            "width": cols,
            "height": rows,
            "timestamp": int(time.time()),
            "env": {"TERM": "xterm-256color", "SHELL": os.environ.get("SHELL", "/bin/sh")},
            "title": title,
        }
        if command:
            header["command"] = " ".join(command)
        self._mode = "wb"
        if resume and self._continue():
            return
        self._append(_line(header))

    def _continue(self) -> bool:
        """An adopted session's recording goes on in its file: later events are timed after its
        last one (a marker says where the restart was). False when there is no file to continue."""
        try:
            size = self.path.stat().st_size
            with open(self.path, "rb") as f:
                f.seek(max(0, size - 65536))
                tail = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        except OSError:
            return False
        if size == 0:
            return False
        try:
            last = json.loads(tail)
            at = float(last[0]) if isinstance(last, list) else 0.0
        except (ValueError, IndexError, TypeError):
            at = 0.0  # a torn last line (killed mid-write): go on after it, never truncate the file
            self._append(b"\n")
        self._mode = "ab"
        self._start = self.loop.time() - at
        self.bytes = self.written = size
        self.truncated = size >= self.max_bytes - MARKER_RESERVE
        if not self.truncated:
            self._append(_line([round(at, 6), "m", "panewatch: the session was adopted by a restarted server"]))
        return True

    # -- recording (event loop) --------------------------------------------------------------
    def elapsed(self) -> float:
        """Seconds since the recording started: the time an event recorded now would get."""
        return self.loop.time() - self._start

    def output(self, data: bytes) -> None:
        """Record PTY output; characters split across reads are decoded whole."""
        if self.closed or self.truncated:
            return
        text = self._decoder.decode(data)
        if text:
            self._event("o", text)

    def resize(self, rows: int, cols: int) -> None:
        if not (self.closed or self.truncated):
            self._event("r", f"{cols}x{rows}")

    def info(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "bytes": self.bytes,
            "truncated": self.truncated,
            "error": self.error,
            "elapsed": round(self.elapsed(), 6),
        }

    def _event(self, kind: str, data: str) -> None:
        at = round(self.elapsed(), 6)
        line = _line([at, kind, data])
        if self.bytes + len(line) > self.max_bytes - MARKER_RESERVE:
            self.truncated = True
            self._append(_line([at, "m", f"panewatch: recording stopped at its size cap of {self.max_bytes} bytes"]))
            log.warning(
                "transcript reached its size cap (%d bytes); recording stopped",
                self.max_bytes,
                extra={"session": self.session},
            )
            return
        self._append(line)

    def _append(self, line: bytes) -> None:
        self.bytes += len(line)
        self._buf.append(line)
        self._buffered += len(line)
        if self._buffered >= FLUSH_BYTES:
            self._flush()
        elif self._timer is None and self._writing is None:
            self._timer = self.loop.call_later(FLUSH_S, self._flush)

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._writing is not None or not self._buf or self.error:
            return
        data = b"".join(self._buf)
        self._buf.clear()
        self._buffered = 0
        self._in_flight = len(data)
        self._writing = self.loop.run_in_executor(None, self._write, data)
        self._writing.add_done_callback(self._written)

    def _written(self, done: asyncio.Future[None]) -> None:
        self._writing = None
        exc = None if done.cancelled() else done.exception()
        if exc is not None:
            self._fail(exc)
            return
        self.written += self._in_flight
        if self._buf:
            self._flush()

    def _fail(self, exc: BaseException) -> None:
        self.error = str(exc)
        self.closed = True
        self._buf.clear()
        log.warning(
            "transcript %s cannot be written, recording stopped: %s", self.path, exc, extra={"session": self.session}
        )

    async def sync(self) -> None:
        """Wait until everything recorded so far is in the file (``written`` bytes)."""
        while True:
            if self._writing is None:
                self._flush()
            writing = self._writing
            if writing is None:
                return
            try:
                await asyncio.shield(writing)
            except Exception:  # reported by _written
                return
            if self._writing is writing:
                # done, but its callback (_written, which counts it) runs on the next loop turn:
                # awaiting a done future does not yield, so without this the loop would spin here
                await asyncio.sleep(0)

    async def aclose(self) -> None:
        """Write what is buffered and close the file; later output is not recorded."""
        if not self.closed and not self.truncated:
            tail = self._decoder.decode(b"", final=True)
            if tail:
                self._event("o", tail)
        self.closed = True
        await self.sync()
        if self._file is not None and not self._file.closed:
            await self.loop.run_in_executor(None, self._file.close)

    # -- file (worker thread) ----------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        if self._file is None:  # opened here, not on the event loop
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, self._mode)  # noqa: SIM115 - kept open across writes
        self._file.write(data)
        self._file.flush()


# --- reading and replaying ---------------------------------------------------------------------


class CastError(ValueError):
    """A file that is not an asciicast v2 recording, with where it goes wrong."""


@dataclass(frozen=True)
class Cast:
    header: dict[str, Any]
    events: list[tuple[float, str, str]]

    @property
    def rows(self) -> int:
        return int(self.header["height"])

    @property
    def cols(self) -> int:
        return int(self.header["width"])


def parse_size(data: str) -> tuple[int, int]:
    """``"COLSxROWS"`` of a resize event as (rows, cols)."""
    cols, _, rows = data.partition("x")
    return int(rows), int(cols)


def read_cast(path: Path | str) -> Cast:
    """Parse an asciicast v2 file; ``CastError`` names the line that is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CastError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CastError(f"{path} is not an asciicast file (not UTF-8)") from None
    lines = text.splitlines()
    try:
        header = json.loads(lines[0]) if lines else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("version") != 2:
        raise CastError(f"{path}:1: not an asciicast v2 header")
    for key in ("width", "height"):
        if not isinstance(header.get(key), int) or header[key] < 1:
            raise CastError(f"{path}:1: the header needs a positive integer {key!r}")
    events: list[tuple[float, str, str]] = []
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        try:
            t, kind, data = json.loads(line)
            if not isinstance(t, (int, float)) or not isinstance(kind, str) or not isinstance(data, str):
                raise TypeError
            if kind == "r":
                parse_size(data)
        except (ValueError, TypeError):
            raise CastError(f"{path}:{number}: not an event [time, code, data]") from None
        events.append((float(t), kind, data))
    return Cast(header, events)


def replay(
    cast: Cast, at: float | None = None, screen_factory: Callable[[int, int], ScreenLike] = Screen
) -> ScreenLike:
    """A fresh screen of the header's size after every event up to ``at`` (None: the end)."""
    screen = screen_factory(cast.rows, cast.cols)
    for t, kind, data in cast.events:
        if at is not None and t > at:
            break
        if kind == "o":
            screen.feed(data.encode())
        elif kind == "r":
            screen.resize(*parse_size(data))
    return screen


@dataclass(frozen=True)
class RawMoment:
    """The output of a recording up to a moment, as a raw fixture (one fixed terminal size)."""

    data: bytes
    rows: int
    cols: int
    resized: bool  # a resize came before the moment: the raw bytes replay at one size only


def raw_until(cast: Cast, at: float | None = None) -> RawMoment:
    chunks: list[str] = []
    rows, cols, resized = cast.rows, cast.cols, False
    for t, kind, data in cast.events:
        if at is not None and t > at:
            break
        if kind == "o":
            chunks.append(data)
        elif kind == "r":
            rows, cols = parse_size(data)
            resized = True
    return RawMoment("".join(chunks).encode(), rows, cols, resized)


async def open_recording(path: Path, size: int) -> tuple[IO[bytes], int]:
    """The recording opened (off the event loop) and how many of its bytes to serve: at most
    ``size``, and no more than the file holds now. Raises ``OSError`` when it went away since it
    was found — opened here, before the response starts, so that is a clean answer."""

    def opened() -> tuple[IO[bytes], int]:
        handle = open(path, "rb")  # noqa: SIM115 - closed by file_chunks
        try:
            return handle, min(size, os.fstat(handle.fileno()).st_size)
        except OSError:
            handle.close()
            raise

    return await asyncio.get_running_loop().run_in_executor(None, opened)


async def file_chunks(handle: IO[bytes], size: int, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
    """The first ``size`` bytes of an opened recording, read off the event loop (a recording
    still growing is served up to the last whole line written); closes it."""
    loop = asyncio.get_running_loop()
    try:
        left = size
        while left > 0:
            try:
                data = await loop.run_in_executor(None, handle.read, min(chunk, left))
            except OSError as exc:  # the disk failed under the download: it ends short
                log.warning("recording %s could not be read to its end: %s", handle.name, exc)
                return
            if not data:
                return
            left -= len(data)
            yield data
    finally:
        await loop.run_in_executor(None, handle.close)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0


async def recorded(transcript: Transcript | None, folder: Path | None, sid: str) -> tuple[Path, int] | None:
    """Where a session's recording is and how many bytes of it to serve: a live session's
    (flushed first), else a deleted session's file left in ``folder``; None if not recorded."""
    if transcript is not None:
        await transcript.sync()
        return (transcript.path, transcript.written) if transcript.written else None
    if folder is None or not re.fullmatch(r"[0-9a-f]{1,64}", sid):
        return None
    path = Path(folder) / f"{sid}.cast"
    size = await asyncio.get_running_loop().run_in_executor(None, _size, path)
    return (path, size) if size else None
