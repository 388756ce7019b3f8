"""Panewatch's gptme plugin: runs inside gptme (copied as ``panewatch_gptme.py``), never in Panewatch.

The launch puts a private folder holding this file and a ``panewatch_gptme-1.0.dist-info`` on
``PYTHONPATH``; gptme (0.35.1) finds every ``gptme.plugins`` entry point on its path and calls each
plugin's ``register_hooks``. The hooks post small JSON events to the pane's report socket
(``$PANEWATCH_REPORT_SOCKET``), in order and without holding gptme up for long (a post that fails
or takes over 2 s is dropped): the turn and each generation and tool starting (working), a tool
confirmation gptme's terminal prompt is about to ask (blocked, with the tool and what it acts on),
the turn's end and the session's (idle). Every event names the conversation (its log folder's name,
which ``gptme --name`` takes) as ``session_id``.

The turn's end is told once gptme's prompt has the keyboard, not when its hook runs: after
``turn.post`` gptme writes its log (an fsync) and then, right before it prompts, throws away
whatever was typed ahead (``flush_stdin``: TCIFLUSH), so a message sent on an idle told at the hook
was echoed by the terminal and lost (seen once, in a loaded test run). A thread waits until the
terminal leaves canonical mode (prompt_toolkit's raw mode: the prompt reads keys) and tells it
then, unless a later event has spoken since.

Self-contained on purpose: it runs on gptme's own Python, where Panewatch is not installed; gptme
is imported only inside the hooks. A gptme subagent (a child gptme with ``GPTME_SUBAGENT_AGENT_ID``,
which inherits ``PYTHONPATH``) registers nothing: its events say nothing about the pane's prompt.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

__all__ = ["plugin"]

TIMEOUT_S = 2.0
#: The longest the turn's end waits for gptme's prompt before it is told anyway.
PROMPT_WAIT_S = 30.0
#: How often the terminal's mode is looked at meanwhile.
PROMPT_POLL_S = 0.02
#: Below gptme's guardrails (200), anomaly watchdog (150) and server confirm (100), above its
#: terminal prompt (``cli_confirm``, 0): the last word before gptme asks, which it never answers.
CONFIRM_PRIORITY = 1
#: The other hooks' priority: working reported before gptme's own hooks run, idle after them.
FIRST = 1000
#: What a tool call acts on, by the tool's name (its first argument or its content).
PATH_TOOLS = {"save", "append", "patch", "morph", "read"}
SUBJECT_MAX = 2000

_conversation: dict[str, str] = {}
#: Events are sent one at a time, in the order they happened: a deferred turn's end is sent
#: only if no event came after it (``_said`` counts them).
_order = threading.Lock()
_said = [0]


def post(event: str, **fields: Any) -> None:
    """One event to the pane's report socket, after every event before it."""
    with _order:
        _said[0] += 1
        _send(event, **fields)


