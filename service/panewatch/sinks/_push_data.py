"""What Web Push keeps (private to ``sinks.push``): a device's subscription with its delivery
counters (the rows of ``push_subscriptions``), a receipt per push, what one push came to, and one
prompt's pushes until a receipt or the end of its escalation chain."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..clock import Timer
from .notify import Notification

#: A device whose last this many pushes got no receipt is "not receiving" (an alarm, not a mystery).
NOT_RECEIVING_AFTER = 3


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


COLUMNS = ("id", "device", "name", "endpoint", "p256dh", "auth", "created")
COUNTERS = ("last_sent", "last_receipt", "unacked", "sent", "failed")


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
class Prompt:
    """One prompt's pushes, until a receipt or until its escalation chain ran out."""

    note: Notification
    prompt: str | None
    receipts: set[str]
    step: int = 0
    acknowledged: bool = False
    timer: Timer | None = None


def by_device(subs: Iterable[Subscription]) -> list[dict[str, Any]]:
    """Per device: last sent, last receipt, pushes without receipt, receiving or not."""
    devices: dict[str, dict[str, Any]] = {}
    for sub in subs:
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
