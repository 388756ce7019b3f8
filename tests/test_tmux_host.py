"""The tmux pane host against a real tmux server: spawn, exact input, output, resize, exit
status, foreground program, whole-tree kill, and adoption by a second host instance."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from panewatch.hosts import LaunchSpec, PaneHandle, PaneHost, SpawnError, WriteRefused
from panewatch.hosts.tmux import PaneInfo, TmuxError, TmuxHost, quote, seed_bytes, tmux_usable, tree_members, unescape
from panewatch.procs.procinfo import program_name
from panewatch.procs.proctree import descendants
from panewatch.procs.sandbox import Policy, Sandbox
from panewatch.screen import Screen
from panewatch.states import State

pytestmark = pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}")

RAW_READER = r"""
import os, sys, tty
tty.setraw(0)
print("ready", flush=True)
with open(sys.argv[1], "wb") as out:
    while True:
        data = os.read(0, 4096)
        out.write(data)
        out.flush()
"""


class Sink:
    """Collects what a host delivers, and can render it on a real screen."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.exits: list[tuple[int | None, str]] = []
        self.changed = asyncio.Event()

    def on_output(self, data: bytes) -> None:
        self.data += data
        self.changed.set()

    def on_exit(self, code: int | None, reason: str) -> None:
        self.exits.append((code, reason))
        self.changed.set()

    def on_change(self) -> None:
        raise AssertionError("a byte host never reports a change")

    def on_status(self, state: State, why: str, event: str) -> None:
        raise AssertionError("a byte host never reports a status")

    def screen(self, rows: int = 24, cols: int = 80) -> Screen:
        screen = Screen(rows, cols)
        screen.feed(bytes(self.data))
        return screen


