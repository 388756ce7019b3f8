"""Recordings: asciicast v2 files of real sessions, their size cap, and replay into the classifier."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from live import live_server
from panewatch.sinks.transcript import Transcript, raw_until, read_cast, replay
from scripted import claude_like


def bash(script: str) -> list[str]:
    return ["bash", "--norc", "--noprofile", "-c", script]


def panewatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "panewatch", *args], capture_output=True, text=True, timeout=60)


def lines_of(path: Path) -> list[list]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]


@pytest.mark.unit
async def test_events_header_split_characters_and_resizes(tmp_path):
    path = tmp_path / "deep" / "s.cast"
    t = Transcript(
        path,
        rows=5,
        cols=30,
        max_bytes=4096,
        loop=asyncio.get_running_loop(),
        title="demo",
        command=["bash", "-c", "x"],
    )
    arrow = "❯".encode()
    t.output(b"hi " + arrow[:1])  # a character cut between two reads
    t.output(arrow[1:] + b" there\r\n")
    t.resize(7, 40)
    t.output(b"\xff")  # not UTF-8: kept as a replacement character, the rest survives
    t.output(b"done")
    await t.aclose()
    t.output(b"after close")  # ignored
    header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert header["version"] == 2 and (header["width"], header["height"]) == (30, 5)
    assert header["title"] == "demo" and set(header["env"]) == {"TERM", "SHELL"}
    assert isinstance(header["timestamp"], int)
    events = lines_of(path)
    assert [e[1] for e in events] == ["o", "o", "r", "o", "o"]
    assert "".join(e[2] for e in events if e[1] == "o") == "hi ❯ there\r\n\ufffddone"
    assert events[2][2] == "40x7"
    times = [e[0] for e in events]
    assert times == sorted(times) and times[0] >= 0
    info = t.info()
    assert 0 < info.pop("elapsed") < 60
    assert info == {"path": str(path), "bytes": path.stat().st_size, "truncated": False, "error": None}

    cast = read_cast(path)
    screen = replay(cast)
    assert (screen.rows, screen.cols) == (7, 40)
    assert screen.lines()[0] == "hi ❯ there"
    assert replay(cast, at=-1).lines()[0] == ""  # before the first event: a blank screen


@pytest.mark.unit
async def test_size_cap_stops_recording_with_one_marker(tmp_path):
    path = tmp_path / "big.cast"
    t = Transcript(path, rows=5, cols=30, max_bytes=4096, loop=asyncio.get_running_loop())
    for i in range(200):
        t.output(f"line {i:04} ".encode() * 4 + b"\r\n")
    t.resize(10, 50)  # after the cap: not recorded
    await t.aclose()
    size = path.stat().st_size
    assert size <= 4096
    assert t.truncated and t.info()["truncated"] is True and t.info()["bytes"] == size
    events = lines_of(path)
    assert events[-1][1] == "m" and "size cap" in events[-1][2]
    assert [e[1] for e in events[:-1]] == ["o"] * (len(events) - 1)
    assert "line 0000" in events[0][2]
    read_cast(path)  # still a valid recording


@pytest.mark.unit
async def test_write_failure_stops_recording_and_says_so(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    t = Transcript(blocker / "s.cast", rows=5, cols=30, max_bytes=4096, loop=asyncio.get_running_loop(), session="abcd")
    t.output(b"hello")
    await t.aclose()
    assert t.error and t.closed and t.info()["error"]


@pytest.mark.integration
async def test_recorded_session_replays_to_the_states_it_had(tmp_path):
    folder = tmp_path / "casts"
    async with live_server(transcripts=folder) as live:
        s = await live.create(agent="claude", command=bash(claude_like()), rows=12, cols=60)
        sid = s["id"]
        assert s["transcript"]["path"] == str(folder / f"{sid}.cast")

        async def elapsed() -> float:
            return (await live.http.get(f"/api/sessions/{sid}")).json()["transcript"]["elapsed"]

        await live.wait_state(sid, "blocked")
        at_blocked = await elapsed()
        live_blocked = (await live.http.get(f"/api/sessions/{sid}/screen")).json()
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})
        assert r.status_code == 200 and r.json()["took"], r.text
        await live.wait_state(sid, "idle")
        at_idle = await elapsed()
        r = await live.http.post(f"/api/sessions/{sid}/resize", json={"rows": 9, "cols": 50})
        assert r.status_code == 200
        live_end = (await live.http.get(f"/api/sessions/{sid}/screen")).json()

        r = await live.http.get(f"/api/sessions/{sid}/transcript")
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/x-asciicast")
        cast_file = tmp_path / "live.cast"
        cast_file.write_bytes(r.content)
        info = (await live.http.get(f"/api/sessions/{sid}")).json()
        assert info["transcript"]["truncated"] is False and info["transcript"]["bytes"] >= len(r.content)

        r = await live.http.delete(f"/api/sessions/{sid}")
        assert r.status_code == 200
        after = await live.http.get(f"/api/sessions/{sid}/transcript")  # the file outlives the session
        assert after.status_code == 200 and after.content.startswith(rb"{" b"")
        assert len(after.content) >= len(cast_file.read_bytes())
        assert (await live.http.get("/api/sessions/0123abcd/transcript")).status_code == 404
        assert (await live.http.get("/api/sessions/..%2F..%2Fetc/transcript")).status_code == 404
        no_token = await live.http.get(f"/api/sessions/{sid}/transcript", headers={"Authorization": ""})
        assert no_token.status_code == 401

    cast = read_cast(cast_file)
    assert [e[2] for e in cast.events if e[1] == "r"] == ["50x9"]
    # the same screen as the live one, at the moment it was blocked and at the end
    assert replay(cast, at_blocked).lines() == live_blocked["rows"]
    end = replay(cast)
    assert (end.rows, end.cols) == (9, 50) and end.lines() == live_end["rows"]

    r = panewatch("classify", "--agent", "claude", "--json", "--at", str(at_blocked), str(cast_file))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["state"] == "blocked" and json.loads(r.stdout)[0]["rule"] == "permission_dialog"
    r = panewatch("classify", "--agent", "claude", "--at", str(at_idle), str(cast_file))
    assert r.returncode == 0 and r.stdout.split()[1] == "idle", r.stdout + r.stderr
    r = panewatch("explain", "--agent", "claude", "--at", str(at_blocked), str(cast_file))
    assert r.returncode == 0 and "screen 12x60" in r.stdout and "verdict: blocked" in r.stdout

    raw = tmp_path / "blocked.raw"
    r = panewatch("cast-to-raw", str(cast_file), "--at", str(at_blocked), "-o", str(raw))
    assert r.returncode == 0 and "rows = 12, cols = 60" in r.stderr and "resized" not in r.stderr
    r = panewatch("classify", "--agent", "claude", "--rows", "12", "--cols", "60", str(raw))
    assert r.stdout.split()[1:] == ["blocked", "permission_dialog"]
    r = panewatch("cast-to-raw", str(cast_file), "-o", str(tmp_path / "end.raw"))
    assert r.returncode == 0 and "rows = 9, cols = 50" in r.stderr and "resized" in r.stderr
    assert raw_until(cast).data == (tmp_path / "end.raw").read_bytes()


@pytest.mark.integration
async def test_no_recording_without_the_option():
    async with live_server() as live:
        s = await live.create(command=bash("echo hi; sleep 30"))
        assert s["transcript"] is None
        assert (await live.http.get(f"/api/sessions/{s['id']}/transcript")).status_code == 404


def _open_files() -> set[Path]:
    """The files this process holds open, from the kernel's own table (``/proc/self/fd``)."""
    fds = Path("/proc/self/fd")
    out = set()
    for fd in fds.iterdir():
        try:
            out.add(Path(fd.readlink()))
        except OSError:  # closed since the listing
            continue
    return out


