"""Git worktrees for sessions: one added for an agent, what it changed read back, removed when done.

Every git call is an asyncio subprocess with a deadline, so the event loop never waits on git,
and the walk that tells whether a worktree moved runs in a worker thread. Panewatch only ever
adds and removes worktrees: it never pushes, merges or deletes a branch.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from .errors import InvalidRequest, PanewatchError

__all__ = [
    "Changes",
    "ChangesCache",
    "FileChange",
    "WorktreeBusy",
    "WorktreeDirty",
    "WorktreeInfo",
    "WorktreeSpec",
    "add",
    "remove",
    "remove_check",
]

#: No git call may hold a request longer than this.
GIT_TIMEOUT_S = 30.0
#: The whole unified diff a changes answer carries; past it, files are listed without their diff.
DIFF_MAX_BYTES = 512_000
#: One file's diff; a longer one is summarised by its counts.
FILE_DIFF_MAX_BYTES = 64_000
#: Files listed in one answer (the counts still cover every file).
FILES_MAX = 2000
#: What git may print for the patch before the read stops (the rest is not even read).
_PATCH_READ_MAX = 4 * DIFF_MAX_BYTES
_GIT_ENV = {"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


@dataclass(frozen=True)
class WorktreeSpec:
    """A git worktree to start the agent in: ``branch`` of ``repo``, new from ``base`` (default: the
    repository's current branch) or the existing branch when no worktree has it."""

    repo: str
    branch: str
    base: str | None = None


class WorktreeInfo(_Model):
    """Where a session's agent works: its repository, branch, folder and the base it compares with."""

    repo: str
    branch: str
    path: str
    base: str  # a branch name (so "behind" follows it) or a commit


class FileChange(_Model):
    path: str
    status: str  # added | modified | deleted | renamed | binary
    added: int | None  # None: binary
    removed: int | None
    diff: str | None  # None: summarised (binary, too large, or past the answer's bound)
    summary: str | None


class Changes(_Model):
    """``GET /api/sessions/{id}/changes``: the branch against its base, committed and not."""

    branch: str
    base: str
    head: str
    ahead: int
    behind: int
    added: int
    removed: int
    files: list[FileChange]
    files_total: int
    truncated: bool  # some file's diff, or some file, is left out


class WorktreeBusy(PanewatchError):
    """The branch is checked out in another worktree, or the folder for it is taken."""

    status = 409


class WorktreeDirty(PanewatchError):
    """Removing the worktree would lose uncommitted work: the files are what would be lost."""

    status = 409

    def __init__(self, path: str, files: list[str]) -> None:
        shown = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "")
        super().__init__(
            f"the worktree {path} has uncommitted changes that deleting would lose ({shown}); "
            "commit them, or delete with ?discard=true"
        )
        self.files = files

    @classmethod
    def told(cls, message: str, files: list[str]) -> WorktreeDirty:
        """The same refusal as another node gave it (its message kept)."""
        made = cls("", files)
        made.args = (message,)
        return made


@dataclass(frozen=True)
class _Run:
    code: int
    out: bytes
    err: str


async def _git(*args: str, cwd: str, env: dict[str, str] | None = None, limit: int | None = None) -> _Run:
    """Run git off the loop; ``limit``: stop reading stdout past that many bytes (the process is ended)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env={**os.environ, **_GIT_ENV, **(env or {})},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        raise InvalidRequest("git is not installed on the server (no `git` on its PATH)") from None
    try:
        async with asyncio.timeout(GIT_TIMEOUT_S):
            if limit is None:
                out, err = await proc.communicate()
            else:
                out, err = await _read_capped(proc, limit)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise InvalidRequest(f"git {args[0]} took longer than {GIT_TIMEOUT_S:.0f} s") from None
    return _Run(proc.returncode or 0, out, err.decode(errors="replace").strip())


async def _read_capped(proc: asyncio.subprocess.Process, limit: int) -> tuple[bytes, bytes]:
    assert proc.stdout is not None and proc.stderr is not None
    err_task = asyncio.ensure_future(proc.stderr.read())
    chunks: list[bytes] = []
    size = 0
    while chunk := await proc.stdout.read(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            proc.kill()
            break
    await proc.wait()
    return b"".join(chunks), await err_task


async def _out(*args: str, cwd: str, env: dict[str, str] | None = None) -> str | None:
    """Stdout of a git call that succeeded, stripped; None when it failed."""
    run = await _git(*args, cwd=cwd, env=env)
    return run.out.decode(errors="replace").strip() if run.code == 0 else None


# -- adding ---------------------------------------------------------------------------------------


def _folder_for(top: str, branch: str) -> str:
    """``<repo>.worktrees/<branch>`` beside the repository: outside it, so its own status stays clean."""
    return os.path.join(os.path.dirname(top), f"{os.path.basename(top)}.worktrees", _SLUG.sub("-", branch))


def _checked_out(porcelain: str) -> dict[str, str]:
    """``{branch: worktree path}`` from ``git worktree list --porcelain``."""
    found: dict[str, str] = {}
    path = ""
    for line in porcelain.splitlines():
        if line.startswith("worktree "):
            path = line[len("worktree ") :]
        elif line.startswith("branch refs/heads/"):
            found[line[len("branch refs/heads/") :]] = path
    return found


async def _toplevel(repo: str) -> str:
    if not os.path.isdir(repo):
        raise InvalidRequest(f"worktree.repo {repo!r} is not a folder")
    top = await _out("rev-parse", "--show-toplevel", cwd=repo)
    if not top:
        raise InvalidRequest(f"worktree.repo {repo!r} is not a git repository")
    return top


async def _default_base(top: str) -> str:
    """The repository's current branch, or its commit when HEAD is detached."""
    name = await _out("symbolic-ref", "--short", "-q", "HEAD", cwd=top)
    if name and await _out("rev-parse", "--verify", "-q", f"refs/heads/{name}", cwd=top):
        return name
    sha = await _out("rev-parse", "--verify", "-q", "HEAD", cwd=top)
    if not sha:
        raise InvalidRequest("the repository has no commit yet to branch from")
    return sha


