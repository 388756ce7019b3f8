"""TLS: ``--tls-cert/--tls-key`` serve https with uvicorn's TLS; binding anything but loopback
in plain http is refused (exit 2, one line) unless ``--insecure-http`` says it is meant."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from panewatch.config import Settings
from panewatch.server import is_loopback, login_url, plain_http_refusal
from panewatch_lab.loopback import free_port
from panewatch_lab.serve_proc import env_without_panewatch


def serve(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "panewatch", "serve", "--state-dir", str(state), "--pane-host", "pty", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_without_panewatch(),
    )


@pytest.mark.integration
def test_plain_http_on_every_address_exits_2_with_one_line(tmp_path):
    done = serve("--host", "0.0.0.0", "--port", str(free_port()), state=tmp_path / "state")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("panewatch: refusing to serve plain http on 0.0.0.0") and "--insecure-http" in line
    assert "--tls-cert" in line and not (tmp_path / "state").exists()  # refused before anything was made


@pytest.mark.unit
def test_the_rule_for_binds():
    assert is_loopback("127.0.0.1") and is_loopback("127.8.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("192.0.2.7")
    assert plain_http_refusal(Settings(host="0.0.0.0")) is not None
    assert plain_http_refusal(Settings(host="0.0.0.0", insecure_http=True)) is None
    assert plain_http_refusal(Settings(host="127.0.0.1")) is None
    assert login_url("127.0.0.1", 8443, "T", "https") == "https://panewatch.localhost:8443/?token=T"


def self_signed(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.mark.integration
def test_tls_serves_https_and_sets_secure_cookies(tmp_path):
    cert, key = self_signed(tmp_path)
    port = free_port()
    argv = [sys.executable, "-m", "panewatch", "serve", "--port", str(port), "--token=tls-token-0123456789"]
    argv += ["--tls-cert", str(cert), "--tls-key", str(key), "--state-dir", str(tmp_path / "state")]
    argv += ["--pane-host", "pty"]
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env_without_panewatch())
    try:
        with httpx.Client(
            base_url=f"https://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=str(cert)), timeout=5
        ) as client:
            deadline = time.monotonic() + 30
            while True:  # until it listens (bounded): the condition, not a fixed sleep
                try:
                    r = client.get("/healthz")
                    break
                except httpx.ConnectError:
                    assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                    time.sleep(0.1)
            assert r.status_code == 200 and r.json()["ok"] is True
            login = client.get("/?token=tls-token-0123456789", follow_redirects=False)
            assert login.status_code == 303 and "Secure" in login.headers["set-cookie"]
        with httpx.Client(timeout=5) as plain:  # the port speaks TLS only
            try:
                plain.get(f"http://127.0.0.1:{port}/healthz")
                raise AssertionError("plain http was answered")
            except httpx.HTTPError:
                pass
        assert f"serving on https://127.0.0.1:{port}" in (tmp_path / "serve.log").read_text()
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()
