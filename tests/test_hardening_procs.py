"""Issue 13, processes: every process a session started dies with it — on DELETE, on the server's
SIGTERM, and at the next start after a SIGKILL — setsid grandchildren, SIGHUP-ignorers and a
double-forked daemon with an empty environment included. Issue 25: the same on the tmux host, in a
sandbox, with a cgroup per pane, and with the marker alone."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from hardening_support import STUBBORN, ServerProcess, host_pids, kill_all, wait_dead, wait_file
from live import live_server
from panewatch.hosts.base import LaunchSpec
from panewatch.hosts.tmux import TmuxHost, TmuxPane, tmux_usable
from panewatch.procs.proctree import MARKER_VAR, Cgroups, Reaper, live
from panewatch.procs.ptyproc import PtyProcess
from panewatch.procs.sandbox import Policy, Sandbox

pytestmark = pytest.mark.integration

HAVE_CGROUPS = Cgroups.detect() is not None
FREEZER_V1 = Path("/sys/fs/cgroup/freezer")


def v1_freezer() -> Cgroups | None:
    """The v1 freezer hierarchy, used when no v2 one is writable (tested here even when v2 is)."""
    base = FREEZER_V1 / "panewatch"
    try:
        base.mkdir(exist_ok=True)
    except OSError:
        return None
    return Cgroups(base, 1) if (FREEZER_V1 / "freezer.state").exists() or (base / "freezer.state").exists() else None


def stubborn_command(out: Path) -> list[str]:
    return ["bash", "--norc", "--noprofile", "-c", STUBBORN, "bash", str(out)]


def _assert_all_dead(pids: list[int], what: str) -> None:
    left = wait_dead(pids, timeout=10)
    kill_all(left)  # never leave them to the next test
    assert left == [], f"{what}: {len(left)} of {len(pids)} processes survived: {left}"


#: The server's two ways to run agents: each in its sandbox (the default), or not (``--no-contain``).
CONTAIN = [True, False]


def _flags(contain: bool) -> list[str]:
    return [] if contain else ["--no-contain"]


@pytest.mark.parametrize("contain", CONTAIN, ids=["contained", "uncontained"])
async def test_delete_kills_setsid_grandchildren_and_sighup_ignorers(tmp_path, contain):
    out = tmp_path / "pids"
    async with live_server(state_dir=tmp_path / "state", contain=contain) as server:
        s = await server.create(command=stubborn_command(out), rows=6, cols=40)
        pids = host_pids([int(x) for x in await asyncio.to_thread(wait_file, out, 4)], s["pid"])
        assert all(live(p) for p in pids)
        r = await server.http.delete(f"/api/sessions/{s['id']}")
        assert r.status_code == 200
        _assert_all_dead(pids, "DELETE")


@pytest.mark.parametrize("contain", CONTAIN, ids=["contained", "uncontained"])
def test_server_sigterm_kills_every_process_of_every_session(tmp_path, contain):
    server = ServerProcess(tmp_path / "state", extra=_flags(contain))
    outs = [tmp_path / f"pids{i}" for i in range(2)]
    roots = [server.create(command=stubborn_command(out), rows=6, cols=40)["pid"] for out in outs]
    pids = [
        p for out, root in zip(outs, roots, strict=True) for p in host_pids(list(map(int, wait_file(out, 4))), root)
    ]
    assert all(live(p) for p in pids)
    server.stop(signal.SIGTERM)
    assert server.proc.returncode is not None
    _assert_all_dead(pids, "server SIGTERM")
    assert not list((tmp_path / "state").glob("panes-*")), "a clean stop leaves no registry behind"


def test_after_a_server_sigkill_the_next_start_kills_the_leftovers(tmp_path):
    state = tmp_path / "state"
    server = ServerProcess(state, extra=_flags(False))
    out = tmp_path / "pids"
    server.create(command=stubborn_command(out), rows=6, cols=40)
    pids = [int(x) for x in wait_file(out, 4)]
    server.stop(signal.SIGKILL)
    survivors = wait_dead(pids, timeout=1.0)
    try:
        assert survivors, "nothing survived a SIGKILL: this test would prove nothing"
        again = ServerProcess(state, extra=_flags(False))
        _assert_all_dead(pids, "next start after SIGKILL")
        err = again.stop(signal.SIGTERM)
        assert "leftover processes" in err, err
    finally:
        kill_all(pids)


def test_a_server_sigkill_leaves_nothing_of_a_contained_pane(tmp_path):
    """The server's death closes the pane's terminal; bwrap dies of the hangup and its namespace
    with it: not even the double fork waits for the next start."""
    server = ServerProcess(tmp_path / "state")
    out = tmp_path / "pids"
    s = server.create(command=stubborn_command(out), rows=6, cols=40)
    pids = host_pids([int(x) for x in wait_file(out, 4)], s["pid"])
    server.stop(signal.SIGKILL)
    _assert_all_dead(pids, "a contained pane after its server's SIGKILL")


@pytest.mark.parametrize("contain", CONTAIN, ids=["contained", "uncontained"])
async def test_an_agent_that_exits_by_itself_leaves_nothing_behind_after_delete(tmp_path, contain):
    """The root exits on its own; its daemon keeps running until the session is deleted (in a
    sandbox it dies with the agent: its PID namespace ends)."""
    out = tmp_path / "pids"
    script = f"(trap '' HUP; exec setsid sleep 1005) & echo $! > {out}; sleep 0.3; exit 3"
    async with live_server(state_dir=tmp_path / "state", contain=contain) as server:
        s = await server.create(command=["bash", "-c", script], rows=6, cols=40)
        pids = host_pids([int(x) for x in await asyncio.to_thread(wait_file, out, 1)], s["pid"])
        await server.wait_state(s["id"], "exited")
        if contain:
            _assert_all_dead(pids, "the contained agent's own exit")
        else:
            assert live(pids[0])
        assert (await server.http.delete(f"/api/sessions/{s['id']}")).status_code == 200
        _assert_all_dead(pids, "DELETE of an exited session")


@pytest.mark.parametrize("kind", ["marker", "cgroup", "cgroup-v1"])
async def test_ptyprocess_terminate_and_close_contain_the_whole_tree(tmp_path, kind):
    cgroups: Cgroups | bool = kind == "cgroup"
    if kind == "cgroup" and not HAVE_CGROUPS:
        pytest.skip("this machine lets the server make no cgroup (no writable freezer / cgroup v2 here)")
    if kind == "cgroup-v1":
        cgroups = v1_freezer() or pytest.skip("no writable v1 freezer hierarchy here")
    reaper = Reaper(tmp_path / "state", cgroups=cgroups)
    reaper.open()
    out = tmp_path / "pids"
    # without a cgroup the marker variable is the net: a child that wipes its environment *and*
    # leaves the tree escapes it (README: Threat model), so the marker variant keeps its env
    script = STUBBORN if cgroups else STUBBORN.replace("env -i ", "")
    cgroups = bool(cgroups)
    exited: list[int] = []
    proc = PtyProcess(
        ["bash", "--norc", "--noprofile", "-c", script, "bash", str(out)],
        on_output=lambda data: None,
        on_exit=exited.append,
        reaper=reaper,
        session="t1",
    )
    assert proc.containment is not None and (proc.containment.cgroup is not None) == cgroups
    pids = [int(x) for x in await asyncio.to_thread(wait_file, out, 4)]
    environ = Path(f"/proc/{pids[0]}/environ").read_bytes()
    assert f"{MARKER_VAR}={proc.containment.marker}".encode() in environ
    await proc.terminate(grace=0.5)
    proc.close()
    _assert_all_dead(pids, f"PtyProcess.terminate ({kind})")
    reaper.close()
    assert not list((tmp_path / "state").glob("panes-*"))


# --- the tmux host (issue 25, item 8): its panes are tmux's children, not the server's ----------

TMUX_MODES = ["contained", "cgroup", "marker"]


def _tmux_host(state: Path, mode: str) -> TmuxHost:
    sandbox = Sandbox(Policy(state)) if mode == "contained" else None
    return TmuxHost(state, sandbox=sandbox, cgroups=mode == "cgroup")


async def _started_tmux(state: Path, mode: str) -> TmuxHost:
    if tmux_usable() is not None:
        pytest.skip(f"tmux host unavailable: {tmux_usable()}")
    state.mkdir(parents=True, exist_ok=True)
    host = _tmux_host(state, mode)
    await host.start()
    if mode == "contained" and not host.sandbox.active:  # type: ignore[union-attr]
        await host.stop()
        await host.kill_server()
        pytest.skip(f"bubblewrap cannot make a sandbox here: {host.sandbox.lost}")  # type: ignore[union-attr]
    if mode == "cgroup" and host.cgroups is None:
        await host.stop()
        await host.kill_server()
        pytest.skip("this machine lets the server make no cgroup (no writable freezer / cgroup v2 here)")
    return host


class _Sink:
    def on_output(self, data: bytes) -> None:
        pass

    def on_exit(self, code: int | None, reason: str) -> None:
        pass

    def on_status(self, state: str, detail: str) -> None:
        pass


def _tmux_spec(session: str, out: Path, script: str) -> LaunchSpec:
    argv = ("bash", "--norc", "--noprofile", "-c", script, "bash", str(out))
    return LaunchSpec(session, argv, os.getcwd(), dict(os.environ), 6, 40)


@pytest.mark.parametrize("mode", TMUX_MODES)
async def test_tmux_delete_kills_setsid_grandchildren_and_an_env_i_double_fork(tmp_path, mode):
    """``env -i setsid sh -c 'sleep &'`` leaves the tree and wipes the marker: a cgroup or the
    sandbox's PID namespace still ends it (the marker alone cannot: README, Threat model)."""
    host = await _started_tmux(tmp_path / "state", mode)
    out = tmp_path / "pids"
    script = STUBBORN if mode != "marker" else STUBBORN.replace("env -i ", "")
    try:
        pane = await host.spawn(_tmux_spec("tk1", out, script), _Sink())
        pids = host_pids([int(x) for x in await asyncio.to_thread(wait_file, out, 4)], pane.pid or 0)
        assert all(live(p) for p in pids)
        await pane.terminate(grace=0.5)
        pane.close()
        _assert_all_dead(pids, f"tmux terminate ({mode})")
        if pane.cgroup is not None:
            assert not pane.cgroup.exists(), "the pane's cgroup goes with it"
    finally:
        await host.stop()
        await host.kill_server()


