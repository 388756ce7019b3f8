"""gptme: the plugin Panewatch adds when it launches the CLI, and what each of its events means.

gptme (0.35.1) takes plugins from the user's config (``[plugins] paths`` in
``~/.config/gptme/config.toml``), the project's ``gptme.toml`` and every installed distribution's
``gptme.plugins`` entry point, and registers each one's hooks (``gptme/plugins/registry.py``,
``gptme/hooks/__init__.py:init_hooks``). Its config file's place is fixed under ``~``, and it has no
plugin flag or variable, so the launch adds a private folder of Panewatch's own to ``PYTHONPATH``
(after the user's own entries), holding the plugin (``_gptme_plugin.py``, as ``panewatch_gptme``)
and a ``panewatch_gptme-1.0.dist-info`` whose entry point names it. The user's files are never
written and the user's own plugins keep loading. Only a user config that lists the plugins it
enables (``[plugins] enabled``) leaves it out: then the screen alone tells the state.

The plugin posts ``{"gptme": event, "session_id": conversation, ...}`` to the pane's report
socket: ``session.start`` (the conversation's name only), ``turn.pre``, ``generation.pre``,
``tool.execute.pre``/``post`` (working), ``tool.confirm`` (blocked, just before gptme's terminal
prompt asks: the tool and its command or file), ``turn.post`` and ``session.end`` (idle).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from ..panes.asks import from_tool
from ..panes.signals import Report
from ..states import RequestSource, State
from .base import UnknownPayload, is_plain, plain_report, private_temp_folder, runs_directly

log = logging.getLogger("panewatch.integrations")

#: What each event the plugin sends means for the pane (None: only names the conversation).
GPTME_EVENTS: dict[str, State | None] = {
    "session.start": None,
    "turn.pre": State.working,
    "generation.pre": State.working,
    "tool.execute.pre": State.working,
    "tool.execute.post": State.working,
    "tool.confirm": State.blocked,
    "turn.post": State.idle,
    "session.end": State.idle,
}
PLUGIN = Path(__file__).with_name("_gptme_plugin.py")
MODULE = "panewatch_gptme"
DIST_INFO = f"{MODULE}-1.0.dist-info"
METADATA = "Metadata-Version: 2.1\nName: panewatch-gptme\nVersion: 1.0\nSummary: Panewatch state reports\n"
ENTRY_POINTS = f"[gptme.plugins]\npanewatch = {MODULE}:plugin\n"


def _write(target: Path, text: str) -> None:
    if not target.exists() or target.read_text() != text:
        scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        scratch.write_text(text)
        scratch.replace(target)


def plugin_path(base: Path) -> Path:
    """The folder gptme's Python finds the plugin in, under ``base``, named by the files' text."""
    text = PLUGIN.read_text()
    digest = hashlib.sha256(f"{text}\0{METADATA}\0{ENTRY_POINTS}".encode()).hexdigest()[:16]
    folder = base / digest
    (folder / DIST_INFO).mkdir(mode=0o700, parents=True, exist_ok=True)
    _write(folder / f"{MODULE}.py", text)
    _write(folder / DIST_INFO / "METADATA", METADATA)
    _write(folder / DIST_INFO / "entry_points.txt", ENTRY_POINTS)
    return folder


def with_path(theirs: str | None, folder: Path) -> str:
    """``PYTHONPATH``: the user's own entries first, the plugin's folder after them."""
    return os.pathsep.join([*(theirs.split(os.pathsep) if theirs else []), str(folder)])


class GptmeIntegration:
    """gptme's plugin (an entry point on ``PYTHONPATH``) and the events it posts."""

    name = "gptme"

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        return []

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        if not runs_directly(argv, processes):
            return {}  # a wrapper script: it may run another Python, or none
        base = private_temp_folder("gptme", "gptme")
        try:
            folder = plugin_path(base) if base else None
        except OSError as exc:
            log.warning("no gptme plugin: writing it failed (%s)", exc)
            folder = None
        return {"PYTHONPATH": with_path(env.get("PYTHONPATH"), folder)} if folder else {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        if is_plain(payload):
            return plain_report(payload, now)
        event = payload.get("gptme")
        if not isinstance(event, str) or event not in GPTME_EVENTS:
            raise UnknownPayload('expected a gptme plugin event ("gptme") or {"state": ...}')
        state = GPTME_EVENTS[event]
        if state is None:
            return None
        tool = payload.get("tool")
        tool = tool if isinstance(tool, str) and tool else None
        if event == "tool.confirm":
            given = payload.get("tool_input")
            request = from_tool(tool, given if isinstance(given, Mapping) else None, RequestSource.hook)
            return Report(state, event, now, f"asks to run {tool or 'a tool'}", request)
        return Report(state, event, now, f"{event} {tool}" if tool else event)
