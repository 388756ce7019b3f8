"""Notifications when a pane starts waiting for its user, without spamming them.

Sent on entering ``blocked`` and on ``working`` -> ``idle``; at most one per session and
state per cooldown (30 s): a prompt that redraws blocked -> working -> blocked must not ring
twice. Sinks: in-process subscribers (the API's WebSockets), a webhook, a shell command.

An agent's own desktop notification (OSC 9, OSC 99, OSC 777 ``notify``) goes to the same
sinks with ``kind`` "desktop", its ``protocol`` and source ``oob``, its text cleaned of
control and format characters. It is bounded per session: the same text again within the
cooldown is dropped, and at most ``DESKTOP_BURST`` go out per cooldown window, so a pane
that prints OSC 9 in a loop rings a few times, not for every line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import tomllib
import unicodedata
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from ._background import Background

log = logging.getLogger("panewatch.sinks.notify")

COOLDOWN_S = 30.0
#: An agent's desktop notifications sent per session within one cooldown window, at most.
DESKTOP_BURST = 3
#: Longest title and body of a desktop notification passed on (characters).
TITLE_MAX, BODY_MAX = 120, 400
MESSAGES_FILE = Path(__file__).with_name("messages.toml")


@dataclass(frozen=True)
class Notification:
    session: str
    name: str
    agent: str
    state: str
    prev: str
    source: str
    rule: str | None
    why: str
    title: str
    body: str
    at: float  # wall clock
    kind: str = "state"  # "state" (a transition), "desktop" (the agent's own OSC 9/99/777), "test"
    protocol: str = ""  # for "desktop": osc9, osc99 or osc777
    escalated: str = ""  # set when a push got no receipt in time and this sink is the next step (why)
    # what a blocked session asks (``asks``), so the message can say it without opening the page
    question: str = ""
    tool: str = ""
    subject: str = ""

    def as_env(self) -> dict[str, str]:
        return {f"PANEWATCH_{k.upper()}": "" if v is None else str(v) for k, v in asdict(self).items()}


def load_messages(path: Path = MESSAGES_FILE) -> dict[str, dict[str, str]]:
    with open(path, "rb") as f:
        return tomllib.load(f)


class _Safe(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def clean(text: str, limit: int) -> str:
    """An agent's text made safe to show and to pass on: control and format characters
    (escapes, bidi overrides, zero-width) dropped, whitespace runs made one space, cut to
    ``limit`` characters. Its text lands in a shell's environment, JSON and a browser."""
    kept = []
    for ch in text[: limit * 4]:
        if ch.isspace():
            kept.append(" ")
        elif unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn"):
            kept.append(ch)
    out = " ".join("".join(kept).split())
    return out if len(out) <= limit else out[: limit - 1] + "\u2026"


def _asked(request: Mapping[str, Any] | None) -> dict[str, str]:
    """The question, tool and subject of what a session asks, cleaned for a lock screen (the
    agent wrote them: escapes and bidi marks go, lengths are capped)."""
    ask = request or {}
    return {
        "question": clean(str(ask.get("question") or ""), TITLE_MAX),
        "tool": clean(str(ask.get("tool") or ""), 60),
        "subject": clean(str(ask.get("subject") or ""), BODY_MAX),
    }


