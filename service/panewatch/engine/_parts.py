"""The running engine's parts, built on one context in the one order they depend on each other:
the façade holds them, no part holds the façade (nor this bundle)."""

from __future__ import annotations

from dataclasses import dataclass

from ..policy import PolicyStore
from ..registry import Registry
from ._context import EngineContext
from ._feed import Feed
from ._guard import Guard
from ._keeper import Keeper
from ._launch import Launcher
from ._policy import PolicyRunner
from ._restore import Restorer
from ._table import Sessions
from ._terminal import Terminals
from ._worktree import Worktrees


@dataclass(frozen=True)
class Parts:
    """The running engine: its context and the parts built on it."""

    ctx: EngineContext
    table: Sessions
    feed: Feed
    launcher: Launcher
    guard: Guard
    keeper: Keeper | None
    restorer: Restorer | None
    policy: PolicyRunner
    terminals: Terminals


def build_parts(ctx: EngineContext, registry: Registry | None, policy: PolicyStore) -> Parts:
    """Every part, each given the context and the parts below it; the policy and the terminals
    listen on the hub."""
    table = Sessions(ctx)
    feed = Feed(ctx, table)
    launcher = Launcher(ctx, table, feed, Worktrees(ctx))
    keeper = Keeper(ctx, table, registry) if registry is not None else None
    restorer = Restorer(ctx, table, launcher, keeper) if keeper is not None else None
    guard = Guard(ctx, feed)
    runner = PolicyRunner(ctx, table, feed, guard, policy)
    ctx.hub.listen(runner.on_event)  # decides blocked asks
    terminals = Terminals(ctx, table, feed, guard, restorer)  # keeps every pane's output from its first byte
    return Parts(ctx, table, feed, launcher, guard, keeper, restorer, runner, terminals)
