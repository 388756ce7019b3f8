"""The dashboard's terminal channel: ``/ws/sessions/{sid}/term``.

One WebSocket per card carries a pane both ways, as an xterm.js widget needs it:

- out: the pane's recent raw output (scrollback from before the page connected), then an
  exact repaint of the emulated screen (colours, cursor, input modes), then live output as
  binary frames; JSON text frames for the rest (size, state, the prompt, held keys). A client
  that falls behind is not queued without bound: past ``CLIENT_BACKLOG`` bytes its backlog is
  dropped and it gets a repaint of the latest screen instead.
- in: keystrokes exactly as xterm.js encodes them (written as-is: the terminal already wrapped
  a paste in bracketed-paste markers when the agent enabled them), resizes (SIGWINCH), and
  the user's decision about held keys.

Typing is the user's explicit act, like attaching in tmux, so it goes through whatever the
pane's state, with one guard: keys that arrive within ``HOLD_S`` of the pane turning
``blocked`` were typed before the user could have seen the prompt, so they are held until the
user says "send anyway" or "drop".

Built on the engine's façade only: ``subscribe`` (every session's output, from its first
byte, for the history and the terminal modes), ``screen``/``get`` (the read models, with the
prompt the server decided), ``write_keys`` and ``resize``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import deque
from contextlib import suppress
from typing import Any

from fastapi import APIRouter, FastAPI, WebSocket

from ..access.roles import CLOSE_FORBIDDEN, KEYS
from ..engine import Actor, Engine, EngineAPI
from ..engine.events import Created, Deleted, Event, Output, StateChanged
from ..errors import PanewatchError, UnknownSession
from .deps import actor_of, engine_of, forbidden, ws_admit
from .routes_ws import run_first

log = logging.getLogger("panewatch.terminal")

#: Raw output kept per pane for scrollback (enough for >5,000 lines of a chatty TUI).
HISTORY_BYTES = 4 * 1024 * 1024
#: A client further behind than this is resynchronised from the screen, never queued.
CLIENT_BACKLOG = 512 * 1024
#: Keys typed this soon after the pane turned blocked are held back.
HOLD_S = 1.0
#: Largest input message (a big paste).
INPUT_MAX = 256 * 1024
CHUNK = 64 * 1024
#: Least time between two state/prompt messages to one client.
META_INTERVAL_S = 0.1

router = APIRouter()


# --- raw-output history ------------------------------------------------------------------


class History:
    """A bounded ring of a pane's raw output, as chunks (trimming never copies megabytes)."""

    def __init__(self, limit: int = HISTORY_BYTES, seed: bytes = b"") -> None:
        self.limit = limit
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.trimmed = False
        if seed:
            self.append(seed)

    def append(self, data: bytes) -> None:
        self.chunks.append(bytes(data))
        self.size += len(data)
        while self.size > self.limit and len(self.chunks) > 1:
            self.size -= len(self.chunks.popleft())
            self.trimmed = True

    def snapshot(self) -> bytes:
        """All kept output; once trimmed, from the first line start (not mid-sequence)."""
        data = b"".join(self.chunks)
        if self.trimmed:
            cut = data.find(b"\n")
            data = data[cut + 1 :] if cut >= 0 else b""
        return data


#: private modes a terminal must share with the pane for keys to be encoded as the agent expects
#: (cursor keys, bracketed paste, mouse reports) and the alternate screen
_MODES = (1, 2004, 1000, 1002, 1003, 1006)
_ALT_MODES = (47, 1047, 1049)
_PRIVATE_MODE = re.compile(rb"\x1b\[\?([\d;]+)([hl])")


class PaneTerm:
    """What the channel keeps per pane: its output history, the terminal modes its program set
    (read from the output, since the screen read model does not carry them), its clients."""

    def __init__(self, limit: int) -> None:
        self.history = History(limit)
        self.modes: dict[int, bool] = {}
        self.tail = b""  # the end of the last chunk, for a sequence split between chunks
        self.clients: set[TermClient] = set()

    def output(self, data: bytes) -> None:
        self.history.append(data)
        if b"\x1b[?" in data or b"\x1b" in self.tail:
            for m in _PRIVATE_MODE.finditer(self.tail + data):
                for mode in m.group(1).split(b";"):
                    if mode.isdigit():
                        self.modes[int(mode)] = m.group(2) == b"h"
        self.tail = data[-16:]
        for client in list(self.clients):
            client.on_output(data)

    @property
    def alternate(self) -> bool:
        return any(self.modes.get(m, False) for m in _ALT_MODES)


