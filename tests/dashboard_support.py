"""Helpers for the dashboard's browser tests: a real server in a subprocess, scripted stand-in
agents, and Debian's Chromium for Playwright.

The agents are bash scripts that draw what Claude's rules look for (a horizontal rule, a
numbered menu with ``❯``, the dialog's footer; ``esc to interrupt`` while working; ``? for
shortcuts`` when idle), launched with ``"agent": "claude"`` so Claude's manifest classifies
them (argv[0] is ``bash``, so no hooks are added).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import httpx

from panewatch_lab.loopback import free_port
from panewatch_lab.serve_proc import START_TIMEOUT_S, ServeProcess, env_without_panewatch

REPO = Path(__file__).resolve().parent.parent
#: The lab's manifests (its ``fake`` agent), when the lab is installed: not bundled with the runtime.
LAB_MANIFESTS = (
    Path(spec.origin).with_name("manifests") if (spec := find_spec("panewatch_lab")) and spec.origin else None
)
ARTIFACTS = REPO / "artifacts"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

RULE = "─" * 40


class Server:
    """``panewatch serve`` in a subprocess, on a fixed port so that it can be restarted there."""

    def __init__(
        self,
        token: str,
        port: int | None = None,
        log_dir: Path | None = None,
        manifests: Path | None = None,
        extra: list[str] | None = None,
    ) -> None:
        self.token = token
        self.extra = list(extra or [])  # more `serve` flags (--push-allow-loopback...)
        self.manifests = manifests or LAB_MANIFESTS  # one extra manifest folder (--manifests)
        self.port = port or free_port()
        self.serve: ServeProcess | None = None
        self.log_dir = log_dir
        self.starts = 0
        # a state folder of its own, chosen now so that a restart finds it again: a module-scoped
        # server starts before the per-test PANEWATCH_STATE_DIR exists, and must never fall back
        # to the user's folder (another run's registry and tmux server would come back in it)
        given = os.environ.get("PANEWATCH_STATE_DIR")
        self.state_dir = Path(given) if given else Path(tempfile.mkdtemp(prefix="pw-test-state-"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, token: str | None = None, timeout: float = START_TIMEOUT_S) -> Server:
        if token is not None:
            self.token = token
        env = env_without_panewatch(keep={"PANEWATCH_STATE_DIR"})
        env["PYTHONUNBUFFERED"] = "1"
        self.starts += 1
        log = self.log_dir / f"server-{self.port}-{self.starts}.log" if self.log_dir is not None else None
        extra = ["--state-dir", str(self.state_dir), "--sweep-ms", "100"]
        extra += ["--manifests", str(self.manifests)] if self.manifests else []
        extra += self.extra
        self.serve = ServeProcess(self.token, extra, port=self.port, env=env, log=log, cwd=REPO).start(timeout)
        return self

    def stop(self) -> None:
        if self.serve is not None:
            self.serve.stop(grace=10)
        self.serve = None

    def close(self) -> None:
        """Stop for good: also end the tmux server, which keeps agents after a stop by design."""
        self.stop()
        sock = self.state_dir / "tmux.sock"
        if sock.exists():
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False)

    # -- the HTTP API, as a script would use it ---------------------------------------------
    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10.0)

    def create(self, command: list[str], *, name: str, agent: str | None = "claude", **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"command": command, "name": name, **extra}
        if agent:
            body["agent"] = agent
        with self.client() as c:
            r = c.post("/api/sessions", json=body)
        assert r.status_code == 201, r.text
        return r.json()

    def sessions(self) -> list[dict[str, Any]]:
        with self.client() as c:
            r = c.get("/api/sessions")
        r.raise_for_status()
        return r.json()["sessions"]

    def screen(self, sid: str) -> list[str]:
        with self.client() as c:
            r = c.get(f"/api/sessions/{sid}/screen")
        r.raise_for_status()
        return r.json()["rows"]

    def delete_all(self) -> None:
        with self.client() as c:
            for s in c.get("/api/sessions").json()["sessions"]:
                c.delete(f"/api/sessions/{s['id']}")


# --- scripted agents ------------------------------------------------------------------------


def _bash(*lines: str) -> list[str]:
    return ["bash", "-c", "\n".join(lines)]


def _printf(text: str) -> str:
    """A printf of ``text`` with \\r\\n line ends (``text`` must not hold a single quote)."""
    assert "'" not in text and "%" not in text
    return "printf '" + text.replace("\n", "\\r\\n") + "'"


CLEAR = "printf '\\x1b[2J\\x1b[H'"
IDLE_LINE = " ? for shortcuts"


def prompt_agent(*, work: float = 4.0) -> list[str]:
    """Claude-like: a permission menu read as one key (no Enter), then work, then idle."""
    return _bash(
        "stty -echo",
        "sleep 0.2",
        _printf(f"{RULE}\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n Esc to cancel · Tab to amend\n"),
        "read -rsn1 key",
        "printf '\\r\\x1b[5A\\x1b[J'",
        'printf " answered %s\\r\\n" "$key"',
        _printf("✻ Working… (esc to interrupt)\n"),
        f"sleep {work}",
        CLEAR,
        _printf(f"{RULE}\n❯ \n{RULE}\n{IDLE_LINE}\n"),
        "exec sleep 600",
    )


def idle_agent(text: str = "", *, after: Path | None = None) -> list[str]:
    """An idle prompt box (optionally below some text) that never changes; with ``after``, the box
    alone first and the text drawn above it once that file exists (idle all along)."""
    body = (text + "\n") if text else ""
    box = f"{RULE}\n❯ \n{RULE}\n{IDLE_LINE}\n"
    if after is not None:
        wait = f"until [ -e {shlex.quote(str(after))} ]; do sleep 0.05; done"
        return _bash("stty -echo", _printf(box), wait, CLEAR, _printf(body + box), "exec sleep 600")
    return _bash("stty -echo", _printf(body + box), "exec sleep 600")


def echo_agent() -> list[str]:
    """Idle; echoes each line it is sent as ``got:<line>``."""
    return _bash(
        "stty -echo",
        _printf(f"{RULE}\n❯ \n{RULE}\n{IDLE_LINE}\n"),
        'while read -r line; do printf "got:%s\\r\\n" "$line"; done',
        "exec sleep 600",
    )


def json_argv(argv: list[str]) -> str:
    return json.dumps(argv)


# A Claude-like TUI in raw mode, for the keyboard tests: it reads keys one by one as the real CLI
# does (the lab's fake agent reads whole lines, so it cannot be interrupted or navigated).
# Idle: an input box that echoes what is typed; Enter starts a turn ("esc to interrupt" in the
# footer, a spinner line); Esc interrupts it. After WORK_S of work it asks for permission in
# a dialog whose selection moves with the arrow keys; Enter picks the selected option. A task
# that starts with "slow" works for a minute (time to interrupt it).
TUI_AGENT = r'''
import os, select, sys, termios, time, tty
RULE = "─" * 40
WORK_S = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
fd = sys.stdin.fileno()
tty.setraw(fd)
out = sys.stdout
def draw(lines):
    out.write("\x1b[2J\x1b[H" + "\r\n".join(lines) + "\r\n")
    out.flush()
def idle(note="", typed=""):
    draw(([note, ""] if note else []) + [RULE, "❯ " + typed, RULE, " ? for shortcuts"])
pending = []
def key(timeout=None):
    """One key: a character, Esc, or an arrow's escape sequence (keys typed fast come together)."""
    if not pending:
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            return None
        data = os.read(fd, 1024).decode(errors="replace")
        i = 0
        while i < len(data):
            n = 3 if data[i] == "\x1b" and data[i + 1:i + 2] in ("[", "O") and i + 2 < len(data) else 1
            pending.append(data[i:i + n])
            i += n
    return pending.pop(0)
