"""Web Push's wire pieces (private to ``sinks.push``): the VAPID key (made once, kept 0600), the
browser's endpoint and keys checked, base64url, RFC 8291 ``aes128gcm`` encryption and the JSON a
service worker gets."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid

from .notify import Notification, clean

VAPID_FILE = "vapid.pem"
#: The payload budget of one push (RFC 8291: a push service takes 4096 bytes of body, of which
#: aes128gcm's header and tag take 103).
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


def vapid_authorization(vapid: Any, subject: str, endpoint: str, now: float, kept: dict[str, tuple[str, float]]) -> str:
    """The VAPID ``Authorization`` header for the endpoint's push service (signed once per
    audience and kept in ``kept`` until an hour before it expires)."""
    parts = urlsplit(endpoint)
    audience = f"{parts.scheme}://{parts.netloc}"
    held = kept.get(audience)
    if held is not None and held[1] - now > 3600:
        return held[0]
    exp = int(now) + 12 * 3600
    header: str = vapid.sign({"aud": audience, "exp": exp, "sub": subject})["Authorization"]
    kept[audience] = (header, exp)
    return header


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


# -- what is sent ---------------------------------------------------------------------------------


def encrypt(p256dh: str, auth: str, body: bytes) -> bytes:
    """RFC 8291 ``aes128gcm``: http_ece encrypts to the browser's key with an ephemeral key of
    ours (cryptography makes it), one record, the sender's key in the header (as pywebpush
    does, without its requests/aiohttp import, which cost seconds before the first push)."""
    encrypted: bytes = http_ece.encrypt(
        body,
        private_key=ec.generate_private_key(ec.SECP256R1()),
        dh=b64url_decode(p256dh),
        auth_secret=b64url_decode(auth),
        version="aes128gcm",
    )
    return encrypted


def build_payload(
    note: Notification,
    prompt: Mapping[str, Any] | None,
    receipt: str,
    answers: Mapping[str, str],
    *,
    test: bool = False,
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
        "replies": {k: v.replace("{name}", note.name) for k, v in answers.items()},
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


def default_subject(public_url: str | None) -> str:
    """``public_url`` when it is https (a URL the push services accept as a contact), else a
    mailto: on localhost, which works with Chrome's and Firefox's services — not Apple's."""
    if public_url and public_url.startswith("https://"):
        parts = urlsplit(public_url)
        return f"https://{parts.netloc}"
    return "mailto:panewatch@localhost"
