"""CPU cost of hostile pane output per 16 KiB slice (the engine's FEED_BUDGET), per backend.

Issue #13: no slice of any content may hold the event loop for more than a few ms. Each
pattern below is repeated into 1 MiB and fed in 16 KiB slices, on the default 32x120 pane
and on the largest size the API allows (500x1000); the worst slice and the mean cost per KB
are printed beside the same run's plain-text baseline. CPU time (``thread_time``), so the
other helpers' load on the machine does not count.

Run: ``nice .venv/bin/python benchmarks/screen_hostile.py [--mib 1]``.
"""

from __future__ import annotations

import argparse
import time

from panewatch.backends import available, make_screen

SLICE = 16 * 1024

_cjk = "".join(map(chr, range(0x4E00, 0x9FFF))).encode()
PATTERNS: dict[str, bytes] = {
    "plain text (baseline)": b"The quick brown fox jumps over the lazy dog. " * 20 + b"\r\n",
    "bomb: a+U+0301, CSI 9999 b": b"a\xcc\x81" + b"\x1b[9999b" * 16,
    "combining marks": "\u0301".encode() * 500,
    "marks at last column": b"\x1b[1;999H" + "x\u0301\u0302".encode() * 50,
    "unterminated CSI digits": b"\x1b[" + b"1" * 100_000,
    "long CSI params ;;;": b"\x1b[" + b"1;" * 1500 + b"m",
    "distinct CJK": _cjk,
    "wide at last column": b"\x1b[1;999H" + "界".encode() * 20 + b"\r\n",
    "REP flood": b"x\x1b[9999b",
    "ED with colour": b"\x1b[41m\x1b[2J\x1b[0m",
    "EL with colour": b"\x1b[44m\x1b[K\x1b[1K\x1b[2K",
    "SU/SD huge": b"\x1b[9999S\x1b[9999T",
    "IL/DL huge": b"\x1b[5;1H\x1b[9999L\x1b[9999M",
    "ICH/DCH huge": b"\x1b[9999@\x1b[9999P",
    "ECH huge": b"\x1b[9999X",
    "CUP far": b"\x1b[9999;9999Hx\x1b[0;0Hy",
    "margins + origin": b"\x1b[2;9999r\x1b[?6h\x1b[9999d\x1b[9999;9999H\x1b[?6l\x1b[r",
    "DECALN": b"\x1b#8",
    "DECCOLM / DECSCNM": b"\x1b[?3h\x1b[?5h\x1b[?3l\x1b[?5l",
    "alt screen toggle": b"\x1b[?1049hx\x1b[?1049l",
    "LF flood": b"\n",
    "yes flood (y LF)": b"y\n",
    "tabs": b"\t\t\t\x1b[3g\x1bH",
    "SGR 38:2 colon": b"\x1b[38:2::1:2:3;48:5:200mx",
    "OSC title flood": b"\x1b]0;" + b"t" * 5000 + b"\x07",
    "DCS unterminated": b"\x1bP" + b"q" * 100_000,
    "C1 CSI digits": "\u009b".encode() + b"9" * 10_000,
    "save/restore cursor": b"\x1b7\x1b[99;99H\x1b8\x1b[s\x1b[u",
    "DSR/DA queries": b"\x1b[6n\x1b[c\x1b[>c\x1b[?25$p",
}


def measure(backend: str, rows: int, cols: int, data: bytes) -> tuple[float, float]:
    """(worst slice CPU ms, mean CPU ms per KB) for ``data`` fed in SLICE slices."""
    screen = make_screen(backend, rows, cols, reply=lambda _b: None)
    worst, total = 0.0, 0.0
    for i in range(0, len(data), SLICE):
        t0 = time.thread_time()
        screen.feed(data[i: i + SLICE])
        took = time.thread_time() - t0
        worst, total = max(worst, took), total + took
    screen.lines()
    return worst * 1000, total * 1000 / (len(data) / 1024)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=float, default=1.0, help="bytes fed per pattern (MiB)")
    p.add_argument("--only", default="", help="run the patterns whose name contains this")
    args = p.parse_args()
    size = int(args.mib * (1 << 20))
    sizes = [(32, 120), (500, 1000)]
    backends = available()
    head = "".join(f" {f'{b} {r}x{c}':>22}" for b in backends for r, c in sizes)
    print(f"worst 16 KiB slice, CPU ms (mean CPU ms per KB in brackets); {args.mib:g} MiB per pattern")
    print(f"{'pattern':28}{head}")
    for name, piece in PATTERNS.items():
        if args.only not in name and "baseline" not in name:
            continue
        data = (piece * (size // len(piece) + 1))[:size]
        cells = []
        for backend in backends:
            for rows, cols in sizes:
                worst, per_kb = measure(backend, rows, cols, data)
                cells.append(f"{worst:9.2f} ({per_kb:7.3f})")
        print(f"{name:28}" + "".join(f" {c:>22}" for c in cells))


if __name__ == "__main__":
    main()