async def test_a_restarted_tmux_host_finds_the_cgroup_of_an_adopted_pane(tmp_path):
    """A pane outlives its server; the next one adopts it and its DELETE still kills the double fork
    that only the cgroup holds (the cgroup's path is kept in a window option)."""
    state = tmp_path / "state"
    first = await _started_tmux(state, "cgroup")
    out = tmp_path / "pids"
    try:
        pane = await first.spawn(_tmux_spec("ad1", out, STUBBORN), _Sink())
        pids = [int(x) for x in await asyncio.to_thread(wait_file, out, 4)]
        cgroup = pane.cgroup
        await first.stop()  # the agent keeps running
        second = _tmux_host(state, "cgroup")
        await second.start()
        try:
            adopted = await second.adopt(pane.pane_id, "ad1", _Sink())
            assert adopted is not None and adopted.cgroup == cgroup
            await adopted.terminate(grace=0.5)
            adopted.close()
            _assert_all_dead(pids, "DELETE after adopt")
        finally:
            await second.stop()
    finally:
        await first.kill_server()


async def test_contained_tmux_pane_exiting_by_itself_takes_its_daemons_along(tmp_path):
    """In a sandbox the agent's end is its PID namespace's end: a daemon it left dies with it at
    once, before any DELETE (uncontained, it waits for the DELETE's cgroup kill)."""
    host = await _started_tmux(tmp_path / "state", "contained")
    out = tmp_path / "pids"
    try:
        script = '(setsid env -i sh -c "sleep 1777 & echo \\$! >> $1; wait" sh "$1" &); sleep 0.3; exit 4'
        pane = await host.spawn(_tmux_spec("ex1", out, script), _Sink())
        pids = host_pids([int(x) for x in await asyncio.to_thread(wait_file, out, 1)], pane.pid or 0)
        await asyncio.to_thread(wait_dead, pids, 10)
        _assert_all_dead(pids, "the agent's own exit")
        assert pane.exited or await _until_exited(pane)
        pane.close()
    finally:
        await host.stop()
        await host.kill_server()


async def _until_exited(pane: TmuxPane) -> bool:
    for _ in range(500):
        if pane.exited:
            return True
        await asyncio.sleep(0.01)
    return pane.exited
