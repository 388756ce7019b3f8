"""The worktree parts that need no git: a unified diff cut per file, the folder a branch gets, the
listing of checked-out branches, and a worktree refusal crossing a cluster as the same error."""

from __future__ import annotations

import pytest

from panewatch import worktrees
from panewatch.errors import Conflict
from panewatch.states import Decision, Source, State

pytestmark = pytest.mark.unit

PATCH = """diff --git a/app.py b/app.py
index 1..2 100644
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
-old
+new
 same
diff --git a/dir/new file.txt b/dir/new file.txt
new file mode 100644
--- /dev/null
+++ b/dir/new file.txt
@@ -0,0 +1 @@
+hello
"""


def test_a_patch_is_cut_per_file_and_each_says_its_status() -> None:
    pieces = worktrees._split_patch(PATCH)
    assert sorted(pieces) == ["app.py", "dir/new file.txt"]
    assert pieces["app.py"].startswith("diff --git a/app.py") and "+new" in pieces["app.py"]
    assert "+hello" in pieces["dir/new file.txt"] and "+new" not in pieces["dir/new file.txt"]
    assert worktrees._status(pieces["app.py"], 1) == "modified"
    assert worktrees._status(pieces["dir/new file.txt"], 1) == "added"
    assert worktrees._status(None, None) == "binary"


def test_numstat_rows_keep_binary_files_without_counts() -> None:
    assert worktrees._numstat("3\t1\tapp.py\n-\t-\tlogo.png\n") == [("app.py", 3, 1), ("logo.png", None, None)]


def test_a_branch_gets_a_folder_beside_the_repository() -> None:
    assert worktrees._folder_for("/src/shop", "agent/fix login") == "/src/shop.worktrees/agent-fix-login"


def test_the_checked_out_branches_are_read_from_the_porcelain_listing() -> None:
    listing = "worktree /src/shop\nHEAD abc\nbranch refs/heads/main\n\nworktree /src/x\nHEAD def\ndetached\n"
    assert worktrees._checked_out(listing) == {"main": "/src/shop"}


def test_a_remote_nodes_worktree_refusal_is_the_same_error_here() -> None:
    federation = pytest.importorskip("panewatch.cluster.federation", reason="nats-py (the cluster extra) is absent")
    from panewatch.cluster.link import RemoteError

    with pytest.raises(worktrees.WorktreeDirty, match="would lose") as dirty:
        federation._raise_remote(RemoteError(409, "the worktree would lose a.txt", {"files": ["a.txt"]}))
    assert dirty.value.files == ["a.txt"] and dirty.value.status == 409
    with pytest.raises(worktrees.WorktreeBusy, match="checked out already"):
        federation._raise_remote(RemoteError(409, "branch 'x' is checked out already, in /r"))
    seen = Decision(State.blocked, Source.screen, "a prompt").as_dict()
    with pytest.raises(Conflict):
        federation._raise_remote(RemoteError(409, "blocked", {"decision": seen}))
