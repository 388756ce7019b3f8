"""/metrics scraped from the service (on real PTYs, or the memory host for the access rules) and read
with Prometheus' own parser: values move."""

from __future__ import annotations

import asyncio
import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from live import live_server, memory_server
from panes_support import ERASE_PROMPT, PROMPT, WORKING
from panewatch.sinks.metrics import family, quantile
from scripted import claude_like


def bash(script: str) -> list[str]:
    return ["bash", "--norc", "--noprofile", "-c", script]


async def scrape(live) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = await live.http.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    values = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values


def v(values, name: str, **labels: str) -> float:
    return values.get((name, tuple(sorted(labels.items()))), 0.0)


async def wait_for(predicate, live, timeout: float = 10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        values = await scrape(live)
        if predicate(values):
            return values
        assert asyncio.get_running_loop().time() < deadline, "metrics never moved"
        await asyncio.sleep(0.05)


@pytest.mark.integration
async def test_metrics_move_with_sessions_and_survive_deletion():
    async with live_server() as live:
        before = await scrape(live)
        assert v(before, "panewatch_sessions", state="blocked") == 0
        assert v(before, "panewatch_pty_read_bytes_total") == 0
        assert any(k[0] == "panewatch_build_info" for k in before)

        s = await live.create(agent="claude", command=bash(claude_like()), rows=12, cols=60)
        await live.wait_state(s["id"], "blocked")
        blocked = await wait_for(lambda m: m[("panewatch_sweep_duration_seconds_count", ())] >= 1, live)
        assert v(blocked, "panewatch_sessions", state="blocked") == 1
        assert sum(v(blocked, "panewatch_sessions", state=x) for x in ("working", "idle", "exited")) == 0
        assert v(blocked, "panewatch_state_transitions_total", source="screen") >= 1
        assert v(blocked, "panewatch_pty_read_bytes_total") > 100
        assert 0 < v(blocked, "panewatch_emulated_bytes_total") <= v(blocked, "panewatch_pty_read_bytes_total")
        assert v(blocked, "panewatch_classifications_total") >= 1
        assert v(blocked, "panewatch_notifications_total") == 1  # entering blocked
        assert v(blocked, "panewatch_sweep_duration_seconds_sum") > 0
        assert v(blocked, "panewatch_sweep_duration_seconds", quantile="0.5") >= 0

        r = await live.http.post(f"/api/sessions/{s['id']}/answer", json={"option": 1, "confirm": True})
        assert r.status_code == 200
        await live.wait_state(s["id"], "idle")
        idle = await scrape(live)
        assert v(idle, "panewatch_sessions", state="idle") == 1 and v(idle, "panewatch_sessions", state="blocked") == 0
        assert v(idle, "panewatch_notifications_total") == 2  # the turn ended
        assert v(idle, "panewatch_state_transitions_total", source="screen") > v(
            blocked, "panewatch_state_transitions_total", source="screen"
        )
        assert v(idle, "panewatch_pty_read_bytes_total") > v(blocked, "panewatch_pty_read_bytes_total")

        assert (await live.http.delete(f"/api/sessions/{s['id']}")).status_code == 200
        gone = await scrape(live)
        assert sum(v(gone, "panewatch_sessions", state=x) for x in ("blocked", "working", "idle", "exited")) == 0
        # counters of a deleted session are kept: they never go down
        assert v(gone, "panewatch_pty_read_bytes_total") >= v(idle, "panewatch_pty_read_bytes_total")
        assert v(gone, "panewatch_emulated_bytes_total") >= v(idle, "panewatch_emulated_bytes_total")


@pytest.mark.unit
async def test_metrics_need_the_token_unless_made_public():
    async with memory_server() as live:
        r = await live.http.get("/metrics", headers={"Authorization": ""})
        assert r.status_code == 401
        r = await live.http.get("/metrics", headers={"Authorization": "Bearer wrong-token-123"})
        assert r.status_code == 403
    async with memory_server(metrics_public=True) as live:
        r = await live.http.get("/metrics", headers={"Authorization": ""})
        assert r.status_code == 200 and "panewatch_sessions" in r.text


@pytest.mark.unit
def test_exposition_pieces():
    lines = family("x_total", "counter", "Help.", [("x_total", {"a": 'q"\\\n'}, 3), ("x_total", {}, 0.5)])
    assert lines == ["# HELP x_total Help.", "# TYPE x_total counter", 'x_total{a="q\\"\\\\\\n"} 3', "x_total 0.5"]
    parsed = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    assert parsed[0].samples[0].labels == {"a": 'q"\\\n'}
    assert math.isnan(quantile([], 0.5))
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0 and quantile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0
    with pytest.raises(ValueError):
        list(text_string_to_metric_families("bad metric line{\n"))


@pytest.mark.unit
async def test_answers_are_counted_by_actor_kind_with_the_time_agents_waited():
    """#30's figures: an answer that took counts for its actor's kind, and the blocked stretch it
    ended (on the engine's clock, here hand-moved) is the time to answer, overall and per session."""
    async with memory_server() as live:
        s = await live.create(agent="claude", command=["agent"], rows=12, cols=60)
        sid, agent = s["id"], live.host.handles[s["id"]]
        agent.emit(WORKING)
        await live.settle()
        agent.emit(PROMPT)
        await live.settle()
        assert (await live.http.get(f"/api/sessions/{sid}")).json()["state"] == "blocked"
        await live.settle(12.0)  # the user comes back 12 s later
        agent.on_input = lambda data: agent.emit(ERASE_PROMPT + WORKING)
        r = await live.http.post(f"/api/sessions/{sid}/answer", json={"option": 1, "confirm": True})
        assert r.status_code == 200 and r.json()["took"], r.text
        values = await scrape(live)
        assert v(values, "panewatch_answers_total", actor_kind="token") == 1
        assert v(values, "panewatch_time_to_answer_seconds_count") == 1
        waited = v(values, "panewatch_time_to_answer_seconds", quantile="0.5")
        assert 12.0 <= waited < 13.0, waited
        assert v(values, "panewatch_session_time_to_answer_seconds", session=sid, quantile="0.5") == waited
        await live.http.delete(f"/api/sessions/{sid}")
        after = await scrape(live)
        assert ("panewatch_session_time_to_answer_seconds", (("quantile", "0.5"), ("session", sid))) not in after
