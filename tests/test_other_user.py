"""Agents run as another user — the README's hard boundary — with a real ``panewatch serve`` on
the tmux host: by default the state folder is 0700 and such an agent's hooks cannot reach the
report socket (``curl: (7)``); with ``--agent-users nobody`` the folder is 0711, the hooks of an
agent run as ``nobody`` (``setpriv``) arrive through the socket, everything else in the folder
stays closed to it, and a resume after the tmux server died comes back as ``nobody`` again with
its flags. A state folder that user cannot reach, or a user that does not exist, stops ``serve``
with one line."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from panewatch.hosts.tmux import tmux_usable
from panewatch.procs.sandbox import legacy_tiocsti
from panewatch_lab.loopback import free_port
from panewatch_lab.serve_proc import ServeProcess, env_without_panewatch, serve_argv

REPO = Path(__file__).resolve().parents[1]
TOKEN = "other-user-token-0123456789"
NOBODY = 65534

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.getuid() != 0, reason="running an agent as another user needs root here"),
    pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed"),
    pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed (the hooks' client)"),
]

#: A stand-in agent: says who it runs as and with what, reports its conversation id the way a
#: hook does (curl to the pane's report socket), then waits; ``--resume ID`` reopens ID.
STANDIN = r"""#!/bin/sh
conv=conv-first
prev=
for a in "$@"; do [ "$prev" = --resume ] && conv=$a; prev=$a; done
printf 'standin uid=%s args=%s\r\n' "$(id -u)" "$*"
curl -sS -m 5 -o /dev/null -w 'report %{http_code}\r\n' -X POST --unix-socket "$PANEWATCH_REPORT_SOCKET" \
  -H 'Content-Type: application/json' --data-binary "{\"state\": \"idle\", \"session_id\": \"$conv\"}" \
  "http://panewatch/report?session=$PANEWATCH_SESSION"
while :; do sleep 60; done
"""

MANIFEST = """
agent = "standin"
version = "1"
description = "test stand-in: reports its conversation id; --resume ID reopens it"
processes = ["pw-standin"]

