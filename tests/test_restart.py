"""Agents outlive the server (tmux host): SIGKILL a real ``panewatch serve`` with live sessions,
start it again, and find the same sessions, the same agent processes, the right states, the
screen as it was, a blocked prompt still answerable; a killed tmux server makes them ``lost``;
a generated token survives the restart; the registry and state folder fail in one line."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dashboard_support import free_port
from panewatch.hosts.tmux import tmux_usable
from panewatch_lab.serve_proc import ServeProcess, env_without_panewatch, serve_argv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}"),
]

REPO = Path(__file__).resolve().parents[1]
TOKEN = "restart-test-token-0123456789"


class Service:
    def __init__(self, state: Path, *extra: str, token: str | None = TOKEN) -> None:
        self.state, self.extra, self.token = state, extra, token
        self.port = free_port()
        self.serve: ServeProcess | None = None
        self.log = state.parent / "server.log"  # every start appends to it

    def start(self) -> Service:
        extra = ["--sweep-ms", "150", "--pane-host", "tmux", "--state-dir", str(self.state), *self.extra]
        env = env_without_panewatch()
        self.serve = ServeProcess(self.token, extra, port=self.port, env=env, log=self.log, cwd=REPO).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=15)

    def kill(self) -> None:
        assert self.serve is not None and self.serve.proc is not None
        self.serve.proc.send_signal(signal.SIGKILL)
        self.serve.proc.wait(10)

    def stop(self) -> None:
        if self.serve is not None:
            self.serve.stop(grace=15)


def wait_for(check, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def by_name(client: httpx.Client) -> dict[str, dict]:
    return {s["name"]: s for s in client.get("/api/sessions").json()["sessions"]}


def screen_text(client: httpx.Client, sid: str) -> str:
    return "\n".join(client.get(f"/api/sessions/{sid}/screen").json()["rows"])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def state(tmp_path: Path):
    folder = tmp_path / "state"
    yield folder
    subprocess.run(["tmux", "-S", str(folder / "tmux.sock"), "kill-server"], capture_output=True, check=False)


#: Claude Code's working screen, its spinner row redrawn at 10 Hz (the claude manifest: working)
SPINNER = [
    sys.executable,
    "-c",
    """
