"""Settings → engine, in one place: the server, the benchmark's probe and the lab build the
engine the same way, so an option added to ``Settings`` reaches all of them."""

from __future__ import annotations

from .config import Settings
from .engine import Engine
from .hosts.base import PaneHost
from .keeper import Keeper
from .manifest import ManifestStore, bundled_manifest_dir
from .notify import Notifier


def build_store(settings: Settings) -> ManifestStore:
    """The bundled manifests, overridden by the ``manifests`` folder when one is set."""
    return ManifestStore.from_dirs(bundled_manifest_dir(), settings.manifests)


def build_engine(settings: Settings, *, store: ManifestStore | None = None, host: PaneHost | None = None,
                 keeper: Keeper | None = None) -> Engine:
    notifier = Notifier(cooldown=settings.cooldown_s, webhook=settings.notify_webhook,
                        command=settings.notify_command)
    return Engine(
        store or build_store(settings), host=host, sweep_ms=settings.sweep_ms, mode=settings.mode,
        settle_ms=settings.settle_ms, cap_ms=settings.cap_ms, change_bytes=settings.change_bytes,
        report_freshness=settings.report_freshness_s, notifier=notifier,
        service_url=settings.public_url or f"http://127.0.0.1:{settings.port}", backend=settings.backend,
        transcripts=settings.transcripts, transcript_max_bytes=settings.transcript_max_bytes, keeper=keeper,
    )
