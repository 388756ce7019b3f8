"""The suite's layers, as a pytest plugin (``pytest_plugins`` in conftest.py).

Every test belongs to exactly one layer, given by a marker (usually the module's ``pytestmark``):

- ``unit``: the memory host, a hand-moved clock (``clock.ManualClock``), the ASGI transport. No
  process, no socket, no sleep, and that is enforced: while a unit test (its fixtures included)
  runs, starting a process (fork, exec, spawn, ``subprocess``), a real socket (bind, connect,
  listen, sendto, a name look-up) and ``time.sleep`` raise :class:`LayerViolation`; and since
  code under test may catch what it raises, any attempt fails the test all the same.
  ``socket.socketpair`` (asyncio's self-pipe) stays allowed, as does ``asyncio.sleep`` in the
  code under test (the engine's own heartbeats); a test's own ``asyncio.sleep`` with a delay does not.
- ``integration``: real processes (PTYs, tmux, uvicorn on loopback, the CLI, pip builds), and races
  that run threads against the real filesystem for seconds on end.
- ``browser``: Debian's Chromium driving the dashboard.
- ``live``: the real agent CLIs (Claude Code, Codex, Gemini, Aider, opencode, Qwen Code, Copilot, Cline,
  Continue, gptme) on the lab's mock model servers
  (or reading their own ``--help``).
- ``bench``: the benchmark's smoke runs.

A test that needs several of these takes the heaviest (unit < integration < browser < live): a
dashboard test driving a real agent CLI is ``live``. A test with no layer, or with two, fails the
collection, naming it.
"""

from __future__ import annotations

import _posixsubprocess
import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

LAYERS = ("unit", "integration", "browser", "live", "bench")
TESTS = str(Path(__file__).resolve().parent)


class LayerViolation(BaseException):
    """A unit test started a process, opened a socket or slept. A ``BaseException`` so that the
    ``except OSError`` / ``except Exception`` of the code under test does not turn it into a
    handled error (it is recorded and fails the test in any case)."""


def layers_of(item: pytest.Item) -> list[str]:
    return sorted({m.name for m in item.iter_markers() if m.name in LAYERS})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = [(item.nodeid, found) for item in items if len(found := layers_of(item)) != 1]
    if wrong:
        lines = [f"  {nodeid}: {', '.join(found) if found else 'no layer'}" for nodeid, found in wrong[:20]]
        more = f"\n  ... and {len(wrong) - 20} more" if len(wrong) > 20 else ""
        raise pytest.UsageError(
            f"{len(wrong)} test(s) need exactly one layer marker of {', '.join(LAYERS)} "
            f"(a module's `pytestmark = pytest.mark.unit`, say; see tests/layers.py):\n" + "\n".join(lines) + more
        )
    _heaviest_first(items)
    _keep_shared_fixtures_together(items)


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _heaviest_first(items: list[pytest.Item]) -> None:
    """Modules in the order bench, live, browser, integration, unit (each module's heaviest test
    decides; a module's tests stay together and in their order): on several workers (.ci/run),
    the long tests start first and the short ones fill in at the end."""
    rank = {layer: i for i, layer in enumerate(("bench", "live", "browser", "integration", "unit"))}
    module_rank: dict[str, int] = {}
    for item in items:
        mod = _module(item)
        module_rank[mod] = min(module_rank.get(mod, len(rank)), rank[layers_of(item)[0]])
    items.sort(key=lambda item: module_rank[_module(item)])


def _keep_shared_fixtures_together(items: list[pytest.Item]) -> None:
    """Tests that share a module-scoped fixture (a server, a browser, a wheel built once) run on
    one worker under ``--dist loadgroup``, so that the fixture is made once, not once per worker."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(fixture_defs[-1].scope == "module" for fixture_defs in defs):
            item.add_marker(pytest.mark.xdist_group(_module(item)))


# --- "unit starts no process, opens no socket, does not sleep", enforced -------------------------

_VIOLATIONS = pytest.StashKey[list[str]]()


ROOT = str(Path(TESTS).parent)


def _where() -> str:
    """The innermost frame of the project's own code (tests, service, lab) that got here."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(ROOT) and name != __file__ and "/.venv/" not in name:
            return f" at {os.path.relpath(name, ROOT)}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _refuse(record: Callable[[str], None], what: str) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        record(what + _where())
        raise LayerViolation(f"a unit test may not {what} (tests/layers.py); mark the test integration")

    return refused


def _patches(record: Callable[[str], None]) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, replacement) for every way out of the process this guard closes."""
    start = _refuse(record, "start a process")
    out: list[tuple[Any, str, Any]] = [(_posixsubprocess, "fork_exec", start), (subprocess, "_fork_exec", start)]
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve", "execvp", "execvpe"):
        if hasattr(os, name):
            out.append((os, name, _refuse(record, f"call os.{name}")))
    for name in ("bind", "connect", "connect_ex", "listen", "sendto"):
        out.append((socket.socket, name, _refuse(record, f"use a real socket ({name})")))
    for name in ("getaddrinfo", "gethostbyname", "create_connection", "create_server"):
        out.append((socket, name, _refuse(record, f"use the network ({name})")))

    real_sleep = time.sleep

    def no_sleep(seconds: float) -> None:
        if seconds > 0:
            record(f"time.sleep({seconds}){_where()}")
            raise LayerViolation(f"a unit test may not sleep (time.sleep({seconds})): move a hand-moved clock instead")
        real_sleep(seconds)

    out.append((time, "sleep", no_sleep))

    real_async_sleep = asyncio.sleep

    async def no_test_sleep(delay: float, result: Any = None) -> Any:
        # the engine's own waits (heartbeats) may run; a test (or a test helper) waiting on the
        # real clock is what a unit test must not do
        caller = sys._getframe(1).f_code.co_filename
        if delay > 0 and caller.startswith(TESTS):
            record(f"asyncio.sleep({delay}){_where()}")
            raise LayerViolation(
                f"a unit test may not wait on the real clock (asyncio.sleep({delay})): advance a ManualClock"
            )
        return await real_async_sleep(delay, result)

    out.append((asyncio, "sleep", no_test_sleep))
    return out


@contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    if "unit" not in layers_of(item):
        yield
        return
    found = item.stash.setdefault(_VIOLATIONS, [])
    saved = []
    for owner, name, replacement in _patches(found.append):
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    found = item.stash.get(_VIOLATIONS, [])
    if found:
        broke = f"a unit test broke its layer ({call.when}): " + "; ".join(dict.fromkeys(found))
        report.outcome = "failed"
        report.longrepr = f"{broke}\n\n{report.longrepr}" if report.longrepr else broke
        found.clear()
    return report