idle()
typed = ""
while True:
    k = key()
    if k is None:
        continue
    if k in ("\r", "\n"):
        task, typed = typed, ""
        work = 60 if task.startswith("slow") else WORK_S
        start = time.monotonic()
        n = 0
        interrupted = False
        while time.monotonic() - start < work:
            draw(["❯ " + task, "", "✻ Working… (%ds)" % n, RULE, "❯ ", RULE, " esc to interrupt"])
            k = key(0.1)
            n += 1
            if k == "\x1b":
                interrupted = True
                break
        if interrupted:
            idle("  ⎿  Interrupted by user")
            continue
        sel = 1
        while True:
            rows = [("❯ " if i == sel else "  ") + "%d. %s" % (i, label)
                    for i, label in ((1, "Yes"), (2, "Yes, and don't ask again"), (3, "No"))]
            draw(["❯ " + task, "", RULE, " Bash command", "   make " + task, " Do you want to proceed?",
                  *[" " + r for r in rows], "", " Esc to cancel · Tab to amend"])
            k = key()
            if k == "\x1b[A" or k == "\x1bOA":
                sel = max(1, sel - 1)
            elif k == "\x1b[B" or k == "\x1bOB":
                sel = min(3, sel + 1)
            elif k in ("\r", "\n"):
                idle("  ⎿  chose option %d for %s" % (sel, task))
                break
            elif k == "\x1b":
                idle("  ⎿  cancelled")
                break
        continue
    if k in ("\x7f", "\b"):
        typed = typed[:-1]
    elif k == "\x03":
        idle("  ⎿  ctrl-c pressed")
        continue
    elif k.isprintable():
        typed += k
    idle(typed=typed)