class Terminals:
    """Every pane's ``PaneTerm``, kept from its first byte by a synchronous engine listener
    (``Created`` is published before the host's first read, so nothing is missed)."""

    def __init__(self, engine: Engine, limit: int = HISTORY_BYTES) -> None:
        self.engine = engine
        self.limit = limit
        self.panes: dict[str, PaneTerm] = {}
        self.unsubscribe = engine.subscribe(self.on_event)

    def on_event(self, event: Event) -> None:
        if isinstance(event, Output):
            pane = self.panes.get(event.session)
            if pane is None:  # a pane adopted before this channel existed
                pane = self.panes[event.session] = PaneTerm(self.limit)
            pane.output(event.data)
        elif isinstance(event, StateChanged) and event.session in self.panes:
            for client in list(self.panes[event.session].clients):
                client.meta_dirty = True  # a state can change without output (a hook's report)
                client.wake.set()
        elif isinstance(event, Created):
            self.panes.setdefault(event.session.id, PaneTerm(self.limit))
        elif isinstance(event, Deleted):
            self.panes.pop(event.session, None)

    def pane(self, sid: str) -> PaneTerm:
        return self.panes.setdefault(sid, PaneTerm(self.limit))


# --- the screen as bytes -------------------------------------------------------------------

_NAMED = {"black": 0, "red": 1, "green": 2, "brown": 3, "yellow": 3, "blue": 4, "magenta": 5, "cyan": 6, "white": 7}


def _colour(name: str, base: int) -> str | None:
    if not name:
        return None
    if re.fullmatch(r"[0-9a-fA-F]{6}", name):
        r, g, b = (int(name[i : i + 2], 16) for i in (0, 2, 4))
        return f"{base + 8};2;{r};{g};{b}"
    bright = name.startswith("bright")
    n = _NAMED.get(name[6:] if bright else name)
    if n is None:
        return None
    return str((base + 60 if bright else base) + n)


def _sgr(fg: str, bg: str, flags: int) -> str:
    parts = ["0"]
    for bit, code in ((1, "1"), (2, "3"), (4, "4"), (8, "7"), (16, "9")):
        if flags & bit:
            parts.append(code)
    for c in (_colour(fg, 30), _colour(bg, 40)):
        if c:
            parts.append(c)
    return "\x1b[" + ";".join(parts) + "m"


def repaint(view: dict[str, Any], modes: dict[int, bool] | None = None, alternate: bool = False) -> bytes:
    """Bytes that draw a screen read model (``rows``, ``styles``, ``cursor``) on a terminal of
    its size: text with its colours, the cursor where it is (shown or hidden), on the pane's
    buffer (main or alternate), with the input modes that change how keys are encoded.
    Erasing the display keeps the terminal's scrollback."""
    modes = modes or {}
    out = ["\x1b[?1049h" if alternate else "\x1b[?1049l", "\x1b[0m\x1b[H\x1b[2J"]
    styles = view.get("styles") or []
    for y, line in enumerate(view["rows"]):
        if not line:
            continue
        out.append(f"\x1b[{y + 1};1H")
        at = 0
        for n, fg, bg, flags in styles[y] if y < len(styles) else []:
            out.append(_sgr(str(fg), str(bg), int(flags)) + line[at : at + int(n)])
            at += int(n)
        if at < len(line):
            out.append("\x1b[0m" + line[at:])
        out.append("\x1b[0m")
    for mode in _MODES:
        out.append(f"\x1b[?{mode}{'h' if modes.get(mode, False) else 'l'}")
    cursor = view["cursor"]
    out.append(f"\x1b[?25{'l' if cursor['hidden'] else 'h'}\x1b[{cursor['row'] + 1};{cursor['col'] + 1}H")
    return "".join(out).encode("utf-8", "replace")


# --- the channel -----------------------------------------------------------------------------