import sys, time
rule = "\u2500" * 60
sys.stdout.write("\\r\\n".join(["* Working...", "", rule, "\u276f ", rule, "  esc to interrupt"]))
i = 0
while True:
    sys.stdout.flush()
    time.sleep(0.1)
    i += 1
    sys.stdout.write("\\x1b7\\x1b[5A\\r\\x1b[2K%s Working... (%ds)\\x1b8" % ("|/-\\\\"[i % 4], i // 10))
""",
]


def agent_env(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(kv.decode().split("=", 1) for kv in f.read().split(b"\0") if b"=" in kv)


def test_sigkilled_server_restarts_and_adopts_every_session(state: Path, tmp_path: Path) -> None:
    casts = tmp_path / "casts"
    svc = Service(state, "--transcripts", str(casts)).start()
    try:
        with svc.client() as c:

            def create(name: str, command: list[str], agent: str | None = None) -> dict:
                body = {"name": name, "command": command, "rows": 20, "cols": 80, "hooks": False}
                if agent:
                    body["agent"] = agent
                r = c.post("/api/sessions", json=body)
                assert r.status_code == 201, r.text
                return r.json()

            marker = create("marker", ["sh", "-c", "printf 'MARKER-%s\\n' 4242; exec sleep 1000"])
            go = tmp_path / "go"  # once answered, the agent's hook reports when this file appears
            hook = (
                f"while [ ! -e {go} ]; do sleep 0.1; done; curl -s -o /dev/null -w '%{{http_code}}' "
                "--unix-socket \"$PANEWATCH_REPORT_SOCKET\" -X POST -H 'Content-Type: application/json' "
                '--data \'{"state":"blocked","detail":"hook after restart"}\' '
                f"http://panewatch/report > {go}.part && mv {go}.part {go}.code"
            )
            prompt = create(
                "prompt",
                ["bash", "-c", f"read -p 'Proceed? [y/N] ' a; echo \"got=$a\"; {hook}; exec sleep 1000"],
                agent="shell",
            )
            create("spinner", SPINNER, agent="claude")
            # it pauses before exiting, as a real command does: tmux 3.3a can lose the last bytes
            # of a process that writes and exits in one instant (see test_host_contract, README)
            done = create("done", ["sh", "-c", "echo DONE-OUTPUT; sleep 0.2; exit 3"])
            wait_for(lambda: by_name(c)["prompt"]["state"] == "blocked", what="the prompt blocked")
            wait_for(lambda: by_name(c)["spinner"]["state"] == "working", what="the spinner working")
            wait_for(lambda: by_name(c)["done"]["state"] == "exited", what="the command exited")
            wait_for(lambda: "MARKER-4242" in screen_text(c, marker["id"]), what="the marker")
            prompt_cast = casts / f"{prompt['id']}.cast"  # recordings reach the file within 0.25 s
            wait_for(
                lambda: prompt_cast.exists() and b'"o", "Proceed?' in prompt_cast.read_bytes(),
                what="the prompt in its recording",
            )
            before = by_name(c)
        svc.kill()
        for s in before.values():
            if s["name"] != "done":
                assert alive(s["pid"]), f"{s['name']} died with the server"

        svc2 = Service(state, "--transcripts", str(casts)).start()
        try:
            with svc2.client() as c:
                after = by_name(c)
                assert {n: s["id"] for n, s in after.items()} == {n: s["id"] for n, s in before.items()}
                for name in ("marker", "prompt", "spinner"):
                    assert after[name]["pid"] == before[name]["pid"] and alive(after[name]["pid"])
                # the first state is right at once (adoption classifies), not a sweep later
                assert after["prompt"]["state"] == "blocked"
                assert after["spinner"]["state"] == "working"
                assert (after["done"]["state"], after["done"]["exit_code"]) == ("exited", 3)
                assert "MARKER-4242" in screen_text(c, marker["id"])
                shown = screen_text(c, done["id"])
                assert "DONE-OUTPUT" in shown, (
                    shown,
                    subprocess.run(
                        [
                            "tmux",
                            "-S",
                            str(state / "tmux.sock"),
                            "capture-pane",
                            "-p",
                            "-S",
                            "-3",
                            "-t",
                            after["done"]["ref"] or "?",
                        ],
                        capture_output=True,
                        text=True,
                    ),
                    after["done"],
                    svc2.log.read_text()[-3000:],
                )
                r = c.post(f"/api/sessions/{prompt['id']}/answer", json={"keys": "y\r", "confirm": True})
                assert r.status_code == 200, r.text
                assert r.json()["took"] is True
                wait_for(lambda: "got=y" in screen_text(c, prompt["id"]), what="the answer on screen")
                # its hooks keep reporting after the restart: over the report socket (same name),
                # identified by their ancestry up to the adopted pane's root pid; no token in its env
                env = agent_env(after["prompt"]["pid"])
                assert "PANEWATCH_REPORT_TOKEN" not in env and "PANEWATCH_TOKEN" not in env
                go.touch()
                wait_for(lambda: Path(f"{go}.code").exists(), what="the hook's report")
                assert Path(f"{go}.code").read_text() == "202"
                reported = wait_for(
                    lambda: (s := by_name(c)["prompt"])["source"] == "hook" and s, what="the hook's state"
                )
                assert reported["state"] == "blocked" and "hook after restart" in reported["why"]
                r = httpx.post(
                    f"{svc2.url}/report?session={prompt['id']}",
                    json={"state": "idle"},
                    headers={"Authorization": "Bearer not-the-token"},
                )
                assert r.status_code == 403
                # the recording goes on in the same file
                cast = casts / f"{prompt['id']}.cast"
                wait_for(lambda: b"got=y" in cast.read_bytes(), what="the answer in the recording")
                text = cast.read_text()
                assert text.count('"version": 2') == 1
                assert any('"o"' in line and "Proceed?" in line for line in text.splitlines()[1:])
                assert "adopted by a restarted server" in text

                # the tmux server killed under a running Panewatch: lost, with why, within a sweep
                subprocess.run(["tmux", "-S", str(state / "tmux.sock"), "kill-server"], check=True)
                lost = wait_for(
                    lambda: (s := by_name(c))["spinner"]["state"] == "lost" and s, timeout=5, what="the sessions lost"
                )
                assert lost["spinner"]["error"] == "the tmux server is gone"
                assert c.get("/healthz").status_code == 200  # still serving
                assert "MARKER-4242" in screen_text(c, marker["id"])  # the last screen stays
        finally:
            svc2.stop()

        # a third start: the tmux server is gone, so every session is shown lost, never dropped
        svc3 = Service(state).start()
        try:
            with svc3.client() as c:
                third = by_name(c)
                assert set(third) == set(before)
                assert {s["state"] for n, s in third.items() if n != "done"} == {"lost"}
                assert "MARKER-4242" in screen_text(c, marker["id"])
                # the card's offer comes with the record, and says the same as the endpoint
                assert third["marker"]["resume"]["possible"] is False
                assert "no resume command" in third["marker"]["resume"]["why"]
                r = c.post(f"/api/sessions/{marker['id']}/resume")
                assert r.status_code == 409 and "no resume command" in r.json()["detail"]
                r = c.delete(f"/api/sessions/{marker['id']}")
                assert r.status_code == 200
                assert marker["id"] not in {s["id"] for s in c.get("/api/sessions").json()["sessions"]}
        finally:
            svc3.stop()
    finally:
        svc.stop()


def test_generated_token_survives_a_restart(state: Path) -> None:
    svc = Service(state, token=None)
    svc.start()
    try:
        token = (state / "token").read_text().strip()
        assert (state / "token").stat().st_mode & 0o777 == 0o600
        with svc.client(token) as c:
            assert c.get("/api/sessions").status_code == 200
        svc.kill()
        svc.start()
        with svc.client(token) as c:
            assert c.get("/api/sessions").status_code == 200  # the dashboard is not logged out
    finally:
        svc.stop()


def test_delete_kills_the_tree_and_the_window(state: Path) -> None:
    svc = Service(state).start()
    try:
        with svc.client() as c:
            r = c.post(
                "/api/sessions",
                json={"name": "tree", "command": ["sh", "-c", "sleep 1001 & sleep 1002"], "hooks": False},
            )
            sid, pid = r.json()["id"], r.json()["pid"]
            time.sleep(0.5)
            out = subprocess.run(["pgrep", "-f", "sleep 100[12]"], capture_output=True, text=True).stdout.split()
            assert len(out) >= 2
            assert c.delete(f"/api/sessions/{sid}").status_code == 200
            wait_for(lambda: not any(alive(int(p)) for p in out) and not alive(pid), what="the tree gone")
            windows = subprocess.run(
                ["tmux", "-S", str(state / "tmux.sock"), "list-sessions", "-F", "#{session_name}"],
                capture_output=True,
                text=True,
            ).stdout.split()
            assert sid not in windows
            r = c.post("/api/sessions", json={"name": "gone", "command": ["true"], "hooks": False})
            gone = r.json()["id"]
            wait_for(lambda: c.get(f"/api/sessions/{gone}").json()["state"] == "exited", what="the exit")
            assert c.delete(f"/api/sessions/{gone}").status_code == 200
            windows = subprocess.run(
                ["tmux", "-S", str(state / "tmux.sock"), "list-sessions", "-F", "#{session_name}"],
                capture_output=True,
                text=True,
            ).stdout.split()
            assert gone not in windows  # an exited agent's window goes with it too
    finally:
        svc.stop()


def test_bad_state_folder_and_registry_are_one_line(state: Path, tmp_path: Path) -> None:
    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            serve_argv(0, TOKEN, args),
            capture_output=True,
            text=True,
            timeout=60,
            env=env_without_panewatch(),
            cwd=REPO,
        )

    state.mkdir(mode=0o700)
    (state / "sessions.sqlite3").write_bytes(b"garbage" * 1000)
    r = serve("--state-dir", str(state))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .startswith(f"panewatch: the session registry {state}/sessions.sqlite3 is damaged")
    )
    os.remove(state / "sessions.sqlite3")
    sqlite3.connect(state / "sessions.sqlite3").execute("PRAGMA user_version=99").connection.commit()
    r = serve("--state-dir", str(state))
    assert r.returncode == 2 and "written by a newer Panewatch" in r.stderr and "Traceback" not in r.stderr
    # another program's database under our name: refused in one line, not a byte of it rewritten
    os.remove(state / "sessions.sqlite3")
    foreign = sqlite3.connect(state / "sessions.sqlite3")
    foreign.execute("CREATE TABLE bookmarks (url TEXT)")
    foreign.commit()
    foreign.close()
    before = (state / "sessions.sqlite3").read_bytes()
    r = serve("--state-dir", str(state))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"panewatch: {state}/sessions.sqlite3 is not a Panewatch session registry (its tables: bookmarks); "
        "move it aside or use another --state-dir"
    )
    assert (state / "sessions.sqlite3").read_bytes() == before
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 4321, 4321)
    r = serve("--state-dir", str(other))
    assert r.returncode == 2 and "belongs to another user" in r.stderr and "Traceback" not in r.stderr
