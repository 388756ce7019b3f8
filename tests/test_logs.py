"""``panewatch serve --log-json``: a real service's log lines are JSON and name their session."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from panewatch.manifest import bundled_manifest_dir
from scripted import claude_like

pytestmark = pytest.mark.integration

TOKEN = "log-test-token-0123"


class Service:
    """``panewatch serve`` in a child process, its stderr read line by line by a thread."""

    def __init__(self, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_") or k == "PANEWATCH_STATE_DIR"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "panewatch", "serve", "--port", "0", "--token", TOKEN, "--sweep-ms", "100", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        found = re.search(r"http://[\d.]+:(\d+)", first)
        assert found, first + self.drain()
        self.port = int(found.group(1))
        self.http = httpx.Client(
            base_url=f"http://127.0.0.1:{found.group(1)}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15
        )

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))

    def drain(self) -> str:
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return "\n".join(self.seen)

    def wait_line(self, predicate, timeout: float = 15.0) -> dict:
        """The next JSON log line for which ``predicate`` holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            record = json.loads(line)  # every line is JSON
            if predicate(record):
                return record
        raise AssertionError("no such log line; got:\n" + self.drain())

    def wait_state(self, sid: str, state: str) -> None:
        deadline = time.monotonic() + 15
        while self.http.get(f"/api/sessions/{sid}").json()["state"] != state:
            assert time.monotonic() < deadline, f"never {state}"
            time.sleep(0.05)

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def test_session_log_lines_carry_the_session_id(tmp_path):
    overrides = tmp_path / "manifests"
    overrides.mkdir()
    shutil.copy(Path(bundled_manifest_dir()) / "claude.toml", overrides / "claude.toml")
    service = Service("--log-json", "--manifests", str(overrides))
    try:
        r = service.http.post(
            "/api/sessions",
            json={
                "agent": "claude",
                "rows": 12,
                "cols": 60,
                "command": ["bash", "--norc", "--noprofile", "-c", claude_like()],
            },
        )
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        started = service.wait_line(lambda rec: rec["msg"].startswith("started"))
        assert started["session"] == sid and started["level"] == "info" and started["logger"] == "panewatch.engine"
        assert isinstance(started["at"], float)

        service.wait_state(sid, "blocked")
        service.wait_line(lambda rec: "-> blocked" in rec["msg"] and rec.get("session") == sid)
        assert service.http.post(f"/api/sessions/{sid}/send", json={"text": "hi"}).status_code == 409
        refused = service.wait_line(lambda rec: "refused" in rec["msg"])
        assert refused["session"] == sid and "blocked" in refused["msg"]

        (overrides / "claude.toml").write_text("this is [ not toml\n")
        broken = service.wait_line(lambda rec: "claude.toml was refused" in rec["msg"])
        assert broken["session"] == sid and broken["level"] == "warning"

        bad = service.http.post("/api/sessions", json={"command": ["/nonexistent/agent"]})
        assert bad.status_code == 201 and bad.json()["state"] == "exited"
        failed = service.wait_line(lambda rec: rec["msg"].startswith("could not start"))
        assert failed["session"] == bad.json()["id"]

        assert service.http.delete(f"/api/sessions/{sid}").status_code == 200
        deleted = service.wait_line(lambda rec: rec["msg"].startswith("deleted"))
        assert deleted["session"] == sid

        with socket.create_connection(("127.0.0.1", service.port), 5) as raw:  # not HTTP at all
            raw.sendall(b"\x16\x03\x01 not http\r\n\r\n")
            raw.recv(1024)
        uvicorn_line = service.wait_line(lambda rec: rec["logger"].startswith("uvicorn"))
        assert uvicorn_line["level"] == "warning" and "Invalid HTTP request" in uvicorn_line["msg"]
    finally:
        service.stop()
    rest = service.drain()
    for line in rest.splitlines():
        json.loads(line)  # nothing but JSON, to the end


def test_text_logs_prefix_the_session():
    service = Service()
    try:
        r = service.http.post("/api/sessions", json={"command": ["bash", "-c", "sleep 30"]})
        sid = r.json()["id"]
        deadline = time.monotonic() + 15
        while f"[{sid}] started bash" not in service.drain():
            assert time.monotonic() < deadline, service.drain()
            time.sleep(0.05)
    finally:
        service.stop()
