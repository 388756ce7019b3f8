"""The dashboard's terminal channel: ``/ws/sessions/{sid}/term`` and ``GET …/prompt``.

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

The prompt's kind and options (``prompt_view``) are derived here from the manifest's matched
rule, because the engine's screen payload does not carry them yet: a rule on the cursor line
named ``password_prompt`` asks for a password, ``yes_no_prompt`` for yes/no; otherwise the
numbered option rows nearest the bottom of the screen (wherever the dialog put them, also
split by its inner rule) are the options. Everything else is answered with keys.
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

from fastapi import APIRouter, FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketState

from .auth import origin_allowed, presented_token, token_matches

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
            data = data[cut + 1:] if cut >= 0 else b""
        return data


class Histories:
    """Keeps a ``History`` for every session from its first byte.

    It sits on the runtime's event hub as a synchronous subscriber: ``created`` is published
    before the PTY's first read, so attaching the output listener then loses nothing.
    (The engine façade's ``output(sid)`` stream replaces this seam.)
    """

    def __init__(self, runtime: Any, limit: int = HISTORY_BYTES) -> None:
        self.runtime = runtime
        self.limit = limit
        self.by_id: dict[str, History] = {}
        runtime.events.subscribers.add(self)

    # the EventHub's subscriber protocol
    def put(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "created":
            sid = (event.get("session") or {}).get("id")
            session = self.runtime.sessions.get(sid)
            if session is not None:
                self.attach(session)
        elif kind == "deleted":
            self.by_id.pop(event.get("session"), None)

    def close(self) -> None:
        self.runtime.events.subscribers.discard(self)

    def attach(self, session: Any) -> History:
        found = self.by_id.get(session.id)
        if found is None:
            found = self.by_id[session.id] = History(self.limit, seed=bytes(session.raw))
            session.output_listeners.append(found.append)
        return found


# --- the screen as bytes -------------------------------------------------------------------

_NAMED = {"black": 0, "red": 1, "green": 2, "brown": 3, "yellow": 3, "blue": 4, "magenta": 5, "cyan": 6,
          "white": 7}
#: modes a terminal must share with the pane for keys to be encoded as the agent expects
_MODES = (1, 2004, 1000, 1002, 1003, 1006, 25)


def _colour(name: str, base: int) -> str | None:
    if not name:
        return None
    if re.fullmatch(r"[0-9a-fA-F]{6}", name):
        r, g, b = (int(name[i:i + 2], 16) for i in (0, 2, 4))
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


def repaint(screen: Any) -> bytes:
    """Bytes that draw the emulated screen on a terminal of its size: text with its colours,
    the cursor where it is (shown or hidden), and the input modes that change how keys are
    encoded (cursor keys, bracketed paste, mouse). Erasing the display keeps the scrollback."""
    # the same buffer as the pane (a full-screen program draws on the alternate one)
    alternate = bool(getattr(screen, "alternate", False))
    out = ["\x1b[?1049h" if alternate else "\x1b[?1049l", "\x1b[0m\x1b[H\x1b[2J"]
    for y, (line, runs) in enumerate(zip(screen.lines(), screen.styles())):
        if not line:
            continue
        out.append(f"\x1b[{y + 1};1H")
        at = 0
        for n, fg, bg, flags in runs:
            out.append(_sgr(str(fg), str(bg), int(flags)) + line[at:at + int(n)])
            at += int(n)
        if at < len(line):
            out.append("\x1b[0m" + line[at:])
        out.append("\x1b[0m")
    for mode in _MODES:
        with suppress(Exception):
            on = screen.mode(mode) if mode != 25 else not screen.cursor.hidden
            out.append(f"\x1b[?{mode}{'h' if on else 'l'}")
    cursor = screen.cursor
    out.append(f"\x1b[{cursor.row + 1};{cursor.col + 1}H")
    return "".join(out).encode("utf-8", "replace")


# --- the prompt, as the server decided it ---------------------------------------------------

_OPTION_ROW = re.compile(r"^\s*(?:│\s*)?(?P<sel>[❯›>▶]\s*)?(?P<n>\d{1,2})[.)]\s+(?P<label>\S.*?)\s*(?:│\s*)?$")
#: rules (by name, any manifest) that say how their prompt is answered; see the module doc
RULE_KINDS = {"password_prompt": "password", "yes_no_prompt": "yes_no"}


def find_options(lines: list[str]) -> list[dict[str, Any]]:
    """The numbered options nearest the bottom: read upwards until option 1, so a dialog's
    rows are found wherever they sit (Claude's question dialog puts "4. Chat about this"
    below an inner rule) and numbered lines of the transcript above it are not."""
    found: dict[int, dict[str, Any]] = {}
    for line in reversed(lines):
        m = _OPTION_ROW.match(line)
        if not m:
            continue
        n = int(m["n"])
        if n in found:
            break  # a second menu above this one
        found[n] = {"option": n, "label": m["label"], "selected": bool(m["sel"])}
        if n == 1:
            break
    if 1 not in found:
        return []
    out = []
    for n in range(1, len(found) + 1):
        if n not in found:
            break
        out.append(found[n])
    return out


def prompt_view(session: Any, store: Any) -> dict[str, Any] | None:
    """What the blocked pane asks for, or None when it is not blocked."""
    d = session.decision
    if d.state != "blocked":
        return None
    lines = session.screen.lines()
    kind = RULE_KINDS.get(d.rule or "")
    view: dict[str, Any] = {"rule": d.rule, "source": d.source, "why": d.why, "options": []}
    if kind == "yes_no":
        row = session.screen.cursor.row
        line = lines[row] if 0 <= row < len(lines) else ""
        word = "(yes/no" in line.lower()
        view["options"] = [{"label": "Yes", "keys": "yes\r" if word else "y\r"},
                           {"label": "No", "keys": "no\r" if word else "n\r"}]
    elif kind is None:
        options = find_options(lines)
        if options:
            kind = "options"
            view["options"] = options
        else:
            kind = "keys"
    view["kind"] = kind
    return view


# --- the channel -----------------------------------------------------------------------------


class TermClient:
    """One browser terminal: what is still to be sent to it, bounded."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.items: deque[bytes | dict[str, Any]] = deque()
        self.backlog = 0
        self.resync = False
        self.wake = asyncio.Event()
        self.meta_dirty = True
        self.size = (session.screen.rows, session.screen.cols)
        self.held: list[str] = []
        self.typing_at: tuple[int, str] | None = None  # cursor row and line before the last keys

    def on_output(self, data: bytes) -> None:
        if self.resync:
            return
        self.items.append(bytes(data))
        self.backlog += len(data)
        if self.backlog > CLIENT_BACKLOG:
            self.clear()
            self.resync = True
        self.wake.set()

    def on_change(self) -> None:
        """The session's watcher: a feed, a state change or a resize."""
        size = (self.session.screen.rows, self.session.screen.cols)
        if size != self.size:
            self.size = size
            self.items.append({"type": "size", "rows": size[0], "cols": size[1]})
        self.meta_dirty = True
        self.wake.set()

    def take(self) -> bytes | dict[str, Any] | None:
        """The next message: a control message, or up to ``CHUNK`` bytes of output (what is
        not taken yet still counts against the backlog, so a stuck socket trips the resync)."""
        if not self.items:
            return None
        if isinstance(self.items[0], dict):
            return self.items.popleft()
        out = bytearray()
        while self.items and not isinstance(self.items[0], dict) and len(out) < CHUNK:
            out += self.items.popleft()  # type: ignore[operator]
        self.backlog -= len(out)
        return bytes(out)

    def clear(self) -> None:
        self.items.clear()
        self.backlog = 0


def _meta(session: Any, store: Any) -> dict[str, Any]:
    return {"type": "state", "state": session.decision.state, "rule": session.decision.rule,
            "source": session.decision.source, "why": session.decision.why,
            "since": session.since, "title": session.screen.title,
            "prompt": prompt_view(session, store), "exit_code": session.exit_code}


async def _admit(ws: WebSocket) -> bool:
    """As the other WebSockets: Origin first, then the token (header, cookie or ?token=);
    refused after accepting, with a close code the page can act on."""
    settings = ws.app.state.settings
    presented = presented_token(ws, allow_query=True)
    refusal = None
    if not origin_allowed(ws, settings.allowed_origins):
        refusal = (4403, "origin not allowed")
    elif presented is None:
        refusal = (4401, "missing token")
    elif not token_matches(presented, settings.token):
        refusal = (4403, "wrong token")
    await ws.accept()
    if refusal:
        await ws.close(code=refusal[0], reason=refusal[1])
        return False
    return True


@router.websocket("/ws/sessions/{sid}/term")
async def term(ws: WebSocket, sid: str) -> None:
    if not await _admit(ws):
        return
    runtime = ws.app.state.runtime
    store = ws.app.state.store
    histories: Histories = ws.app.state.term_histories
    session = runtime.sessions.get(sid)
    if session is None:
        await ws.close(code=4404, reason=f"no session {sid!r}")
        return
    history = histories.attach(session)
    client = TermClient(session)
    # everything read so far is on the screen, so history + repaint + what follows is seamless
    session.feed_all()
    past = history.snapshot()
    screen_now = repaint(session.screen)
    session.output_listeners.append(client.on_output)
    session.watchers.add(client.on_change)

    async def send_json(obj: dict[str, Any]) -> None:
        await ws.send_text(json.dumps(obj))

    async def sender() -> None:
        rows, cols = client.size
        await send_json({"type": "hello", "rows": rows, "cols": cols, "history_bytes": len(past)})
        for i in range(0, len(past), CHUNK):
            await ws.send_bytes(past[i:i + CHUNK])
        await ws.send_bytes(screen_now)
        await send_json({"type": "ready"})
        last_meta: dict[str, Any] | None = None
        meta_at = 0.0
        while True:
            wait = None
            if client.meta_dirty:
                due = meta_at + META_INTERVAL_S - time.monotonic()
                if due <= 0:
                    client.meta_dirty = False
                    meta = _meta(session, store)
                    if meta != last_meta:
                        await send_json(meta)
                        last_meta = meta
                    meta_at = time.monotonic()
                else:
                    wait = due
            if client.resync:
                session.feed_all()
                client.resync = False
                client.clear()
                rows, cols = client.size = (session.screen.rows, session.screen.cols)
                log.info("a slow terminal client was resynchronised from the screen", extra={"session": session.id})
                await send_json({"type": "size", "rows": rows, "cols": cols, "resync": True})
                await ws.send_bytes(repaint(session.screen))
            item = client.take()
            if isinstance(item, dict):
                await send_json(item)
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

    async def receiver() -> None:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None or len(text) > INPUT_MAX * 2:
                await send_json({"type": "error", "detail": "send JSON text messages (input up to 256 KiB)"})
                continue
            try:
                msg = json.loads(text)
            except ValueError:
                await send_json({"type": "error", "detail": "not JSON"})
                continue
            if not isinstance(msg, dict):
                continue
            reply = handle(runtime, session, client, msg)
            if reply is not None:
                await send_json(reply)

    try:
        await _run(ws, sender(), receiver())
    finally:
        session.watchers.discard(client.on_change)
        with suppress(ValueError):
            session.output_listeners.remove(client.on_output)
        if client.held:
            log.info("dropped %d held-back key bytes: the page went away", sum(map(len, client.held)),
                     extra={"session": session.id})


def _cursor_line(session: Any) -> tuple[int, str]:
    row = session.screen.cursor.row
    lines = session.screen.lines()
    return row, (lines[row] if 0 <= row < len(lines) else "")


def _own_echo(session: Any, typing_at: tuple[int, str] | None) -> bool:
    """The "prompt" is the user's own typing: the cursor is still on the line they were typing
    on and that line only grew (``read -p "Go? [y/N]`` typed at a shell matches the yes/no rule
    as it is typed). A real prompt comes on a new line, or replaces the line."""
    if typing_at is None or not typing_at[1].strip():
        return False
    row, line = _cursor_line(session)
    return row == typing_at[0] and line.startswith(typing_at[1])


def _write(session: Any, data: str) -> bool:
    proc = session.proc
    if proc is None or not proc.alive:
        return False
    proc.write(data.encode("utf-8", "surrogatepass"))
    return True


def handle(runtime: Any, session: Any, client: TermClient, msg: dict[str, Any]) -> dict[str, Any] | None:
    """One message from the page; returns the reply to send, if any."""
    kind = msg.get("type")
    if kind == "input":
        data = msg.get("data")
        if not isinstance(data, str) or not data or len(data) > INPUT_MAX:
            return {"type": "error", "detail": "input: a non-empty string of at most 256 KiB"}
        if session.proc is None or not session.proc.alive:
            return {"type": "error", "detail": "the session has exited"}
        if client.held:
            if sum(map(len, client.held)) + len(data) > INPUT_MAX:
                return {"type": "error", "detail": "too many keys held back: send or drop them first"}
            client.held.append(data)
            return {"type": "held", "bytes": sum(map(len, client.held))}
        decision = runtime.classify(session)
        if (decision.state == "blocked" and runtime.clock() - session.since_mono < HOLD_S
                and not _own_echo(session, client.typing_at)):
            client.held.append(data)
            log.info("held back %d key bytes typed %.2fs after the pane turned blocked (%s)", len(data),
                     runtime.clock() - session.since_mono, decision.rule, extra={"session": session.id})
            return {"type": "held", "bytes": len(data), "rule": decision.rule}
        client.typing_at = _cursor_line(session)
        _write(session, data)
        log.info("typed %d bytes (pane %s)", len(data), decision.state, extra={"session": session.id})
        return None
    if kind == "release":
        held, client.held = "".join(client.held), []
        if not held:
            return {"type": "released", "sent": False, "bytes": 0}
        if msg.get("send") is True:
            ok = _write(session, held)
            log.info("sent %d held-back key bytes on the user's word", len(held), extra={"session": session.id})
            return {"type": "released", "sent": ok, "bytes": len(held)}
        log.info("dropped %d held-back key bytes on the user's word", len(held), extra={"session": session.id})
        return {"type": "released", "sent": False, "bytes": len(held)}
    if kind == "resize":
        rows, cols = msg.get("rows"), msg.get("cols")
        if not (isinstance(rows, int) and isinstance(cols, int) and 2 <= rows <= 500 and 10 <= cols <= 1000):
            return {"type": "error", "detail": "resize: rows 2..500 and cols 10..1000"}
        if (rows, cols) != (session.screen.rows, session.screen.cols):
            runtime.resize(session.id, rows, cols)
            log.info("resized to %dx%d from the page", rows, cols, extra={"session": session.id})
        return None
    return {"type": "error", "detail": f"unknown message type {kind!r}"}


async def _run(ws: WebSocket, *coros: Any) -> None:
    """Run sender and receiver until either ends (a close ends the receiver)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for task in pending:
            with suppress(asyncio.CancelledError, Exception):
                await task
        for task in done:
            exc = task.exception()
            if exc and not isinstance(exc, (WebSocketDisconnect, RuntimeError, ConnectionError)):
                log.warning("terminal websocket ended with %r", exc)
    finally:
        if ws.client_state == WebSocketState.CONNECTED:
            with suppress(Exception):
                await ws.close()


@router.get("/api/sessions/{sid}/prompt", tags=["screens"])
async def get_prompt(request: Request, sid: str) -> dict[str, Any]:
    """The prompt a blocked pane shows: its kind (options, yes_no, password, keys) and options."""
    settings = request.app.state.settings
    presented = presented_token(request)
    if presented is None:
        raise HTTPException(401, "missing token: send Authorization: Bearer <token>",
                            headers={"WWW-Authenticate": "Bearer"})
    if not token_matches(presented, settings.token):
        raise HTTPException(403, "wrong token")
    runtime = request.app.state.runtime
    session = runtime.sessions.get(sid)
    if session is None:
        raise HTTPException(404, f"no session {sid!r}")
    decision = runtime.classify(session)
    return {"state": decision.state, "prompt": prompt_view(session, request.app.state.store)}


def install(app: FastAPI) -> None:
    """Add the terminal channel to the app (needs ``app.state.runtime/settings/store``)."""
    app.state.term_histories = Histories(app.state.runtime)
    app.include_router(router)
