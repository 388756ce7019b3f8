"""Screen feed throughput: synthetic agent output and real captures through every emulator.

The generators reproduce what agents actually send (the research notes' §2 cases): plain
lines, a 24-bit-colour spinner, Ink's "cursor up N + erase below" repaints of a 20-row box,
and words placed one by one with ``CSI n G`` (Claude Code's habit, no LF at all). Each is
fed in 4 KiB chunks, as the PTY reader delivers them, to: bare pyte, the project's pyte
wrapper (``screen.Screen``), the Ghostty wrapper, and the bare ``pyghostty``/``pyavt``
packages when installed, so the wrappers' own overhead is visible beside their engines.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from panewatch.backends import BackendUnavailable

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "agent",
    "tool",
    "call",
    "result",
    "running",
    "tests",
    "passed",
    "failed",
    "file",
    "edit",
    "read",
    "write",
]
CHUNK = 4096
ROWS, COLS = 32, 120


def _rgb(rng: random.Random) -> str:
    return f"{rng.randint(0, 255)};{rng.randint(0, 255)};{rng.randint(0, 255)}"


def plain(n: int, seed: int = 1) -> bytes:
    """(a) plain ASCII lines."""
    rng, out, k = random.Random(seed), [], 0
    while k < n:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 16)))[:118] + "\r\n"
        out.append(line)
        k += len(line)
    return "".join(out).encode()


def spinner(n: int, seed: int = 1) -> bytes:
    """(b) a Claude-like status line repainted with CUP, EL, 24-bit SGR (~245 B a frame)."""
    rng, out, k, i = random.Random(seed), [], 0, 0
    while k < n:
        frame = (
            f"\x1b[{ROWS - 3};1H\x1b[2K\x1b[38;2;{_rgb(rng)}m{'⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'[i % 10]}\x1b[0m "
            f"\x1b[1m\x1b[38;2;{_rgb(rng)}mThinking\x1b[0m\x1b[38;2;{_rgb(rng)}m… \x1b[2m({i % 600}s · "
            f"↑ {i * 7 % 9000} tokens · esc to interrupt)\x1b[0m\x1b[{ROWS - 1};1H\x1b[48;2;{_rgb(rng)}m"
            f"\x1b[38;2;{_rgb(rng)}m ? for shortcuts \x1b[0m\x1b[60G\x1b[38;2;{_rgb(rng)}mctx 42%\x1b[0m"
            f"\x1b[{ROWS};5H"
        ).encode()
        out.append(frame)
        k += len(frame)
        i += 1
    return b"".join(out)


def _box(rng: random.Random, k: int) -> list[str]:
    rows = ["\x1b[38;2;215;119;87m╭" + "─" * 116 + "╮\x1b[39m"]
    for j in range(18):
        text = " ".join(rng.choice(WORDS) for _ in range(8))[:100]
        rows.append(
            f"\x1b[38;2;215;119;87m│\x1b[39m \x1b[1m{'>' if j == 0 else ' '}\x1b[22m "
            f"\x1b[38;2;{_rgb(rng)}m{text:<100}\x1b[39m \x1b[2m{k % 1000:>8}\x1b[22m    "
            "\x1b[38;2;215;119;87m│\x1b[39m"
        )
    return [*rows, "\x1b[38;2;215;119;87m╰" + "─" * 116 + "╯\x1b[39m"]


def ink_repaint(n: int, seed: int = 1) -> bytes:
    """(c1) Ink: ``\\r CSI {N}A CSI J`` then a fresh 20-row box, over and over."""
    rng, out, k, prev, i = random.Random(seed), [], 0, 0, 0
    while k < n:
        rows = _box(rng, i)
        frame = ((f"\r\x1b[{prev}A\x1b[J" if prev else "") + "\r\n".join(rows)).encode()
        prev = len(rows) - 1
        out.append(frame)
        k += len(frame)
        i += 1
    return b"".join(out)


def cha_words(n: int, seed: int = 1) -> bytes:
    """(c4) Claude Code's dialogs: every word placed with ``CSI n G``, rows stepped with
    ``CSI 1 B`` + CR (no LF), the whole block repainted with cursor-up + ``ESC[J``."""
    rng, out, k = random.Random(seed), [], 0
    while k < n:
        rows = []
        for _ in range(19):
            col, parts = 2, []
            for _ in range(rng.randint(4, 12)):
                word = rng.choice(WORDS)
                if col + len(word) >= COLS:
                    break
                parts.append(f"\x1b[{col}G\x1b[38;2;{_rgb(rng)}m{word}\x1b[39m")
                col += len(word) + 1
            rows.append("".join(parts))
        frame = ("\r\x1b[19A\x1b[J" + "\x1b[1B\r".join(rows)).encode()
        out.append(frame)
        k += len(frame)
    return b"".join(out)


GENERATORS: dict[str, Callable[[int], bytes]] = {
    "plain text": plain,
    "spinner (24-bit SGR)": spinner,
    "Ink repaint (CUU+ED)": ink_repaint,
    "CSI n G words": cha_words,
}


def captures(roots: Iterable[Path]) -> bytes:
    """Every ``*.raw`` capture under ``roots`` (fixtures/, the lab's notes), concatenated."""
    data = bytearray()
    for root in roots:
        if root.is_dir():
            for path in sorted(root.rglob("*.raw")):
                data += path.read_bytes()
    return bytes(data)


# -- engines ---------------------------------------------------------------------------------


def _bare_pyte() -> Callable[[bytes], None]:
    import pyte

    stream = pyte.ByteStream(pyte.Screen(COLS, ROWS))

    def feed(chunk: bytes) -> None:
        try:
            stream.feed(chunk)
        except TypeError:  # pyte's defect on CSI with extra parameters; counted as fed
            pass

    return feed


def _wrapper(backend: str) -> Callable[[], Callable[[bytes], None]]:
    def make() -> Callable[[bytes], None]:
        from panewatch.backends import make_screen

        return make_screen(backend, ROWS, COLS, reply=lambda _: None).feed

    return make


def _bare_ghostty() -> Callable[[bytes], None]:
    import pyghostty

    return pyghostty.Terminal(cols=COLS, rows=ROWS, scrollback=0).feed


def _bare_avt() -> Callable[[bytes], None]:
    import avt

    vt = avt.Vt(COLS, ROWS, 0)

    def feed(chunk: bytes) -> None:
        vt.feed_str(chunk.decode("utf-8", "replace"))

    return feed


#: name -> factory of a ``feed(bytes)``; a factory raising ImportError means "not installed".
ENGINES: dict[str, Callable[[], Callable[[bytes], None]]] = {
    "pyte (bare)": _bare_pyte,
    "pyte + wrapper": _wrapper("pyte"),
    "ghostty + wrapper": _wrapper("ghostty"),
    "pyghostty (bare)": _bare_ghostty,
    "pyavt (bare)": _bare_avt,
}


@dataclass(frozen=True)
class Throughput:
    engine: str
    stream: str
    mb_per_s: float
    bytes_fed: int


def measure(feed_factory: Callable[[], Callable[[bytes], None]], data: bytes, min_seconds: float) -> tuple[float, int]:
    """MB/s feeding ``data`` in 4 KiB chunks, repeated until ``min_seconds`` have passed."""
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    feed = feed_factory()
    fed = 0
    start = time.perf_counter()
    while True:
        for chunk in chunks:
            feed(chunk)
        fed += len(data)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return fed / elapsed / 1e6, fed


def run_throughput(
    size: int, min_seconds: float, capture_roots: Iterable[Path], captures_limit: int = 0
) -> list[Throughput]:
    """Every engine on every synthetic stream and on the real captures (their first
    ``captures_limit`` bytes when set: a smoke run need not feed all 27 MB of them per engine)."""
    streams = {name: gen(size) for name, gen in GENERATORS.items()}
    real = captures(capture_roots)
    if captures_limit:
        real = real[:captures_limit]
    if real:
        streams["real captures"] = real
    out = []
    for engine, factory in ENGINES.items():
        try:
            factory()
        except (ImportError, OSError, BackendUnavailable):  # an optional engine that is not installed
            continue
        for name, data in streams.items():
            mbs, fed = measure(factory, data, min_seconds)
            out.append(Throughput(engine, name, mbs, fed))
    return out
