"""The sandbox (issue 25): where the sandbox goes in a launch (after a user switch, before the
agent), what it hides and lets back in, what it refuses with a clear 4xx, what ``serve`` says
when it cannot contain, and that the real bwrap it starts refuses TIOCSTI and hides the state
folder while the agent keeps its terminal, its environment and its exit status."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from live import live_server
from panewatch.config import Settings
from panewatch.hosts.base import LaunchSpec
from panewatch.hosts.pty import PtyHost
from panewatch.procs.sandbox import Policy, Sandbox, Uncontainable, legacy_tiocsti, sandbox_for, tmux_default_folder

HAVE_BWRAP = shutil.which("bwrap") is not None


async def started(policy: Policy | None) -> Sandbox:
    sandbox = Sandbox(policy)
    await sandbox.start()
    if policy is not None and policy.bwrap == "bwrap" and not sandbox.active:
        pytest.skip(f"bubblewrap cannot make a sandbox here: {sandbox.lost}")
    return sandbox


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    (folder / "report").mkdir(parents=True)
    return folder


@pytest.mark.integration
async def test_the_sandbox_goes_after_a_user_switch_and_before_the_agent(state: Path) -> None:
    sandbox = await started(Policy(state, others_pass=True))  # agent_users: the filter is reachable
    env = {"PANEWATCH_REPORT_SOCKET": str(state / "report" / "report.sock")}
    argv = sandbox.wrap(["sudo", "-u", "agent", "--", "nice", "-n", "5", "claude", "--resume", "x"], env)
    bwrap = next(i for i, word in enumerate(argv) if word.endswith("/bwrap"))
    assert argv[:4] == ["sudo", "-u", "agent", "--"]  # setuid works only outside (no_new_privs)
    assert argv[-3:] == ["claude", "--resume", "x"]
    words = argv[bwrap:]
    for needed in ("--unshare-pid", "--die-with-parent", "--proc", "--dev"):
        assert needed in words
    assert words[words.index("--cap-drop") + 1] == "ALL"  # as root, bwrap keeps every capability otherwise
    hide = words.index(str(state.resolve()))
    assert words[hide - 1] == "--tmpfs"
    folder = str((state / "report").resolve())
    assert words.index(folder) > hide and words[words.index(folder) - 1] == "--bind"  # the folder, not the socket
    if sandbox.filter is not None:
        assert words[words.index("--seccomp") + 1] == "3" and str(sandbox.filter) in argv[:bwrap]


@pytest.mark.integration
async def test_commands_no_sandbox_can_hold_are_refused_with_the_way_out(state: Path) -> None:
    sandbox = await started(Policy(state))
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    with pytest.raises(Uncontainable, match=r"one string.*sudo -u USER -- COMMAND.*--no-contain"):
        sandbox.wrap(["runuser", "agent", "-c", "claude"], env)
    if shutil.which("su") and os.stat(shutil.which("su") or "").st_mode & 0o4000:
        with pytest.raises(Uncontainable, match="setuid"):
            sandbox.wrap(["su", "-c", "claude", "agent"], env)
    assert sandbox.wrap(["sh", "-c", "claude"], env)[-3:] == ["sh", "-c", "claude"]  # a shell is an agent here


@pytest.mark.integration
async def test_a_user_switch_on_a_private_state_folder_is_refused_where_the_filter_is_needed(state: Path) -> None:
    """The other user could not read the filter in a 0700 folder: refused with the way out, at once."""
    sandbox = await started(Policy(state))
    if sandbox.filter is None:
        assert sandbox.wrap(["sudo", "-u", "agent", "--", "claude"], {})[:4] == ["sudo", "-u", "agent", "--"]
        return
    with pytest.raises(Uncontainable, match=r"another user.*--agent-users USER.*--no-contain"):
        sandbox.wrap(["sudo", "-u", "agent", "--", "claude"], {})
    assert sandbox.wrap(["nice", "claude"], {})[-1] == "claude"  # no switch: contained as before


@pytest.mark.unit
def test_the_settings_hide_the_server_s_secrets(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-of-the-user\n")
    settings = Settings(token_file=token, transcripts=tmp_path / "casts")
    policy = sandbox_for(settings, tmp_path / "state").policy
    assert policy is not None
    assert token in policy.secrets and tmp_path / "casts" in policy.secrets
    assert tmux_default_folder() in policy.secrets  # the user's own tmux servers
    assert sandbox_for(Settings(contain=False), tmp_path).policy is None


@pytest.mark.unit
async def test_without_bubblewrap_serve_says_once_what_is_lost_and_runs_uncontained(
    state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "panewatch.procs.sandbox")
    sandbox = Sandbox(Policy(state, bwrap="no-such-bwrap-here"))
    await sandbox.start()
    await sandbox.start()  # a second host sharing it: still said once
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "NOT contained" in warnings[0] and "bubblewrap is not installed" in warnings[0]
    assert "/dev/pts" in warnings[0] and "--no-contain" in warnings[0]
    assert not sandbox.active and sandbox.wrap(["claude"], {}) == ["claude"]


@pytest.mark.unit
async def test_containment_off_warns_when_tiocsti_is_open(state: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "panewatch.procs.sandbox")
    await Sandbox(None).start()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "not contained" in said
    assert ("legacy_tiocsti is 1" in said) == legacy_tiocsti()


@pytest.mark.unit
async def test_a_sandbox_not_started_refuses_instead_of_running_uncontained(state: Path) -> None:
    with pytest.raises(Uncontainable, match="not ready"):
        Sandbox(Policy(state)).wrap(["claude"], {})


class Sink:
    def __init__(self) -> None:
        self.out = bytearray()
        self.exits: list[int | None] = []

    def on_output(self, data: bytes) -> None:
        self.out += data

    def on_exit(self, code: int | None, reason: str) -> None:
        self.exits.append(code)

    def on_status(self, state: str, detail: str) -> None:
        raise AssertionError("a byte host never reports a status")


PROBE = r"""
import fcntl, os, sys, termios
state = sys.argv[1]
print("tty", os.isatty(0), os.ttyname(0))
print("state", sorted(os.listdir(state)))
print("env", os.environ.get("ONLY_MINE", "-"))
print("pgrp-holds-terminal", os.tcgetpgrp(0) == os.getpgrp() == os.getpid())
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"#")
    print("tiocsti open")
