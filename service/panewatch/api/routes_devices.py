"""Paired devices: a one-time code (and its QR) to pair a phone, the list, revocation.

``POST /api/devices/pair`` needs the token or a live login/device; ``/pair`` itself needs
nothing but the code (that is the point: the phone has no credential yet). The page's form
posts there and gets the device cookie; a script posts JSON and gets a bearer credential.
"""

from __future__ import annotations

import html
import json
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..access.auth import Who
from ..access.devices import COOKIE, COOKIE_MAX_AGE_S, Devices, PairingRefused, shown_code
from ..access.roles import Role
from ..access.users import DEFAULT_USER, NAME_PATTERN, Users
from ..access.validation import clean_text
from .deps import require_token, secure_cookies, settings_of, who_of

router = APIRouter()

#: The longest device name kept (it is shown on the page and in logs).
NAME_MAX = 60


def devices_of(request: Request) -> Devices:
    devices: Devices = request.app.state.devices
    return devices


def base_url(request: Request) -> str:
    """Where a phone reaches this server: ``public_url`` when set (a tunnel's name), else the
    address this request came to."""
    public = settings_of(request).public_url
    if public:
        return public.rstrip("/")
    return f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"


def qr_svg(text: str) -> str:
    """A QR code of ``text`` as an SVG data URI (segno: the page shows it as an image)."""
    import segno

    uri: str = segno.make(text, error="m").svg_data_uri(scale=6, border=2, dark="#000", light="#fff")
    return uri


class PairFor(BaseModel):
    """Whose the device will be: ``user`` (made with ``role`` when new, given ``role`` when it is
    named); no user: ``default``, an owner (what every paired device was before users)."""

    model_config = ConfigDict(extra="forbid")
    user: str | None = Field(None, pattern=NAME_PATTERN)
    role: Role | None = None


def users_of_app(request: Request) -> Users | None:
    users: Users | None = getattr(request.app.state, "users", None)
    return users


@router.post("/api/devices/pair", status_code=201, tags=["devices"], dependencies=[Depends(require_token)])
async def new_pairing(request: Request, body: PairFor | None = None) -> dict[str, Any]:
    """A one-time pairing code, valid for 5 minutes, with the URL a phone opens and its QR."""
    body = body or PairFor()
    users, user = users_of_app(request), body.user or DEFAULT_USER
    if users is not None:
        users.ensure(user, body.role)
    code, expires = devices_of(request).new_code(user)
    url = f"{base_url(request)}/pair?code={quote(shown_code(code))}"
    note = None
    if not settings_of(request).public_url:
        note = (
            "public_url is not set: the URL names the address this request came to, which a phone "
            "may not reach; set --public-url to the address it does (a tailscale serve name, say)"
        )
    return {
        "code": shown_code(code),
        "user": user,
        "url": url,
        "expires_at": expires,
        "expires_in_s": round(expires - devices_of(request).wall()),
        "qr_svg": qr_svg(url),
        "note": note,
    }


@router.get("/api/devices", tags=["devices"], dependencies=[Depends(require_token)])
async def list_devices(request: Request, who: Annotated[Who, Depends(who_of)]) -> dict[str, Any]:
    """Every paired device with when it was last seen and its open sockets; ``you``: the caller."""
    users = users_of_app(request)
    listing = devices_of(request).listing()
    for device in listing:
        found = users.user_of(device["id"]) if users is not None else None
        device["user"], device["role"] = (found.name, str(found.role)) if found else (None, None)
    return {"devices": listing, "you": who.as_dict()}


@router.delete("/api/devices/{device_id}", tags=["devices"], dependencies=[Depends(require_token)])
async def revoke_device(device_id: str, request: Request) -> dict[str, Any]:
    """Revoke at once: its credential is refused (401), its sockets closed, its pushes dropped."""
    if not await devices_of(request).revoke(device_id):
        raise HTTPException(404, f"no live device {device_id[:40]!r}")
    return {"revoked": device_id}


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="color-scheme" content="dark">
<title>Pair this device — Panewatch</title>
<style>body{{font:16px system-ui,sans-serif;margin:2rem auto;max-width:28rem;padding:0 1rem}}
input,button{{font:inherit;min-height:44px;width:100%;box-sizing:border-box;margin:.3rem 0}}
.error{{color:#f66}}</style></head>
<body><h1>Pair this device</h1>{message}
<form method="post" action="/pair">
<label>Pairing code<input name="code" value="{code}" autocomplete="off" autocapitalize="characters" required></label>
<label>Name this device<input name="name" maxlength="{name_max}" placeholder="my phone" required></label>
<button type="submit">Pair</button></form>
<p>The code comes from <code>panewatch pair</code> or the dashboard's <b>Pair a device</b>, and
works once, for 5 minutes.</p></body></html>"""


def pair_page(code: str = "", error: str | None = None, status: int = 200) -> HTMLResponse:
    message = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    body = _PAGE.format(message=message, code=html.escape(code[:20]), name_max=NAME_MAX)
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


@router.get("/pair", include_in_schema=False)
async def pair_form(code: str = "") -> HTMLResponse:
    return pair_page(code)


@router.post("/pair", tags=["devices"])
async def pair(request: Request) -> Response:
    """Use a pairing code. A form post (the page) gets the device cookie and goes to the
    dashboard; JSON ``{"code", "name"}`` (a script) gets ``{"device", "token"}``, the bearer
    credential, shown only this once."""
    raw = await request.body()
    as_json = request.headers.get("content-type", "").startswith("application/json")
    try:
        if as_json:
            data = json.loads(raw or b"{}")
            if not isinstance(data, dict):
                raise ValueError("a JSON object is expected")
            code, name = str(data.get("code") or ""), str(data.get("name") or "")
        else:
            form = parse_qs(raw.decode("utf-8"), max_num_fields=10)
            code, name = (form.get("code") or [""])[0], (form.get("name") or [""])[0]
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPException(400, f"cannot read the pairing request: {exc}") from None
    name = " ".join(clean_text(name, NAME_MAX).split()) or "device"
    user = devices_of(request).user_of_code(code) or DEFAULT_USER
    try:
        device, credential = devices_of(request).pair(code, name)
    except PairingRefused as exc:
        if as_json:
            return JSONResponse({"detail": str(exc)}, status_code=403)
        return pair_page(code, f"{exc}: ask for a new code", status=403)
    users = users_of_app(request)
    if users is not None:
        users.assign(device.id, users.ensure(user, None).name)  # its user, unless removed since
    if as_json:
        return JSONResponse({"device": device.as_dict(), "token": credential}, status_code=201)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        COOKIE,
        credential,
        httponly=True,
        samesite="strict",
        max_age=COOKIE_MAX_AGE_S,
        secure=secure_cookies(request),
    )
    return response