[resume]
args = ["--resume", "{agent_session_id}"]
flags = ["--restricted"]
"""


@pytest.fixture
def place() -> Iterator[Path]:
    """A folder another user may pass through (0711, under /tmp): pytest's own tmp folder is
    0700, as a home folder is, and no state folder inside it is reachable by other users."""
    root = Path(tempfile.mkdtemp(prefix="pw-other-user-"))
    os.chmod(root, 0o711)
    (root / "manifests").mkdir()
    (root / "manifests" / "standin.toml").write_text(MANIFEST)
    script = root / "pw-standin"
    script.write_text(STANDIN)
    script.chmod(0o755)
    try:
        yield root
    finally:
        sock = root / "state" / "tmux.sock"
        if sock.exists():
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def serve(place: Path, *extra: str) -> ServeProcess:
    args = ["--state-dir", str(place / "state"), "--pane-host", "tmux", "--manifests", str(place / "manifests")]
    return ServeProcess(TOKEN, [*args, "--sweep-ms", "100", *extra], env=env_without_panewatch(), cwd=REPO).start(60)


def as_nobody(place: Path, *args: str) -> list[str]:
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", str(place / "pw-standin"), *args]


def wait_for(check: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


def screen(client: httpx.Client, sid: str) -> str:
    return "\n".join(client.get(f"/api/sessions/{sid}/screen").json()["rows"])


def conversation(place: Path, sid: str) -> str | None:
    conn = sqlite3.connect(place / "state" / "sessions.sqlite3")
    try:
        row = conn.execute("SELECT agent_session_id FROM sessions WHERE id = ?", (sid,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def nobody_can(*argv: str) -> bool:
    return (
        subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", *argv],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )


def test_an_agent_run_as_another_user_reports_through_the_socket_and_resumes_as_that_user(place: Path) -> None:
    state = place / "state"
    # the default: private to the server's user. Contained, where the sandbox needs its TIOCSTI
    # filter (in that private folder), such a launch is refused at once with the way out
    server = serve(place)
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15) as c:
            r = c.post("/api/sessions", json={"agent": "standin", "command": as_nobody(place), "cwd": str(place)})
            if legacy_tiocsti():
                assert r.status_code == 422 and "--agent-users" in r.text, r.text
                assert c.get("/api/sessions").json()["sessions"] == []
            else:
                assert r.status_code == 201, r.text
                assert c.delete(f"/api/sessions/{r.json()['id']}").status_code == 200
            assert stat.S_IMODE(state.stat().st_mode) == 0o700
    finally:
        server.stop()
    # uncontained, the agent runs, and its hooks cannot even connect to the report socket
    server = serve(place, "--no-contain")
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15) as c:
            r = c.post("/api/sessions", json={"agent": "standin", "command": as_nobody(place), "cwd": str(place)})
            assert r.status_code == 201, r.text
            refused = r.json()["id"]
            wait_for(lambda: "report " in screen(c, refused), "the stand-in's report attempt")
            assert "report 000" in screen(c, refused) and "(7)" in screen(c, refused)  # curl: (7), no connection
            assert stat.S_IMODE(state.stat().st_mode) == 0o700
            assert c.delete(f"/api/sessions/{refused}").status_code == 200
    finally:
        server.stop()

    server = serve(place, "--agent-users", "nobody")
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=15) as c:
            assert stat.S_IMODE(state.stat().st_mode) == 0o711
            r = c.post(
                "/api/sessions",
                json={"agent": "standin", "command": as_nobody(place, "--restricted"), "cwd": str(place)},
            )
            assert r.status_code == 201, r.text
            sid, pid = r.json()["id"], r.json()["pid"]
            wait_for(lambda: conversation(place, sid) == "conv-first", "nobody's report through the report socket")
            shown = screen(c, sid)
            assert f"standin uid={NOBODY} args=--restricted" in shown and "report 202" in shown
            assert f"Uid:\t{NOBODY}\t" in Path(f"/proc/{pid}/status").read_text()
            # the folder lets that user through to the socket and the sandbox's filter, to nothing else
            passable = {"report": 0o711, "sandbox": 0o711, "report.sock": 0o666, "tiocsti.bpf": 0o644}
            for entry in [*state.iterdir(), *(state / "report").iterdir(), *(state / "sandbox").iterdir()]:
                mode = stat.S_IMODE(entry.lstat().st_mode)
                assert entry.lstat().st_uid == 0, entry
                want = passable.get(entry.name)
                assert mode == want if want is not None else not mode & 0o077, (entry, oct(mode))
            assert not nobody_can("ls", str(state / "report")), "the report folder cannot be listed"
            assert not nobody_can("ls", str(state)), "the folder cannot be listed"
            assert not nobody_can("cat", str(state / "sessions.sqlite3")), "the registry cannot be read"
            assert not nobody_can("cat", str(state / "token")), "the API token cannot be read"
            assert not nobody_can("tmux", "-S", str(state / "tmux.sock"), "list-panes", "-a"), "no tmux for it"

            # the tmux server dies: lost; resume brings it back as nobody, flags and all
            subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], check=True)
            wait_for(lambda: c.get(f"/api/sessions/{sid}").json()["state"] == "lost", "lost")
            assert c.get(f"/api/sessions/{sid}").json()["resume"] == {"possible": True, "why": None}
            r = c.post(f"/api/sessions/{sid}/resume")
            assert r.status_code == 200, r.text
            resumed = r.json()
            assert resumed["command"] == as_nobody(place, "--restricted", "--resume", "conv-first")
            wait_for(lambda: "report 202" in screen(c, sid), "the resumed stand-in's report")
            assert f"standin uid={NOBODY} args=--restricted --resume conv-first" in screen(c, sid)
            assert f"Uid:\t{NOBODY}\t" in Path(f"/proc/{resumed['pid']}/status").read_text()
    finally:
        server.stop()


def test_a_state_folder_the_agent_user_cannot_reach_stops_serve_in_one_line(place: Path) -> None:
    hidden = place / "private"
    hidden.mkdir(mode=0o700)  # like a home folder: its own user passes, nobody does not
    for users, why in (
        (["nobody"], f"agent_users: nobody cannot reach the report socket: {hidden} (mode 700, owner root)"),
        (["no-such-user-pw"], "agent_users: there is no user 'no-such-user-pw' on this machine"),
    ):
        argv = serve_argv(free_port(), None, ["--state-dir", str(hidden / "state"), "--pane-host", "pty"])
        for user in users:
            argv += ["--agent-users", user]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env_without_panewatch(), cwd=REPO)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0], done.stderr
        assert not (hidden / "state").exists(), "a refused start makes nothing"
