"""Issue 25, item 6: one server per state folder.

A second ``serve`` on a folder in use adopted the first's panes and its DELETE killed them (tmux
host), or marked the first's live agents lost (pty host). Now it exits 2 at once with one line
naming the pid that holds the folder, and the first's sessions are untouched — real
``panewatch serve`` processes on both hosts. The lock dies with its holder however it dies, and
no agent inherits it (else a tmux server that outlives a SIGKILLed server would hold the folder).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hardening_support import ServerProcess
from panewatch.access.statelock import LOCK_FILE, StateLockError, lock_state_dir
from panewatch.hosts.tmux import tmux_usable
from panewatch.procs.proctree import live as alive
from panewatch_lab.serve_proc import env_without_panewatch, serve_argv

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
HOSTS = ["pty", pytest.param("tmux", marks=pytest.mark.skipif(tmux_usable() is not None, reason=str(tmux_usable())))]


def second_serve(state: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``panewatch serve`` on ``state`` (port 0): what it printed, and how long it took."""
    start = time.monotonic()
    done = subprocess.run(
        serve_argv(0, "second-token-0123456789", ["--state-dir", str(state), *extra]),
        capture_output=True,
        text=True,
        timeout=120,
        env=env_without_panewatch(),
        cwd=REPO,
    )
    return done, time.monotonic() - start


def agent_env(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)


def holders_of(path: Path) -> list[int]:
    """Every process with ``path`` open (an inherited lock would show up here)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    found.append(int(pid))
                    break
            except OSError:
                continue
    return found


@pytest.mark.parametrize("host", HOSTS)
def test_a_second_serve_on_the_folder_exits_2_and_the_firsts_sessions_are_untouched(tmp_path, host):
    state = tmp_path / "state"
    first = ServerProcess(state, pane_host=host)
    try:
        s = first.create(command=["sleep", "600"], name="kept", rows=6, cols=40)
        before = first.wait_state(s["id"], "idle")
        report_socket = Path(agent_env(before["pid"])["PANEWATCH_REPORT_SOCKET"])
        # the same start-up without the lock's refusal, for the figure: a bad option exits 2 too
        baseline, base_s = second_serve(state, "--port", "70000")
        assert baseline.returncode == 2
        done, took = second_serve(state, "--pane-host", host)
        print(f"\nsecond serve refused in {took:.2f} s (a serve refused for a bad option: {base_s:.2f} s)")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines()[-1] == (
            f"panewatch: another panewatch serve (pid {first.pid}) already uses the state folder {state}; "
            "stop it, or give this one another --state-dir"
        )
        # no timed assert (both figures grow with the machine's load): a refusal that waited for
        # the lock would wait for the first server, which holds it to the end, and time out above
        # the first's session is as it was: same process, same state, still answerable
        after = first.http.get(f"/api/sessions/{s['id']}").json()
        assert (after["pid"], after["state"]) == (before["pid"], "idle") and os.path.exists(f"/proc/{after['pid']}")
        assert [x["id"] for x in first.http.get("/api/sessions").json()["sessions"]] == [s["id"]]
        assert first.http.post(f"/api/sessions/{s['id']}/send", json={"text": "x"}).status_code == 200
        with socket.socket(socket.AF_UNIX) as probe:  # the second removed no socket of the first's
            probe.connect(str(report_socket))
        assert holders_of((state / LOCK_FILE).resolve()) == [first.pid]  # the agent holds nothing
    finally:
        first.stop()
        if host == "tmux":
            subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], capture_output=True, check=False)


@pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}")
def test_a_sigkilled_server_leaves_no_lock_even_with_its_agents_alive(tmp_path):
    state = tmp_path / "state"
    first = ServerProcess(state, pane_host="tmux")
    try:
        s = first.create(command=["sleep", "600"], name="outlives", rows=6, cols=40)
        agent = first.wait_state(s["id"], "idle")["pid"]
        first.stop(signal.SIGKILL)
        assert alive(agent), "the tmux host's agent outlives the server (else this proves nothing)"
        assert holders_of((state / LOCK_FILE).resolve()) == []  # not the agent, not the tmux server
        again = ServerProcess(state, pane_host="tmux")  # starts: the kernel freed the lock
        try:
            assert again.http.get(f"/api/sessions/{s['id']}").json()["pid"] == agent  # adopted
        finally:
            again.stop()
    finally:
        subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], capture_output=True, check=False)


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_the_holder_is_named_even_before_it_wrote_its_pid_and_the_lock_dies_with_it(tmp_path):
    # a holder that never writes its pid into the file: /proc/locks names it
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / LOCK_FILE)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(StateLockError, match=rf"^another panewatch serve \(pid {holder.pid}\) already uses"):
            lock_state_dir(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    lock = lock_state_dir(tmp_path)  # SIGKILL released it: no stale lock to clear by hand
    try:
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        child = subprocess.Popen(["sleep", "600"], close_fds=False)  # even a child that keeps fds
        try:
            assert child.pid not in holders_of((tmp_path / LOCK_FILE).resolve())  # O_CLOEXEC
        finally:
            child.kill()
            child.wait()
    finally:
        lock.release()
    lock_state_dir(tmp_path).release()  # released: the next one gets it


def test_the_lock_leaves_the_reapers_lock_files_alone(tmp_path):
    from panewatch.procs.proctree import Reaper

    lock = lock_state_dir(tmp_path)
    try:
        reaper = Reaper(tmp_path, cgroups=False)
        reaper.open()
        assert reaper.cleanup_leftovers() == 0  # its glob (panes-*.lock) does not see server.lock
        reaper.close()  # nor does its clean stop remove it
        with pytest.raises(StateLockError):
            lock_state_dir(tmp_path)  # still there, still held
    finally:
        lock.release()