class Notifier:
    """Decides whether a transition deserves a notification and fans it out to the sinks."""

    def __init__(
        self,
        *,
        cooldown: float = COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        webhook: str | None = None,
        command: str | None = None,
        messages: dict[str, dict[str, str]] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.cooldown = cooldown
        self._transport = transport  # the webhook's (tests give an ASGI app)
        self.clock = clock
        self.wall = wall
        self.webhook = webhook
        self.command = command
        self.messages = messages if messages is not None else load_messages()
        self._last: dict[tuple[str, str], float] = {}
        #: per session: when its last desktop notifications went out, and their text
        self._desktop: dict[str, deque[tuple[float, str]]] = {}
        self.suppressed = 0  # desktop notifications dropped by the bound
        self._subscribers: list[Callable[[Notification], None]] = []
        self._tasks = Background()
        self.sent = 0
        self._client: httpx.AsyncClient | None = None
        #: ``deferred(note, sink)`` True: the webhook or command ("webhook", "command") is left to
        #: the push escalation chain for this notification (``push.Pusher.defers``)
        self.deferred: Callable[[Notification, str], bool] | None = None

    def subscribe(self, callback: Callable[[Notification], None]) -> Callable[[], None]:
        """Call ``callback`` for every notification; returns the unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    @staticmethod
    def wanted(prev: str | None, state: str) -> bool:
        """Entering blocked, or a turn that ended (working -> idle)."""
        return (state == "blocked" and prev != "blocked") or (prev == "working" and state == "idle")

    def on_transition(
        self,
        *,
        session: str,
        name: str,
        agent: str,
        prev: str | None,
        state: str,
        source: str,
        rule: str | None,
        why: str,
        request: Mapping[str, Any] | None = None,
    ) -> Notification | None:
        """Record a state change; return the notification if one was sent. ``request`` is what
        a blocked session asks (``asks.Request.as_dict``): its question and subject go into the
        wording, so a phone's lock screen says *what* is asked, not only that something is."""
        if not self.wanted(prev, state):
            return None
        now = self.clock()
        key = (session, state)
        last = self._last.get(key)
        if last is not None and now - last < self.cooldown:
            return None
        self._last[key] = now
        asked = _asked(request)
        fields = _Safe(name=name, agent=agent, state=state, prev=prev or "", why=why, source=source, **asked)
        wording = self.messages.get(state, {})
        body = wording.get("body", "{why}")
        if asked["question"] or asked["subject"]:  # the wording for a known request, when the file has one
            body = wording.get("asks_subject" if asked["subject"] else "asks", body)
        note = Notification(
            session=session,
            name=name,
            agent=agent,
            state=state,
            prev=prev or "",
            source=source,
            rule=rule,
            why=why,
            title=wording.get("title", "{name}: {state}").format_map(fields),
            body=body.format_map(fields),
            at=self.wall(),
            **asked,
        )
        self._send(note)
        return note

    def on_desktop(
        self, *, session: str, name: str, agent: str, state: str, protocol: str, title: str, body: str
    ) -> Notification | None:
        """An agent raised a desktop notification; return it if it was sent (not dropped by
        the per-session bound: a repeat of the same text, or past ``DESKTOP_BURST``)."""
        title, body = clean(title, TITLE_MAX), clean(body, BODY_MAX)
        if not title and not body:
            return None
        now = self.clock()
        recent = self._desktop.setdefault(session, deque())
        while recent and now - recent[0][0] >= self.cooldown:
            recent.popleft()
        text = f"{title}\n{body}"
        if len(recent) >= DESKTOP_BURST or any(seen == text for _, seen in recent):
            self.suppressed += 1
            return None
        recent.append((now, text))
        fields = _Safe(name=name, agent=agent, state=state, title=title, body=body, protocol=protocol)
        wording = self.messages.get("desktop", {})
        note = Notification(
            session=session,
            name=name,
            agent=agent,
            state=state,
            prev=state,
            source="oob",
            rule=None,
            why=f"{protocol.upper()} desktop notification from the agent",
            title=wording.get("title" if title else "untitled", "{name}: {title}").format_map(fields),
            body=wording.get("body", "{body}").format_map(fields),
            at=self.wall(),
            kind="desktop",
            protocol=protocol,
        )
        self._send(note)
        return note

    def _send(self, note: Notification) -> None:
        self.sent += 1
        for callback in list(self._subscribers):
            try:
                callback(note)
            except Exception:
                log.exception("notification subscriber failed")
        for sink in ("webhook", "command"):
            if not (self.deferred and self.deferred(note, sink)):
                self.deliver(note, sink)

    def deliver(self, note: Notification, sink: str) -> None:
        """Send ``note`` to one sink ("webhook" or "command") if it is configured: every
        notification does, and an escalated push does (``note.escalated`` says why)."""
        if sink == "webhook" and self.webhook:
            self._tasks.spawn(self._post(note))
        elif sink == "command" and self.command:
            self._tasks.spawn(self._run(note))

    def answered(self, session: str) -> None:
        """An answer took: the next ``blocked`` of this session is a new prompt, not the old one
        redrawn, so it rings at once (agents ask several permissions in a row; a cooldown that
        swallowed the second one was a push that silently never came)."""
        self._last.pop((session, "blocked"), None)

    def forget(self, session: str) -> None:
        for key in [k for k in self._last if k[0] == session]:
            del self._last[key]
        self._desktop.pop(session, None)

    async def _post(self, note: Notification) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=5.0, transport=self._transport)
        try:
            await self._client.post(self.webhook, json=asdict(note))  # type: ignore[arg-type]
        except httpx.HTTPError as exc:
            log.warning("webhook %s failed: %s", self.webhook, exc, extra={"session": note.session})

    async def _run(self, note: Notification) -> None:
        try:
            proc = await asyncio.create_subprocess_shell(
                self.command,  # type: ignore[arg-type]
                env={**os.environ, **note.as_env()},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            await asyncio.wait_for(proc.wait(), 30)
        except (TimeoutError, OSError) as exc:
            log.warning("notification command failed: %s", exc, extra={"session": note.session})

    async def drain(self) -> None:
        """Wait for the webhook posts and commands under way (tests; a clean stop)."""
        await self._tasks.drain()

    async def aclose(self) -> None:
        await self._tasks.cancel()
        if self._client is not None:
            await self._client.aclose()
