"""The bounded write queue behind the pty and ACP stdio hosts, on a real pipe."""

from __future__ import annotations

import asyncio
import os

import pytest

from panewatch.procs.outbox import Outbox

pytestmark = pytest.mark.unit


async def test_what_the_pipe_cannot_take_now_is_written_once_the_reader_reads() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)
    loop = asyncio.get_running_loop()
    box = Outbox(loop, w, limit=4 << 20)
    data = os.urandom(1 << 20)  # far more than a pipe buffer (64 KiB)
    box.send(data)
    assert 0 < box.queued < len(data)  # part written now, the rest queued: nothing blocked
    os.set_blocking(r, False)
    got = bytearray()
    for _ in range(10_000):
        await asyncio.sleep(0)  # the loop's writer callback drains the queue as room appears
        try:
            got += os.read(r, 1 << 16)
        except BlockingIOError:
            continue
        if len(got) == len(data):
            break
    assert bytes(got) == data and box.queued == 0
    box.close()
    os.close(r)
    os.close(w)


async def test_the_limit_is_for_the_caller_to_refuse_with_its_own_error() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)
    box = Outbox(asyncio.get_running_loop(), w, limit=100_000)
    box.send(b"x" * 99_000)  # 64 KiB fit in the pipe, the rest waits
    assert box.queued == 99_000 - (1 << 16)
    assert box.fits(100_000 - box.queued) and not box.fits(100_000 - box.queued + 1)
    box.close()
    assert box.queued == 0  # closing drops what nobody will read
    os.close(r)
    os.close(w)


async def test_a_reader_that_went_away_drops_the_queue_and_says_so() -> None:
    r, w = os.pipe()
    os.set_blocking(w, False)
    broken: list[bool] = []
    box = Outbox(asyncio.get_running_loop(), w, limit=1 << 20, on_broken=lambda: broken.append(True))
    os.close(r)
    box.send(b"hello")  # EPIPE (SIGPIPE is ignored by Python)
    assert broken == [True] and box.queued == 0
    box.close()
    os.close(w)