async def until(check, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.environ.get("HOME", "/root"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
    }


def spec(session: str, *argv: str, rows: int = 24, cols: int = 80, cwd: str | None = None) -> LaunchSpec:
    return LaunchSpec(session=session, argv=argv, cwd=cwd or os.getcwd(), env=env(), rows=rows, cols=cols)


@pytest.fixture
async def host(tmp_path: Path):
    h = TmuxHost(tmp_path / "state")
    await h.start()
    yield h
    await h.stop()
    await h.kill_server()


def windows(h: TmuxHost) -> list[str]:
    out = subprocess.run(
        ["tmux", "-S", str(h.socket), "list-windows", "-a", "-F", "#{session_name} #{window_name}"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return out.split("\n")


@pytest.mark.unit
def test_quote_and_unescape_round_trip_every_byte() -> None:
    data = bytes(range(1, 256))
    assert quote(data).startswith('"') and "\n" not in quote(data) and "$" not in quote(data)
    escaped = b"".join(b"\\%03o" % c if c < 0x20 or c == 0x5C else bytes([c]) for c in data)
    assert unescape(escaped) == data
    spinner = b"\x1b7\x1b[5A\r\x1b[2K\xe2\xa0\x8b Working\xe2\x80\xa6 (esc to interrupt)\x1b8\\"
    assert unescape(b"".join(b"\\%03o" % c if c < 0x20 or c == 0x5C else bytes([c]) for c in spinner)) == spinner
    # what the C decoder refuses (never sent by tmux) is decoded by the plain routine: escapes
    # decoded, a lone backslash kept
    assert unescape(b"a\\033b\\x") == b"a\x1bb\\x"
    assert unescape(b"end\\") == b"end\\"


@pytest.mark.integration
async def test_host_is_the_seam(host: TmuxHost) -> None:
    assert isinstance(host, PaneHost)
    pane = await host.spawn(spec("s1", "sh", "-c", "sleep 30"), Sink())
    assert isinstance(pane, PaneHandle)
    assert pane.answers_queries and pane.ref.startswith("%") and pane.pid and pane.alive
    assert (host.state_dir.stat().st_mode & 0o777) == 0o700
    assert (host.socket.stat().st_mode & 0o077) == 0  # tmux toggles the owner's x bit itself


@pytest.mark.integration
async def test_output_arrives_and_input_is_exact_bytes(host: TmuxHost, tmp_path: Path) -> None:
    out = tmp_path / "got.bin"
    sink = Sink()
    pane = await host.spawn(spec("raw1", sys.executable, "-c", RAW_READER, str(out)), sink)
    await until(lambda: b"ready" in sink.data, what="the reader's first output")
    data = bytes(range(256)) + "é✓ \x1b[A\r\n".encode() + b"x" * 40_000  # NUL, controls, UTF-8, >1 chunk
    pane.write(data)
    await until(lambda: out.exists() and out.stat().st_size >= len(data), what="every byte")
    assert out.read_bytes() == data


@pytest.mark.integration
async def test_resize_reaches_the_agent(host: TmuxHost) -> None:
    sink = Sink()
    pane = await host.spawn(spec("rs1", "sh", "-c", "stty size; read x; stty size; sleep 30", rows=24, cols=80), sink)
    await until(lambda: b"24 80" in sink.data, what="the first size")
    pane.resize(20, 90)
    await asyncio.sleep(0.1)
    pane.write(b"\r")
    await until(lambda: b"20 90" in sink.data, what="the new size")


@pytest.mark.integration
async def test_exit_status_and_signal(host: TmuxHost) -> None:
    sink = Sink()
    pane = await host.spawn(spec("ex1", "sh", "-c", "echo bye; exit 7"), sink)
    await until(lambda: sink.exits, what="the exit")
    assert sink.exits == [(7, "exited with status 7")]
    assert b"bye" in sink.data  # the last output comes before the exit
    assert not pane.alive and pane.foreground_pgid() is None
    with pytest.raises(WriteRefused):
        pane.write(b"x")
    sink2 = Sink()
    await host.spawn(spec("ex2", "sh", "-c", "kill -TERM $$"), sink2)
    await until(lambda: sink2.exits, what="the death by signal")
    assert sink2.exits[0][0] == -signal.SIGTERM and "SIGTERM" in sink2.exits[0][1]


@pytest.mark.integration
async def test_foreground_program_and_signal(host: TmuxHost) -> None:
    sink = Sink()
    pane = await host.spawn(spec("fg1", "sh"), sink)
    await until(lambda: pane.foreground_pgid() == pane.pid, what="the shell in the foreground")
    pane.write(b"sleep 30\r")
    await until(lambda: pane.foreground_pgid() not in (None, pane.pid), what="sleep in the foreground")
    program = program_name(pane.foreground_pgid())
    assert program is not None and program.name == "sleep"
    pane.signal(signal.SIGINT)  # reaches the foreground group: the shell is back
    await until(lambda: pane.foreground_pgid() == pane.pid, what="the shell back after ^C")
    assert pane.alive


@pytest.mark.integration
async def test_terminate_kills_the_whole_tree_and_the_window(host: TmuxHost) -> None:
    sink = Sink()
    # a setsid grandchild whose parent is gone is no descendant any more: its marker finds it
    pane = await host.spawn(
        spec("kt1", "sh", "-c", "trap '' HUP; sleep 1000 & (setsid sleep 1001 &); sleep 1002"), sink
    )
    await until(lambda: len(tree_members("kt1", pane.marker, pane.pid)) >= 4, what="the children")
    pids = tree_members("kt1", pane.marker, pane.pid)
    assert pids - descendants(pane.pid), "the setsid grandchild left the tree (its parent exited)"
    assert any(s == "kt1" for s in " ".join(windows(host)).split())
    code = await pane.terminate(grace=0.3)
    assert code == -signal.SIGKILL  # it ignored SIGHUP
    await until(lambda: not any(os.path.exists(f"/proc/{p}") and _not_zombie(p) for p in pids), what="the tree gone")
    assert not any(line.startswith("kt1 ") for line in windows(host))
    assert "kt1" not in await host.list_sessions()


@pytest.mark.integration
async def test_a_server_of_another_folder_with_the_same_session_id_never_kills_its_agents(
    host: TmuxHost, tmp_path: Path
) -> None:
    """Agents are found by a marker in their environment; two servers (two test workers did) with
    a session of the same id must not find each other's: the marker names the state folder too."""
    other = TmuxHost(tmp_path / "other-state")
    await other.start()
    try:
        mine = await host.spawn(spec("same1", "sh", "-c", "sleep 1000 & sleep 1001"), Sink())
        theirs = await other.spawn(spec("same1", "sh", "-c", "sleep 1000 & sleep 1001"), Sink())
        await until(lambda: len(tree_members("same1", mine.marker, mine.pid)) >= 3, what="my children")
        await until(lambda: len(tree_members("same1", theirs.marker, theirs.pid)) >= 3, what="their children")
        mine_before = tree_members("same1", mine.marker, mine.pid)
        assert mine.marker != theirs.marker
        await theirs.terminate(grace=0.3)
        assert all(_not_zombie(p) for p in mine_before), "the other server's DELETE killed my agent"
        assert mine.alive
    finally:
        await other.stop()
        await other.kill_server()


def _not_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.integration
async def test_failed_spawn_leaves_no_window(host: TmuxHost, tmp_path: Path) -> None:
    before = windows(host)
    with pytest.raises(SpawnError, match="not found"):
        await host.spawn(spec("bad1", "/no/such/program"), Sink())
    with pytest.raises(SpawnError, match="does not exist"):
        await host.spawn(spec("bad2", "sh", cwd=str(tmp_path / "missing")), Sink())
    assert windows(host) == before


@pytest.mark.integration
async def test_a_command_far_over_tmux_s_command_limit_runs_whole(host: TmuxHost) -> None:
    """tmux refuses a command line over ~16 KB: the pane exited 127 after a 201. The command and
    its environment now reach the pane in a launch script, which deletes itself."""
    sink = Sink()
    arg, big = "a" * 40_000, "b" * 50_000
    launch = LaunchSpec(
        "long1", ("sh", "-c", 'echo "got ${#1} ${#BIG}"', "sh", arg), os.getcwd(), {**env(), "BIG": big}, 24, 80
    )
    await host.spawn(launch, sink)
    await until(lambda: sink.exits, what="the exit")
    assert sink.exits[0][0] == 0 and b"got 40000 50000" in sink.data
    assert not list((host.state_dir / "launch").iterdir()), "the launch script removed itself"


@pytest.mark.integration
async def test_a_second_host_adopts_the_pane_with_its_screen(host: TmuxHost, tmp_path: Path) -> None:
    sink = Sink()
    pane = await host.spawn(spec("ad1", "sh", rows=10, cols=40), sink)
    pid, ref = pane.pid, pane.ref
    await until(lambda: sink.data, what="the prompt")
    pane.write(b"printf '\\033[31mMARKER\\033[0m\\n'; printf '\\033[?2004h'\r")
    await until(lambda: b"MARKER\x1b[0m\r\n" in sink.data, what="the marker")
    await asyncio.sleep(0.2)
    before = sink.screen(10, 40)
    pane.close()
    await host.stop()  # the agent keeps running

    second = TmuxHost(tmp_path / "state")
    await second.start()
    try:
        sink2 = Sink()
        assert await second.adopt(ref, "someone-else", Sink()) is None  # the id names another session
        adopted = await second.adopt(ref, "ad1", sink2)
        assert adopted is not None and adopted.pid == pid and adopted.alive
        screen = sink2.screen(10, 40)
        assert screen.lines() == before.lines()
        assert (screen.cursor.row, screen.cursor.col) == (before.cursor.row, before.cursor.col)
        marker_row = next(i for i, line in enumerate(screen.lines()) if line.startswith("MARKER"))
        assert screen.styles()[marker_row][0][:2] == [6, "red"]  # colours come along
        assert screen.mode(2004)  # bracketed paste remembered through the window option
        adopted.write(b"echo again\r")
        await until(lambda: b"again" in sink2.data[len(sink2.data) - 200 :], what="live output after adoption")
        assert await second.adopt("%99999", "ad1", Sink()) is None
    finally:
        await second.stop()


@pytest.mark.integration
async def test_a_contained_pane_is_adopted_contained(tmp_path: Path) -> None:
    """The window says the pane runs in a sandbox: the next server signals the agent inside (never
    bwrap, which would die of it) and knows it as the launched process (the shell-back signal)."""
    state = tmp_path / "state"
    first = TmuxHost(state, sandbox=Sandbox(Policy(state)))
    await first.start()
    if not first.sandbox or not first.sandbox.active:
        await first.stop()
        await first.kill_server()
        pytest.skip(f"bubblewrap cannot make a sandbox here: {first.sandbox.lost if first.sandbox else '-'}")
    second = TmuxHost(state, sandbox=Sandbox(Policy(state)))
    try:
        pane = await first.spawn(spec("cad1", "sh"), Sink())
        await until(lambda: pane.agent_pid is not None and pane.foreground_pgid() == pane.agent_pid, what="the shell")
        shell = pane.agent_pid
        pane.close()
        await first.stop()
        await second.start()
        adopted = await second.adopt(pane.ref, "cad1", Sink())
        assert adopted is not None and adopted.contained and adopted.agent_pid == shell != adopted.pid
        adopted.write(b"sleep 30\r")
        await until(lambda: adopted.foreground_pgid() not in (None, shell), what="sleep in the foreground")
        adopted.signal(signal.SIGINT)
        await until(lambda: adopted.foreground_pgid() == shell, what="the shell back after ^C")
        assert adopted.alive
        await adopted.terminate(grace=0.5)
    finally:
        await second.stop()
        await second.kill_server()


@pytest.mark.integration
async def test_adopting_an_exited_pane_gives_its_last_screen_and_status(host: TmuxHost, tmp_path: Path) -> None:
    sink = Sink()
    pane = await host.spawn(spec("de1", "sh", "-c", "echo LAST-WORDS; exit 3", rows=8, cols=40), sink)
    await until(lambda: sink.exits, what="the exit")
    ref = pane.ref
    await host.stop()
    second = TmuxHost(tmp_path / "state")
    await second.start()
    try:
        sink2 = Sink()
        adopted = await second.adopt(ref, "de1", sink2)
        assert adopted is not None and not adopted.alive
        assert sink2.exits == [(3, "exited with status 3")]
        lines = sink2.screen(8, 40).lines()
        assert lines[0].startswith("LAST-WORDS") and not any("Pane is dead" in line for line in lines)
    finally:
        await second.stop()


@pytest.mark.integration
async def test_orphan_windows_are_removed_but_known_ones_kept(host: TmuxHost) -> None:
    kept = await host.spawn(spec("keep1", "sleep", "1000"), Sink())
    orphan = await host.spawn(spec("orph1", "sleep", "1001"), Sink())
    assert await host.remove_orphans({"keep1"}) == ["orph1"]
    await until(lambda: not _not_zombie(orphan.pid), what="the orphan gone")
    assert set(await host.list_sessions()) == {"keep1"} and _not_zombie(kept.pid)


@pytest.mark.integration
async def test_killed_tmux_server_loses_every_pane(host: TmuxHost) -> None:
    sinks = [Sink(), Sink()]
    for i, sink in enumerate(sinks):
        await host.spawn(spec(f"lost{i}", "sleep", "1000"), sink)
    subprocess.run(["tmux", "-S", str(host.socket), "kill-server"], check=True)
    await until(lambda: all(s.exits for s in sinks), what="both panes lost")
    assert all(s.exits == [(None, "the tmux server is gone")] for s in sinks)


@pytest.mark.integration
async def test_socket_of_another_user_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    sock = state / "tmux.sock"
    sock.write_text("")
    os.chown(sock, 12345, 12345)
    with pytest.raises(TmuxError, match="belongs to another user"):
        await TmuxHost(state).start()


@pytest.mark.unit
def test_seed_bytes_paint_an_alternate_screen() -> None:
    info = PaneInfo(
        "%1", 1, "@1", "s", False, None, None, 3, 1, True, True, 20, 4, 0, 3, False, False, "/dev/pts/9", "t"
    )
    screen = Screen(4, 20)
    screen.feed(seed_bytes([b"main screen"], [b"\x1b[1mfull\x1b[0m", b"screen app"], info))
    assert screen.lines()[:2] == ["full", "screen app"]
    assert screen.alternate and (screen.cursor.row, screen.cursor.col) == (1, 3) and screen.title == "t"
    screen.feed(b"\x1b[?1049l")
    assert screen.lines()[0].startswith("main screen")


@pytest.mark.unit
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_tmux_usable_names_what_is_missing() -> None:
    assert tmux_usable("no-such-tmux-binary") is not None and "not installed" in tmux_usable("no-such-tmux-binary")


@pytest.mark.integration
async def test_start_and_spawn_start_no_process_on_the_event_loop(tmp_path: Path, monkeypatch) -> None:
    """Issue 26 item 4, spawning never blocks the loop: every process the host starts (``tmux -V``
    in ``check_ready``, the server, the control client, the spawn's tmux call) is forked in a
    worker thread, never on the loop's."""
    loop_thread = threading.get_ident()
    started: list[tuple[list[str], int]] = []
    real = subprocess.Popen

    class Recorded(real):  # type: ignore[valid-type,misc]
        def __init__(self, args, *rest, **kwargs) -> None:
            started.append(([str(a) for a in args], threading.get_ident()))
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    h = TmuxHost(tmp_path / "state")
    try:
        await h.start()
        await h.spawn(spec("offloop", sys.executable, "-c", "import time; time.sleep(30)"), Sink())
    finally:
        await h.stop()
        await h.kill_server()
    argvs = [argv for argv, _ in started]
    assert any("-V" in argv for argv in argvs), "tmux -V was seen"
    assert any("-C" in argv for argv in argvs), "the control client was seen"
    assert any("new-session" in argv for argv in argvs), "the spawn's tmux call was seen"
    assert [argv[:4] for argv, thread in started if thread == loop_thread] == []
