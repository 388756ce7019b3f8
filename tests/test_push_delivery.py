"""Acceptance: the server (in process: the push goes out, nothing comes in through a socket) pushes to
a loopback stand-in push service; every request is the real wire format — decrypted with the
subscription's private key (RFC 8291), its VAPID JWT verified against ``GET /api/push/key`` (RFC
8292), TTL and Urgency set (RFC 8030) — and its payload names the session, the request, the options,
the prompt id and a receipt id that the server then counts. Blocked → push: the figure is printed."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest

from dashboard_support import prompt_agent
from live import live_server
from panewatch_lab.loopback import Loopback
from push_support import BrowserKeys, PushService, vapid_claims

pytestmark = pytest.mark.integration


async def test_blocked_is_pushed_in_the_real_wire_format_and_the_receipt_counts(tmp_path):
    service = PushService()
    stand_in = Loopback().start(service.app(), lifespan="off")
    try:
        async with live_server(state_dir=tmp_path / "state", push_allow_loopback=True) as live:
            key = (await live.http.get("/api/push/key")).json()["publicKey"]
            keys = BrowserKeys()
            endpoint = f"{stand_in.url}/push/phone"
            r = await live.http.post("/api/push/subscriptions", json={**keys.subscription(endpoint), "name": "phone"})
            assert r.status_code == 201, r.text
            sub = r.json()

            session = await live.create(command=prompt_agent(work=30), agent="claude", name="asker")
            info = await live.wait_state(session["id"], "blocked")
            (push,) = await asyncio.to_thread(service.wait_for, 1)
            print(f"blocked -> push received at the push service: {(push.wall - info['since']) * 1000:.0f} ms")

            assert push.headers["content-encoding"] == "aes128gcm"
            assert push.headers["urgency"] == "high" and int(push.headers["ttl"]) == 3600
            claims = vapid_claims(push.headers["authorization"], key)
            assert claims["aud"] == f"http://{urlsplit(stand_in.url).netloc}"
            assert claims["sub"] == "mailto:panewatch@localhost"

            payload = keys.decrypt(push.body)
            screen = (await live.http.get(f"/api/sessions/{session['id']}/screen")).json()
            assert payload["session"] == session["id"] and payload["name"] == "asker" and payload["agent"] == "claude"
            assert payload["state"] == "blocked", payload
            # what the session asks, as the queue reads it from the screen (the same as the API's)
            assert payload["request"]["question"] == info["request"]["question"] == "Do you want to proceed?"
            assert payload["body"] == "claude asks: Do you want to proceed?"
            assert payload["options"] == [{"label": "Yes", "option": 1}, {"label": "No", "option": 2}]
            assert [a["title"] for a in payload["actions"]] == ["Yes", "No"]
            assert payload["prompt_id"] == screen["prompt"]["id"]
            assert payload["title"] == "asker needs you"

            before = (await live.http.get("/api/push/subscriptions")).json()["devices"][0]
            assert before["without_receipt"] == 1 and before["last_receipt"] is None
            plain = live.http.headers.pop("Authorization")  # a receipt needs only its id
            r = await live.http.post(f"/api/push/receipts/{payload['receipt_id']}", json={"event": "shown"})
            live.http.headers["Authorization"] = plain
            assert r.status_code == 200, r.text
            after = (await live.http.get("/api/push/subscriptions")).json()["devices"][0]
            assert after["without_receipt"] == 0 and after["last_receipt"] >= push.wall - 1

            metrics = (await live.http.get("/metrics")).text
            assert 'panewatch_push_without_receipt{device="token",name="phone"} 0' in metrics
            assert "panewatch_push_sent_total 1" in metrics

            # the push service forgot the subscription: the test button says so, and it is removed
            service.statuses["phone"] = [410]
            steps = (await live.http.post("/api/push/test", json={"subscription": sub["id"]})).json()["steps"]
            assert steps[1]["ok"] is False and steps[1]["status"] == 410 and "removed" in steps[1]["detail"]
            assert (await live.http.get("/api/push/subscriptions")).json()["subscriptions"] == []
    finally:
        stand_in.close()
