"""The session registry and the state folder: what survives a restart, and one clear line when
the file or folder cannot be used (never a traceback, never a silent empty start)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path

import pytest

from panewatch.access.statedir import (
    OPEN_MODE,
    PRIVATE_MODE,
    StateDirError,
    check_reachable,
    load_or_create_token,
    prepare_state_dir,
    secure_contents,
)
from panewatch.registry import (
    APPLICATION_ID,
    REGISTRY_FILE,
    SCHEMA_VERSION,
    Record,
    Registry,
    RegistryError,
    hash_token,
    token_matches,
)

pytestmark = pytest.mark.unit


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
    with pytest.raises(RegistryError, match=rf"newer Panewatch \(format 7, this one reads {SCHEMA_VERSION}\); upgrade"):
        Registry.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    conn.close()


def without_worktree(reg: Registry) -> None:
    """The sessions table as it was before format 4 (DROP COLUMN cannot cut it: its comments)."""
    kept = ", ".join(r[1] for r in reg.db.execute("PRAGMA table_info(sessions)") if r[1] != "worktree")
    with reg.db:
        reg.db.execute(f"CREATE TABLE old AS SELECT {kept} FROM sessions")
        reg.db.execute("DROP TABLE sessions")
        reg.db.execute("ALTER TABLE old RENAME TO sessions")


def test_a_format_2_file_gains_the_device_tables_and_keeps_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    old = Registry.open(path)
    old.add(
        Record(id="s1", name="kept", command=["claude"], cwd="/", token_hash="h", host_kind="tmux", rows=2, cols=10)
    )
    old.db.execute("DROP TABLE devices")
    old.db.execute("DROP TABLE push_subscriptions")
    without_worktree(old)  # format 4's
    old.db.execute("PRAGMA user_version=2")
    old.close()
    reg = Registry.open(path)
    assert [r.id for r in reg.all()] == ["s1"]
    assert reg.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    assert reg.db.execute("SELECT count(*) FROM devices").fetchone()[0] == 0
    assert reg.db.execute("SELECT count(*) FROM push_subscriptions").fetchone()[0] == 0
    reg.close()


def test_a_format_3_file_gains_the_worktree_column_and_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    old = Registry.open(path)
    old.add(Record(id="s1", name="kept", command=["sh"], cwd="/", token_hash="h", host_kind="pty", rows=2, cols=10))
    without_worktree(old)
    old.db.execute("PRAGMA user_version=3")
    old.close()
    reg = Registry.open(path)
    kept = reg.get("s1")
    assert kept is not None and kept.worktree is None
    where = {"repo": "/r", "branch": "b", "path": "/r.worktrees/b", "base": "main"}
    reg.add(
        Record(
            id="s2", name="w", command=["sh"], cwd="/", token_hash="h", host_kind="pty", rows=2, cols=10, worktree=where
        )
    )
    found = reg.get("s2")
    assert found is not None and found.worktree == where
    reg.close()


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id=1234")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match="not a Panewatch session registry"):
        Registry.open(path)


def _v1_registry(path: Path, version: int) -> None:
    """A registry as format 1 wrote it (and the same table with no version, as format 0)."""
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL, agent TEXT, command TEXT NOT NULL,"
        " cwd TEXT NOT NULL, created REAL NOT NULL, token_hash TEXT NOT NULL, host_kind TEXT NOT NULL,"
        " host_ref TEXT, agent_session_id TEXT, state TEXT, since REAL, why TEXT, exit_code INTEGER,"
        " rows INTEGER NOT NULL, cols INTEGER NOT NULL, hooks INTEGER NOT NULL DEFAULT 1, last_screen TEXT,"
        " updated REAL NOT NULL)"
    )
    conn.execute(
        "INSERT INTO sessions (id, name, agent, command, cwd, created, token_hash, host_kind, rows, cols, updated)"
        " VALUES ('old1', 'claude', 'claude', '[\"claude\", \"--settings\", \"{}\"]', '/tmp', 1.0, 'h', 'tmux',"
        " 32, 120, 1.0)"
    )
    if version:
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [1, 0])
def test_an_older_registry_of_ours_is_migrated_and_says_its_launch_was_not_kept(tmp_path: Path, version: int) -> None:
    path = tmp_path / REGISTRY_FILE
    _v1_registry(path, version)
    reg = Registry.open(path)
    (old,) = reg.all()
    assert (old.id, old.command, old.launched, old.env) == ("old1", ["claude", "--settings", "{}"], None, {})
    reg.add(record("new1", launched=["claude", "--permission-mode", "plan"], env={"ANTHROPIC_BASE_URL": "http://x"}))
    reg.close()
    again = Registry.open(path)
    new = again.get("new1")
    assert new is not None and new.launched == ["claude", "--permission-mode", "plan"]
    assert new.env == {"ANTHROPIC_BASE_URL": "http://x"}
    again.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("SELECT count(*) FROM devices").fetchone()[0] == 0  # format 3's tables too
    assert conn.execute("SELECT count(*) FROM push_subscriptions").fetchone()[0] == 0
    conn.close()


def test_another_apps_sqlite_file_without_an_application_id_is_refused_untouched(tmp_path: Path) -> None:
    # the nit of issue 25: another program's database under our file name (application_id 0,
    # tables of its own) was taken over: our table added, our id and version written into it
    path = tmp_path / REGISTRY_FILE
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(RegistryError) as err:
        Registry.open(path)
    message = str(err.value)
    assert "not a Panewatch session registry (its tables: notes)" in message and "\n" not in message
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [REGISTRY_FILE]  # no -wal, no -shm either


def test_a_table_named_sessions_of_another_shape_is_not_ours(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sessions (user TEXT, cookie TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(RegistryError, match=r"its tables: sessions\)"):
        Registry.open(path)


def test_every_file_of_the_registry_is_private_from_its_creation(tmp_path: Path) -> None:
    reg = Registry.in_state_dir(tmp_path)
    reg.add(record("s1", env={"SECRET": "x"}))
    files = sorted(p for p in tmp_path.iterdir() if p.name.startswith(REGISTRY_FILE))
    assert [p.name for p in files] == [REGISTRY_FILE, f"{REGISTRY_FILE}-shm", f"{REGISTRY_FILE}-wal"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}
    reg.close()


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


def test_the_folder_for_agents_of_other_users_is_0711_and_later_checks_keep_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    prepare_state_dir(state, OPEN_MODE)
    assert stat.S_IMODE(state.stat().st_mode) == 0o711
    prepare_state_dir(state)  # the tmux host's own check, the token: no mode given, 0711 kept
    assert stat.S_IMODE(state.stat().st_mode) == 0o711
    prepare_state_dir(state, PRIVATE_MODE)  # the setting turned off: private again
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_everything_in_the_state_folder_is_made_private_or_refused(tmp_path: Path) -> None:
    prepare_state_dir(tmp_path)
    loose = tmp_path / "report.port"
    loose.write_text("8766")
    loose.chmod(0o644)
    sub = tmp_path / "old-recordings"
    sub.mkdir(mode=0o755)
    sub.chmod(0o755)
    # a socket's inode, as a bound socket leaves it (mknod: no socket is opened in a unit test)
    os.mknod(tmp_path / "report.sock", 0o666 | stat.S_IFSOCK)
    os.chmod(tmp_path / "report.sock", 0o666)
    secure_contents(tmp_path)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o600
    assert stat.S_IMODE(sub.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "report.sock").stat().st_mode) == 0o666  # open by design
    os.chown(loose, 4242, 4242)
    with pytest.raises(StateDirError, match=r"report\.port in the state folder belongs to another user"):
        secure_contents(tmp_path)


def test_the_report_and_sandbox_folders_stay_as_passable_as_the_state_folder(tmp_path: Path) -> None:
    """A restart must not close the way to the report socket that agents of other users take."""
    state = tmp_path / "state"
    prepare_state_dir(state, OPEN_MODE)
    for name in ("report", "sandbox"):
        (state / name).mkdir(mode=0o711)
    (state / "recordings").mkdir(mode=0o711)
    secure_contents(state)
    assert stat.S_IMODE((state / "report").stat().st_mode) == 0o711
    assert stat.S_IMODE((state / "sandbox").stat().st_mode) == 0o711
    assert stat.S_IMODE((state / "recordings").stat().st_mode) == 0o700
    prepare_state_dir(state, PRIVATE_MODE)  # agent_users turned off: closed again
    secure_contents(state)
    assert stat.S_IMODE((state / "report").stat().st_mode) == 0o700


def test_agent_users_must_be_able_to_pass_every_folder_above() -> None:
    base = Path(tempfile.mkdtemp())  # under /tmp itself: pytest's tmp folders sit in a 0700 one
    try:
        base.chmod(0o711)
        closed = base / "home"
        closed.mkdir(mode=0o700)
        with pytest.raises(
            StateDirError, match=f"nobody cannot reach the report socket: {closed} \\(mode 700, owner root\\)"
        ):
            check_reachable(closed / "panewatch", ["nobody"])
        check_reachable(closed / "panewatch", ["root"])  # its owner passes
        closed.chmod(0o711)
        check_reachable(closed / "not" / "made" / "yet", ["nobody", "root"])
        with pytest.raises(StateDirError, match="there is no user 'no-such-user-pw'"):
            check_reachable(closed, ["no-such-user-pw"])
    finally:
        shutil.rmtree(base)
