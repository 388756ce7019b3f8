"""Web Push: the VAPID key, subscriptions, receipts, the test push, and what a page shows.

``POST /api/push/receipts/{id}`` needs no other credential than its id (random, 128 bits): the
service worker must be able to say "shown" even when the device's cookie does not come along,
and a receipt changes nothing but the delivery figures.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from ..access.auth import Who
from ..access.validation import Utf8Text
from ..sinks.push import Pusher, PushRefused
from .deps import require_token, who_of

router = APIRouter(tags=["push"])
W = Annotated[Who, Depends(who_of)]


def pusher_of(request: Request) -> Pusher:
    pusher: Pusher | None = getattr(request.app.state, "push", None)
    if pusher is None:
        raise HTTPException(503, "Web Push is not available on this server (no state folder for its key)")
    return pusher


P = Annotated[Pusher, Depends(pusher_of)]


class Keys(BaseModel):
    model_config = ConfigDict(extra="ignore")
    p256dh: str = Field(min_length=1, max_length=200)
    auth: str = Field(min_length=1, max_length=100)


class NewSubscription(BaseModel):
    """The browser's ``PushSubscription.toJSON()``, plus the name the user gives the device."""

    model_config = ConfigDict(extra="ignore")
    endpoint: str = Field(min_length=8, max_length=2048)
    keys: Keys
    expirationTime: float | None = None
    name: Utf8Text | None = Field(None, max_length=60, description="the device's name (default: the caller's)")


class ReceiptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    event: Literal["shown", "action", "clicked"] = "shown"


class TestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    subscription: Utf8Text | None = Field(None, max_length=40, description="default: the caller's newest")
    wait_s: float = Field(10.0, gt=0, le=60, description="how long to wait for the service worker's receipt")


class SeenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sessions: list[Annotated[str, Field(max_length=80)]] = Field(default_factory=list, max_length=1000)


@router.get("/api/push/key", dependencies=[Depends(require_token)])
async def push_key(pusher: P) -> dict[str, str]:
    """The VAPID public key (base64url): the browser's ``applicationServerKey``."""
    return {"publicKey": pusher.public_key}


@router.post(
    "/api/push/subscriptions",
    status_code=201,
    dependencies=[Depends(require_token)],
    responses={422: {"description": "an endpoint that is not https:, or keys that are not a browser's"}},
)
async def subscribe(body: NewSubscription, pusher: P, who: W) -> dict[str, Any]:
    try:
        sub = pusher.subscribe(
            body.endpoint, body.keys.p256dh, body.keys.auth, device=who.id, name=body.name or who.name
        )
    except PushRefused as exc:
        raise HTTPException(422, str(exc)) from None
    return sub.as_dict()


@router.get("/api/push/subscriptions", dependencies=[Depends(require_token)])
async def subscriptions(pusher: P, who: W) -> dict[str, Any]:
    """Every subscription and, per device, last sent / last receipt / pushes without receipt."""
    warnings = []
    if pusher.subject.endswith("@localhost") and any("apple.com" in s["push_service"] for s in pusher.listing()):
        warnings.append(
            "Apple's push service refuses a VAPID subject on localhost: set push_subject to a mailto: or "
            "https: URL of yours, or this device gets nothing"
        )
    return {
        "subscriptions": pusher.listing(),
        "devices": pusher.by_device(),
        "you": who.as_dict(),
        "warnings": warnings,
    }


@router.delete("/api/push/subscriptions/{sub_id}", dependencies=[Depends(require_token)])
async def unsubscribe(sub_id: str, pusher: P) -> dict[str, Any]:
    if not pusher.remove(sub_id):
        raise HTTPException(404, f"no push subscription {sub_id[:40]!r}")
    return {"removed": sub_id}


@router.post("/api/push/receipts/{receipt_id}", responses={404: {"description": "unknown receipt id"}})
async def receipt(receipt_id: str, pusher: P, body: ReceiptBody | None = None) -> dict[str, Any]:
    """The service worker showed a push (``shown``) or the user acted on it."""
    if not pusher.receipt(receipt_id, (body or ReceiptBody()).event):
        raise HTTPException(404, "unknown receipt id (a push from before a restart, or never sent)")
    return {"ok": True}


@router.post("/api/push/test", dependencies=[Depends(require_token)])
async def test_push(pusher: P, who: W, body: TestBody | None = None) -> dict[str, Any]:
    """Push a test and wait for the receipt: every step of the path, and which one failed."""
    body = body or TestBody()
    sub_id = body.subscription
    if sub_id is None:
        mine = [s for s in pusher.listing() if s["device"] == who.id]
        if not mine:
            raise HTTPException(409, "this device has no push subscription: enable push first")
        sub_id = max(mine, key=lambda s: s["created"])["id"]
    return await pusher.test(sub_id, body.wait_s)


@router.post("/api/push/seen", status_code=204, dependencies=[Depends(require_token)])
async def seen(body: SeenBody, pusher: P, who: W) -> Response:
    """This page is focused and visible and shows these sessions (an empty list: none now):
    pushes about them to this device are held while it keeps saying so."""
    pusher.seen(who.id, body.sessions)
    return Response(status_code=204)