@pytest.mark.integration
async def test_stopping_the_service_closes_recordings(tmp_path):
    async with live_server(transcripts=tmp_path) as live:
        s = await live.create(command=bash("printf 'bye\\r\\n'; sleep 30"))
        path = tmp_path / f"{s['id']}.cast"
        for _ in range(250):  # written (and opened) by a worker thread, a moment after the output
            if path in _open_files():
                break
            await asyncio.sleep(0.02)
        assert path in _open_files()  # recording while the service runs
    assert path not in _open_files()  # closed when it stopped
    cast = read_cast(path)
    assert "bye" in "".join(e[2] for e in cast.events)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json\n", ":1: not an asciicast v2 header"),
        ('{"version": 1, "width": 5, "height": 5}\n', ":1: not an asciicast v2 header"),
        ('{"version": 2, "width": 0, "height": 5}\n', "positive integer 'width'"),
        ('{"version": 2, "width": 5, "height": 5}\n[0.1, "o", "x"]\n[0.2, "o"]\n', ":3: not an event"),
        ('{"version": 2, "width": 5, "height": 5}\n[0.1, "r", "wide"]\n', ":2: not an event"),
    ],
)
def test_bad_recordings_are_refused_naming_the_line(tmp_path, content, needle):
    path = tmp_path / "bad.cast"
    path.write_text(content)
    r = panewatch("classify", str(path))
    assert r.returncode == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.integration