class TermClient:
    """One browser terminal: what is still to be sent to it, bounded."""

    def __init__(self, size: tuple[int, int]) -> None:
        self.items: deque[bytes | dict[str, Any]] = deque()
        self.backlog = 0
        self.resync = False
        self.wake = asyncio.Event()
        self.meta_dirty = True
        # output is fed to the screen a loop turn after it arrives: the title it sets is only
        # there then, so an output-driven read is followed by one more, an interval later
        self.meta_trailing = False
        self.size = size
        self.held: list[str] = []
        self.typing_at: tuple[int, str] | None = None  # cursor row and line before the last keys

    def on_output(self, data: bytes) -> None:
        self.meta_dirty = self.meta_trailing = True  # the prompt's selection, the title: read again
        if not self.resync:
            self.items.append(data)
            self.backlog += len(data)
            if self.backlog > CLIENT_BACKLOG:
                self.clear()
                self.resync = True
        self.wake.set()

    def on_resize(self, rows: int, cols: int) -> None:
        """The pane was resized: the bytes after this point are drawn at the new size."""
        if (rows, cols) != self.size:
            self.size = (rows, cols)
            self.items.append({"type": "size", "rows": rows, "cols": cols})
            self.wake.set()

    def take(self) -> bytes | dict[str, Any] | None:
        """The next message: a control message, or up to ``CHUNK`` bytes of output (what is
        not taken yet still counts against the backlog, so a stuck socket trips the resync)."""
        if not self.items:
            return None
        first = self.items[0]
        if isinstance(first, dict):
            self.items.popleft()
            return first
        out = bytearray()
        while self.items and len(out) < CHUNK:
            item = self.items[0]
            if isinstance(item, dict):
                break
            out += item
            self.items.popleft()
        self.backlog -= len(out)
        return bytes(out)

    def clear(self) -> None:
        self.items.clear()
        self.backlog = 0


def _meta(engine: Engine, sid: str) -> dict[str, Any]:
    """State, title and the prompt the server decided, from the engine's read models. The
    screen (which feeds pending output) is read only while blocked, for the prompt."""
    info = engine.info(sid)
    prompt = None
    if info.state == "blocked":
        found = engine.screen_now(sid).prompt  # read fresh: the state may have moved on
        prompt = found.model_dump(mode="json") if found else None
        info = engine.info(sid)
    return {
        "type": "state",
        "state": str(info.state),
        "rule": info.rule,
        "source": str(info.source),
        "why": info.why,
        "since": info.since,
        "title": info.title,
        "prompt": prompt,
        "request": info.request.model_dump(mode="json") if info.request else None,
        "exit_code": info.exit_code,
        "rows": info.rows,
        "cols": info.cols,
    }


@router.websocket("/ws/sessions/{sid}/term")
async def term(ws: WebSocket, sid: str) -> None:
    if not await ws_admit(ws):
        return
    terminals: Terminals = ws.app.state.terminals
    engine = terminals.engine
    if sid not in engine:
        try:
            await engine_of(ws).get(sid)  # another node's pane (cluster), or none at all
        except UnknownSession as exc:
            await ws.close(code=4404, reason=str(exc))
            return
        await _remote_term(ws, engine_of(ws), sid)
        return
    try:
        # read fresh: everything received so far is on the screen, so history + repaint + what
        # follows is seamless (all three are taken in this same turn of the loop)
        view = engine.screen_now(sid, styles=True)
    except UnknownSession as exc:
        await ws.close(code=4404, reason=str(exc))
        return
    pane = terminals.pane(sid)
    past = pane.history.snapshot()
    screen_now = repaint(view.model_dump(mode="json"), pane.modes, pane.alternate)
    client = TermClient((view.size.rows, view.size.cols))
    pane.clients.add(client)

    try:
        await run_first(
            ws,
            _sender(ws, engine, sid, pane, client, past, screen_now),
            _receiver(ws, engine, terminals, sid, client, actor_of(ws)),
            what="terminal websocket",
        )
    finally:
        pane.clients.discard(client)
        if client.held:
            log.info(
                "dropped %d held-back key bytes: the page went away", sum(map(len, client.held)), extra={"session": sid}
            )


async def _send_json(ws: WebSocket, obj: dict[str, Any]) -> None:
    await ws.send_text(json.dumps(obj))


