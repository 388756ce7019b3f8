"""The benchmark runs end to end and prints every figure; its parts say what they measure.

No timing is asserted anywhere: figures vary with the machine, the benchmark only reports them.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import math
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from engine_support import TESTER
from panewatch import backends
from panewatch.engine import Engine, EngineOptions, SessionSpec
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch_lab import fake_agent
from panewatch_lab.bench import Delays, EventLog, match_delays, pct
from panewatch_lab.bench_streams import GENERATORS, measure


def _quick_bench(tmp_path: Path, scenario: str) -> tuple[str, dict]:
    """``panewatch bench --quick`` of one scenario: its printed text and its JSON figures."""
    out_json = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, "-m", "panewatch", "bench", "--quick", "--only", scenario, "--json", str(out_json)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out_json.read_text())


def _latency_figures(text: str, figures: dict) -> None:
    assert "## 1. Prompt drawn" in text
    for label in ("median", "p99", "max", "server CPU", "change/sweep"):
        assert label in text, label
    for mode in ("sweep", "change"):
        row = figures["latency"][mode]
        assert row["prompts"] >= 1, row  # a prompt was drawn and its event seen
        assert all(math.isfinite(row[k]) for k in ("median", "p99", "max", "cpu_s"))


def _scale_figures(text: str, figures: dict) -> None:
    assert "## 2. Many agents" in text
    for label in ("RSS/session", "sweep p99", "loop lag p99"):
        assert label in text, label
    for row in figures["scale"]:
        assert row["cpu_share"] > 0 and row["rss_per_session"] != 0 and math.isfinite(row["lag_p99"])


def _flood_figures(text: str, figures: dict) -> None:
    assert "## 3. One pane flooding" in text
    for label in ("API p99", "emulated"):
        assert label in text, label
    for row in figures["flood"]:
        assert row["flood"]["emulated_per_s"] > 0  # the flood pane really was emulated
        assert math.isfinite(row["flood"]["api_p99"])


def _throughput_figures(text: str, figures: dict) -> None:
    assert "## 4. Screen feed" in text
    for label in ("pyte + wrapper", "pyte (bare)"):
        assert label in text, label
    engines = {r["engine"] for r in figures["throughput"]}
    assert {"pyte (bare)", "pyte + wrapper"} <= engines
    assert all(r["mb_per_s"] > 0 for r in figures["throughput"])
    assert "real captures" in {r["stream"] for r in figures["throughput"]}


def _cluster_figures(text: str, figures: dict) -> None:
    assert "## Cluster" in text and "nodes followed" in text
    cluster = figures["cluster"]
    assert cluster["latency"]["matched"] >= 1, cluster  # a state change seen on both nodes
    assert cluster["follower"][0]["peers"] == 0  # the no-peer baseline comes first
    assert all(row["cpu"] > 0 and row["sessions"] >= 0 for row in cluster["follower"])
    assert cluster["follower"][-1]["sessions"] > cluster["follower"][0]["sessions"]  # the peers' sessions listed


#: what each scenario of the quick run must print (the replay and the dashboards have their own
#: tests below: no need to pay for them twice in CI)
QUICK = {
    "latency": _latency_figures,
    "scale": _scale_figures,
    "flood": _flood_figures,
    "throughput": _throughput_figures,
    "cluster": _cluster_figures,
}


@pytest.mark.bench
@pytest.mark.parametrize("scenario", list(QUICK))
def test_quick_bench_prints_every_figure(tmp_path, scenario):
    """Each scenario of the quick run, one test each: run one after another they were the suite's
    longest test (184 s at load 8), a tail no other worker could share."""
    text, figures = _quick_bench(tmp_path, scenario)
    QUICK[scenario](text, figures)


def _events(pairs: dict[str, list[tuple[float, str]]]) -> EventLog:
    log = EventLog()
    log.by_session.update(pairs)
    return log


@pytest.mark.unit
def test_delays_match_each_drawn_change_to_the_first_event_after_it():
    truth = {"a": [(10.0, "working"), (11.0, "blocked"), (12.0, "working"), (13.0, "idle"), (14.0, "working")]}
    events = _events({"a": [(10.1, "working"), (11.05, "blocked"), (12.3, "working"), (14.02, "working")]})
    d = match_delays(truth, events, start=10.5, end=20.0)
    assert d.total == 4
    assert d.missed == 1  # the idle screen was never reported
    assert d.prompts == pytest.approx([0.05])
    assert sorted(d.changes) == pytest.approx([0.02, 0.05, 0.3])


@pytest.mark.unit
def test_an_event_before_the_previous_change_is_not_taken_for_a_later_one():
    truth = {"a": [(0.0, "blocked"), (1.0, "working"), (2.0, "blocked"), (3.0, "working")]}
    # the second prompt was never reported: the first one's event must not stand in for it
    d = match_delays(truth, _events({"a": [(0.03, "blocked"), (1.04, "working")]}), start=0.5, end=2.5)
    assert d.total == 2 and d.missed == 1 and d.prompts == []
    # an event seen a hair before the agent noted its clock (it was descheduled) counts as no delay
    d = match_delays(
        truth, _events({"a": [(0.03, "blocked"), (1.04, "working"), (1.999, "blocked")]}), start=0.5, end=2.5
    )
    assert d.missed == 0 and d.prompts == [0.0]


@pytest.mark.unit
def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert pct(values, 50) == 50 and pct(values, 99) == 99 and pct(values, 100) == 100
    assert math.isnan(pct([], 99))
    assert Delays().total == 0


@pytest.mark.unit
@pytest.mark.parametrize("backend", backends.available())
def test_the_benchmarks_agent_screens_classify_as_the_agent_says(backend):
    """The fake agent's phases, drawn as it draws them, read as working / blocked / idle under the
    claude manifest, which the benchmark's sessions use."""
    manifest = ManifestStore.from_dirs(bundled_manifest_dir(), None).get("claude")
    screen = backends.make_screen(backend, 32, 120)
    out = io.StringIO()
    term = fake_agent.Terminal(out, 120)
    wording = tomllib.loads(fake_agent.WORDING.read_text())
    tool = next(t for t in wording["tools"] if t["name"] == "Bash")

    def state() -> str:
        screen.feed(out.getvalue().encode())
        out.seek(0)
        out.truncate()
        return manifest.classify(screen.lines(), screen.title, screen.cursor.row).state

    term.show([], fake_agent.idle_chrome(wording, 120))
    assert state() == "idle"
    frame = lambda n: fake_agent.spinner_frame(wording, n, "Baking", time.monotonic())  # noqa: E731
    term.show(["❯ tidy up", ""], fake_agent.working_rows(wording, 120, frame(0)))
    assert state() == "working"
    term.redraw_first(frame(1))
    assert state() == "working"
    term.show([fake_agent.tool_line(tool)], fake_agent.prompt_rows(wording, tool, "/tmp", 120))
    assert state() == "blocked"
    term.show([], fake_agent.working_rows(wording, 120, frame(2)))
    assert state() == "working" and "Do you want" not in screen.text()
    term.show(["● Done.", ""], fake_agent.idle_chrome(wording, 120))
    assert state() == "idle"


