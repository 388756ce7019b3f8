"""Which terminal emulator a pane's screen runs on: pyte (always there) or Ghostty (optional).

Every backend offers the same small interface (``ScreenLike``) so that sessions, the API and
the benchmark never care which one they hold. The default, ``auto``, is Ghostty wherever its
wheel (the ``fast`` extra, ``pip install 'panewatch[fast]'``) installs, pyte otherwise: Ghostty
emulates real agents' output ~100× faster, which is what holds the CPU target with hundreds of
panes (benchmarks/RESULTS.md, issue 17); pyte is a plain Python dependency that installs
everywhere, and the manifests give the same results on both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .oob import OutOfBand
from .screen import Cursor, Screen

BACKENDS = ("pyte", "ghostty")
#: ``auto`` picks the first of these that imports.
PREFERRED = ("ghostty", "pyte")


class BackendUnavailable(Exception):
    """The configured backend's package is not installed."""


class ScreenLike(Protocol):
    """What the service reads from and writes to an emulated screen."""

    rows: int
    cols: int
    seq: int
    oob: OutOfBand  # what the agent says out of band (OSC 7501, 9;4, 9/99/777)

    def feed(self, data: bytes) -> None: ...
    def feed_text(self, text: str) -> None: ...
    def lines(self) -> list[str]: ...
    def text(self) -> str: ...
    def styles(self) -> list[list[list[object]]]: ...
    def mode(self, number: int, private: bool = True) -> bool: ...
    def resize(self, rows: int, cols: int) -> None: ...

    @property
    def cursor(self) -> Cursor: ...
    @property
    def title(self) -> str: ...
    @property
    def alternate(self) -> bool: ...
    @property
    def mid_frame(self) -> bool: ...
    @property
    def errors(self) -> int:
        """Sequences lost to a contained exception; read-only here, as ``Screen`` derives it."""
        ...


ScreenFactory = Callable[..., ScreenLike]


def screen_class(backend: str) -> ScreenFactory:
    """The screen class for ``backend``; raises ``BackendUnavailable`` with the fix if missing."""
    if backend == "pyte":
        return Screen
    if backend == "ghostty":
        try:
            from .screen_ghostty import GhosttyScreen
        except (ImportError, OSError) as exc:
            raise BackendUnavailable(
                f"backend 'ghostty' needs pyghostty ({exc}); install it with "
                "pip install 'panewatch[fast]', or use backend = \"pyte\""
            ) from None
        return GhosttyScreen
    raise BackendUnavailable(f"unknown screen backend {backend!r} (known: {', '.join(BACKENDS)})")


def available() -> list[str]:
    """The backends that can be used on this machine."""
    out = []
    for name in BACKENDS:
        try:
            screen_class(name)
        except BackendUnavailable:
            continue
        out.append(name)
    return out


def choose(backend: str) -> tuple[str, str]:
    """The backend to use for the configured ``backend`` (``auto`` or a name), and why, for the
    start-up log line."""
    if backend != "auto":
        screen_class(backend)  # not installed: BackendUnavailable with the fix
        return backend, "configured"
    for name in PREFERRED:
        try:
            screen_class(name)
        except BackendUnavailable as exc:
            why = str(exc)
            continue
        return name, "auto: the fastest installed" if name == PREFERRED[0] else f"auto: {why.split(';')[0]}"
    raise BackendUnavailable("no screen backend installed")  # pyte is a dependency: not reached


def make_screen(backend: str, rows: int, cols: int, reply: Callable[[bytes], None] | None = None) -> ScreenLike:
    """A fresh screen of ``backend``."""
    return screen_class(backend)(rows, cols, reply=reply)
