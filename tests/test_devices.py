"""Paired devices and the push API through the app (the ASGI transport, no process): a one-time
code, a device credential (cookie or bearer), who acts, revocation; subscriptions refused with
a reason; the receipt's id as its only credential."""

from __future__ import annotations

import httpx
import pytest

from panewatch.access.devices import CODE_TTL_S, MAX_FAILED_CODES, Devices, PairingRefused
from panewatch.api import create_app
from panewatch.config import Settings
from push_support import BrowserKeys

pytestmark = pytest.mark.unit

TOKEN = "devices-token-0123456789"
BASE = "http://panewatch.localhost"


@pytest.fixture
async def api(tmp_path):
    app = create_app(Settings(token=TOKEN, state_dir=tmp_path / "state", push_allow_loopback=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=BASE) as client:
        client.app = app
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def pair(api: httpx.AsyncClient, name: str = "phone") -> tuple[str, str]:
    r = await api.post("/api/devices/pair", headers=bearer(TOKEN))
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["url"] == f"{BASE}/pair?code={made['code']}" and made["expires_in_s"] == CODE_TTL_S
    assert made["qr_svg"].startswith("data:image/svg+xml")
    r = await api.post("/pair", json={"code": made["code"], "name": name})
    assert r.status_code == 201, r.text
    return r.json()["device"]["id"], r.json()["token"]


async def test_a_paired_device_acts_as_itself_until_revoked(api):
    device, credential = await pair(api)
    r = await api.get("/api/devices", headers=bearer(credential))
    assert r.status_code == 200
    # paired without a user: the default user's, an owner (what every device was before users)
    assert r.json()["you"] == {"kind": "device", "id": device, "name": "phone", "user": "default", "role": "owner"}
    (listed,) = r.json()["devices"]
    assert listed["id"] == device and listed["last_seen"] is not None and listed["revoked"] is None
    assert (await api.get("/api/devices", headers=bearer(TOKEN))).json()["you"]["kind"] == "token"

    assert (await api.delete(f"/api/devices/{device}", headers=bearer(TOKEN))).json() == {"revoked": device}
    r = await api.get("/api/sessions", headers=bearer(credential))
    assert r.status_code == 401 and "revoked" in r.json()["detail"]
    assert (await api.delete(f"/api/devices/{device}", headers=bearer(TOKEN))).status_code == 404
    forged = credential[:-4] + "AAAA"
    assert (await api.get("/api/sessions", headers=bearer(forged))).status_code == 403


async def test_the_page_pairs_by_form_and_gets_an_http_only_cookie(api):
    r = await api.post("/api/devices/pair", headers=bearer(TOKEN))
    code = r.json()["code"]
    page = await api.get(f"/pair?code={code}")
    assert page.status_code == 200 and f'value="{code}"' in page.text
    r = await api.post("/pair", content=f"code={code.lower()}&name=My+phone", headers={"Origin": BASE})
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("panewatch_device=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert (await api.get("/api/devices")).json()["you"]["name"] == "My phone"
    # the code worked once
    again = await api.post("/pair", content=f"code={code}&name=x", headers={"Origin": BASE})
    assert again.status_code == 403 and "unknown or used pairing code" in again.text


async def test_codes_expire_and_guessing_voids_them():
    now = [1000.0]
    devices = Devices(None, wall=lambda: now[0])
    code, expires = devices.new_code()
    assert expires == now[0] + CODE_TTL_S
    now[0] += CODE_TTL_S + 1
    with pytest.raises(PairingRefused, match="expired"):
        devices.pair(code, "late")
    code, _ = devices.new_code()
    for n in range(MAX_FAILED_CODES):
        with pytest.raises(PairingRefused, match="unknown"):
            devices.pair(f"WRONG{n:03d}", "guess")
    with pytest.raises(PairingRefused):  # voided by the guessing
        devices.pair(code, "mine")
    code, _ = devices.new_code()
    device, credential = devices.pair(code.lower()[:4] + "-" + code[4:], "mine")
    assert devices.check(credential) is device


async def test_subscriptions_are_checked_listed_and_removed(api):
    keys = BrowserKeys()
    r = await api.get("/api/push/key", headers=bearer(TOKEN))
    key = r.json()["publicKey"]
    assert len(key) == 87  # a P-256 point, uncompressed, base64url
    good = keys.subscription("https://push.example/endpoint/abc")
    r = await api.post("/api/push/subscriptions", headers=bearer(TOKEN), json={**good, "name": "desk"})
    assert r.status_code == 201, r.text
    sub = r.json()
    assert sub["name"] == "desk" and sub["device"] == "token" and sub["push_service"] == "https://push.example"
    assert "endpoint" not in sub  # the endpoint is the push's secret address
    for body, why in (
        ({**good, "endpoint": "http://push.example/x"}, "https"),
        ({**good, "keys": {"p256dh": "AAAA", "auth": good["keys"]["auth"]}}, "65 bytes"),
        ({**good, "keys": {"p256dh": good["keys"]["p256dh"], "auth": "AAAA"}}, "16 bytes"),
        ({"endpoint": "https://push.example/y"}, "keys"),
    ):
        r = await api.post("/api/push/subscriptions", headers=bearer(TOKEN), json=body)
        assert r.status_code == 422 and why in str(r.json()["detail"]), r.text
    listed = (await api.get("/api/push/subscriptions", headers=bearer(TOKEN))).json()
    assert [s["id"] for s in listed["subscriptions"]] == [sub["id"]]
    assert listed["devices"][0]["receiving"] is True
    assert (await api.delete(f"/api/push/subscriptions/{sub['id']}", headers=bearer(TOKEN))).status_code == 200
    assert (await api.get("/api/push/subscriptions", headers=bearer(TOKEN))).json()["subscriptions"] == []


async def test_revoking_a_device_drops_its_push_subscriptions(api):
    device, credential = await pair(api, "tablet")
    r = await api.post(
        "/api/push/subscriptions", headers=bearer(credential), json=BrowserKeys().subscription("https://p.example/1")
    )
    assert r.status_code == 201 and r.json()["device"] == device and r.json()["name"] == "tablet"
    await api.delete(f"/api/devices/{device}", headers=bearer(TOKEN))
    assert (await api.get("/api/push/subscriptions", headers=bearer(TOKEN))).json()["subscriptions"] == []


async def test_a_receipt_needs_only_its_id_and_an_unknown_one_is_404(api):
    r = await api.post("/api/push/receipts/not-a-receipt", json={"event": "shown"})
    assert r.status_code == 404 and "unknown receipt" in r.json()["detail"]
    r = await api.post("/api/push/receipts/x", json={"event": "exploded"})
    assert r.status_code == 422
    assert (await api.get("/api/push/subscriptions")).status_code == 401  # the rest still needs a credential


async def test_writes_say_who_made_them(api, caplog):
    device, credential = await pair(api, "phone")
    caplog.set_level("INFO", logger="panewatch.api")
    await api.post("/api/push/seen", headers=bearer(credential), json={"sessions": []})  # changes nothing
    await api.post("/api/push/test", headers=bearer(credential), json={})
    lines = [r for r in caplog.records if r.getMessage().startswith("POST ")]
    (line,) = lines
    assert line.getMessage() == f"POST /api/push/test by device {device} (phone) of default"
    assert line.actor == {"kind": "device", "id": device, "name": "phone", "user": "default", "role": "owner"}
