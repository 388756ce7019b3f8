"""Settings → engine, in one place: the server, the benchmark's probe and the lab build the
engine the same way, so an option added to ``Settings`` reaches all of them."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path

from .config import Settings
from .engine import Engine
from .hosts.base import PaneHost
from .hosts.pty import PtyHost
from .identity import state_dir
from .keeper import Keeper
from .manifest import ManifestStore, bundled_manifest_dir
from .notify import Notifier
from .proctree import Reaper
from .registry import Registry


def build_store(settings: Settings) -> ManifestStore:
    """The bundled manifests, overridden by the ``manifests`` folder when one is set."""
    return ManifestStore.from_dirs(bundled_manifest_dir(), settings.manifests)


def build_engine(
    settings: Settings,
    *,
    store: ManifestStore | None = None,
    host: PaneHost | None = None,
    hosts: Mapping[str, PaneHost] | None = None,
    private: Path | None = None,
    keeper: Keeper | None = None,
) -> Engine:
    """The engine ``settings`` describe: ``hosts`` by kind (the first is the default), else ``host``,
    else the pty host with a reaper in the state folder (``private``, else ``state_dir(settings)``),
    so every process of a pane dies with it and with the server; ``keeper`` writes the session registry."""
    if hosts is None:
        host = host or PtyHost(reaper=Reaper(private or state_dir(settings)))
    notifier = Notifier(cooldown=settings.cooldown_s, webhook=settings.notify_webhook, command=settings.notify_command)
    return Engine(
        store or build_store(settings),
        host=host,
        hosts=hosts,
        sweep_ms=settings.sweep_ms,
        mode=settings.mode,
        settle_ms=settings.settle_ms,
        cap_ms=settings.cap_ms,
        change_bytes=settings.change_bytes,
        report_freshness=settings.report_freshness_s,
        notifier=notifier,
        service_url=settings.public_url or f"http://127.0.0.1:{settings.port}",
        backend=settings.backend,
        transcripts=settings.transcripts,
        transcript_max_bytes=settings.transcript_max_bytes,
        keeper=keeper,
    )


def build_service_engine(
    settings: Settings,
    *,
    store: ManifestStore | None = None,
    host: PaneHost | None = None,
    registry: Registry | None = None,
    private: Path | None = None,
) -> Engine:
    """The engine a server runs (on ``host``, keeping the session ``registry``): the local
    one, wrapped in the cluster façade when ``cluster_url`` is set (nats-py is then needed:
    ``pip install 'panewatch[cluster]'``)."""
    keeper = Keeper(registry) if registry is not None else None
    engine = build_engine(settings, store=store, host=host, keeper=keeper, private=private)
    if not settings.cluster_url:
        return engine
    try:
        from .cluster.federation import ClusterEngine
        from .cluster.link import ClusterError, LinkOptions, NodeLink
    except ImportError as exc:
        raise StartupRefused(f"--cluster-url needs nats-py: pip install 'panewatch[cluster]' ({exc})") from None
    node = settings.node or socket.gethostname().split(".")[0]
    engine.id_prefix = f"{node}-"
    opts = LinkOptions(
        settings.cluster_url,
        node,
        creds=_path(settings.cluster_creds),
        tls_ca=_path(settings.cluster_tls_ca),
        tls_cert=_path(settings.cluster_tls_cert),
        tls_key=_path(settings.cluster_tls_key),
    )
    holder: list[ClusterEngine] = []
    try:
        link = NodeLink(opts, lambda op, args: holder[0].respond(op, args))
    except ClusterError as exc:
        raise StartupRefused(str(exc)) from None
    holder.append(ClusterEngine(engine, link))
    return holder[0]  # type: ignore[return-value]  # the same façade, over every node


class StartupRefused(Exception):
    """The server cannot start as configured (cluster refused it, nats-py missing...): one line."""


def _path(value: Path | None) -> str | None:
    return str(value) if value is not None else None
