"""A fleet of sessions for the attention queue's browser tests: 20 panes in every state, each
agent logging every key its pane receives (the tests read the logs: nothing the page does by
accident may type into a pane).

The blocked ones draw what users meet: the real Claude Code CLI's Bash, file-edit and question
dialogs (raw captures replayed) and a shell's ``[y/N]`` question; working ones keep Claude's
"esc to interrupt" footer up; idle ones its prompt box; exited ones ended; lost ones lost their
tmux pane.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dashboard_support import REPO, RULE, Server

CAPTURES = REPO / "fixtures" / "claude" / "2.1.332"

# One agent for every role. It reads its pane raw and appends every key to its log (the
# terminal's answers to a capture's queries are no key and are not logged). A blocked one, given
# its first key, says which it got and turns idle; a working one redraws its spinner.
FLEET_AGENT = r"""
import os, re, select, sys, time, tty
log_path, role, arg, rule = sys.argv[1:5]
fd = sys.stdin.fileno()
tty.setraw(fd)
out = lambda s: os.write(1, s.encode() if isinstance(s, str) else s)
# (device attributes, cursor position, mode and colour reports; a key such as Shift+Tab's ESC [ Z stays)
reply = re.compile(rb"\x1b(?:\[[?>][\d;]*[a-zA-Z]|\[\d+;\d+R|\[\??[\d;]*\$y|\][^\x07\x1b]*(?:\x07|\x1b\\)|P[^\x1b]*\x1b\\)")
open(log_path, "wb").close()
IDLE = "%s\r\n\u276f \r\n%s\r\n ? for shortcuts\r\n" % (rule, rule)
def idle(note=""):
    out("\x1b[2J\x1b[H" + (note + "\r\n" if note else "") + IDLE)
if role == "capture":
    with open(arg, "rb") as f:
        out(f.read())
elif role == "yn":
    out("sh$ ./migrate\r\nDrop old tables? [y/N] ")
elif role == "idle":
    idle(arg)
answered = role not in ("capture", "yn")
n = 0
while True:
    r, _, _ = select.select([fd], [], [], 0.3 if role == "working" else None)
    if role == "working":
        n += 1
        out("\x1b[2J\x1b[H%s\r\n\r\n\u273b Working\u2026 (%ds)\r\n%s\r\n\u276f \r\n%s\r\n esc to interrupt\r\n" % (arg, n, rule, rule))
    if not r:
        continue
    data = reply.sub(b"", os.read(fd, 1024))
    if not data:
        continue
    with open(log_path, "ab") as f:
        f.write(data)
    if not answered:
        answered = True
        key = data.decode(errors="replace")[:1]
        if role == "yn":
            out("\r\ngot:[%s]\r\nsh$ " % key)
        else:
            idle(" answered %s" % key)
"""


def fleet_agent(log: Path, role: str, arg: str = "") -> list[str]:
    return [sys.executable, "-c", FLEET_AGENT, str(log), role, arg, RULE]


@dataclass
class Fleet:
    """The sessions made, by role, and where each one logs the keys it got."""

    server: Server
    blocked: list[str] = field(default_factory=list)  # in the order they started waiting
    working: list[str] = field(default_factory=list)
    idle: list[str] = field(default_factory=list)
    exited: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    logs: dict[str, Path] = field(default_factory=dict)
    asks: dict[str, str] = field(default_factory=dict)  # a blocked session -> a line of what it asks

    @property
    def all(self) -> list[str]:
        return self.blocked + self.working + self.idle + self.exited + self.lost

    def received(self, sid: str) -> bytes:
        return self.logs[sid].read_bytes() if self.logs[sid].exists() else b""

    def typed_into(self) -> dict[str, bytes]:
        """Every live pane that received a key, with what it got."""
        return {sid: got for sid in self.logs if (got := self.received(sid))}


def state_of(server: Server, sid: str) -> dict[str, Any]:
    with server.client() as c:
        return c.get(f"/api/sessions/{sid}").json()


def wait_for(check, what: str, timeout: float = 15.0) -> None:
    """Poll (the server or a pane's log, not the page) until ``check()`` holds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def wait_state(server: Server, sid: str, state: str, timeout: float = 20.0) -> None:
    """Poll the server (not the page) until the session is in ``state``."""
    deadline = time.monotonic() + timeout
    while (now := state_of(server, sid)["state"]) != state:
        assert time.monotonic() < deadline, f"{sid} stayed {now}, never {state}"
        time.sleep(0.05)


BLOCKED = [
    # (name, role, arg, a line of what it asks)
    ("claude-bash", "capture", "blocked-bash-32x120.raw", "touch x.txt"),
    ("migrate", "yn", "", "Drop old tables? [y/N]"),
    ("claude-edit", "capture", "blocked-edit-32x120.raw", "Do you want to make this edit to edit-me.txt?"),
    ("claude-ask", "capture", "blocked-question-32x120.raw", "Which fruit should I use?"),
]


def make_fleet(server: Server, tmp: Path) -> Fleet:
    """20 sessions: 4 blocked (each waiting longer than the next), 6 working, 5 idle, 3 exited, 2
    lost, in two project folders."""
    fleet = Fleet(server)
    folders = [tmp / "proj-api", tmp / "proj-web"]
    for f in folders:
        f.mkdir(exist_ok=True)

    def start(name: str, role: str, arg: str, i: int, agent: str = "claude") -> str:
        log = tmp / f"{name}.keys"
        sid = server.create(fleet_agent(log, role, arg), name=name, agent=agent, cwd=str(folders[i % 2]))["id"]
        fleet.logs[sid] = log
        return sid

    for i, (name, role, arg, asks) in enumerate(BLOCKED):
        path = str(CAPTURES / arg) if role == "capture" else arg
        sid = start(name, role, path, i, agent="shell" if role == "yn" else "claude")
        wait_state(server, sid, "blocked")  # one after the other: the order of their waits is known
        fleet.blocked.append(sid)
        fleet.asks[sid] = asks
    for i in range(6):
        fleet.working.append(start(f"worker-{i + 1}", "working", f"❯ build step {i + 1}", i))
    for i in range(5):
        fleet.idle.append(start(f"idle-{i + 1}", "idle", f"done with task {i + 1}", i))
    for i in range(2):
        fleet.lost.append(start(f"gone-{i + 1}", "idle", "about to lose its pane", i))
    for i, code in enumerate((0, 2, 0)):
        sid = server.create(
            ["bash", "-c", f"echo finished-{i + 1}; exit {code}"], name=f"done-{i + 1}", cwd=str(folders[i % 2])
        )["id"]
        fleet.exited.append(sid)
    for sid in fleet.working:
        wait_state(server, sid, "working")
    for sid in fleet.idle + fleet.lost:
        wait_state(server, sid, "idle")
    for sid in fleet.exited:
        wait_state(server, sid, "exited")
    sock = server.state_dir / "tmux.sock"
    for sid in fleet.lost:
        ref = state_of(server, sid)["ref"]
        subprocess.run(["tmux", "-S", str(sock), "kill-pane", "-t", ref], check=True, capture_output=True)
        wait_state(server, sid, "lost")
        del fleet.logs[sid]  # no pane to type into
    for sid in fleet.blocked:
        assert state_of(server, sid)["state"] == "blocked"
    return fleet
