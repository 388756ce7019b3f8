"""Issue 13, identity: from inside a pane the API token is nowhere in /proc, no server setting is
inherited, and a pane can report only for itself (the report socket names the caller by its
ancestry, whatever session the request claims)."""

from __future__ import annotations

import asyncio
import secrets
import signal
import sys
from pathlib import Path

import httpx
import pytest

from hardening_support import ServerProcess, wait_file
from live import NO_SOCKET_PORT, TOKEN, Live, live_server
from panewatch.api import create_app
from panewatch.config import Settings
from panewatch.engine import Engine
from panewatch.hosts.base import LaunchSpec, PaneHandle, PaneSink
from panewatch.hosts.pty import PtyHost
from panewatch.manifest import ManifestStore, bundled_manifest_dir

#: Runs inside a pane: every /proc/*/cmdline and /proc/*/environ it can read, into one file.
SCAN = """
import os, sys
out = open(sys.argv[1] + ".part", "wb")
n = 0
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                data = f.read()
        except OSError:
            continue
        out.write(data.replace(b"\\0", b"\\n") + b"\\n")
        n += 1
out.write(f"SCANNED {n}\\n".encode())
out.close()
os.rename(sys.argv[1] + ".part", sys.argv[1])
"""


def scan_from_a_pane(server: ServerProcess, tmp_path: Path) -> tuple[bytes, str]:
    script = tmp_path / "scan.py"
    script.write_text(SCAN)
    out = tmp_path / "scan.txt"
    needle = "needle-" + secrets.token_hex(8)  # planted in the pane's own environ: the scan must see it
    s = server.create(command=[sys.executable, str(script), str(out)], env={"PW_NEEDLE": needle})
    wait_file(out, 1, timeout=20)
    server.wait_state(s["id"], "exited")
    return out.read_bytes(), needle


def _check_scan(data: bytes, needle: str, token: str, contained: bool = False) -> int:
    """How often the token was found; the scan must have read what it should (uncontained: every
    process of the user; contained: only its own sandbox's, a handful)."""
    scanned = int(data.rsplit(b"SCANNED ", 1)[1].split()[0])
    assert needle.encode() in data, "the scan did not read its own environment"
    assert (scanned <= 8) if contained else (scanned > 20), f"the scan read {scanned} files"
    return data.count(token.encode())


#: These run uncontained: the token must be out of reach even where a pane sees every process of
#: the user (contained it sees none of the server's; test_contain_attack.py).
UNCONTAINED = ["--no-contain"]


@pytest.mark.integration
@pytest.mark.parametrize("how", ["generated", "token-file"])
def test_no_pane_can_read_the_api_token_anywhere_in_proc(tmp_path, how, capsys):
    token_file = None
    if how == "token-file":
        token_file = tmp_path / "token"
        token_file.write_text(secrets.token_urlsafe(24) + "\n")
        token_file.chmod(0o600)
    config = tmp_path / "pw.toml"
    config.write_text("cooldown_s = 5\n")
    server = ServerProcess(
        tmp_path / "state", token_file=token_file, env={"PANEWATCH_CONFIG": str(config)}, extra=UNCONTAINED
    )
    try:
        data, needle = scan_from_a_pane(server, tmp_path)
        found = _check_scan(data, needle, server.token)
        with capsys.disabled():
            print(f"\n{how}: token found {found} times in {data.count(b'SCANNED')} scans of /proc")
        assert found == 0
    finally:
        err = server.stop()
    assert "can read it" not in err  # no warning: this token is not exposed


@pytest.mark.integration
@pytest.mark.parametrize("contained", [False, True], ids=["uncontained", "contained"])
def test_a_token_given_on_the_command_line_is_readable_and_the_server_says_so(tmp_path, contained):
    """The negative control: uncontained, the same scan does find a token passed with --token; in
    a sandbox the server's argv is out of sight, so even that token is found 0 times."""
    token = "given-" + secrets.token_hex(12)
    server = ServerProcess(tmp_path / "state", token=token, extra=[] if contained else UNCONTAINED)
    try:
        data, needle = scan_from_a_pane(server, tmp_path)
        found = _check_scan(data, needle, token, contained)
        assert found == 0 if contained else found >= 1
    finally:
        err = server.stop(signal.SIGTERM)
    assert "every agent running as this user can read it" in err, err


@pytest.mark.integration
def test_agents_inherit_no_panewatch_setting(tmp_path):
    config = tmp_path / "pw.toml"
    config.write_text("cooldown_s = 5\n")
    server = ServerProcess(
        tmp_path / "state", env={"PANEWATCH_CONFIG": str(config), "PANEWATCH_NOTIFY_WEBHOOK": "http://127.0.0.1:9/hook"}
    )
    try:
        out = tmp_path / "env"
        s = server.create(command=["sh", "-c", f"env > {out}.part && mv {out}.part {out}"])
        server.wait_state(s["id"], "exited")
        names = {line.split("=", 1)[0] for line in out.read_text().splitlines() if "=" in line}
        ours = {n for n in names if n.startswith("PANEWATCH_")}
        assert ours == {
            "PANEWATCH_SESSION",
            "PANEWATCH_URL",
            "PANEWATCH_REPORT_SOCKET",
            "PANEWATCH_REPORT_URL",
            "PANEWATCH_PANE",
        }, ours
    finally:
        server.stop()


