"""``panewatch pair`` against a real server (uvicorn): the code, its URL, the QR in the terminal
and as an image; the code then pairs a device."""

from __future__ import annotations

import asyncio
import sys

import pytest

from live import TOKEN, live_server
from panewatch_lab.serve_proc import env_without_panewatch

pytestmark = pytest.mark.integration


async def test_panewatch_pair_prints_a_code_its_url_and_qr_and_saves_the_image(tmp_path):
    async with live_server(socket=True, state_dir=tmp_path / "state") as live:
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")
        image = tmp_path / "qr.png"
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "panewatch", "pair", "--url", live.url, "--token-file", str(token_file)),
            *("--image", str(image)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env_without_panewatch(),
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        text = out.decode()
        assert "█" in text or "▀" in text  # the QR, drawn in the terminal
        (line,) = [row for row in text.splitlines() if row.startswith("Pairing code")]
        code = line.split()[2]
        assert f"{live.url}/pair?code={code}" in line and "5 minutes" in line
        assert image.read_bytes().startswith(b"\x89PNG")
        assert "public_url is not set" in err.decode()  # says the URL may not reach a phone
        r = await live.http.post("/pair", json={"code": code, "name": "script"}, headers={"Authorization": ""})
        assert r.status_code == 201 and r.json()["device"]["name"] == "script"