'''


def tui_agent(work: float = 1.5) -> list[str]:
    return [sys.executable, "-c", TUI_AGENT, str(work)]


def shell() -> list[str]:
    """An interactive bash without the user's rc files, its prompt fixed for the tests."""
    return ["bash", "--norc", "--noprofile", "-i"]


SHELL_ENV = {"PS1": "sh$ ", "HISTFILE": "/dev/null"}


CAPTURE_AGENT = r"""
import os, re, sys, time, tty
path, rule, idle_line = sys.argv[1:4]
fd = sys.stdin.fileno()
tty.setraw(fd)
with open(path, "rb") as f:
    os.write(1, f.read())
# the terminal's answers to the capture's queries (device attributes, colours...) are no key
reply = re.compile(r"\x1b(?:\[[?>]?[\d;]*[$]?[a-zA-Z~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|P[^\x1b]*\x1b\\)")
key = ""
while not key:
    key = reply.sub("", os.read(fd, 256).decode(errors="replace"))[:1]
os.write(1, ("\x1b[2J\x1b[H answered %s\r\n%s\r\n❯ \r\n%s\r\n%s\r\n" % (key, rule, rule, idle_line)).encode())
time.sleep(600)
"""


def capture_agent(path: Path) -> list[str]:
    """Replays a raw capture of the real CLI, then waits for one key and says which it got."""
    return [sys.executable, "-c", CAPTURE_AGENT, str(path), RULE, IDLE_LINE]


# Chromium logs every refused HTTP request and every failed WebSocket handshake in the console;
# a 4xx the page asked for and explains (a refused send, a bad form field) or a connection the
# page is retrying while the server restarts is no error of the page.
_EXPECTED_NOISE = (
    "Failed to load resource: the server responded with a status of 409",
    "Failed to load resource: the server responded with a status of 422",
)
_NETWORK_NOISE = (
    "Failed to load resource: net::ERR_CONNECTION_REFUSED",
    "WebSocket connection to",
    "Failed to load resource: the server responded with a status of 401",
    "Failed to load resource: the server responded with a status of 403",
)


_GONE = "Failed to load resource: the server responded with a status of 404"
_SESSION_READ = re.compile(r"/api/sessions/[^/]+(?:/screen|/changes)?$")


def console_errors(errors: list[str], *, network_down: bool = False):
    """A ``page.on("console", …)`` handler that records the page's console errors."""
    noise = _EXPECTED_NOISE + (_NETWORK_NOISE if network_down else ())

    def on_console(msg: Any) -> None:
        if msg.type != "error" or msg.text.startswith(noise):
            return
        # a session deleted while the page read it (its record, its screen): the page drops it
        if msg.text.startswith(_GONE) and _SESSION_READ.search((msg.location or {}).get("url", "")):
            return
        errors.append(msg.text)

    return on_console