@pytest.mark.integration
def test_the_benchmarks_agent_runs_by_itself_and_notes_each_change(tmp_path):
    """--auto: no input, prompts answered and tasks typed by the agent; the truth has only changes."""
    from panewatch_lab.bench import agent_command, read_truth
    from panewatch_lab.pty_session import PtySession

    state_file = tmp_path / "truth.jsonl"
    argv = agent_command(state_file, 3, hold=(0.1, 0.2))
    with PtySession(argv, rows=32, cols=120) as session:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and [s for _, s in read_truth(state_file)].count("blocked") < 2:
            time.sleep(0.05)
        assert session.exit_status is None  # still going: nothing waits for input
    states = [s for _, s in read_truth(state_file)]
    assert states.count("blocked") >= 2 and "working" in states
    assert all(a != b for a, b in itertools.pairwise(states))


@pytest.mark.unit
def test_throughput_is_measured_for_every_stream():
    for name, gen in GENERATORS.items():
        data = gen(20_000)
        assert len(data) >= 20_000, name
        mbs, fed = measure(lambda: backends.make_screen("pyte", 32, 120).feed, data, 0.0)
        assert mbs > 0 and fed == len(data)


@pytest.mark.unit
def test_unknown_backend_is_refused_when_the_engine_is_made():
    store = ManifestStore.from_dirs(bundled_manifest_dir(), None)
    with pytest.raises(backends.BackendUnavailable, match="unknown screen backend"):
        Engine(store, options=EngineOptions(backend="vt52"))


