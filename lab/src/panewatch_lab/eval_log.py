"""The evaluation's raw log: every observation, timestamped on one clock, in one list.

Threads (the detector ticker, the process sampler, the server's own loop through the tap and
the hook recorder) and the driving event loop all append here; the tables and the picture are
computed from this list alone, so a saved log (JSON lines, gzip) reproduces them exactly.
Times are ``time.monotonic()``, the clock the fake agent's state file and the mock API's log use.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Record = dict[str, Any]


class Recorder:
    """A thread-safe, append-only list of records ``{"k": kind, "t": mono, ...}``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[Record] = []

    def add(self, kind: str, t: float, **fields: Any) -> None:
        record = {"k": kind, "t": round(t, 4), **fields}
        with self._lock:
            self._records.append(record)

    def records(self, kind: str | None = None) -> list[Record]:
        """A time-ordered copy (optionally of one kind)."""
        with self._lock:
            out = [r for r in self._records if kind is None or r["k"] == kind]
        return sorted(out, key=lambda r: r["t"])


class JsonlTail:
    """The JSON lines another process appended to a file since the last ``read()``.

    The fake agent's state file and the mock API's log grow while the evaluation runs; a line
    cut off mid-write is kept until the rest of it arrives."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pos = 0
        self._partial = b""

    def read(self) -> list[Record]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._pos)
                data = fh.read()
        except FileNotFoundError:
            return []
        self._pos += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]


def save(records: Iterable[Record], path: Path) -> None:
    """JSON lines, gzip-compressed when the name ends in ``.gz``."""
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def load(path: Path) -> list[Record]:
    opener = gzip.open if Path(path).suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        return [json.loads(line) for line in fh if line.strip()]