async def add(repo: str, branch: str, base: str | None) -> WorktreeInfo:
    """``git worktree add`` for ``branch`` (new from ``base``, or the existing branch when it is free)."""
    top = await _toplevel(repo)
    if await _out("check-ref-format", "--branch", branch, cwd=top) is None or branch.startswith("-"):
        raise InvalidRequest(f"worktree.branch {branch!r} is not a valid branch name")
    listing = await _out("worktree", "list", "--porcelain", cwd=top) or ""
    if (elsewhere := _checked_out(listing).get(branch)) is not None:
        raise WorktreeBusy(f"branch {branch!r} is checked out already, in {elsewhere}")
    path = _folder_for(top, branch)
    if os.path.lexists(path):
        raise WorktreeBusy(f"the folder for this worktree, {path}, exists already; remove it or pick another branch")
    if base is not None and (
        base.startswith("-") or not await _out("rev-parse", "-q", "--verify", f"{base}^{{commit}}", cwd=top)
    ):
        raise InvalidRequest(f"worktree.base {base!r} is not a commit or branch of {top}")
    start = base or await _default_base(top)
    exists = await _out("rev-parse", "--verify", "-q", f"refs/heads/{branch}", cwd=top) is not None
    args = ["worktree", "add", "--", path, branch] if exists else ["worktree", "add", "-b", branch, "--", path, start]
    run = await _git(*args, cwd=top)
    if run.code != 0:
        raise WorktreeBusy(f"git worktree add refused: {run.err[-400:]}")
    return WorktreeInfo(repo=top, branch=branch, path=path, base=start)


# -- removing -------------------------------------------------------------------------------------


async def _uncommitted(path: str) -> list[str]:
    run = await _git("status", "--porcelain", "-z", "--untracked-files=all", cwd=path)
    if run.code != 0:
        return []
    return [entry[3:] for entry in run.out.decode(errors="replace").split("\0") if len(entry) > 3]


async def remove_check(wt: WorktreeInfo) -> None:
    """``WorktreeDirty`` when removing the worktree now would lose uncommitted work."""
    if os.path.isdir(wt.path) and (lost := await _uncommitted(wt.path)):
        raise WorktreeDirty(wt.path, lost)


async def remove(wt: WorktreeInfo, *, discard: bool) -> list[str]:
    """Remove the worktree (never its branch); ``WorktreeDirty`` when it holds uncommitted work
    and ``discard`` is not given. What was discarded, or []."""
    if not os.path.isdir(wt.path):
        await _git("worktree", "prune", cwd=wt.repo)
        return []
    lost = await _uncommitted(wt.path)
    if lost and not discard:
        raise WorktreeDirty(wt.path, lost)
    run = await _git("worktree", "remove", *(["--force"] if lost else []), "--", wt.path, cwd=wt.repo)
    if run.code != 0:
        raise WorktreeBusy(f"git worktree remove refused: {run.err[-400:]}")
    return lost


# -- what changed ---------------------------------------------------------------------------------


def _stamp(path: str) -> tuple[int, int]:
    """The newest mtime of any file or folder of the worktree (``.git`` aside) and how many there
    are: moves whenever a file is written, added or removed. In a worker thread."""
    newest, count = 0, 0
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name == ".git" and folder == path:
                        continue
                    st = entry.stat(follow_symlinks=False)
                    newest, count = max(newest, st.st_mtime_ns, st.st_ctime_ns), count + 1
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return newest, count


def _index_mtime(index: str) -> int:
    try:
        return os.stat(index).st_mtime_ns
    except OSError:
        return 0


