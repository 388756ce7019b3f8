"""The session registry and the state folder: what survives a restart, and one clear line when
the file or folder cannot be used (never a traceback, never a silent empty start)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from panewatch.registry import REGISTRY_FILE, Record, Registry, RegistryError, hash_token, token_matches
from panewatch.statedir import StateDirError, load_or_create_token, prepare_state_dir


def record(sid: str = "a1b2c3d4", **kw) -> Record:
    base = dict(
        id=sid,
        name="claude",
        command=["claude", "--settings", "{}"],
        cwd="/tmp",
        token_hash=hash_token("tok-" + sid),
        host_kind="tmux",
        host_ref="%3",
        rows=32,
        cols=120,
        agent="claude",
        created=1000.0,
    )
    base.update(kw)
    return Record(**base)


def test_sessions_survive_reopening(tmp_path: Path) -> None:
    reg = Registry.in_state_dir(tmp_path)
    reg.add(record("s1"))
    reg.add(record("s2", created=2000.0, host_ref="%4", agent=None, hooks=False))
    reg.set_state("s1", "blocked", 1234.5, "permission prompt")
    reg.set_agent_session("s1", "0b7f-claude-session")
    reg.update("s2", host_ref="%9")
    reg.close()

    again = Registry.in_state_dir(tmp_path)
    s1, s2 = again.all()
    assert (s1.id, s1.state, s1.since, s1.why, s1.agent_session_id) == (
        "s1",
        "blocked",
        1234.5,
        "permission prompt",
        "0b7f-claude-session",
    )
    assert s1.command == ["claude", "--settings", "{}"] and s1.host_kind == "tmux" and s1.hooks
    assert (s2.host_ref, s2.agent, s2.hooks) == ("%9", None, False)
    again.remove("s1")
    assert [r.id for r in again.all()] == ["s2"] and again.get("s1") is None
    assert stat.S_IMODE((tmp_path / REGISTRY_FILE).stat().st_mode) == 0o600
    with pytest.raises(ValueError, match="not updatable"):
        again.update("s2", id="x")


def test_token_hash_checks_the_old_token() -> None:
    h = hash_token("secret-token")
    assert "secret-token" not in h
    assert token_matches("secret-token", h) and not token_matches("other", h)


def test_damaged_file_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(RegistryError) as err:
        Registry.open(path)
    message = str(err.value)
    assert str(path) in message and "damaged" in message and f"mv {path} {path}.bad" in message
    assert "\n" not in message
    assert path.read_bytes().startswith(b"this is not sqlite")  # nothing lost


def test_newer_format_is_refused_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    Registry.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=7")
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match=r"newer Panewatch \(format 7, this one reads 1\); upgrade"):
        Registry.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    conn.close()


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id=1234")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match="not a Panewatch session registry"):
        Registry.open(path)


def test_state_dir_is_private_and_token_kept(tmp_path: Path) -> None:
    state = tmp_path / "deep" / "state"
    token = load_or_create_token(state)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "token").stat().st_mode) == 0o600
    assert load_or_create_token(state) == token and len(token) >= 16
    os.chmod(state, 0o755)
    prepare_state_dir(state)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_unusable_state_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StateDirError, match=r"cannot (use|create) the state folder .*; use another --state-dir"):
        prepare_state_dir(blocker / "state")
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 4242, 4242)
    with pytest.raises(StateDirError, match="belongs to another user"):
        prepare_state_dir(other)
