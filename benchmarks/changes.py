"""``GET /api/sessions/{id}/changes`` on a 5,000-file repository, beside ``git status`` alone.

Builds a repository of N files in folders of 50 (one commit), starts a session in a worktree of
it through the API (in process, ASGI transport, a real PTY running ``sleep``), changes three files
and adds an untracked one, then times, in the same run: ``git status --porcelain`` in the
worktree (the baseline: the least any answer costs), the first ``/changes`` (computed), and
the next ones with nothing moved (the cache's check: HEAD, base, index mtime, a walk of the files'
mtimes), then one after a file is touched (computed again). Wall times, medians of ``--calls``.

Run: ``nice .venv/bin/python benchmarks/changes.py [--files 5000] [--calls 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from panewatch.api import create_app
from panewatch.config import Settings

TOKEN = "bench-token-0123456789"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@e",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@e",
}


def make_repo(at: Path, files: int) -> None:
    at.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=at, check=True)
    for i in range(files):
        folder = at / f"pkg{i // 50:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i:05d}.py").write_text("".join(f"value_{i}_{n} = {n}\n" for n in range(30)))
    subprocess.run(["git", "add", "-A"], cwd=at, check=True, env=ENV)
    subprocess.run(["git", "commit", "-q", "-m", "files"], cwd=at, check=True, env=ENV)


async def timed(call) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    await call()
    return (time.perf_counter() - start) * 1000


async def run(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="pw-changes-"))
    make_repo(tmp / "repo", args.files)
    app = create_app(Settings(token=TOKEN, port=9, state_dir=tmp / "state"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url="http://127.0.0.1:9", transport=transport, headers=headers) as http:
            r = await http.post(
                "/api/sessions",
                json={"command": ["sleep", "600"], "worktree": {"repo": str(tmp / "repo"), "branch": "b"}},
            )
            r.raise_for_status()
            sid, path = r.json()["id"], Path(r.json()["cwd"])
            for name in ("pkg000/mod00000.py", "pkg050/mod02500.py", "pkg099/mod04999.py"):
                (path / name).write_text((path / name).read_text().replace("= 1\n", "= 100\n"))
            (path / "new.txt").write_text("untracked\n")

            async def status() -> None:
                proc = await asyncio.create_subprocess_exec(
                    "git", "status", "--porcelain", cwd=path, stdout=asyncio.subprocess.DEVNULL
                )
                await proc.wait()

            async def changes() -> None:
                got = await http.get(f"/api/sessions/{sid}/changes")
                got.raise_for_status()
                assert got.json()["files_total"] == 4, got.json()

            base = [await timed(status) for _ in range(args.calls)]
            first = await timed(changes)
            cached = [await timed(changes) for _ in range(args.calls)]
            os.utime(path / "new.txt")
            after = await timed(changes)
            base_after = [await timed(status) for _ in range(args.calls)]
            await http.delete(f"/api/sessions/{sid}", params={"discard": "true"})
    print(f"repository: {args.files} files; worktree {path}; load {os.getloadavg()[0]:.1f}")
    print(
        f"git status --porcelain (baseline): median {statistics.median(base):.0f} ms, after: {statistics.median(base_after):.0f} ms"
    )
    print(f"/changes first (computed):          {first:.0f} ms")
    print(f"/changes cached (nothing moved):    median {statistics.median(cached):.0f} ms, max {max(cached):.0f} ms")
    print(f"/changes after a touch (computed):  {after:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=20)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