except OSError as exc:
    print("tiocsti refused", exc.errno)
m, s = os.openpty()
print("own ptys", os.ttyname(s).startswith("/dev/pts/"))
sys.exit(5)
"""


@pytest.mark.integration
@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed (apt-get install bubblewrap)")
async def test_in_the_real_sandbox_the_agent_keeps_its_terminal_env_and_status(state: Path) -> None:
    (state / "token").write_text("secret\n")
    host = PtyHost(sandbox=Sandbox(Policy(state)))
    await host.start()
    sandbox = host.sandbox
    assert sandbox is not None
    if not sandbox.active:
        pytest.skip(f"bubblewrap cannot make a sandbox here: {sandbox.lost}")
    sink = Sink()
    env = {**os.environ, "ONLY_MINE": "kept", "PANEWATCH_REPORT_SOCKET": str(state / "report" / "r.sock")}
    handle = await host.spawn(LaunchSpec("sb1", (sys.executable, "-c", PROBE, str(state)), "/", env, 10, 80), sink)
    for _ in range(500):
        if sink.exits:
            break
        await asyncio.sleep(0.01)
    text = sink.out.decode(errors="replace")
    assert sink.exits == [5], text  # the agent's own status, through bwrap
    assert "tty True" in text and "pgrp-holds-terminal True" in text and "own ptys True" in text
    assert "state ['report']" in text, text  # the token, the registry, the tmux socket: hidden
    assert "env kept" in text
    assert ("tiocsti refused 1" in text) if sandbox.filter else True, text
    handle.close()
    await host.stop()


@pytest.mark.integration
@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed (apt-get install bubblewrap)")
async def test_an_opaque_user_switch_is_a_422_at_create_time(tmp_path: Path) -> None:
    async with live_server(state_dir=tmp_path / "state") as server:
        host = server.engine.hosts.default
        if not host.sandbox.active:
            pytest.skip(f"bubblewrap cannot make a sandbox here: {host.sandbox.lost}")
        r = await server.http.post("/api/sessions", json={"command": ["runuser", "agent", "-c", "claude"]})
        assert r.status_code == 422 and "cannot contain" in r.json()["detail"], r.text
        assert (await server.http.get("/api/sessions")).json()["sessions"] == []
