"""What the engine's parts share, handed to each when the engine starts: the manifests, the hub,
the notifier, the clocks, the hosts and the options. No part holds the façade, or another part
it does not use: each is given the context and the few parts below it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from ..clock import Clock
from ..errors import InvalidRequest
from ..hosts.base import HostKind, PaneHost
from ..manifest import ManifestStore
from ..procs.procinfo import Program
from ..sinks.notify import Notifier
from ._options import EngineOptions
from .events import EventHub


class Hosts:
    """Every host by kind and the default one; the ACP host is always there (ACP agents need no
    setup), the pty host when nothing else was given."""

    def __init__(self, host: PaneHost | None, hosts: Mapping[HostKind, PaneHost] | None) -> None:
        if hosts is None:
            if host is None:
                from ..hosts.pty import PtyHost

                host = PtyHost()
            hosts = {host.kind: host}
        self.by_kind: dict[HostKind, PaneHost] = dict(hosts)
        if HostKind.acp not in self.by_kind:
            from ..hosts.acp import AcpHost

            self.by_kind[HostKind.acp] = AcpHost()
        self.default = host if host is not None else next(iter(self.by_kind.values()))

    def get(self, kind: HostKind | None) -> PaneHost:
        """The host of this kind (None: the default); ``InvalidRequest`` when none is configured."""
        if kind is None:
            return self.default
        found = self.by_kind.get(kind)
        if found is None:
            raise InvalidRequest(f"unknown host {kind!r} (configured: {', '.join(self.by_kind)})")
        return found

    def __iter__(self) -> Iterator[PaneHost]:
        return iter(self.by_kind.values())


@dataclass
class Reach:
    """How a new agent reaches this server: its URL and the variables every agent gets (the
    report socket's path and URL), known only once the server listens."""

    url: str
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineContext:
    store: ManifestStore
    hub: EventHub
    notifier: Notifier
    clock: Clock  # monotonic: the scheduler's, the guards' waits, a report's age
    wall: Callable[[], float]  # wall clock: a decision's ``since``
    programs: Callable[[int], Program | None]  # which program a process group runs (/proc)
    options: EngineOptions
    backend: str  # the screen backend chosen at start ("auto" decided)
    hosts: Hosts
    reach: Reach