def test_at_needs_a_recording(tmp_path):
    (tmp_path / "x.raw").write_bytes(b"hello")
    r = panewatch("classify", "--at", "1", str(tmp_path / "x.raw"))
    assert r.returncode == 2 and "--at needs a .cast recording" in r.stderr


@pytest.mark.integration
async def test_the_size_cap_setting_reaches_live_recordings(tmp_path):
    async with live_server(transcripts=tmp_path, transcript_max_bytes=4096) as live:
        s = await live.create(
            command=bash("for i in $(seq 400); do printf 'line %04d of output\\r\\n' $i; done; sleep 30")
        )
        for _ in range(500):
            info = (await live.http.get(f"/api/sessions/{s['id']}")).json()
            if info["transcript"]["truncated"]:
                break
            await asyncio.sleep(0.02)
        assert info["transcript"]["truncated"] is True and info["transcript"]["bytes"] <= 4096
        r = await live.http.get(f"/api/sessions/{s['id']}/transcript")
        assert r.status_code == 200 and len(r.content) <= 4096
        assert json.loads(r.content.splitlines()[-1])[1] == "m"


class _Spun(BaseException):
    """sync() went round without giving the loop a turn (BaseException: sync catches Exception)."""


@pytest.mark.unit
async def test_sync_right_after_a_write_finished_gives_the_loop_a_turn(tmp_path, monkeypatch):
    """A write's future is done a loop turn before its callback counts it; a sync() in between
    (a GET of the recording) once spun there forever, freezing the service."""
    loop = asyncio.get_running_loop()
    t = Transcript(tmp_path / "s.cast", rows=5, cols=30, max_bytes=4096, loop=loop, session="abcd")
    t.output(b"hello")
    await t.sync()
    written = t.written
    done = loop.create_future()
    done.add_done_callback(t._written)
    t._writing, t._in_flight = done, 7
    done.set_result(None)  # done; _written is scheduled, not run
    rounds = 0
    shield = asyncio.shield

    def counted(arg):
        nonlocal rounds
        rounds += 1
        if rounds > 20:
            raise _Spun
        return shield(arg)

    monkeypatch.setattr(asyncio, "shield", counted)
    await t.sync()
    assert t.written == written + 7 and t._writing is None


@pytest.mark.integration
async def test_a_recording_removed_after_it_was_found_is_a_clean_404(tmp_path, monkeypatch, caplog):
    """The file is opened before the answer starts: one removed between the lookup and the open
    (a cleanup job, a user) is a 404 that says so, not a traceback halfway through a 200."""
    async with live_server(transcripts=tmp_path) as live:
        sid = (await live.create(command=bash("printf 'hi\\r\\n'; sleep 30")))["id"]
        for _ in range(200):  # until the header and the first output are in the file
            if (await live.http.get(f"/api/sessions/{sid}/transcript")).status_code == 200:
                break
            await asyncio.sleep(0.02)
        found = live.engine.transcript

        async def then_removed(wanted: str):
            where = await found(wanted)
            where[0].unlink()
            return where

        monkeypatch.setattr(live.engine, "transcript", then_removed)
        with caplog.at_level("WARNING"):
            r = await live.http.get(f"/api/sessions/{sid}/transcript")
        assert r.status_code == 404 and "went away" in r.json()["detail"], r.text
        assert not [rec for rec in caplog.records if rec.levelname in ("ERROR", "CRITICAL")]
