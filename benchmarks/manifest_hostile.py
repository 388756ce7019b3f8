"""Slowest classification of every bundled manifest on hostile 1000-row x 500-column screens.

Issue #13 target: under 30 ms per classification. Printed beside two same-run baselines: the
same manifests on the real fixture screens, and the same rules compiled with Python's ``re``
(what ran before RE2). Screens are built to hurt the rules' regexes: long runs of the
characters their classes and literals almost match, horizontal rules everywhere (the region
finder runs on every line), unicode spaces, prompt fragments that never complete.

Run: ``nice .venv/bin/python benchmarks/manifest_hostile.py`` (a few seconds per manifest).
"""

from __future__ import annotations

import re
import statistics
import time

from panewatch.fixtures import default_root, find_folders, load_folder
from panewatch.manifest import _regions
from panewatch.manifest import HORIZONTAL_RULE, CompiledManifest, CompiledRule, ManifestStore, bundled_manifest_dir
from panewatch.screen import Screen

ROWS, COLS = 1000, 500


def _fill(piece: str) -> str:
    return (piece * (COLS // max(1, len(piece)) + 1))[:COLS]


HOSTILE = {
    "a-run then !": [_fill("a")[:-1] + "!"] * ROWS,
    "spaces": [" " * COLS] * ROWS,
    "unicode spaces": [_fill("\u00a0\u2003 \u3000")] * ROWS,
    "horizontal rules + label": [_fill("─") [:200] + " x" * 100 + " " * 99 + "!"] * ROWS,
    "all rules": [_fill("─")] * ROWS,
    "password no colon": [_fill("password ")] * ROWS,
    "password colons": [_fill("Password:x ")] * ROWS,
    "menu fragments": [_fill("❯ 1. ") ] * ROWS,
    "esc fragments": [_fill("Esc to cance")] * ROWS,
    "spinner-ish": [_fill("✻ x …x (")] * ROWS,
    "yes/no fragments": [_fill("(y/n [Y/n (yes/no/[fing")] * ROWS,
    "prompt chars": [_fill("> ask> › • ◦ Working (")] * ROWS,
    "mixed": [_fill(p) for p in ("a", "❯ 1. x", "─", " ", "password ", "Esc to cancel · ", "…")] * (ROWS // 7)
    + [""] * (ROWS % 7),
}


def _time(manifest: CompiledManifest, lines: list[str], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()  # CPU time: the other helpers' load on this machine is not ours
        manifest.classify(lines, "", len(lines) - 1)
        best = min(best, time.thread_time() - t0)
    return best * 1000


def _on_python_re(manifest: CompiledManifest) -> CompiledManifest:
    """The same manifest with every pattern compiled by ``re`` (the engine before RE2)."""
    rules = []
    for cr in manifest.rules:
        flags = re.MULTILINE | (re.IGNORECASE if cr.rule.ignore_case else 0)
        comp = lambda ps: [re.compile(p.pattern, flags) for p in ps]  # noqa: E731
        rules.append(CompiledRule(cr.rule, comp(cr.any), comp(cr.all), comp(cr.not_)))
    return CompiledManifest(manifest.manifest, rules, manifest.path)


def main() -> None:
    store = ManifestStore.from_dirs(bundled_manifest_dir())
    fixtures = []
    for folder in find_folders(default_root()):
        for fx in load_folder(folder):
            s = Screen(fx.truth.rows, fx.truth.cols)
            s.feed(fx.read())
            fixtures.append(s.lines())
    print(f"hostile screens: {ROWS} rows x {COLS} columns ({ROWS * COLS:,} cells); best of 3 per screen, CPU ms; fixtures = median over the real captures")
    print(f"{'manifest':10} {'fixtures re':>12} {'fixtures RE2':>13} {'hostile re':>11} {'hostile RE2':>12}"
          "  slowest screen (RE2)")
    new_rule = _regions._horizontal_rule
    for agent in store.agents():
        manifest = store.get(agent)
        base = statistics.median(_time(manifest, lines, 1) for lines in fixtures)
        worst_name, worst = max(((name, _time(manifest, lines)) for name, lines in HOSTILE.items()),
                                key=lambda x: x[1])
        old = _on_python_re(manifest)
        _regions._horizontal_rule = lambda: HORIZONTAL_RULE  # the region finder on re, as before
        try:
            base_re = statistics.median(_time(old, lines, 1) for lines in fixtures)
            worst_re = max(_time(old, lines, 1) for lines in HOSTILE.values())
        finally:
            _regions._horizontal_rule = new_rule
        flag = "" if worst < 30 else "  OVER 30 ms"
        print(f"{agent:10} {base_re:12.3f} {base:13.3f} {worst_re:11.1f} {worst:12.1f}  {worst_name}{flag}")


if __name__ == "__main__":
    main()
