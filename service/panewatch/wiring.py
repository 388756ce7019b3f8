"""Settings → engine, in one place: the server, the benchmark's probe and the lab build the
engine the same way, so an option added to ``Settings`` reaches all of them."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .access.identity import state_dir
from .config import Settings
from .engine import Engine, EngineAPI, EngineOptions, HostKind
from .errors import StartupRefused
from .hosts.base import PaneHost
from .hosts.pty import PtyHost
from .manifest import ManifestStore, bundled_manifest_dir
from .policy import PolicyStore
from .procs.proctree import Reaper
from .procs.sandbox import sandbox_for
from .registry import Registry
from .sinks.notify import Notifier


def build_store(settings: Settings) -> ManifestStore:
    """The bundled manifests, overridden by the ``manifests`` folder when one is set."""
    return ManifestStore.from_dirs(bundled_manifest_dir(), settings.manifests)


def options_of(settings: Settings) -> EngineOptions:
    """The engine's part of the settings."""
    return EngineOptions(
        mode=settings.mode,
        sweep_ms=settings.sweep_ms,
        settle_ms=settings.settle_ms,
        cap_ms=settings.cap_ms,
        change_bytes=settings.change_bytes,
        report_freshness=settings.report_freshness_s,
        hold_keys_ms=settings.hold_keys_ms,
        backend=settings.backend,
        transcripts=Path(settings.transcripts) if settings.transcripts else None,
        transcript_max_bytes=settings.transcript_max_bytes,
        service_url=settings.public_url or f"http://127.0.0.1:{settings.port}",
    )


def build_engine(
    settings: Settings,
    *,
    store: ManifestStore | None = None,
    host: PaneHost | None = None,
    hosts: Mapping[HostKind, PaneHost] | None = None,
    private: Path | None = None,
    registry: Registry | None = None,
    options: EngineOptions | None = None,
) -> Engine:
    """The engine ``settings`` describe: ``hosts`` by kind (the first is the default), else ``host``,
    else the pty host with a reaper in the state folder (``private``, else ``state_dir(settings)``),
    so every process of a pane dies with it and with the server, and each agent in the sandbox the
    settings ask for (``contain``); sessions are kept in ``registry``."""
    if hosts is None and host is None:
        folder = private or state_dir(settings)
        host = PtyHost(reaper=Reaper(folder), sandbox=sandbox_for(settings, folder))
    notifier = Notifier(cooldown=settings.cooldown_s, webhook=settings.notify_webhook, command=settings.notify_command)
    return Engine(
        store or build_store(settings),
        host=host,
        hosts=hosts,
        options=options or options_of(settings),
        notifier=notifier,
        registry=registry,
        policy=PolicyStore.from_file(settings.policy_file),
    )


def build_service_engine(
    settings: Settings,
    *,
    store: ManifestStore | None = None,
    host: PaneHost | None = None,
    registry: Registry | None = None,
    private: Path | None = None,
) -> EngineAPI:
    """The engine a server runs (on ``host``, keeping the session ``registry``): the local
    one, wrapped in the cluster's when ``cluster_url`` is set (nats-py is then needed:
    ``pip install 'panewatch[cluster]'``)."""
    if not settings.cluster_url:
        return build_engine(settings, store=store, host=host, registry=registry, private=private)
    try:
        from .cluster.federation import ClusterEngine
        from .cluster.link import ClusterError, LinkOptions, NodeLink
    except ImportError as exc:
        raise StartupRefused(f"--cluster-url needs nats-py: pip install 'panewatch[cluster]' ({exc})") from None
    node = settings.node or socket.gethostname().split(".")[0]
    options = replace(options_of(settings), id_prefix=f"{node}-")
    engine = build_engine(settings, store=store, host=host, registry=registry, private=private, options=options)
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
    return holder[0]


def _path(value: Path | None) -> str | None:
    return str(value) if value is not None else None
