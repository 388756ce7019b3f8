"""PTY processes for real: reading, writing, resizing, exit through the pidfd, no leaks."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from panewatch.procs.ptyproc import PtyProcess, SpawnError, WriteRefused

pytestmark = pytest.mark.integration


class Child:
    """A PtyProcess plus what it printed and how it ended."""

    def __init__(self, argv, **kw):
        self.out = bytearray()
        self.exited = asyncio.get_running_loop().create_future()
        self.proc = PtyProcess(
            argv,
            on_output=self.out.extend,
            on_exit=lambda code: self.exited.done() or self.exited.set_result(code),
            **kw,
        )

    async def until(self, needle: bytes, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.out:
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not seen in {bytes(self.out)!r}")
            await asyncio.sleep(0.01)


async def test_output_input_and_controlling_terminal():
    c = Child(
        [
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            'tty; [ -t 0 ] && echo STDIN-IS-TTY; read -r line; echo "got:$line"; exit 7',
        ]
    )
    await c.until(b"STDIN-IS-TTY")
    assert b"/dev/pts/" in c.out
    c.proc.write(b"hello\r")
    assert await asyncio.wait_for(c.exited, 5) == 7
    assert b"got:hello" in c.out
    assert c.proc.returncode == 7
    c.proc.close()


async def test_child_is_session_leader_and_foreground_group():
    c = Child(["bash", "--norc", "--noprofile", "-c", "sleep 0.3; echo done"])
    await asyncio.sleep(0.1)
    assert c.proc.foreground_pgid() == c.proc.pid
    assert os.getsid(c.proc.pid) == c.proc.pid
    await asyncio.wait_for(c.exited, 5)
    c.proc.close()


async def test_resize_sends_sigwinch_and_sets_the_size():
    c = Child(
        [
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            "trap 'echo WINCH $(stty size)' WINCH; echo ready; while :; do sleep 0.05; done",
        ],
        rows=24,
        cols=80,
    )
    await c.until(b"ready")
    c.proc.resize(40, 132)
    await c.until(b"WINCH 40 132")
    await c.proc.terminate(grace=1)
    c.proc.close()


async def test_exit_is_seen_from_the_process_not_from_eof():
    # the grandchild ignores SIGHUP and keeps the slave open for 3 s after the child exits
    c = Child(["bash", "--norc", "--noprofile", "-c", "(trap '' HUP; sleep 3; echo LATE) & echo started; exit 5"])
    start = time.monotonic()
    assert await asyncio.wait_for(c.exited, 5) == 5
    assert time.monotonic() - start < 1.5
    assert b"started" in c.out
    c.proc.close()


async def test_terminate_escalates_to_sigkill():
    c = Child(["bash", "--norc", "--noprofile", "-c", "trap '' HUP TERM; echo stubborn; while :; do sleep 0.05; done"])
    await c.until(b"stubborn")
    start = time.monotonic()
    code = await c.proc.terminate(grace=0.5)
    assert code == -signal.SIGKILL
    assert 0.4 < time.monotonic() - start < 3
    c.proc.close()


async def test_write_to_an_exited_process_is_refused():
    c = Child(["true"])
    await asyncio.wait_for(c.exited, 5)
    with pytest.raises(WriteRefused):
        c.proc.write(b"x")
    c.proc.close()


async def test_write_to_a_child_that_never_reads_is_bounded():
    c = Child(["bash", "--norc", "--noprofile", "-c", "stty -icanon; echo ready; sleep 30"])
    await c.until(b"ready")
    with pytest.raises(WriteRefused, match="not reading"):
        for _ in range(100):
            c.proc.write(b"x" * 65536)
    await c.proc.terminate(grace=0.5)
    c.proc.close()


async def test_spawn_error_is_reported():
    with pytest.raises(SpawnError, match="cannot start"):
        PtyProcess(["/nonexistent/agent"], on_output=lambda _: None, on_exit=lambda _: None)
    with pytest.raises(SpawnError):
        PtyProcess(["true"], cwd="/nonexistent-folder", on_output=lambda _: None, on_exit=lambda _: None)


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _zombies() -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            out.append(pid)
    return out


async def test_many_spawn_kill_cycles_leave_no_zombie_and_no_fd():
    before = _fds()
    for i in range(60):
        c = Child(["bash", "--norc", "--noprofile", "-c", "echo up; sleep 30"])
        if i % 3 == 0:
            await c.until(b"up")
        await c.proc.terminate(grace=0.5)
        assert c.exited.done()
        c.proc.close()
    await asyncio.sleep(0.05)
    assert _zombies() == []
    assert _fds() - before == set()
