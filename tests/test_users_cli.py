"""``panewatch users`` and ``panewatch pair --user --role`` against a real server (uvicorn): users
added, listed with their devices, given another role, removed (their devices revoked); a refusal
exits 2 with the server's reason."""

from __future__ import annotations

import asyncio
import sys

import pytest

from live import TOKEN, live_server
from panewatch_lab.serve_proc import env_without_panewatch

pytestmark = pytest.mark.integration


async def test_panewatch_users_and_pair_for_a_user_manage_people_on_the_running_server(tmp_path):
    async with live_server(socket=True, state_dir=tmp_path / "state") as live:
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")

        async def cli(*args: str) -> tuple[int, str, str]:
            proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "panewatch", *args, "--url", live.url, "--token-file", str(token_file)),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env_without_panewatch(),
            )
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            assert proc.returncode is not None
            return proc.returncode, out.decode(), err.decode()

        assert (await cli("users", "add", "amy", "--role", "operator"))[:2] == (0, "amy\toperator\tno devices\n")
        code, _, err = await cli("users", "add", "amy")
        assert code == 2 and "409" in err and "exists" in err
        code, out, _ = await cli("pair", "--user", "ben", "--role", "viewer", "--no-qr")
        assert code == 0 and "for user ben" in out
        pairing = out.split()[2]
        r = await live.http.post("/pair", json={"code": pairing, "name": "ben-phone"}, headers={"Authorization": ""})
        assert r.status_code == 201
        ben = {"Authorization": f"Bearer {r.json()['token']}"}
        code, out, _ = await cli("users", "list")
        assert code == 0 and out.splitlines() == [
            "amy\toperator\tno devices",
            f"ben\tviewer\tben-phone ({r.json()['device']['id']})",
        ]
        assert (await live.http.post("/api/sessions", json={"command": ["sh"]}, headers=ben)).status_code == 403
        assert (await cli("users", "set-role", "ben", "operator"))[0] == 0
        r = await live.http.post("/api/sessions", json={"command": ["true"]}, headers=ben)
        assert r.status_code == 201, r.text
        code, out, _ = await cli("users", "remove", "ben")
        assert (code, out) == (0, "removed ben; revoked 1 devices\n")
        assert (await live.http.get("/api/sessions", headers=ben)).status_code == 401
        code, _, err = await cli("users", "set-role", "nobody", "owner")
        assert code == 2 and "404" in err and "no user 'nobody'" in err
