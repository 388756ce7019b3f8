"""The report endpoint over loopback TCP (where Claude's native http hooks post): a pane can
report only for itself, as on the report socket, though TCP names no caller.

Pane A posts with curl over TCP, naming pane B, naming no pane, then naming itself; only the
last is taken. The endpoint found the process holding A's socket in ``/proc`` and walked its real
parents. Answers over TCP carry no body (an http hook would read one as its decision).
"""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from hardening_support import wait_file
from live import live_server

pytestmark = pytest.mark.integration

PANE_A = r"""
post() { curl -s -o "$OUT/$1.body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
         $3 --data "$2" "$PANEWATCH_REPORT_URL$4" > "$OUT/$1.code"; }
post to_b '{"state":"blocked","detail":"forged"}' "" "?session=$B_ID"
post to_b_by_header '{"state":"blocked","detail":"forged"}' "-H X-Panewatch-Session:$B_ID" ""
post to_none '{"state":"blocked","detail":"forged"}' "" ""
post own '{"state":"blocked","detail":"mine"}' "" "?session=$PANEWATCH_SESSION"
echo done > "$OUT/done"
sleep 30
"""


async def test_over_tcp_pane_a_can_report_only_for_itself(tmp_path):
    async with live_server(state_dir=tmp_path / "state") as live:
        url = live.app.state.report_socket.url  # what agents get as PANEWATCH_REPORT_URL
        assert url.startswith("http://127.0.0.1:") and url.endswith("/report")
        b = await live.create(command=["sleep", "30"], name="B")
        await live.wait_state(b["id"], "idle")
        a = await live.create(
            command=["bash", "--norc", "-c", PANE_A], name="A", env={"OUT": str(tmp_path), "B_ID": b["id"]}
        )
        await asyncio.to_thread(wait_file, tmp_path / "done", 1, 15)
        names = ("to_b", "to_b_by_header", "to_none", "own")
        code = {k: (tmp_path / f"{k}.code").read_text() for k in names}
        body = {k: (tmp_path / f"{k}.body").read_text() for k in names}
        assert code == {"to_b": "403", "to_b_by_header": "403", "to_none": "403", "own": "202"}, code
        assert set(body.values()) == {""}, body
        info_b = (await live.http.get(f"/api/sessions/{b['id']}")).json()
        assert info_b["state"] == "idle" and info_b["source"] != "hook"
        info_a = await live.wait_state(a["id"], "blocked")
        assert info_a["source"] == "hook" and "mine" in info_a["why"]

        # a process outside every pane (this test) is refused, whichever session it names
        async with httpx.AsyncClient() as c:
            r = await c.post(f"{url}?session={b['id']}", json={"state": "blocked"})
            assert (r.status_code, r.content) == (403, b"")
        # the endpoint listens on loopback only
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        assert host == "127.0.0.1"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))  # (the port is taken on loopback: the service holds it)
            assert probe.connect_ex(("127.0.0.1", int(port))) == 0
