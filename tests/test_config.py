"""Configuration: every option reachable as a flag, env var and TOML key, in that precedence,
and every bad value refused in one line that names the option."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import websockets

from live import live_server
from panewatch.cli import build_parser
from panewatch.config import (
    ConfigError,
    Settings,
    env_name,
    flag_name,
    flags_from_namespace,
    options_table,
    settings_or_error,
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No PANEWATCH_* variable of the machine running the tests leaks into these."""
    import os

    for key in list(os.environ):
        if key.startswith("PANEWATCH_"):
            monkeypatch.delenv(key)


def settings_for(*argv: str) -> Settings:
    args = build_parser().parse_args(["serve", *argv])
    return settings_or_error(flags_from_namespace(args))


def serve(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``panewatch serve`` with a configuration that must be refused before it listens."""
    import os
    import tempfile

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_")}
    # never the user's state folder, and no tmux server left behind by a server that did start
    full_env.update(PANEWATCH_STATE_DIR=tempfile.mkdtemp(prefix="pw-config-"), PANEWATCH_PANE_HOST="pty")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "panewatch", "serve", *argv], capture_output=True, text=True, env=full_env, timeout=60
    )


@pytest.mark.unit
def test_precedence_flag_over_env_over_file_over_default(tmp_path, monkeypatch):
    config = tmp_path / "panewatch.toml"
    config.write_text('port = 1111\nsweep_ms = 300\nmode = "change"\ncooldown_s = 5\n')
    monkeypatch.setenv("PANEWATCH_PORT", "2222")
    monkeypatch.setenv("PANEWATCH_SWEEP_MS", "400")
    s = settings_for("--config", str(config), "--port", "3333")
    assert s.port == 3333  # flag
    assert s.sweep_ms == 400  # environment
    assert s.mode == "change" and s.cooldown_s == 5  # file
    assert s.settle_ms == 40  # default
    # the file named by the environment is read too
    monkeypatch.setenv("PANEWATCH_CONFIG", str(config))
    assert settings_for().mode == "change"


@pytest.mark.integration
def test_every_option_has_a_flag_and_each_flag_takes_effect(tmp_path):
    parser_help = subprocess.run(
        [sys.executable, "-m", "panewatch", "serve", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    for name in Settings.model_fields:
        assert flag_name(name) in parser_help, name
    s = settings_for(
        "--report-freshness-s",
        "5",
        "--notify-webhook",
        "http://127.0.0.1:9/hook",
        "--transcripts",
        str(tmp_path),
        "--transcript-max-bytes",
        "10000",
        "--log-json",
        "--allowed-origins",
        "http://a",
        "--allowed-origins",
        "http://b",
        "--screen-interval-ms",
        "50",
        "--settle-ms",
        "30",
        "--cap-ms",
        "200",
        "--cooldown-s",
        "0",
        "--notify-command",
        "true",
        "--public-url",
        "http://h:1",
        "--host",
        "::1",
        "--manifests",
        str(tmp_path),
        "--token",
        "x" * 10,
        "--sweep-ms",
        "90",
        "--mode",
        "change",
    )
    assert s.report_freshness_s == 5 and s.notify_webhook == "http://127.0.0.1:9/hook"
    assert s.transcripts == tmp_path and s.transcript_max_bytes == 10000 and s.log_json is True
    assert s.allowed_origins == ["http://a", "http://b"] and s.screen_interval_ms == 50
    assert (s.settle_ms, s.cap_ms, s.cooldown_s, s.notify_command) == (30, 200, 0, "true")
    assert (s.public_url, s.host, s.manifests, s.token, s.sweep_ms, s.mode) == (
        "http://h:1",
        "::1",
        tmp_path,
        "x" * 10,
        90,
        "change",
    )
    assert settings_for("--no-log-json").log_json is False


@pytest.mark.unit
def test_list_option_from_the_environment_as_json(monkeypatch):
    monkeypatch.setenv("PANEWATCH_ALLOWED_ORIGINS", '["http://x.example", "http://y.example"]')
    assert settings_for().allowed_origins == ["http://x.example", "http://y.example"]
    assert settings_for("--allowed-origins", "http://z").allowed_origins == ["http://z"]  # flag wins whole
    monkeypatch.setenv("PANEWATCH_ALLOWED_ORIGINS", "http://x.example")
    with pytest.raises(ConfigError, match=r"allowed_origins \(PANEWATCH_ALLOWED_ORIGINS\).*JSON list"):
        settings_for()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("argv", "env", "needles"),
    [
        (["--port", "70000"], {}, ["port (--port)", "65535"]),
        (["--mode", "fast"], {}, ["mode (--mode)", "'sweep' or 'change'"]),
        ([], {"PANEWATCH_SWEEP_MS": "often"}, ["sweep_ms (PANEWATCH_SWEEP_MS)", "integer"]),
        (["--transcripts", "/etc/hostname"], {}, ["transcripts (--transcripts)", "not a folder"]),
        (["--transcript-max-bytes", "10"], {}, ["transcript_max_bytes", "4096"]),
        (["--config", "/nonexistent/panewatch.toml"], {}, ["config file /nonexistent/panewatch.toml not found"]),
        ([], {"PANEWATCH_LOG_JSON": "maybe"}, ["log_json (PANEWATCH_LOG_JSON)", "boolean"]),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_the_option(argv, env, needles):
    r = serve(*argv, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith("panewatch: bad configuration: ") and r.stderr.count("\n") == 1, r.stderr
    for needle in needles:
        assert needle in r.stderr
    assert r.stdout == ""  # it never started serving


@pytest.mark.integration
def test_bad_config_file_names_the_file_and_the_key(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('port = "eighty"\nsweeep_ms = 100\n')
    r = serve("--config", str(config))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"port (port in {config})" in r.stderr and "sweeep_ms" in r.stderr and "unknown option" in r.stderr
    config.write_text("port = \n")
    r = serve(env={"PANEWATCH_CONFIG": str(config)})
    assert r.returncode == 2 and f"config file {config} is not valid TOML" in r.stderr


@pytest.mark.integration
def test_token_is_never_repeated_in_an_error():
    r = serve("--token", "s3cr")
    assert r.returncode == 2 and "token (--token)" in r.stderr and "s3cr" not in r.stderr


@pytest.mark.unit
def test_options_table_lists_every_option_with_its_three_names():
    table = options_table()
    for name in Settings.model_fields:
        assert f"`{flag_name(name)}" in table and f"`{env_name(name)}`" in table


@pytest.mark.integration
async def test_allowed_origins_from_the_environment_reach_the_websocket_check(monkeypatch):
    monkeypatch.setenv("PANEWATCH_ALLOWED_ORIGINS", json.dumps(["http://dash.example"]))
    async with live_server() as live:
        async with live.ws("/ws/state", origin="http://dash.example") as ws:
            assert json.loads(await ws.recv())["type"] == "snapshot"
        async with live.ws("/ws/state", origin="http://evil.example") as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 4403


@pytest.mark.unit
def test_readme_has_the_options_table_as_the_model_makes_it():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert options_table() in readme, "README's Configuration table is stale: paste panewatch.config.options_table()"


@pytest.mark.unit
def test_the_default_backend_is_auto_ghostty_where_it_installs_and_the_choice_is_logged(caplog):
    """``auto`` by default: Ghostty wherever its wheel installs (it keeps out-of-band status and
    answers the kitty keyboard query as pyte does), pyte elsewhere."""
    import logging

    from panewatch import backends
    from panewatch.engine import Engine
    from panewatch.hosts.memory import MemoryHost
    from panewatch.manifest import ManifestStore, bundled_manifest_dir

    assert Settings().backend == "auto" and Settings().mode == "change"
    expected = "ghostty" if "ghostty" in backends.available() else "pyte"
    assert backends.choose("auto")[0] == expected
    assert backends.choose("pyte") == ("pyte", "configured")
    with caplog.at_level(logging.INFO, logger="panewatch.engine"):
        engine = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), host=MemoryHost())
    assert engine.backend == expected
    assert any(r.getMessage().startswith(f"screen backend {expected} (") for r in caplog.records)
