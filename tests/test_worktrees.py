"""Sessions in their own git worktree (#31), on real git in temporary repositories and real PTYs:
adding one per session, the refusals, what each changed (and only it), removal on delete only
when clean or confirmed (the branch always kept), and the ledger's events."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine_support import TESTER, fast
from live import Live, live_server
from panewatch import worktrees
from panewatch.engine import Engine, SessionSpec, WorktreeSpec
from panewatch.engine.events import Acted, Action
from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.registry import REGISTRY_FILE, Registry

pytestmark = pytest.mark.integration

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}


def git(cwd: Path | str, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


async def agit(cwd: Path | str, *args: str) -> str:
    """git from a test whose server runs on this loop: in a thread, so the server goes on."""
    return await asyncio.to_thread(git, cwd, *args)


def make_repo(at: Path) -> Path:
    at.mkdir()
    git(at, "init", "-q", "-b", "main")
    (at / "app.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    git(at, "add", "app.py")
    git(at, "commit", "-q", "-m", "first")
    return at


def writes(name: str, text: str = "hello\n") -> list[str]:
    """A shell that writes ``name`` in its folder and stays."""
    return ["bash", "--norc", "--noprofile", "-c", f"printf {text!r} > {name}; exec sleep 60"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
async def live():
    async with live_server() as server:
        yield server


async def changes_with(live: Live, sid: str, path: str, timeout: float = 10.0) -> dict[str, Any]:
    """The session's changes once ``path`` is among them (the shell wrote it)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        r = await live.http.get(f"/api/sessions/{sid}/changes")
        assert r.status_code == 200, r.text
        found = r.json()
        if any(f["path"] == path for f in found["files"]):
            return found
        assert asyncio.get_running_loop().time() < deadline, f"{path} never appeared: {found}"
        await asyncio.sleep(0.05)


async def test_two_sessions_in_two_worktrees_each_see_only_their_own_file(live: Live, repo: Path) -> None:
    a = await live.create(command=writes("a.txt"), worktree={"repo": str(repo), "branch": "agent-a"})
    b = await live.create(command=writes("b.txt"), worktree={"repo": str(repo), "branch": "agent-b"})
    assert a["worktree"]["branch"] == "agent-a" and a["worktree"]["base"] == "main"
    assert a["cwd"] == a["worktree"]["path"] == str(repo.parent / "repo.worktrees" / "agent-a")
    assert git(a["cwd"], "rev-parse", "--abbrev-ref", "HEAD") == "agent-a"

    ca = await changes_with(live, a["id"], "a.txt")
    cb = await changes_with(live, b["id"], "b.txt")
    assert [f["path"] for f in ca["files"]] == ["a.txt"] and [f["path"] for f in cb["files"]] == ["b.txt"]
    only = ca["files"][0]
    assert (only["status"], only["added"], only["removed"]) == ("added", 1, 0)
    assert "+hello" in only["diff"] and (ca["added"], ca["removed"], ca["ahead"], ca["behind"]) == (1, 0, 0, 0)
    assert git(repo, "status", "--porcelain") == ""  # the repository itself is untouched

    await agit(a["cwd"], "add", "a.txt")
    await agit(a["cwd"], "commit", "-q", "-m", "a")
    ca = (await live.http.get(f"/api/sessions/{a['id']}/changes")).json()
    assert (ca["ahead"], ca["behind"]) == (1, 0) and [f["path"] for f in ca["files"]] == ["a.txt"]
    assert ca["head"] == git(a["cwd"], "rev-parse", "HEAD")

    (repo / "app.py").write_text("changed on main\n")
    await agit(repo, "commit", "-q", "-am", "main moves")
    ca = (await live.http.get(f"/api/sessions/{a['id']}/changes")).json()
    assert (ca["ahead"], ca["behind"]) == (1, 1) and [f["path"] for f in ca["files"]] == ["a.txt"]
    cb = (await live.http.get(f"/api/sessions/{b['id']}/changes")).json()
    assert (cb["ahead"], cb["behind"]) == (0, 1) and [f["path"] for f in cb["files"]] == ["b.txt"]


async def test_the_registry_keeps_the_worktree_and_an_existing_free_branch_is_checked_out(
    repo: Path, tmp_path: Path
) -> None:
    git(repo, "branch", "kept", "main")
    registry = Registry.open(tmp_path / REGISTRY_FILE)
    engine = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), options=fast(), registry=registry)
    await engine.start()
    try:
        info = await engine.create(
            SessionSpec(command=writes("x.txt"), worktree=WorktreeSpec(str(repo / "."), "kept")), actor=TESTER
        )
    finally:
        await engine.stop()
    assert info.worktree is not None and git(info.cwd, "rev-parse", "HEAD") == git(repo, "rev-parse", "kept")
    again = Engine(
        ManifestStore.from_dirs(bundled_manifest_dir()),
        options=fast(),
        registry=Registry.open(tmp_path / REGISTRY_FILE),
    )
    await again.start()
    try:
        restored = await again.get(info.id)  # lost (a pty does not outlive its server), still in its worktree
        assert restored.worktree == info.worktree and restored.cwd == info.worktree.path
    finally:
        await again.stop()


