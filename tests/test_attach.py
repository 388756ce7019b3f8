"""``panewatch attach`` driven through a real PTY: typing reaches the agent, the host (what the
service reads) sees it, detaching leaves the agent running; the pty host is refused plainly."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from panewatch.hosts.tmux import TmuxHost, tmux_usable
from panewatch.registry import Record, Registry, hash_token
from test_tmux_host import Sink, spec, until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}"),
]


def register(state: Path, sid: str, ref: str | None, kind: str = "tmux", name: str = "shell") -> None:
    reg = Registry.in_state_dir(state)
    reg.add(
        Record(
            id=sid,
            name=name,
            command=["sh"],
            cwd="/",
            token_hash=hash_token("t"),
            host_kind=kind,
            host_ref=ref,
            rows=20,
            cols=70,
        )
    )
    reg.close()


def run_attach(state: Path, session: str) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "panewatch", "attach", session, "--state-dir", str(state)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(slave)
    os.set_blocking(master, False)
    return proc, master


def read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            return out
        if not chunk:
            return out
        out += chunk


async def test_attach_types_into_the_pane_and_detach_leaves_it_running(tmp_path: Path) -> None:
    state = tmp_path / "state"
    host = TmuxHost(state)
    await host.start()
    try:
        sink = Sink()
        pane = await host.spawn(spec("att1", "sh", rows=20, cols=70), sink)
        await until(lambda: sink.data, what="the prompt")
        register(state, "att1", pane.ref, name="my-shell")
        proc, master = run_attach(state, "my-shell")  # by its name
        seen = bytearray()

        def screen_shows(text: bytes) -> bool:
            seen.extend(read_all(master))
            return text in seen or proc.poll() is not None

        try:
            await until(lambda: screen_shows(b"att1"), timeout=10, what="tmux's status line in the user's terminal")
            assert proc.poll() is None, seen.decode(errors="replace")
            os.write(master, b"echo ATTACHED-$((6*7))\r")
            await until(lambda: b"ATTACHED-42" in sink.data, what="the service's view of the typed command")
            os.write(master, b"\x02d")  # tmux's detach key
            await until(lambda: proc.poll() is not None, timeout=10, what="the detach")
            assert proc.returncode == 0
            seen.extend(read_all(master))
            assert b"detached" in seen
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            os.close(master)
        assert pane.alive and os.path.exists(f"/proc/{pane.pid}")
        pane.write(b"echo STILL-HERE\r")
        await until(lambda: b"STILL-HERE\r\n" in sink.data, what="the agent still running after detach")
    finally:
        await host.stop()
        await host.kill_server()


def test_attach_to_a_pty_session_says_it_needs_tmux(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    register(state, "pty1", "4242", kind="pty")
    proc = subprocess.run(
        [sys.executable, "-m", "panewatch", "attach", "pty1", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "panewatch: session pty1 runs on the pty host; attach needs the tmux host "
        "(start `panewatch serve --pane-host tmux`, then create the session again)"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "panewatch", "attach", "nope", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and proc.stderr.strip() == f"panewatch: no session 'nope' in {state}"