PANE_A = r"""
post() { curl -s -o "$OUT/$1.body" -w '%{http_code}' --unix-socket "$PANEWATCH_REPORT_SOCKET" -X POST \
         -H 'Content-Type: application/json' --data "$2" "http://panewatch/report$3" > "$OUT/$1.code"; }
post to_b '{"state":"blocked","detail":"forged"}' "?session=$B_ID"
post to_none '{"state":"blocked","detail":"forged"}' "?session=nosuchsession"
( setsid sh -c 'true' )  # leaving its process group does not change whose pane it is
post own '{"state":"blocked","detail":"mine"}' ""
tr '\0' '\n' < /proc/$B_PID/environ | grep '^PANEWATCH_' > "$OUT/b_env" || true
printf '%s' "$PANEWATCH_REPORT_SOCKET" > "$OUT/socket"
echo done > "$OUT/done"
sleep 30
"""


@pytest.mark.integration
async def test_pane_a_cannot_change_pane_b_state(tmp_path):
    async with live_server(state_dir=tmp_path / "state") as live:
        b = await live.create(command=["sleep", "30"], name="B")
        await live.wait_state(b["id"], "idle")
        a = await live.create(
            command=["bash", "--norc", "-c", PANE_A],
            name="A",
            env={"OUT": str(tmp_path), "B_ID": b["id"], "B_PID": str(b["pid"])},
        )
        await asyncio.to_thread(wait_file, tmp_path / "done", 1, 15)
        code = {k: (tmp_path / f"{k}.code").read_text() for k in ("to_b", "to_none", "own")}
        body = {k: (tmp_path / f"{k}.body").read_text() for k in ("to_b", "to_none", "own")}
        assert code["to_b"] == code["to_none"] == "403" and body["to_b"] == body["to_none"], (code, body)
        assert code["own"] == "202", body["own"]
        info_b = (await live.http.get(f"/api/sessions/{b['id']}")).json()
        assert info_b["state"] == "idle" and info_b["source"] != "hook"
        info_a = await live.wait_state(a["id"], "blocked")
        assert info_a["source"] == "hook" and "mine" in info_a["why"]
        b_env = (tmp_path / "b_env").read_text()
        assert "PANEWATCH_REPORT_TOKEN" not in b_env and "PANEWATCH_TOKEN" not in b_env

        # a process outside every pane (this test) is refused too, the same way
        sock = (tmp_path / "socket").read_text()  # the socket every pane is given
        async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=sock), base_url="http://panewatch") as c:
            r = await c.post(f"/report?session={b['id']}", json={"state": "blocked"})
            assert r.status_code == 403 and r.text == body["to_b"]
            r = await c.post("/report", content=b"[" * 30000)
            assert r.status_code == 403  # refused before its body is even read
        # anyone may connect (agents of another user too): the caller's ancestry is what decides
        assert Path(sock).stat().st_mode & 0o777 == 0o666


class LateHost(PtyHost):
    """A PTY host that says which process it started a while after the program runs, as tmux
    does under load (its answer comes after the pane's program started)."""

    async def spawn(self, spec: LaunchSpec, sink: PaneSink) -> PaneHandle:
        handle = await super().spawn(spec, sink)
        await asyncio.sleep(1.0)
        return handle


EARLY_HOOK = r"""
curl -s -o /dev/null -w '%{http_code}' --unix-socket "$PANEWATCH_REPORT_SOCKET" -X POST \
     -H 'Content-Type: application/json' --data '{"state":"blocked","detail":"first hook"}' \
     "http://panewatch/report" > "$OUT/code.part"
mv "$OUT/code.part" "$OUT/code"
sleep 30
"""


@pytest.mark.integration
async def test_a_panes_first_hook_lands_though_its_host_has_not_yet_said_which_process_it_is(tmp_path):
    engine = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), host=LateHost())
    app = create_app(Settings(token=TOKEN, port=NO_SOCKET_PORT, state_dir=tmp_path / "state"), engine=engine)
    async with app.router.lifespan_context(app):
        live = Live(app, NO_SOCKET_PORT, in_process=True)
        try:
            s = await live.create(command=["bash", "--norc", "-c", EARLY_HOOK], env={"OUT": str(tmp_path)})
            code = (await asyncio.to_thread(wait_file, tmp_path / "code", 1, 15))[0]
            assert code == "202", "the hook sent before the spawn returned was refused"
            info = await live.wait_state(s["id"], "blocked")
            assert info["source"] == "hook" and "first hook" in info["why"]
        finally:
            await live.http.aclose()


@pytest.mark.unit
def test_login_ids_expire_are_revocable_across_restarts_and_die_with_the_token(tmp_path):
    from panewatch.access.login import Logins

    now = [1000.0]
    revoked = tmp_path / "revoked.json"
    logins = Logins("token-one-123", 60, revoked_file=revoked, clock=lambda: now[0])
    a, b = logins.issue(), logins.issue()
    assert "token-one-123" not in a and logins.valid(a) and logins.valid(b)
    assert not logins.valid(a[:-1] + ("0" if a[-1] != "0" else "1"))  # a forged mac
    nonce, expiry, mac = a.split(".")
    assert not logins.valid(f"{nonce}.{int(expiry) + 3600}.{mac}")  # a stretched expiry
    assert logins.revoke(a) and not logins.valid(a)
    restarted = Logins("token-one-123", 60, revoked_file=revoked, clock=lambda: now[0])
    assert restarted.valid(b) and not restarted.valid(a)  # same token: logged in, revocation kept
    assert not Logins("another-token-456", 60, clock=lambda: now[0]).valid(b)  # a new token logs out
    now[0] += 61
    assert not restarted.valid(b)  # expired
