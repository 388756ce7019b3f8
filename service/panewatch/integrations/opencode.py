"""opencode: the plugin Panewatch adds when it launches the CLI, and what each event means.

opencode (1.18.33) has no hook commands; it has JS plugins, listed in its config's ``plugin``
array, and it merges the inline config in ``OPENCODE_CONFIG_CONTENT`` last, its ``plugin`` list
appended to the others' (checked: the plugin ran beside the user's global config). So the launch
sets that variable to the user's own inline config, if they set one, with Panewatch's plugin
(``opencode_plugin.js``, copied into a private folder) appended. The user's files are never
written and their plugins keep running. ``OPENCODE_CONFIG_DIR`` is not used: opencode runs an npm
install into such a folder.

The plugin runs inside opencode (a descendant of the pane's process) and posts small JSON
events to the pane's report socket, in order: ``chat.message`` (a prompt went in),
``tool.execute.before``/``after``, ``permission.asked`` (its permission name — ``bash``, ``edit``
… — and the command or file), ``permission.replied``, ``session.idle`` and ``session.error``.
"""

from __future__ import annotations

import hashlib
import json
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

#: The variable holding opencode's inline config (merged last, plugins appended).
CONTENT_VARIABLE = "OPENCODE_CONFIG_CONTENT"
#: What each event the plugin sends means for the pane.
OPENCODE_EVENTS: dict[str, State] = {
    "chat.message": State.working,
    "tool.execute.before": State.working,
    "tool.execute.after": State.working,
    "permission.asked": State.blocked,
    "permission.replied": State.working,
    "session.idle": State.idle,
    "session.error": State.idle,
}
PLUGIN = Path(__file__).with_name("opencode_plugin.js")


def plugin_file(folder: Path) -> Path:
    """The plugin, copied into ``folder`` under a name that changes with its text."""
    text = PLUGIN.read_text()
    target = folder / f"panewatch-{hashlib.sha256(text.encode()).hexdigest()[:16]}.js"
    if not target.exists() or target.read_text() != text:
        scratch = folder / f".plugin.{os.getpid()}.tmp"
        scratch.write_text(text)
        scratch.replace(target)
    return target


def with_plugin(theirs: str | None, plugin: Path) -> str | None:
    """The inline config: the user's (``theirs``), with the plugin appended to its ``plugin``
    list; None when theirs is not a JSON object (then the launch goes on without the plugin)."""
    try:
        config = json.loads(theirs) if theirs else {}
    except ValueError as exc:
        log.warning("no opencode plugin: %s is not JSON (%s)", CONTENT_VARIABLE, exc)
        return None
    if not isinstance(config, dict) or not isinstance(config.get("plugin", []), list):
        return None
    return json.dumps({**config, "plugin": [*config.get("plugin", []), plugin.as_uri()]})


def _request(payload: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """(tool, input) of a ``permission.asked``: its permission name and what it acts on (the
    plugin's ``tool_input``: the permission's metadata and its patterns)."""
    tool = payload.get("permission")
    given = payload.get("tool_input")
    meta = given if isinstance(given, Mapping) else {}
    found: dict[str, str] = {}
    for key, as_key in (("command", "command"), ("filepath", "path"), ("filePath", "path"), ("path", "path")):
        value = meta.get(key)
        if isinstance(value, str) and value and as_key not in found:
            found[as_key] = value
    patterns = meta.get("patterns")
    if not found and isinstance(patterns, list) and patterns and all(isinstance(p, str) for p in patterns):
        found["command" if tool == "bash" else "path"] = "\n".join(patterns)
    if isinstance(meta.get("description"), str):
        found["description"] = meta["description"]
    return (tool if isinstance(tool, str) else None), found


class OpencodeIntegration:
    """opencode's plugin (through ``OPENCODE_CONFIG_CONTENT``) and the events it posts."""

    name = "opencode"

    def launch_args(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> list[str]:
        return []

    def launch_env(self, argv: Sequence[str], processes: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
        if not runs_directly(argv, processes):
            return {}
        folder = private_temp_folder("opencode", "opencode")
        try:
            content = with_plugin(env.get(CONTENT_VARIABLE), plugin_file(folder)) if folder else None
        except OSError as exc:
            log.warning("no opencode plugin: copying it failed (%s)", exc)
            content = None
        return {CONTENT_VARIABLE: content} if content else {}

    def interpret(self, payload: Mapping[str, Any], now: float, memo: MutableMapping[str, Any]) -> Report | None:
        if is_plain(payload):
            return plain_report(payload, now)
        event = payload.get("opencode")
        if not isinstance(event, str) or event not in OPENCODE_EVENTS:
            raise UnknownPayload('expected an opencode plugin event ("opencode") or {"state": ...}')
        state = OPENCODE_EVENTS[event]
        if event == "permission.asked":
            tool, found = _request(payload)
            request = from_tool(tool, found, RequestSource.hook)
            return Report(state, event, now, f"asks permission to use {request.tool or 'a tool'}", request)
        tool = payload.get("tool")
        detail = f"{event} {tool}" if isinstance(tool, str) and tool else event
        return Report(state, event, now, detail[:200])
