"""Commands that other distributions plug into ``panewatch`` (the lab's ``lab`` and ``bench``).

A distribution declares ``[project.entry-points."panewatch.plugins"] NAME = "module:main"``,
where ``main(argv: list[str]) -> int`` runs ``panewatch NAME ARGS...``. The runtime wheel
knows the names it offers and how to get them, never the code: nothing is imported until the
command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

GROUP = "panewatch.plugins"

#: The commands the lab distribution adds, with their one-line help for ``panewatch --help``.
KNOWN: dict[str, str] = {
    "lab": "mock model API, fake agent, captures, evaluation",
    "bench": "benchmark: detection latency, many agents, floods, emulator speed",
}

INSTALL_HINT = (
    "`panewatch {name}` comes with the lab, a separate distribution (panewatch-lab) kept in the\n"
    "`lab/` folder of Panewatch's repository; it is not part of the runtime wheel. From a checkout,\n"
    "into the environment that has panewatch:\n"
    "\n"
    "    pip install ./lab            # or, to work on it: pip install -e ./lab\n"
    "\n"
    "`.ci/run` installs it for the tests."
)

Runner = Callable[[list[str]], int]


def available() -> dict[str, str]:
    """Every installed plugin command: name → the ``module:function`` it runs (not yet loaded)."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def find(name: str) -> Runner | None:
    """The installed runner of ``panewatch NAME``, or None when no distribution provides it."""
    for ep in entry_points(group=GROUP, name=name):
        runner: Runner = ep.load()
        return runner
    return None


def install_hint(name: str) -> str:
    return INSTALL_HINT.format(name=name)
