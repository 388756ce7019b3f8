"""The terminal channel's metadata (title, state, prompt) follows the screen, not the raw bytes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from live import live_server

pytestmark = pytest.mark.integration


async def _meta_with(ws: Any, key: str, value: str, timeout: float = 5.0) -> dict[str, Any]:
    async def find() -> dict[str, Any]:
        while True:
            message = await ws.recv()
            if isinstance(message, str):
                meta = json.loads(message)
                if meta.get("type") == "state" and meta.get(key) == value:
                    return meta

    return await asyncio.wait_for(find(), timeout)


async def test_a_title_set_while_the_terminal_is_open_reaches_it() -> None:
    """The bytes reach the channel a loop turn before they are fed to the screen, where the title
    is read: a title set by a pane's last output, with the channel idle, was once never sent."""
    async with live_server() as live:
        s = await live.create(
            command=["bash", "-c", r"sleep 0.6; printf '\033]0;late-title-7\007'; exec sleep 600"], name="t"
        )
        async with live.ws(f"/ws/sessions/{s['id']}/term") as ws:
            meta = await _meta_with(ws, "title", "late-title-7")
        assert meta["state"] in ("idle", "working")
        assert (await live.http.get(f"/api/sessions/{s['id']}")).json()["title"] == "late-title-7"