async def _sender(
    ws: WebSocket, engine: Engine, sid: str, pane: PaneTerm, client: TermClient, past: bytes, screen_now: bytes
) -> None:
    """History, the repaint, ``ready``, then output and (at most every META_INTERVAL_S) state."""
    rows, cols = client.size
    await _send_json(ws, {"type": "hello", "rows": rows, "cols": cols, "history_bytes": len(past)})
    for i in range(0, len(past), CHUNK):
        await ws.send_bytes(past[i : i + CHUNK])
    await ws.send_bytes(screen_now)
    await _send_json(ws, {"type": "ready"})
    last_meta: dict[str, Any] | None = None
    meta_at = 0.0
    while True:
        wait = None
        if client.meta_dirty:
            due = meta_at + META_INTERVAL_S - time.monotonic()
            if due <= 0:
                client.meta_dirty, client.meta_trailing = client.meta_trailing, False
                try:
                    meta = _meta(engine, sid)
                except UnknownSession:
                    await ws.close(code=4404, reason=f"session {sid!r} was deleted")
                    return
                client.on_resize(meta["rows"], meta["cols"])  # a resize through the HTTP API
                if meta != last_meta:
                    await _send_json(ws, meta)
                    last_meta = meta
                meta_at = time.monotonic()
            else:
                wait = due
        if client.resync:
            client.resync = False
            client.clear()
            fresh = engine.screen_now(sid, styles=True)
            rows, cols = client.size = (fresh.size.rows, fresh.size.cols)
            log.info("a slow terminal client was resynchronised from the screen", extra={"session": sid})
            await _send_json(ws, {"type": "size", "rows": rows, "cols": cols, "resync": True})
            await ws.send_bytes(repaint(fresh.model_dump(mode="json"), pane.modes, pane.alternate))
        item = client.take()
        if isinstance(item, dict):
            await _send_json(ws, item)
        elif item:
            await ws.send_bytes(item)
        if client.items or client.resync:
            continue
        client.wake.clear()
        if wait is None and not client.meta_dirty:
            await client.wake.wait()
        else:
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(client.wake.wait(), timeout=max(wait or META_INTERVAL_S, 0.01))


#: The page's messages that write to the pane (keys, held-back keys, a new size).
WRITES = frozenset({"input", "release", "resize"})