@pytest.mark.integration
async def test_engine_gives_sessions_the_configured_backend():
    pytest.importorskip("pyghostty")
    from panewatch.screen_ghostty import GhosttyScreen

    engine = Engine(ManifestStore.from_dirs(bundled_manifest_dir(), None), options=EngineOptions(backend="ghostty"))
    await engine.start()
    try:
        sid = (
            await engine.create(
                SessionSpec(command=["sh", "-c", "printf 'hello from ghostty'; sleep 5"], rows=10, cols=40),
                actor=TESTER,
            )
        ).id
        assert isinstance(engine._p.table.by_id[sid].pane.screen, GhosttyScreen)  # type: ignore[union-attr]  # white box: the backend
        for _ in range(100):
            if (await engine.screen(sid)).rows[0] == "hello from ghostty":
                break
            await asyncio.sleep(0.05)
        assert (await engine.screen(sid)).rows[0] == "hello from ghostty"
    finally:
        await engine.stop()


@pytest.mark.unit
def test_every_fixture_classifies_correctly_on_ghostty_too(capsys):
    pytest.importorskip("pyghostty")
    from panewatch.cli import main
    from panewatch.fixtures import find_folders

    root = Path(__file__).resolve().parent.parent / "fixtures"
    if not find_folders(root):
        pytest.skip("no fixture folders under fixtures/")
    code = main(["fixtures", str(root), "--backend", "ghostty"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 0, last
    done, total = last.rsplit(" ", 1)[1].split("/")
    assert done == total and int(total) > 0


@pytest.mark.bench
def test_the_replay_runs_real_captures_and_prints_every_figure(tmp_path):
    """Tiny sizes: the real-traffic replay runs on every installed backend in both modes, beside
    the replay driver alone, and prints (and saves) every figure."""
    out_json = tmp_path / "replay.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "panewatch",
            "bench",
            "--only",
            "replay",
            "--replay-sizes",
            "3",
            "--replay-seconds",
            "1.5",
            "--replay-warmup",
            "0.5",
            "--json",
            str(out_json),
            "--plot",
            str(tmp_path / "replay.png"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in (
        "## 5. Real-traffic replay",
        "CPU (1 core)",
        "minus driver",
        "RSS/pane",
        "B/s/pane",
        "change p50",
        "p99",
        "lag p99",
        "driver   alone",
        "change/sweep CPU",
    ):
        assert label in proc.stdout, (label, proc.stdout)
    rows = json.loads(out_json.read_text())["replay"]
    engines = {(r["backend"], r["mode"]) for r in rows if not r["driver_only"]}
    assert engines == {(b, m) for b in backends.available() for m in ("change", "sweep")}
    for r in rows:
        assert r["panes"] == 3 and r["cpu"] > 0 and r["bytes_per_s_per_pane"] > 0  # bytes really replayed
        assert r["captures"] >= 1 and "claude" in r["agents"]
        if not r["driver_only"]:
            assert r["classifications_per_s"] > 0 and math.isfinite(r["lag_p99"])
    if (tmp_path / "replay.png").exists():
        assert (tmp_path / "replay.png").read_bytes()[:4] == b"\x89PNG"
    else:
        assert "matplotlib missing" in proc.stdout


@pytest.mark.bench
def test_the_dashboards_scenario_watches_screens_over_real_websockets_and_prints_its_columns(tmp_path):
    """Tiny sizes: replayed panes with the HTTP app on, two dashboards of two screens each in a
    client process of their own; every socket opened, frames arrived and were timed."""
    out_json = tmp_path / "dash.json"
    argv = ["--only", "dashboards", "--dash-panes", "4", "--dashboards", "2", "--dash-watch", "2"]
    argv += ["--replay-seconds", "2", "--replay-warmup", "0.5", "--backends", "pyte", "--json", str(out_json)]
    proc = subprocess.run(
        [sys.executable, "-m", "panewatch", "bench", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("## 6. Dashboards", "sockets", "CPU (1 core)", "frames/s", "frame p50", "client CPU", "driver"):
        assert label in proc.stdout, (label, proc.stdout)
    rows = json.loads(out_json.read_text())["dashboards"]
    (served,) = [r for r in rows if not r["driver_only"]]
    assert served["dashboards_opened"] == served["dashboards_sockets"] == 4 and served["client_errors"] == []
    assert served["frames_per_s"] > 0 and math.isfinite(served["frame_p99"]) and served["cpu"] > 0


@pytest.mark.unit
def test_replay_frames_are_the_captures_own_bytes_cut_where_a_repaint_starts():
    from panewatch_lab.bench_replay import RESET, load_captures, split_frames

    root = Path(__file__).resolve().parent.parent / "fixtures"
    captures = load_captures([root], 32, 120)
    assert captures and all(c.state in ("idle", "working", "blocked") for c in captures)
    for cap in captures:
        raw = next((root / cap.agent).rglob(cap.name)).read_bytes()
        assert b"".join(cap.frames) == RESET + raw  # nothing lost, nothing added but the reset
    data = b"a" * 40 + b"\x1b[?2026h" + b"b" * 40 + b"\x1b[?2026h" + b"c" * 40 + b"\x1b[?2026h" + b"d"
    assert split_frames(data) == [b"a" * 40, b"\x1b[?2026h" + b"b" * 40, b"\x1b[?2026h" + b"c" * 40, b"\x1b[?2026hd"]
    short = b"x" * 10 + b"\x1b[?2026h" + b"y" * 10 + b"\x1b[?2026h" + b"z" * 40 + b"\x1b[?2026h"
    assert split_frames(short) == [b"x" * 10 + b"\x1b[?2026h" + b"y" * 10 + b"\x1b[?2026h" + b"z" * 40, b"\x1b[?2026h"]


@pytest.mark.unit
async def test_the_dashboards_stamp_frames_on_the_way_out_and_leave_the_engine_alone():
    """``bench_t`` is added to a watched screen's frames by a wrapper of the app, reading the
    engine's public ``fed()`` only: the newest output shown, once; other sockets pass untouched."""
    import random
    from collections import deque

    from panewatch_lab.bench_replay import Player, StampFrames

    class Fed:  # what the wrapper may read: the public ``fed(sid)``
        def __init__(self) -> None:
            self.n = 10

        def fed(self, sid: str) -> int:
            return self.n

    engine = Fed()
    player = Player(handle=None, order=[], rng=random.Random(0), marks=deque([(10, 1.0)]))
    frame = '{"type":"screen","full":true}'

    async def app(scope, receive, send):
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": frame})  # nothing newer than at the start
        player.marks.append((25, 2.0))
        engine.n = 30
        await send({"type": "websocket.send", "text": frame})  # output of t=2.0 now shown
        await send({"type": "websocket.send", "text": frame})  # nothing newer again
        await send({"type": "websocket.send", "text": '{"type":"other"}'})

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    wrapped = StampFrames(app, engine, {"s1": player})  # type: ignore[arg-type]
    await wrapped({"type": "websocket", "path": "/ws/sessions/s1/screen"}, None, send)
    texts = [json.loads(m["text"]) for m in sent if m["type"] == "websocket.send"]
    assert [t.get("bench_t", "absent") for t in texts] == [None, 2.0, None, "absent"]
    assert all(t["full"] for t in texts[:3])
    sent.clear()
    await wrapped({"type": "websocket", "path": "/ws/sessions/other/screen"}, None, send)
    assert all("bench_t" not in m.get("text", "") for m in sent) and len(sent) == 5
