"""The real captures under fixtures/, each replayed once per test process and screen backend.

Replaying a capture through pyte is most of the unit layer's cost (all 432 of them take ~16 s of
CPU on pyte, ~1 s on Ghostty), and six modules read the same captures: each used to replay them
into a cache of its own. Here the replay is made once per (capture, size, backend) and shared as a
``Replay``: a frozen copy of what the tests read off the screen (rows, title, cursor), so that no
test can change what another one reads. The tests then do only their own part, the
classification. Under ``pytest-xdist`` the modules that use it run on one worker
(``CAPTURES_GROUP``), so the replays are made once per run, not once per worker.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from panewatch.backends import make_screen
from panewatch.fixtures import Fixture, default_root, find_folders, load_folder
from panewatch.screen import Cursor

#: The ``xdist_group`` of every module that reads the replays (tests/layers.py keeps a group on one
#: worker under ``--dist loadgroup``).
CAPTURES_GROUP = "captures"


@dataclass(frozen=True)
class Replay:
    """What a screen showed after a whole capture was fed to it, read-only: the same calls as on
    the screen (``lines()``, ``text()``, ``title``, ``cursor``), each ``lines()`` a fresh list."""

    rows: tuple[str, ...]
    title: str
    cursor: Cursor

    def lines(self) -> list[str]:
        return list(self.rows)

    def text(self) -> str:
        return "\n".join(self.rows)


@functools.cache
def _replay(path: Path, rows: int, cols: int, backend: str) -> Replay:
    screen = make_screen(backend, rows, cols)
    screen.feed(path.read_bytes())
    return Replay(tuple(screen.lines()), screen.title, screen.cursor)


def replay(path: Path, rows: int, cols: int, backend: str = "pyte") -> Replay:
    """``path`` (a whole capture) fed at once to a fresh ``rows`` x ``cols`` screen of
    ``backend``, made once per process."""
    return _replay(path.resolve(), rows, cols, backend)


def replayed(fx: Fixture, backend: str = "pyte") -> Replay:
    """A fixture's capture at the size it was captured at."""
    return replay(fx.path, fx.truth.rows, fx.truth.cols, backend)


@functools.cache
def every_fixture() -> tuple[Fixture, ...]:
    """Every capture of every agent under fixtures/, in folder order."""
    return tuple(fx for folder in find_folders(default_root()) for fx in load_folder(folder))