async def _receiver(
    ws: WebSocket, engine: Engine, terminals: Terminals, sid: str, client: TermClient, actor: Actor
) -> None:
    """Keystrokes and resizes from the page, each answered by ``handle``."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None or len(text) > INPUT_MAX * 2:
            await _send_json(ws, {"type": "error", "detail": "send JSON text messages (input up to 256 KiB)"})
            continue
        try:
            msg = json.loads(text)
        except ValueError:
            await _send_json(ws, {"type": "error", "detail": "not JSON"})
            continue
        if not isinstance(msg, dict):
            continue
        if msg.get("type") in WRITES and (why := forbidden(ws, KEYS)) is not None:
            await ws.close(code=CLOSE_FORBIDDEN, reason=why)  # a viewer watches, never types
            return
        try:
            reply = await handle(engine, terminals, sid, client, msg, actor)
        except UnknownSession:
            return
        except PanewatchError as exc:  # exited, not reading its input, a bad size
            reply = {"type": "error", "detail": str(exc)}
        if reply is not None:
            await _send_json(ws, reply)


def _own_echo(now: dict[str, Any], typing_at: tuple[int, str] | None) -> bool:
    """The "prompt" is the user's own typing: the cursor is still on the line they were typing
    on and that line only grew (``read -p "Go? [y/N]`` typed at a shell matches the yes/no rule
    as it is typed). A real prompt comes on a new line, or replaces the line."""
    if typing_at is None or not typing_at[1].strip():
        return False
    line: str = now["line"]
    return now["row"] == typing_at[0] and line.startswith(typing_at[1])


async def handle(
    engine: Engine, terminals: Terminals, sid: str, client: TermClient, msg: dict[str, Any], actor: Actor
) -> dict[str, Any] | None:
    """One message from the page; returns the reply to send, if any."""
    kind = msg.get("type")
    if kind == "input":
        data = msg.get("data")
        if not isinstance(data, str) or not data or len(data) > INPUT_MAX:
            return {"type": "error", "detail": "input: a non-empty string of at most 256 KiB"}
        if client.held:
            if sum(map(len, client.held)) + len(data) > INPUT_MAX:
                return {"type": "error", "detail": "too many keys held back: send or drop them first"}
            client.held.append(data)
            return {"type": "held", "bytes": sum(map(len, client.held))}
        now = engine.typing(sid)  # as fresh as a classification now
        if now["state"] == "blocked":
            age = time.time() - now["since"]
            if age < HOLD_S and not _own_echo(now, client.typing_at):
                client.held.append(data)
                log.info(
                    "held back %d key bytes typed %.2fs after the pane turned blocked (%s)",
                    len(data),
                    age,
                    now["rule"],
                    extra={"session": sid},
                )
                return {"type": "held", "bytes": len(data), "rule": now["rule"]}
        client.typing_at = (now["row"], now["line"])
        engine.keys(sid, data.encode("utf-8", "surrogatepass"), actor)  # logged there, per burst
        return None
    if kind == "release":
        held, client.held = "".join(client.held), []
        if not held:
            return {"type": "released", "sent": False, "bytes": 0}
        if msg.get("send") is True:
            log.info("sending %d held-back key bytes on the user's word", len(held), extra={"session": sid})
            engine.keys(sid, held.encode("utf-8", "surrogatepass"), actor)
            return {"type": "released", "sent": True, "bytes": len(held)}
        log.info("dropped %d held-back key bytes on the user's word", len(held), extra={"session": sid})
        return {"type": "released", "sent": False, "bytes": len(held)}
    if kind == "resize":
        rows, cols = msg.get("rows"), msg.get("cols")
        if not (isinstance(rows, int) and isinstance(cols, int)):
            return {"type": "error", "detail": "resize: rows and cols are integers"}
        info = engine.info(sid)
        if (rows, cols) != (info.rows, info.cols):
            await engine.resize(sid, rows, cols, actor=actor)  # a bad size raises InvalidRequest: the reply says why
            # a page resizes as its window is dragged: a line each is noise at info
            log.debug("resized to %dx%d from the page", rows, cols, extra={"session": sid})
            for other in list(terminals.pane(sid).clients):
                other.on_resize(rows, cols)
        return None
    return {"type": "error", "detail": f"unknown message type {kind!r}"}


async def _remote_term(ws: WebSocket, cluster: EngineAPI, sid: str) -> None:
    """Another node's pane, watched from here: its screen frames (which flow over the cluster
    only while watched) drawn as repaints; no history and no typing (answers go through the
    guarded ``/answer``, which the owning node checks; type on that node's own dashboard)."""
    view: dict[str, Any] = {}
    sent_size: tuple[int, int] | None = None
    ready = False

    async def sender() -> None:
        nonlocal sent_size, ready
        async for frame in await cluster.screens(sid, styles=True):
            _apply_frame(view, frame.model_dump(mode="json"))
            size = (view["size"]["rows"], view["size"]["cols"])
            if size != sent_size:
                await ws.send_text(
                    json.dumps(
                        {
                            "type": "hello" if sent_size is None else "size",
                            "rows": size[0],
                            "cols": size[1],
                            "history_bytes": 0,
                        }
                    )
                )
                sent_size = size
            await ws.send_bytes(repaint(view))
            if not ready:  # as a local terminal does once its first screen is out
                await ws.send_text(json.dumps({"type": "ready"}))
                ready = True
            await ws.send_text(
                json.dumps(
                    {
                        "type": "state",
                        "state": view.get("state"),
                        "rule": view.get("rule"),
                        "source": view.get("source"),
                        "title": view.get("title", ""),
                        "prompt": view.get("prompt"),
                        "request": view.get("request"),
                        "rows": size[0],
                        "cols": size[1],
                    }
                )
            )

    async def receiver() -> None:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            await _send_json(ws, {"type": "error", "detail": REMOTE_READ_ONLY})

    await run_first(ws, sender(), receiver(), what="terminal websocket")


REMOTE_READ_ONLY = (
    "this session runs on another node: answer its prompt with the buttons, or type on that node's dashboard"
)


def _apply_frame(view: dict[str, Any], frame: dict[str, Any]) -> None:
    """A screen frame (full, or the rows and styles that changed) applied to the view kept."""
    if frame.get("full"):
        view.clear()
        view.update(frame)
        return
    rows, styles = list(view.get("rows", [])), list(view.get("styles", []))
    for i, row in frame.get("changed", {}).items():
        if int(i) < len(rows):
            rows[int(i)] = row
    for i, style in frame.get("changed_styles", {}).items():
        if int(i) < len(styles):
            styles[int(i)] = style
    view.update({k: v for k, v in frame.items() if k not in ("changed", "changed_styles")}, rows=rows, styles=styles)


def install(app: FastAPI, local: Engine) -> None:
    """Add the terminal channel to the app, kept from ``local``: this node's engine."""
    app.state.terminals = Terminals(local)
    app.include_router(router)
