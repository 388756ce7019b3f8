"""The browser's side of Web Push, for tests: a subscription's keys, decryption of what the
server sent (RFC 8291, with http_ece — the library, not our code), the VAPID JWT checked
against the server's public key (RFC 8292, with cryptography's ECDSA), and a stand-in push
service that records every request it gets (RFC 8030) and answers with the status it is told.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import http_ece
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class BrowserKeys:
    """What a browser makes when it subscribes: a P-256 key pair and a 16-byte auth secret."""

    def __init__(self) -> None:
        self.private = ec.generate_private_key(ec.SECP256R1())
        self.auth = os.urandom(16)
        point = self.private.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        self.p256dh = b64url(point)

    def subscription(self, endpoint: str, name: str = "test phone") -> dict[str, Any]:
        """``PushSubscription.toJSON()`` plus the device name, as the page posts it."""
        return {
            "endpoint": endpoint,
            "expirationTime": None,
            "keys": {"p256dh": self.p256dh, "auth": b64url(self.auth)},
        }

    def decrypt(self, body: bytes) -> dict[str, Any]:
        """The push's JSON payload (``aes128gcm``: the sender's key is in the body's header)."""
        plain = http_ece.decrypt(body, private_key=self.private, auth_secret=self.auth, version="aes128gcm")
        return json.loads(plain)


def vapid_claims(authorization: str, public_key: str) -> dict[str, Any]:
    """Check ``Authorization: vapid t=<JWT>,k=<key>``: ``k`` is the server's public key and the
    JWT's ES256 signature verifies with it; the JWT's claims."""
    scheme, _, params = authorization.partition(" ")
    assert scheme == "vapid", authorization[:40]
    parts = dict(p.split("=", 1) for p in params.split(","))
    assert parts["k"] == public_key, "the push is signed with another key than GET /api/push/key's"
    header_b64, payload_b64, sig_b64 = parts["t"].split(".")
    assert json.loads(unb64url(header_b64)) == {"typ": "JWT", "alg": "ES256"}
    sig = unb64url(sig_b64)
    assert len(sig) == 64
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(public_key))
    der = utils.encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    key.verify(der, f"{header_b64}.{payload_b64}".encode(), ec.ECDSA(hashes.SHA256()))  # raises if forged
    claims: dict[str, Any] = json.loads(unb64url(payload_b64))
    return claims


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived
    wall: float  # time.time() when it arrived (compared with a state's `since`)


@dataclass
class PushService:
    """A stand-in push service: ``POST /push/{name}`` is recorded and answered with
    ``statuses[name]`` (popped in order; 201 once they run out)."""

    received: list[Received] = field(default_factory=list)
    statuses: dict[str, list[int]] = field(default_factory=dict)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def app(self) -> Starlette:
        async def push(request: Request) -> Response:
            name = request.path_params["name"]
            body = await request.body()
            with self.arrived:
                self.received.append(
                    Received(request.url.path, dict(request.headers), body, time.monotonic(), time.time())
                )
                self.arrived.notify_all()
            queue = self.statuses.get(name) or []
            return Response(status_code=queue.pop(0) if queue else 201)

        return Starlette(routes=[Route("/push/{name}", push, methods=["POST"])])

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """Block (a thread: the service runs in one of its own) until ``count`` pushes came."""
        with self.arrived:
            ok = self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
        assert ok, f"{len(self.received)} pushes arrived, wanted {count}"
        return list(self.received)
