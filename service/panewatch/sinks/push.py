"""Web Push that is proven delivered: RFC 8030 requests, RFC 8291 encryption, RFC 8292 VAPID.

Why this exists: every supervisor that pushes to phones has shipped a push that silently never
arrived (a socket counted as "the user is looking", a VAPID subject a push service refused, a
200 before dispatch). So here a push is not done when the push service took it: the service
worker posts a **receipt** when it shows the notification (and again when the user acts on it),
each device's last sent / last receipt / pushes without receipt are shown on the page and in
``/metrics``, a device whose last ``NOT_RECEIVING_AFTER`` pushes got no receipt is marked "not
receiving", a push not acknowledged within ``push_ack_s`` escalates along a configured chain
(another device, the webhook, the shell command) once per prompt, and "send a test" walks the
whole path and says which step failed.

The crypto is the libraries': ``http_ece`` encrypts (``aes128gcm``, with an ephemeral key
``cryptography`` makes), ``py_vapid`` signs the VAPID JWT; the VAPID key is generated once and kept 0600 in the state
folder. The requests are ours (httpx, async, bounded, with timeouts): the event loop never
waits on a push service. A push is suppressed for one device only when *that device* reported,
within ``SEEN_S``, a focused and visible page showing that session — never because some socket
or tab is open somewhere.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import logging
import os
import secrets
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import http_ece
import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid

from ..clock import Clock, LoopClock, Timer
from ._background import Background
from .notify import Notification, Notifier, clean

log = logging.getLogger("panewatch.sinks.push")

VAPID_FILE = "vapid.pem"
#: A device whose last this many pushes got no receipt is "not receiving" (an alarm, not a mystery).
NOT_RECEIVING_AFTER = 3
#: A device that showed a session in a focused, visible page this recently is not pushed about it.
SEEN_S = 5.0
#: Retries of a push that failed for a reason that may pass (5xx, 429, the network), and their waits.
BACKOFF_S = (1.0, 4.0)
#: At most this many push requests in flight at once; each has these timeouts.
CONCURRENCY = 16
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
#: With more subscriptions than this in one fan-out, encryption runs in a thread (off the loop).
OFFLOAD_AT = 8
#: Receipts remembered (the oldest go first), and the payload budget of one push (RFC 8291: a
#: push service takes 4096 bytes of body, of which aes128gcm's header and tag take 103).
MAX_RECEIPTS = 10_000
PAYLOAD_MAX = 3800
#: Prompts with at most this many options carry them as notification actions.
MAX_ACTIONS = 2


class PushRefused(ValueError):
    """A subscription the server will not push to; the message says why (a 422 for the API)."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# -- VAPID ---------------------------------------------------------------------------------------


def load_or_create_vapid(state_dir: Path) -> Any:
    """The server's VAPID key (``py_vapid.Vapid``): made once, kept 0600 in the state folder, so
    that subscriptions survive restarts (a browser's subscription is bound to this public key)."""
    path = Path(state_dir) / VAPID_FILE
    if path.exists():
        return Vapid.from_file(str(path))
    vapid = Vapid()
    vapid.generate_keys()
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(vapid.private_pem())
    os.replace(tmp, path)
    return vapid


def public_key(vapid: Any) -> str:
    """The applicationServerKey a browser subscribes with: the uncompressed P-256 point, base64url."""
    raw: bytes = vapid.public_key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return b64url(raw)


# -- subscriptions -------------------------------------------------------------------------------


def check_endpoint(endpoint: str, allow_loopback: bool) -> str:
    """An endpoint the server may POST to: ``https:``, or ``http:`` on loopback when allowed."""
    if len(endpoint) > 2048:
        raise PushRefused("endpoint longer than 2048 characters")
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname or ""
    except ValueError as exc:
        raise PushRefused(f"endpoint is not a URL: {exc}") from None
    if not host:
        raise PushRefused("endpoint has no host")
    if parts.scheme == "https":
        return endpoint
    if parts.scheme == "http":
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if loopback and allow_loopback:
            return endpoint
        if loopback:
            raise PushRefused("a loopback http: endpoint needs push_allow_loopback (--push-allow-loopback)")
    raise PushRefused("endpoint must be an https: URL (push services are)")