async def test_worktree_refusals_say_why(live: Live, repo: Path, tmp_path: Path) -> None:
    cmd = writes("x.txt")
    plain = tmp_path / "plain"
    plain.mkdir()
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"repo": str(plain), "branch": "x"}, 422, "is not a git repository"),
        ({"repo": str(tmp_path / "nowhere"), "branch": "x"}, 422, "is not a folder"),
        ({"repo": str(repo), "branch": "main"}, 409, "checked out already, in " + str(repo)),
        ({"repo": str(repo), "branch": "bad..name"}, 422, "not a valid branch name"),
        ({"repo": str(repo), "branch": "x", "base": "no-such-ref"}, 422, "is not a commit or branch"),
    ]
    for worktree, status, why in cases:
        r = await live.http.post("/api/sessions", json={"command": cmd, "worktree": worktree})
        assert r.status_code == status and why in r.json()["detail"], (worktree, r.text)
    taken = repo.parent / "repo.worktrees" / "taken"
    taken.mkdir(parents=True)
    (taken / "mine.txt").write_text("someone's")
    r = await live.http.post("/api/sessions", json={"command": cmd, "worktree": {"repo": str(repo), "branch": "taken"}})
    assert r.status_code == 409 and "exists already" in r.json()["detail"]
    assert (taken / "mine.txt").read_text() == "someone's"
    r = await live.http.post(
        "/api/sessions", json={"command": cmd, "cwd": str(repo), "worktree": {"repo": str(repo), "branch": "y"}}
    )
    assert r.status_code == 422 and "not both" in r.text
    r = await live.http.post("/api/sessions", json={"agent": "no-such", "worktree": {"repo": str(repo), "branch": "z"}})
    assert r.status_code == 422 and "unknown agent" in r.text
    assert "z" not in git(repo, "branch", "--list", "z")  # a refused launch adds no worktree, no branch
    assert (await live.http.get("/api/sessions")).json()["sessions"] == []


async def test_without_git_the_refusal_says_so(live: Live, repo: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    r = await live.http.post(
        "/api/sessions", json={"command": ["/bin/sh"], "worktree": {"repo": str(repo), "branch": "x"}}
    )
    assert r.status_code == 422 and "git is not installed" in r.json()["detail"]


async def test_delete_keeps_a_dirty_worktree_until_confirmed_and_always_keeps_the_branch(
    live: Live, repo: Path
) -> None:
    acted: list[Acted] = []
    live.engine.subscribe(lambda e: acted.append(e) if isinstance(e, Acted) else None)
    s = await live.create(command=writes("work.txt"), worktree={"repo": str(repo), "branch": "dirty"})
    await changes_with(live, s["id"], "work.txt")

    r = await live.http.delete(f"/api/sessions/{s['id']}")
    assert r.status_code == 409 and r.json()["files"] == ["work.txt"] and "discard=true" in r.json()["detail"]
    assert (await live.http.get(f"/api/sessions/{s['id']}")).json()["state"] != "exited"  # nothing ended
    assert os.path.isdir(s["cwd"])

    r = await live.http.delete(f"/api/sessions/{s['id']}", params={"discard": "true"})
    assert r.status_code == 200 and r.json()["discarded"] == ["work.txt"]
    assert not os.path.exists(s["cwd"]) and git(repo, "rev-parse", "--verify", "refs/heads/dirty")
    assert (await live.http.get(f"/api/sessions/{s['id']}")).status_code == 404

    clean = await live.create(command=["sleep", "60"], worktree={"repo": str(repo), "branch": "clean"})
    r = await live.http.delete(f"/api/sessions/{clean['id']}")
    assert r.status_code == 200 and r.json()["discarded"] == []
    assert not os.path.exists(clean["cwd"]) and git(repo, "rev-parse", "--verify", "refs/heads/clean")

    ledger = [(e.session, e.action, e.actor.kind) for e in acted if "worktree" in e.action]
    assert ledger == [
        (s["id"], Action.worktree_added, "token"),
        (s["id"], Action.worktree_removed, "token"),
        (clean["id"], Action.worktree_added, "token"),
        (clean["id"], Action.worktree_removed, "token"),
    ]
    assert "1 uncommitted files discarded" in next(e.detail for e in acted if e.action == Action.worktree_removed)


async def test_changes_of_a_session_without_a_worktree_is_refused(live: Live) -> None:
    s = await live.create(command=["sleep", "60"])
    r = await live.http.get(f"/api/sessions/{s['id']}/changes")
    assert r.status_code == 422 and "not started in a worktree" in r.json()["detail"]


# -- the git part alone -----------------------------------------------------------------------------


async def test_binary_and_large_files_are_summarised_and_the_cache_follows_writes(repo: Path) -> None:
    wt = await worktrees.add(str(repo), "big", None)
    path = Path(wt.path)
    (path / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (path / "huge.txt").write_text("".join(f"row {i}\n" for i in range(20_000)))
    (path / "app.py").write_text("line 1\nnew line\n")
    cache = worktrees.ChangesCache()
    first = await cache.get(wt)
    by = {f.path: f for f in first.files}
    assert by["blob.bin"].status == "binary" and by["blob.bin"].diff is None and by["blob.bin"].added is None
    assert (
        by["huge.txt"].diff is None and by["huge.txt"].added == 20_000 and "too large" in (by["huge.txt"].summary or "")
    )
    assert by["app.py"].status == "modified" and (by["app.py"].added, by["app.py"].removed) == (1, 19)
    assert "+new line" in (by["app.py"].diff or "") and first.truncated
    assert await cache.get(wt) is first  # nothing moved: the kept answer

    (path / "huge.txt").unlink()
    second = await cache.get(wt)
    assert second is not first and sorted(f.path for f in second.files) == ["app.py", "blob.bin"]
    assert not second.truncated
    assert git(wt.path, "status", "--porcelain", "--untracked-files=all") == "M app.py\n?? blob.bin"