def _send(event: str, **fields: Any) -> None:
    """One event to the pane's report socket (nothing without one: not launched by Panewatch)."""
    where, session = os.environ.get("PANEWATCH_REPORT_SOCKET"), os.environ.get("PANEWATCH_SESSION")
    if not where or not session:
        return
    payload = {"gptme": event, **fields}
    if "session_id" not in payload and "name" in _conversation:
        payload["session_id"] = _conversation["name"]
    body = json.dumps(payload).encode()
    head = (
        f"POST /report?session={quote(session)} HTTP/1.1\r\nHost: panewatch\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(TIMEOUT_S)
            conn.connect(where)
            conn.sendall(head.encode() + body)
            while conn.recv(4096):
                pass
    except OSError:
        pass


def _named(logdir: Any) -> dict[str, str]:
    """``session_id``: the conversation's name (its log folder), remembered for later events."""
    if logdir is None:
        return {}
    _conversation["name"] = Path(str(logdir)).name
    return {"session_id": _conversation["name"]}


def _subject(tool_use: Any) -> dict[str, str]:
    """What a tool call acts on: a shell command, or a file (``save``, ``patch`` …)."""
    tool = getattr(tool_use, "tool", None)
    args, kwargs = getattr(tool_use, "args", None) or [], getattr(tool_use, "kwargs", None) or {}
    content = getattr(tool_use, "content", None)
    if tool == "shell":
        command = kwargs.get("command") or content
        return {"command": str(command)[:SUBJECT_MAX]} if command else {}
    if tool in PATH_TOOLS:
        path = kwargs.get("path") or (args[0] if args else None)
        return {"path": str(path)[:SUBJECT_MAX]} if path else {}
    return {}


def _would_ask(tool_use: Any) -> bool:
    """Whether gptme's terminal prompt will ask about this call: it is registered and enabled (not
    ``--no-confirm``, not the server), no auto-confirm is on and the tool is not read-only."""
    from gptme.hooks import HookType, get_hooks
    from gptme.hooks.confirm import is_auto_confirm_active
    from gptme.tools import get_tool

    if not any(h.name == "cli_confirm" and h.enabled for h in get_hooks(HookType.TOOL_CONFIRM)):
        return False
    if is_auto_confirm_active():
        return False
    tool = get_tool(getattr(tool_use, "tool", ""))
    return not (tool is not None and tool.read_only and not tool.is_mcp)


# gptme passes each hook only the keyword arguments its signature names
def session_start(logdir: Any = None) -> None:
    post("session.start", **_named(logdir))


def turn_pre(manager: Any = None) -> None:
    post("turn.pre", **_named(getattr(manager, "logdir", None)))


def generation_pre(*_messages: Any, model: Any = None) -> None:
    post("generation.pre", model=str(model or ""))


def tool_pre(data: Any = None) -> None:
    post("tool.execute.pre", tool=str(getattr(getattr(data, "tool_use", None), "tool", "") or ""))


def tool_post(data: Any = None) -> None:
    post("tool.execute.post", tool=str(getattr(getattr(data, "tool_use", None), "tool", "") or ""))


def tool_confirm(tool_use: Any, *_preview_and_workspace: Any) -> None:
    """Reports blocked when gptme is about to ask; returns None: gptme's own prompt answers."""
    if _would_ask(tool_use):
        post("tool.confirm", tool=str(getattr(tool_use, "tool", "") or ""), tool_input=_subject(tool_use))


def turn_post(manager: Any = None) -> None:
    """Idle, told once gptme prompts (module docstring); at once without a terminal (``-n``)."""
    fields = _named(getattr(manager, "logdir", None))
    fd = _stdin_fd()
    if fd is None:
        post("turn.post", **fields)
        return
    with _order:
        mine = _said[0]
    threading.Thread(target=_tell_when_prompting, args=(fd, mine, fields), daemon=True).start()


def _stdin_fd() -> int | None:
    """gptme's terminal (its stdin), or None when it reads no terminal."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):
        return None
    return fd if os.isatty(fd) else None


def reading_keys(fd: int) -> bool:
    """The terminal is out of canonical mode: a prompt (prompt_toolkit's raw mode) reads its keys.
    True when it cannot be told (not a terminal any more): nothing is left to wait for."""
    try:
        return not termios.tcgetattr(fd)[3] & termios.ICANON
    except (termios.error, OSError):
        return True


def _tell_when_prompting(fd: int, mine: int, fields: dict[str, str], sleep: Any = time.sleep) -> None:
    """``turn.post`` once the prompt reads keys (at most ``PROMPT_WAIT_S`` on), unless another
    event was told meanwhile (a new turn, the session's end): that one says what is now."""
    deadline = time.monotonic() + PROMPT_WAIT_S
    while not reading_keys(fd) and time.monotonic() < deadline:
        sleep(PROMPT_POLL_S)
    with _order:
        if _said[0] == mine:
            _said[0] += 1
            _send("turn.post", **fields)


def session_end(logdir: Any = None) -> None:
    post("session.end", **_named(logdir))


def register() -> None:
    """Registers the hooks (gptme calls it once, at start)."""
    from gptme.hooks import HookType, register_hook

    if os.environ.get("GPTME_SUBAGENT_AGENT_ID"):
        return
    # working is told before gptme's own hooks of the event run, idle after them
    for kind, func, priority in (
        (HookType.SESSION_START, session_start, -FIRST),
        (HookType.TURN_PRE, turn_pre, FIRST),
        (HookType.GENERATION_PRE, generation_pre, FIRST),
        (HookType.TOOL_EXECUTE_PRE, tool_pre, FIRST),
        (HookType.TOOL_EXECUTE_POST, tool_post, FIRST),
        (HookType.TURN_POST, turn_post, -FIRST),
        (HookType.SESSION_END, session_end, -FIRST),
    ):
        register_hook(f"panewatch.{kind.value}", kind, func, priority=priority)
    register_hook("panewatch.tool.confirm", HookType.TOOL_CONFIRM, tool_confirm, priority=CONFIRM_PRIORITY)


def plugin() -> Any:
    """The ``gptme.plugins`` entry point: a factory gptme calls for its plugin."""
    from gptme.plugins.plugin import GptmePlugin

    return GptmePlugin(name="panewatch", register_hooks=register)