def check_keys(p256dh: str, auth: str) -> None:
    """The browser's keys: a P-256 public point (65 bytes, uncompressed) and a 16-byte secret."""
    try:
        point, secret = b64url_decode(p256dh), b64url_decode(auth)
    except (ValueError, TypeError):
        raise PushRefused("keys.p256dh and keys.auth must be base64url") from None
    if len(point) != 65 or point[0] != 4:
        raise PushRefused("keys.p256dh must be an uncompressed P-256 point (65 bytes)")
    if len(secret) != 16:
        raise PushRefused("keys.auth must be 16 bytes")
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        raise PushRefused("keys.p256dh is not a point on P-256") from None


@dataclass
class Subscription:
    id: str
    device: str  # Who.id of the subscriber: a device id, "login-…" or "token"
    name: str
    endpoint: str
    p256dh: str
    auth: str
    created: float
    last_sent: float | None = None
    last_receipt: float | None = None
    unacked: int = 0  # pushes sent since the last receipt
    sent: int = 0
    failed: int = 0

    @property
    def receiving(self) -> bool:
        return self.unacked < NOT_RECEIVING_AFTER

    def as_dict(self) -> dict[str, Any]:
        parts = urlsplit(self.endpoint)
        return {
            "id": self.id,
            "device": self.device,
            "name": self.name,
            "push_service": f"{parts.scheme}://{parts.netloc}",  # the endpoint's path is a secret
            "created": self.created,
            "last_sent": self.last_sent,
            "last_receipt": self.last_receipt,
            "without_receipt": self.unacked,
            "receiving": self.receiving,
            "sent": self.sent,
            "failed": self.failed,
        }


_COLUMNS = ("id", "device", "name", "endpoint", "p256dh", "auth", "created")
_COUNTERS = ("last_sent", "last_receipt", "unacked", "sent", "failed")


@dataclass
class Receipt:
    id: str
    subscription: str
    device: str
    session: str
    prompt: str | None
    sent_at: float
    shown_at: float | None = None
    acted_at: float | None = None
    shown: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Outcome:
    """What happened to one push: ``ok``, the push service's status, and the step that failed."""

    ok: bool
    status: int | None = None
    detail: str = ""
    gone: bool = False  # the push service said the subscription no longer exists (404/410)


@dataclass
class _Prompt:
    """One prompt's pushes, until a receipt or until its escalation chain ran out."""

    note: Notification
    prompt: str | None
    receipts: set[str]
    step: int = 0
    acknowledged: bool = False
    timer: Timer | None = None


