"""What an engine is configured with, in one value: the settings it reads, none of its parts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..panes.scheduler import Mode, Timing


@dataclass(frozen=True)
class EngineOptions:
    """The engine's settings (``wiring.options_of`` makes them from ``Settings``)."""

    mode: Mode = "sweep"
    sweep_ms: int = 700
    settle_ms: int = 40
    cap_ms: int = 150
    change_bytes: int = 256
    report_freshness: float = 60.0
    #: keys typed into a terminal this soon after its pane turned blocked are held back
    hold_keys_ms: int = 1000
    manifest_check_s: float = 1.0
    backend: str = "auto"
    transcripts: Path | None = None
    transcript_max_bytes: int = 50 * 1024 * 1024
    service_url: str = ""
    #: put before every new session id (a cluster node's name), so ids are unique across nodes
    id_prefix: str = ""

    @property
    def timing(self) -> Timing:
        return Timing(
            mode=self.mode,
            sweep_s=self.sweep_ms / 1000,
            settle_s=self.settle_ms / 1000,
            cap_s=self.cap_ms / 1000,
            change_bytes=self.change_bytes,
        )