async def _key(wt: WorktreeInfo) -> tuple[object, ...]:
    """What the cache is keyed on: HEAD and base commits, the index's mtime, the files' stamp
    (one git call, and the walk in a worker thread beside it)."""
    revs, stamp = await asyncio.gather(
        _out("rev-parse", "--path-format=absolute", "--git-path", "index", "HEAD", wt.base, cwd=wt.path),
        asyncio.to_thread(_stamp, wt.path),
    )
    index = (revs or "").split("\n", 1)[0]
    return revs, stamp, await asyncio.to_thread(_index_mtime, index) if index else 0


def _numstat(text: str) -> list[tuple[str, int | None, int | None]]:
    rows: list[tuple[str, int | None, int | None]] = []
    for line in text.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3:
            added, removed, path = parts
            rows.append((path, None if added == "-" else int(added), None if removed == "-" else int(removed)))
    return rows


def _split_patch(patch: str) -> dict[str, str]:
    """A unified diff cut into one piece per file, by the ``b/`` path of its header."""
    pieces: dict[str, str] = {}
    for piece in re.split(r"(?m)^(?=diff --git )", patch):
        first = piece.split("\n", 1)[0]
        if first.startswith("diff --git ") and " b/" in first:
            pieces[first.rsplit(" b/", 1)[1]] = piece
    return pieces


def _status(piece: str | None, added: int | None) -> str:
    if added is None:
        return "binary"
    head = (piece or "").split("@@", 1)[0]
    if "new file mode" in head:
        return "added"
    if "deleted file mode" in head:
        return "deleted"
    return "modified"


async def compute(wt: WorktreeInfo) -> Changes:
    """Everything the branch changed since it left its base, uncommitted and untracked work
    included (a private copy of the index marks untracked files intent-to-add; nothing of the
    worktree's own index or files is touched)."""
    head = await _out("rev-parse", "HEAD", cwd=wt.path) or ""
    counts = await _out("rev-list", "--left-right", "--count", f"{wt.base}...HEAD", cwd=wt.path) or "0 0"
    behind, ahead = (int(n) for n in counts.split())
    since = await _out("merge-base", wt.base, "HEAD", cwd=wt.path) or head
    index = await _out("rev-parse", "--path-format=absolute", "--git-path", "index", cwd=wt.path)
    scratch = await asyncio.to_thread(tempfile.mkdtemp, prefix="panewatch-index-")
    try:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        if index and os.path.exists(index):
            await asyncio.to_thread(shutil.copyfile, index, env["GIT_INDEX_FILE"])
        else:
            await _git("read-tree", "HEAD", cwd=wt.path, env=env)
        await _git("add", "--all", "--intent-to-add", cwd=wt.path, env=env)
        stat = await _git("diff", "--numstat", "--no-renames", since, cwd=wt.path, env=env)
        patch = await _git("diff", "--no-renames", "--no-color", since, cwd=wt.path, env=env, limit=_PATCH_READ_MAX)
    finally:
        await asyncio.to_thread(shutil.rmtree, scratch, True)
    rows = _numstat(stat.out.decode(errors="replace"))
    pieces = _split_patch(patch.out.decode(errors="replace"))
    files, budget, truncated = [], DIFF_MAX_BYTES, len(rows) > FILES_MAX
    for path, added, removed in rows[:FILES_MAX]:
        piece = pieces.get(path)
        diff, summary = None, None
        if added is None:
            summary = "binary file"
        elif piece is None or len(piece) > FILE_DIFF_MAX_BYTES or len(piece) > budget:
            summary = f"+{added} −{removed}: diff too large to show"
            truncated = True
        else:
            diff, budget = piece, budget - len(piece)
        files.append(
            FileChange(
                path=path, status=_status(piece, added), added=added, removed=removed, diff=diff, summary=summary
            )
        )
    return Changes(
        branch=wt.branch,
        base=wt.base,
        head=head,
        ahead=ahead,
        behind=behind,
        added=sum(a or 0 for _, a, _ in rows),
        removed=sum(r or 0 for _, _, r in rows),
        files=files,
        files_total=len(rows),
        truncated=truncated,
    )


class ChangesCache:
    """Changes per worktree, computed again only when its HEAD, base, index or files moved; one
    computation at a time per worktree (pollers wait for the one running)."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[tuple[object, ...], Changes]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, wt: WorktreeInfo) -> Changes:
        async with self._locks.setdefault(wt.path, asyncio.Lock()):
            key = await _key(wt)
            kept = self._kept.get(wt.path)
            if kept is not None and kept[0] == key:
                return kept[1]
            changes = await compute(wt)
            self._kept[wt.path] = (key, changes)  # the key read before: a write during it shows next time
            return changes

    def forget(self, path: str) -> None:
        self._kept.pop(path, None)
        self._locks.pop(path, None)
