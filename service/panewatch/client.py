"""A small client of the service for scripts: ``panewatch wait SESSION --until blocked``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import websockets

if TYPE_CHECKING:
    import httpx

DEFAULT_URL = "http://127.0.0.1:8765"


def ws_url(base: str, path: str) -> str:
    parts = urlsplit(base)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, "", ""))


async def wait_state(sid: str, until: str, *, url: str, token: str, timeout: float | None) -> bool:
    """True once session ``sid`` is in state ``until`` (checked against the snapshot, then events)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with websockets.connect(ws_url(url, "/ws/state"), additional_headers=headers) as ws:

        async def watch() -> bool:
            async for message in ws:
                event = json.loads(message)
                kind = event.get("type")
                if kind == "snapshot":
                    states = {s["id"]: s["state"] for s in event["sessions"]}
                    if sid not in states:
                        raise LookupError(f"no session {sid!r}")
                    if states[sid] == until:
                        return True
                elif kind == "state" and event["session"] == sid and event["state"] == until:
                    return True
                elif kind == "deleted" and event["session"] == sid:
                    raise LookupError(f"session {sid!r} was deleted")
            return False

        try:
            return await asyncio.wait_for(watch(), timeout)
        except TimeoutError:
            return False


def wait_for_state(sid: str, until: str, *, timeout: float | None, url: str | None, token: str | None) -> int:
    url = url or os.environ.get("PANEWATCH_URL") or DEFAULT_URL
    token = token or os.environ.get("PANEWATCH_TOKEN")
    if not token:
        print("panewatch: give --token or set PANEWATCH_TOKEN", file=sys.stderr)
        return 2
    try:
        reached = asyncio.run(wait_state(sid, until, url=url, token=token, timeout=timeout))
    except LookupError as exc:
        print(f"panewatch: {exc}", file=sys.stderr)
        return 2
    except (OSError, websockets.exceptions.WebSocketException) as exc:
        print(f"panewatch: cannot reach {url}: {exc}", file=sys.stderr)
        return 2
    if not reached:
        print(f"panewatch: {sid} did not reach {until} in time", file=sys.stderr)
    return 0 if reached else 1


def server_token(token: str | None, token_file: str | None, state_dir: str | None) -> str | None:
    """The API token for a command run beside the server: ``--token``/``PANEWATCH_TOKEN``, a token
    file, else the one the server keeps in its state folder (readable by this user only)."""
    from pathlib import Path

    from .access.statedir import TOKEN_FILE
    from .config import default_state_dir

    token = token or os.environ.get("PANEWATCH_TOKEN")
    if token:
        return token
    candidates = [token_file or os.environ.get("PANEWATCH_TOKEN_FILE")]
    candidates.append(str(Path(state_dir or os.environ.get("PANEWATCH_STATE_DIR") or default_state_dir()) / TOKEN_FILE))
    for path in candidates:
        if path:
            try:
                first = Path(path).read_text().strip().splitlines()
            except OSError:
                continue
            if first and len(first[0]) >= 8:
                return first[0]
    return None


def pair(
    *,
    url: str | None,
    token: str | None,
    token_file: str | None,
    state_dir: str | None,
    image: str | None,
    qr: bool,
    user: str | None = None,
    role: str | None = None,
) -> int:
    """``panewatch pair``: a one-time code from the running server (for a device of ``user``,
    made with ``role`` when new), its URL and QR (printed in the terminal; ``image`` also saves
    it as .png or .svg)."""
    import segno

    body: dict[str, str | None] = {k: v for k, v in (("user", user), ("role", role)) if v}
    r = _post_to_server(
        "/api/devices/pair", 201, url=url, token=token, token_file=token_file, state_dir=state_dir, body=body
    )
    if r is None:
        return 2
    code = r.json()
    made = segno.make(code["url"], error="m")
    if qr:
        made.terminal(out=sys.stdout, compact=True)
    print(
        f"Pairing code {code['code']} for user {code.get('user')} (one use, {code['expires_in_s'] // 60} minutes): "
        f"open {code['url']}"
    )
    if code.get("note"):
        print(f"note: {code['note']}", file=sys.stderr)
    if image:
        made.save(image, scale=8, border=2)
        print(f"QR code saved to {image}")
    return 0


def policy_switch(action: str, *, url: str | None, token_file: str | None, state_dir: str | None) -> int:
    """``panewatch policy pause|resume``: the running server's kill switch (0: done, 2: refused)."""
    r = _post_to_server(f"/api/policy/{action}", 200, url=url, token=None, token_file=token_file, state_dir=state_dir)
    if r is None:
        return 2
    body = r.json()
    print(f"policy {'paused' if body['paused'] else 'resumed'} ({body['file'] or 'no policy file'})")
    return 0


#: ``panewatch users ACTION``: (method, path, expected status); ``{name}`` is the user's.
USER_CALLS = {
    "list": ("GET", "/api/users", 200),
    "add": ("POST", "/api/users", 201),
    "set-role": ("PATCH", "/api/users/{name}", 200),
    "remove": ("DELETE", "/api/users/{name}", 200),
}


def users(
    action: str, name: str | None, role: str | None, *, url: str | None, token_file: str | None, state_dir: str | None
) -> int:
    """``panewatch users list|add|set-role|remove``: the running server's users (owners only;
    0: done, 2: refused, the server's reason on stderr)."""
    method, path, expected = USER_CALLS[action]
    body: dict[str, str | None] | None = {"role": role} if role else None
    if action == "add":
        body = {"name": name, "role": role or "viewer"}
    r = _post_to_server(
        path.format(name=name), expected, url=url, token=None, token_file=token_file, state_dir=state_dir,
        body=body, method=method,
    )  # fmt: skip
    if r is None:
        return 2
    found = r.json()
    if action == "remove":
        print(f"removed {found['removed']}; revoked {len(found['revoked'])} devices")
        return 0
    for user in found["users"] if action == "list" else [found]:
        devices = ", ".join(f"{d['name']} ({d['id']}{', revoked' if d['revoked'] else ''})" for d in user["devices"])
        print(f"{user['name']}\t{user['role']}\t{devices or 'no devices'}")
    return 0


def _post_to_server(
    path: str,
    expected: int,
    *,
    url: str | None,
    token: str | None,
    token_file: str | None,
    state_dir: str | None,
    body: dict[str, str | None] | None = None,
    method: str = "POST",
) -> httpx.Response | None:
    """Send ``method`` ``path`` (with the JSON ``body``) to the running server with its token; None
    (said on stderr) when there is no token, the server cannot be reached or it answers anything
    but ``expected``."""
    import httpx

    url = (url or os.environ.get("PANEWATCH_URL") or DEFAULT_URL).rstrip("/")
    found = server_token(token, token_file, state_dir)
    if not found:
        print("panewatch: no token: give --token-file or set PANEWATCH_TOKEN (or --state-dir)", file=sys.stderr)
        return None
    try:
        r = httpx.request(method, f"{url}{path}", headers={"Authorization": f"Bearer {found}"}, json=body, timeout=10)
    except httpx.HTTPError as exc:
        print(f"panewatch: cannot reach {url}: {exc}", file=sys.stderr)
        return None
    if r.status_code != expected:
        detail = r.json().get("detail") if r.headers.get("content-type", "").startswith("application/json") else r.text
        print(f"panewatch: the server refused ({r.status_code}): {detail}", file=sys.stderr)
        return None
    return r
