"""A small client of the service for scripts: ``panewatch wait SESSION --until blocked``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from urllib.parse import urlsplit, urlunsplit

import websockets

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
