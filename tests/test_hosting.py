"""Choosing the pane host: tmux where it is usable, else the pty host with one line saying what
that costs; asking for tmux without it is one line and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from panewatch import hosting
from panewatch.hosting import StartupError, choose_host, open_hosting
from panewatch.hosts.pty import PtyHost
from panewatch.hosts.tmux import TmuxHost, tmux_usable


@pytest.mark.unit
def test_without_tmux_the_pty_host_is_chosen_and_said(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(hosting, "tmux_usable", lambda: "tmux is not installed (Debian: apt-get install tmux)")
    host, note = choose_host(None, tmp_path)
    assert isinstance(host, PtyHost)
    assert note.startswith("agents run on the pty host and will not survive a restart of the server")
    with pytest.raises(StartupError, match=r"^--pane-host tmux: tmux is not installed"):
        choose_host("tmux", tmp_path)
    host, note = choose_host("pty", tmp_path)
    assert isinstance(host, PtyHost) and note is None


@pytest.mark.integration
@pytest.mark.skipif(tmux_usable() is not None, reason=f"tmux host unavailable: {tmux_usable()}")
def test_tmux_is_the_default_where_usable(tmp_path: Path) -> None:
    h = open_hosting(state_dir=tmp_path / "s", pane_host=None, token=None)
    try:
        assert isinstance(h.host, TmuxHost) and h.note is None and h.token
        assert (tmp_path / "s" / "token").read_text().strip() == h.token
    finally:
        h.registry.close()


@pytest.mark.integration
def test_serve_asking_for_tmux_without_it_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PANEWATCH_")}
    env["PATH"] = str(Path(sys.executable).parent)  # python, but no tmux
    token = tmp_path / "token"  # a token file: --token would add its warning line
    token.write_text("x" * 12)
    token.chmod(0o600)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "panewatch",
            "serve",
            "--port",
            "0",
            "--token-file",
            str(token),
            "--pane-host",
            "tmux",
            "--state-dir",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "panewatch: --pane-host tmux: tmux is not installed (Debian: apt-get install tmux)"
