"""Service configuration: flags over environment (``PANEWATCH_*``) over a TOML file over defaults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource


class Settings(BaseSettings):
    """Every option of ``panewatch serve``; the README lists them all."""

    model_config = SettingsConfigDict(env_prefix="PANEWATCH_", extra="forbid", validate_default=True)

    host: str = Field("127.0.0.1", description="address to bind; loopback unless you mean it")
    port: int = Field(8765, ge=0, le=65535, description="port to bind (0 picks a free one)")
    token: str | None = Field(None, min_length=8, description="API token; random and printed if unset")
    sweep_ms: int = Field(700, ge=20, le=60_000, description="interval of the classification sweep")
    mode: Literal["sweep", "change"] = Field(
        "sweep", description="sweep: classify every sweep_ms; change: shortly after output pauses")
    settle_ms: int = Field(40, ge=5, le=5000, description="change mode: quiet time before classifying")
    cap_ms: int = Field(150, ge=10, le=10_000, description="change mode: longest wait while output never pauses")
    manifests: Path | None = Field(None, description="extra manifest folder, overriding the bundled ones")
    report_freshness_s: float = Field(60.0, gt=0, description="how long a hook report is trusted")
    cooldown_s: float = Field(30.0, ge=0, description="notifications: per session and state")
    notify_webhook: str | None = Field(None, description="URL that gets a JSON POST per notification")
    notify_command: str | None = Field(None, description="shell command run per notification (PANEWATCH_* env)")
    public_url: str | None = Field(None, description="URL agents' hooks use to reach /report")
    allowed_origins: list[str] = Field(default_factory=list, description="extra Origins allowed on WebSockets")
    screen_interval_ms: int = Field(100, ge=10, le=10_000, description="screen WebSocket: least time between frames")
    transcripts: Path | None = Field(None, description="folder for asciicast recordings of every session")
    transcript_max_bytes: int = Field(50 * 1024 * 1024, ge=4096, description="size cap of one recording")
    backend: Literal["pyte", "ghostty"] = Field("pyte", description="screen emulator")
    log_json: bool = Field(False, description="log JSON lines instead of text")
    config: Path | None = Field(None, description="TOML file with any of these options")

    @field_validator("manifests", "transcripts")
    @classmethod
    def _folder(cls, value: Path | None) -> Path | None:
        if value is not None and value.exists() and not value.is_dir():
            raise ValueError(f"{value} is not a folder")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_kwargs = getattr(init_settings, "init_kwargs", {}) or {}
        path = init_kwargs.get("config") or os.environ.get("PANEWATCH_CONFIG")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if path:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(path)))
        return tuple(sources)


def load_settings(**flags: Any) -> Settings:
    """Settings from flags (None means "not given"), the environment and the config file."""
    given = {k: v for k, v in flags.items() if v is not None}
    path = given.get("config") or os.environ.get("PANEWATCH_CONFIG")
    if path and not Path(path).is_file():
        raise ValueError(f"config file {path} not found")
    return Settings(**given)