class Pusher:
    """Subscriptions, pushes, receipts, suppression and escalation for one server."""

    def __init__(
        self,
        *,
        db: sqlite3.Connection | None,
        vapid: Any,
        subject: str,
        notifier: Notifier,
        prompt_of: Callable[[str], Mapping[str, Any] | None] = lambda sid: None,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
        allow_loopback: bool = False,
        ack_s: float = 60.0,
        ttl_s: int = 3600,
        kinds: tuple[str, ...] = ("blocked",),
        chain: tuple[str, ...] = (),
    ) -> None:
        self.db, self.vapid, self.subject = db, vapid, subject
        self.notifier, self.prompt_of = notifier, prompt_of
        self._clock, self.wall = clock, wall
        self._transport = transport
        self.allow_loopback, self.ack_s, self.ttl_s = allow_loopback, ack_s, ttl_s
        self.kinds, self.chain = frozenset(kinds), chain
        self.public_key = public_key(vapid)
        self._subs: dict[str, Subscription] = {}
        self._receipts: OrderedDict[str, Receipt] = OrderedDict()
        self._prompts: dict[str, _Prompt] = {}
        self._seen: dict[tuple[str, str], float] = {}  # (device, session) -> clock time
        self._vapid_headers: dict[str, tuple[str, float]] = {}  # audience -> (Authorization, exp)
        self._client: httpx.AsyncClient | None = None
        self._limit = asyncio.Semaphore(CONCURRENCY)
        self._tasks = Background()
        self.counts = {"sent": 0, "failed": 0, "retried": 0, "removed": 0, "suppressed": 0, "escalated": 0}
        self.counts["receipts"] = 0
        #: whether a device may see a session (a session restricted to other users is not pushed to it)
        self.may_see: Callable[[str, str], bool] = lambda device, session: True
        if db is not None:
            names = ", ".join(_COLUMNS + _COUNTERS)
            for row in db.execute(f"SELECT {names} FROM push_subscriptions ORDER BY created"):
                sub = Subscription(*row)
                self._subs[sub.id] = sub
        notifier.subscribe(self.on_notification)
        notifier.deferred = self.defers

    @property
    def clock(self) -> Clock:
        if self._clock is None:
            self._clock = LoopClock(asyncio.get_running_loop())
        return self._clock

    # -- subscriptions ---------------------------------------------------------------------
    def subscribe(self, endpoint: str, p256dh: str, auth: str, *, device: str, name: str) -> Subscription:
        """Keep a browser's ``PushSubscription`` for ``device``; the same endpoint again replaces
        the old one (a browser re-subscribes with the same endpoint after a key change)."""
        check_endpoint(endpoint, self.allow_loopback)
        check_keys(p256dh, auth)
        for old in [s for s in self._subs.values() if s.endpoint == endpoint]:
            self.remove(old.id)
        sub = Subscription(secrets.token_hex(8), device, name, endpoint, p256dh, auth, self.wall())
        self._subs[sub.id] = sub
        if self.db is not None:
            marks = ", ".join("?" for _ in _COLUMNS)
            values = tuple(getattr(sub, c) for c in _COLUMNS)
            self.db.execute(f"INSERT INTO push_subscriptions ({', '.join(_COLUMNS)}) VALUES ({marks})", values)
        log.info("push subscription %s for %s (%s) at %s", sub.id, device, name, sub.as_dict()["push_service"])
        return sub

    def get(self, sub_id: str) -> Subscription | None:
        return self._subs.get(sub_id)

    def listing(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self._subs.values()]

    def remove(self, sub_id: str) -> bool:
        if self._subs.pop(sub_id, None) is None:
            return False
        if self.db is not None:
            self.db.execute("DELETE FROM push_subscriptions WHERE id = ?", (sub_id,))
        return True

    def drop_device(self, device: str) -> None:
        """A revoked device: none of its subscriptions is pushed to again."""
        for sub in [s for s in self._subs.values() if s.device == device]:
            self.remove(sub.id)

    def _save(self, sub: Subscription) -> None:
        if self.db is not None:
            sets = ", ".join(f"{c} = ?" for c in _COUNTERS)
            self.db.execute(
                f"UPDATE push_subscriptions SET {sets} WHERE id = ?", (*(getattr(sub, c) for c in _COUNTERS), sub.id)
            )

    # -- what the pages say ----------------------------------------------------------------
    def seen(self, device: str, sessions: list[str]) -> None:
        """``device``'s page is focused and visible and shows these sessions (reported every few
        seconds while so); an empty list: it no longer shows any."""
        now = self.clock.time()
        for key in [k for k in self._seen if k[0] == device]:
            del self._seen[key]
        for sid in sessions[:1000]:
            self._seen[(device, sid)] = now

    def _shown_on(self, device: str, session: str) -> bool:
        at = self._seen.get((device, session))
        return at is not None and self.clock.time() - at <= SEEN_S

    # -- pushing ---------------------------------------------------------------------------
    def _wanted(self, note: Notification) -> bool:
        return (note.kind if note.kind == "desktop" else note.state) in self.kinds

    def _backup(self, sub: Subscription) -> bool:
        """A device named in the escalation chain is pushed only when escalated to."""
        return f"device:{sub.name}" in self.chain or f"device:{sub.device}" in self.chain

    def defers(self, note: Notification, sink: str) -> bool:
        """Whether the notifier leaves ``sink`` ("webhook", "command") to the escalation chain for
        this notification: when the chain names it and a device is subscribed to get it first."""
        return (
            sink in self.chain
            and note.kind == "state"
            and note.state == "blocked"
            and self._wanted(note)
            and any(not self._backup(s) for s in self._subs.values())
        )

    def on_notification(self, note: Notification) -> None:
        """The notifier's subscriber: push to every subscribed device (but the ones that show
        the session right now), and start the prompt's escalation clock."""
        if not self._wanted(note) or not self._subs:
            return
        prompt = self.prompt_of(note.session) if note.kind == "state" and note.state == "blocked" else None
        prompt_id = str(prompt["id"]) if prompt and prompt.get("id") else None
        targets, suppressed = [], 0
        for sub in self._subs.values():
            if self._backup(sub) or not self.may_see(sub.device, note.session):
                continue
            if self._shown_on(sub.device, note.session):
                suppressed += 1
                continue
            targets.append(sub)
        self.counts["suppressed"] += suppressed
        key = prompt_id or f"{note.session}:{note.at}"
        tracked = _Prompt(note, prompt_id, set(), acknowledged=suppressed > 0)  # seen on a screen: acknowledged
        if note.kind == "state" and note.state == "blocked":
            old = self._prompts.pop(key, None)
            if old is not None and old.timer is not None:
                old.timer.cancel()
            self._prompts[key] = tracked
            if not tracked.acknowledged and self.chain:
                tracked.timer = self.clock.call_at(self.clock.time() + self.ack_s, lambda: self._overdue(key))
        if targets:
            self._tasks.spawn(self._fan_out(note, prompt, targets, tracked))

    def payload(
        self, note: Notification, prompt: Mapping[str, Any] | None, receipt: str, *, test: bool = False
    ) -> bytes:
        """The JSON a service worker gets (encrypted): what to show, the answers it may offer as
        actions (a prompt of at most ``MAX_ACTIONS`` options), the prompt id and the receipt id."""
        options = []
        for o in (prompt or {}).get("options", [])[:8]:
            option = {"label": clean(str(o.get("label", "")), 80)}
            if o.get("option") is not None:
                option["option"] = o["option"]
            elif o.get("keys"):
                option["keys"] = str(o["keys"])[:40]
            options.append(option)
        actions = (
            [{"action": str(i), "title": o["label"][:40]} for i, o in enumerate(options)]
            if 0 < len(options) <= MAX_ACTIONS
            else []
        )
        data: dict[str, Any] = {
            "v": 1,
            "kind": "test" if test else note.kind,
            "session": note.session,
            "name": note.name,
            "agent": note.agent,
            "state": note.state,
            "title": note.title,
            "body": note.body,
            # what is asked (``asks``); the rule's reason where the pane gave no question
            "request": {"question": note.question or note.why, "tool": note.tool, "subject": note.subject},
            "options": options,
            "actions": actions,
            "prompt_id": (prompt or {}).get("id"),
            "receipt_id": receipt,
            "url": f"/?session={note.session}",
            "at": note.at,
            # the follow-up an answer from the notification shows (wording: messages.toml [answer])
            "replies": {k: v.replace("{name}", note.name) for k, v in self.notifier.messages.get("answer", {}).items()},
        }
        raw = json.dumps(data, ensure_ascii=False).encode()
        while len(raw) > PAYLOAD_MAX and (
            data["options"] or len(data["body"]) > 40 or len(data["request"]["subject"]) > 40
        ):
            if data["options"]:
                data["options"], data["actions"] = data["options"][:-1], []
            elif len(data["request"]["subject"]) > 40:
                data["request"]["subject"] = data["request"]["subject"][: len(data["request"]["subject"]) // 2] + "…"
            else:
                data["body"] = data["body"][: len(data["body"]) // 2] + "…"
            raw = json.dumps(data, ensure_ascii=False).encode()
        return raw

    async def _fan_out(
        self, note: Notification, prompt: Mapping[str, Any] | None, targets: list[Subscription], tracked: _Prompt
    ) -> None:
        offload = len(targets) > OFFLOAD_AT
        await asyncio.gather(*(self._push(sub, note, prompt, tracked, offload) for sub in targets))

    async def _push(
        self,
        sub: Subscription,
        note: Notification,
        prompt: Mapping[str, Any] | None,
        tracked: _Prompt | None,
        offload: bool,
        *,
        test: bool = False,
    ) -> tuple[Receipt, Outcome]:
        receipt = Receipt(
            secrets.token_urlsafe(16), sub.id, sub.device, note.session, tracked.prompt if tracked else None, 0.0
        )
        self._remember(receipt)
        if tracked is not None:
            tracked.receipts.add(receipt.id)
        body = self.payload(note, prompt, receipt.id, test=test)
        outcome = await self.deliver(sub, body, offload=offload)
        receipt.sent_at = self.wall()
        if outcome.ok:
            sub.last_sent, sub.sent, sub.unacked = receipt.sent_at, sub.sent + 1, sub.unacked + 1
            self._save(sub)
        return receipt, outcome

    def _remember(self, receipt: Receipt) -> None:
        self._receipts[receipt.id] = receipt
        while len(self._receipts) > MAX_RECEIPTS:
            self._receipts.popitem(last=False)

    def _encrypt(self, sub: Subscription, body: bytes) -> bytes:
        """RFC 8291 ``aes128gcm``: http_ece encrypts to the browser's key with an ephemeral key of
        ours (cryptography makes it), one record, the sender's key in the header (as pywebpush
        does, without its requests/aiohttp import, which cost seconds before the first push)."""
        encrypted: bytes = http_ece.encrypt(
            body,
            private_key=ec.generate_private_key(ec.SECP256R1()),
            dh=b64url_decode(sub.p256dh),
            auth_secret=b64url_decode(sub.auth),
            version="aes128gcm",
        )
        return encrypted

    def _authorization(self, endpoint: str) -> str:
        """The VAPID ``Authorization`` header for the endpoint's push service (signed once per
        audience and kept until an hour before it expires)."""
        parts = urlsplit(endpoint)
        audience = f"{parts.scheme}://{parts.netloc}"
        now = self.wall()
        kept = self._vapid_headers.get(audience)
        if kept is not None and kept[1] - now > 3600:
            return kept[0]
        exp = int(now) + 12 * 3600
        header: str = self.vapid.sign({"aud": audience, "exp": exp, "sub": self.subject})["Authorization"]
        self._vapid_headers[audience] = (header, exp)
        return header

    async def deliver(self, sub: Subscription, body: bytes, *, offload: bool = False) -> Outcome:
        """One push to one subscription (RFC 8030): encrypted, signed, sent with TTL and
        ``Urgency: high``; retried on 429/5xx/network errors; 404/410 removes the subscription."""
        try:
            encrypted = await asyncio.to_thread(self._encrypt, sub, body) if offload else self._encrypt(sub, body)
            headers = {
                "TTL": str(self.ttl_s),
                "Urgency": "high",
                "Content-Encoding": "aes128gcm",
                "Content-Type": "application/octet-stream",
                "Authorization": self._authorization(sub.endpoint),
            }
        except Exception as exc:  # a key the libraries refuse: nothing to retry
            return self._failed(sub, Outcome(False, None, f"cannot encrypt or sign the push: {exc}"))
        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._transport, timeout=TIMEOUT, follow_redirects=False)
        outcome = Outcome(False)
        for attempt in range(len(BACKOFF_S) + 1):
            if attempt:
                self.counts["retried"] += 1
                await self.clock.sleep(BACKOFF_S[attempt - 1])
                if sub.id not in self._subs:
                    break
            try:
                async with self._limit:
                    response = await self._client.post(sub.endpoint, content=encrypted, headers=headers)
            except httpx.HTTPError as exc:
                outcome = Outcome(False, None, f"the push service is unreachable: {type(exc).__name__}: {exc}")
                continue
            status = response.status_code
            if 200 <= status < 300:
                self.counts["sent"] += 1
                return Outcome(True, status)
            if status in (404, 410):
                self.remove(sub.id)
                self.counts["removed"] += 1
                log.info("push subscription %s (%s) is gone (%d): removed", sub.id, sub.name, status)
                return self._failed(sub, Outcome(False, status, f"the push service says {status}: removed", gone=True))
            outcome = Outcome(False, status, f"the push service answered {status}: {response.text[:200]}")
            if status != 429 and status < 500:  # the request itself is wrong: retrying repeats it
                break
        return self._failed(sub, outcome)

    def _failed(self, sub: Subscription, outcome: Outcome) -> Outcome:
        self.counts["failed"] += 1
        sub.failed += 1
        self._save(sub)
        log.warning("push to %s (%s) failed: %s", sub.id, sub.name, outcome.detail)
        return outcome

    # -- receipts and escalation -----------------------------------------------------------
    def receipt(self, receipt_id: str, event: str) -> bool:
        """The service worker showed the push ("shown") or the user acted on it ("action",
        "clicked"); False for an unknown (or long forgotten) receipt id."""
        receipt = self._receipts.get(receipt_id)
        if receipt is None:
            return False
        now = self.wall()
        self.counts["receipts"] += 1
        if event == "shown":
            receipt.shown_at = receipt.shown_at or now
        else:
            receipt.acted_at = now
            receipt.shown_at = receipt.shown_at or now
        receipt.shown.set()
        sub = self._subs.get(receipt.subscription)
        if sub is not None:
            sub.last_receipt, sub.unacked = now, 0
            self._save(sub)
        for tracked in self._prompts.values():
            if receipt_id in tracked.receipts and not tracked.acknowledged:
                tracked.acknowledged = True
                if tracked.timer is not None:
                    tracked.timer.cancel()
        return True

    def _overdue(self, key: str) -> None:
        """``ack_s`` passed without a receipt: the next step of the chain (once each), unless the
        prompt was acknowledged or is gone from its pane (answered elsewhere)."""
        tracked = self._prompts.get(key)
        if tracked is None or tracked.acknowledged:
            return
        now_prompt = self.prompt_of(tracked.note.session) if tracked.prompt else None
        if tracked.prompt and (now_prompt is None or now_prompt.get("id") != tracked.prompt):
            self._prompts.pop(key, None)
            return
        if tracked.step >= len(self.chain):
            self._prompts.pop(key, None)
            return
        step = self.chain[tracked.step]
        tracked.step += 1
        self.counts["escalated"] += 1
        reason = f"no receipt within {self.ack_s:g} s: escalated to {step}"
        log.warning("%s", reason, extra={"session": tracked.note.session})
        note = replace(tracked.note, escalated=reason)
        if step.startswith("device:"):
            wanted = step[len("device:") :]
            backups = [s for s in self._subs.values() if wanted in (s.name, s.device)]
            if backups:
                prompt = self.prompt_of(note.session)
                self._tasks.spawn(self._fan_out(note, prompt, backups, tracked))
        else:
            self.notifier.deliver(note, step)
        if tracked.step < len(self.chain):
            tracked.timer = self.clock.call_at(self.clock.time() + self.ack_s, lambda: self._overdue(key))
        else:
            tracked.timer = None

    # -- the test button -------------------------------------------------------------------
    async def test(self, sub_id: str, wait_s: float = 10.0) -> dict[str, Any]:
        """Push a test to one subscription and wait for its receipt: each step of the path with
        whether it worked, so the page can say which one failed."""
        steps: list[dict[str, Any]] = []
        sub = self._subs.get(sub_id)
        if sub is None:
            steps.append({"step": "subscription", "ok": False, "detail": "no such subscription: enable push again"})
            return {"ok": False, "steps": steps}
        steps.append({"step": "subscription", "ok": True, "detail": f"{sub.name} at {sub.as_dict()['push_service']}"})
        words = self.notifier.messages.get("test", {})
        note = Notification(
            session="",
            name=sub.name,
            agent="",
            state="test",
            prev="",
            source="test",
            rule=None,
            why="a test from the dashboard",
            title=words.get("title", "Panewatch test"),
            body=words.get("body", "Push works on this device."),
            at=self.wall(),
            kind="test",
        )
        receipt, outcome = await self._push(sub, note, None, None, False, test=True)
        steps.append(
            {
                "step": "push service",
                "ok": outcome.ok,
                "status": outcome.status,
                "detail": "accepted the push" if outcome.ok else outcome.detail,
            }
        )
        if not outcome.ok:
            return {"ok": False, "steps": steps, "receipt_id": receipt.id}
        try:
            await asyncio.wait_for(receipt.shown.wait(), wait_s)
            steps.append({"step": "service worker", "ok": True, "detail": "showed the notification (receipt came)"})
        except TimeoutError:
            steps.append(
                {
                    "step": "service worker",
                    "ok": False,
                    "detail": f"no receipt within {wait_s:g} s: the notification was not shown (is the browser "
                    "running, notification permission granted, the page's service worker installed?)",
                }
            )
        return {"ok": all(s["ok"] for s in steps), "steps": steps, "receipt_id": receipt.id}

    # -- figures and lifecycle -------------------------------------------------------------
    def by_device(self) -> list[dict[str, Any]]:
        """Per device: last sent, last receipt, pushes without receipt, receiving or not."""
        devices: dict[str, dict[str, Any]] = {}
        for sub in self._subs.values():
            d = devices.setdefault(
                sub.device,
                {"device": sub.device, "name": sub.name, "last_sent": None, "last_receipt": None, "without_receipt": 0},
            )
            for key, value in (("last_sent", sub.last_sent), ("last_receipt", sub.last_receipt)):
                if value is not None and (d[key] is None or value > d[key]):
                    d[key] = value
            d["without_receipt"] += sub.unacked
        for d in devices.values():
            d["receiving"] = d["without_receipt"] < NOT_RECEIVING_AFTER
        return list(devices.values())

    async def drain(self) -> None:
        """Wait for the pushes under way (tests; a clean stop)."""
        await self._tasks.drain()

    async def aclose(self) -> None:
        for tracked in self._prompts.values():
            if tracked.timer is not None:
                tracked.timer.cancel()
        await self._tasks.cancel()
        if self._client is not None:
            await self._client.aclose()


def default_subject(public_url: str | None) -> str:
    """``public_url`` when it is https (a URL the push services accept as a contact), else a
    mailto: on localhost, which works with Chrome's and Firefox's services — not Apple's."""
    if public_url and public_url.startswith("https://"):
        parts = urlsplit(public_url)
        return f"https://{parts.netloc}"
    return "mailto:panewatch@localhost"
