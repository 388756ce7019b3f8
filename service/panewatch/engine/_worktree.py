"""Sessions in their own git worktree: the engine's side of ``worktrees`` (the git work itself).

The worktree is added before the agent starts there and removed after it ended, only when clean
or when the delete confirmed losing its changes; both are ``Acted`` events naming the actor, for
the approval ledger. Nothing here pushes, merges or deletes a branch.
"""

from __future__ import annotations

import logging

from .. import worktrees
from ..errors import InvalidRequest
from ..worktrees import Changes, WorktreeInfo, WorktreeSpec
from ._context import EngineContext
from ._sessions import AnySession
from .events import Acted, Action
from .models import Actor

log = logging.getLogger("panewatch.engine")


class Worktrees:
    """Adds, reads and removes the worktrees of sessions; their changes cached per worktree."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.cache = worktrees.ChangesCache()

    async def add(self, spec: WorktreeSpec) -> WorktreeInfo:
        return await worktrees.add(spec.repo, spec.branch, spec.base)

    def added(self, session: AnySession, actor: Actor) -> None:
        """Announce a worktree the session started in (after its ``Created``)."""
        wt = session.worktree
        assert wt is not None
        log.info("worktree %s (branch %s) added for %s", wt.path, wt.branch, actor, extra={"session": session.id})
        self.ctx.hub.publish(Acted(session.id, Action.worktree_added, actor, f"{wt.branch} at {wt.path}"))

    async def undo(self, wt: WorktreeInfo) -> None:
        """A launch refused after its worktree was added: the fresh worktree goes (its branch stays)."""
        await worktrees.remove(wt, discard=True)

    async def check_removable(self, session: AnySession, *, discard: bool) -> None:
        """``WorktreeDirty`` (409, the files) before anything of the session ends, unless ``discard``."""
        if session.worktree is not None and not discard:
            await worktrees.remove_check(session.worktree)

    async def remove(self, session: AnySession, actor: Actor, *, discard: bool) -> list[str] | None:
        """Remove an ended session's worktree; the files it lost (None: it had no worktree). Work
        written after the check, between it and the agent's end, keeps the worktree in place."""
        wt = session.worktree
        if wt is None:
            return None
        self.cache.forget(wt.path)
        try:
            lost = await worktrees.remove(wt, discard=discard)
        except (worktrees.WorktreeDirty, worktrees.WorktreeBusy) as exc:
            log.warning("worktree %s kept: %s", wt.path, exc, extra={"session": session.id})
            return []
        detail = f"{wt.branch} at {wt.path}" + (f", {len(lost)} uncommitted files discarded" if lost else "")
        self.ctx.hub.publish(Acted(session.id, Action.worktree_removed, actor, detail))
        return lost

    async def changes(self, session: AnySession) -> Changes:
        if session.worktree is None:
            raise InvalidRequest(f"session {session.id!r} was not started in a worktree (no changes to show)")
        return await self.cache.get(session.worktree)
