"""Service configuration: flags over environment (``PANEWATCH_*``) over a TOML file over defaults."""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)


class Settings(BaseSettings):
    """Every option of ``panewatch serve``; the README lists them all."""

    model_config = SettingsConfigDict(env_prefix="PANEWATCH_", extra="forbid", validate_default=True)

    host: str = Field("127.0.0.1", description="address to bind; loopback unless you mean it")
    port: int = Field(8765, ge=0, le=65535, description="port to bind (0 picks a free one)")
    token: str | None = Field(
        None,
        min_length=8,
        description="API token; random if unset, kept 0600 in the state folder (a restart does not log the dashboard out) and printed (agents of the same user can read "
        "this one from the server's argv or environment: prefer token_file)",
    )
    token_file: Path | None = Field(None, description="file whose first line is the API token (keep it 0600)")
    state_dir: Path | None = Field(
        None,
        description="private folder for the report socket and the pane registry "
        "(default $XDG_STATE_HOME/panewatch, else ~/.local/state/panewatch)",
    )
    agent_users: list[str] = Field(
        default_factory=list,
        description="users other than the server's that agents run as (sudo -u, runuser, setpriv): the state folder "
        "becomes 0711 so their hooks reach the report socket (files stay 0600), checked at start",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names accepted besides loopback ones and public_url's (DNS-rebinding guard)",
    )
    max_body_bytes: int = Field(1 << 20, ge=1024, le=1 << 30, description="largest request body of any endpoint")
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="time a connection to the API port has to send its request head (then 408 and closed)",
    )
    login_ttl_s: float = Field(12 * 3600.0, gt=0, description="life of a dashboard login (its cookie)")
    sweep_ms: int = Field(700, ge=20, le=60_000, description="interval of the classification sweep")
    mode: Literal["sweep", "change"] = Field(
        "change",
        description="change: big repaints classified shortly after output pauses, the rest every sweep_ms; "
        "sweep: everything every sweep_ms",
    )
    hold_keys_ms: int = Field(
        1000,
        ge=0,
        le=60_000,
        description="keys typed into a terminal this soon after its pane turned blocked are held back until confirmed",
    )
    settle_ms: int = Field(40, ge=5, le=5000, description="change mode: quiet time before classifying")
    cap_ms: int = Field(150, ge=10, le=10_000, description="change mode: longest wait while output never pauses")
    change_bytes: int = Field(
        256,
        ge=0,
        le=1 << 20,
        description="change mode: a burst of output (no 20 ms gap) this big is read once it settles; a smaller one (a spinner frame) once the pane pauses",
    )
    manifests: Path | None = Field(None, description="extra manifest folder, overriding the bundled ones")
    policy_file: Path | None = Field(
        None, description="the approval policy (TOML rules, first match wins), re-read when it changes"
    )
    report_freshness_s: float = Field(60.0, gt=0, description="how long a hook report is trusted")
    cooldown_s: float = Field(30.0, ge=0, description="notifications: per session and state")
    notify_webhook: str | None = Field(None, description="URL that gets a JSON POST per notification")
    notify_command: str | None = Field(None, description="shell command run per notification (PANEWATCH_* env)")
    public_url: str | None = Field(
        None,
        description="the service's URL as browsers and agents reach it (agents get it as PANEWATCH_URL; "
        "its host is allowed; https makes the login cookie Secure)",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="extra Origins trusted as the dashboard's own: on WebSockets, and on POST/PUT/PATCH/DELETE "
        'authenticated by the login cookie ("*": any, which turns that check off)',
    )
    screen_interval_ms: int = Field(100, ge=10, le=10_000, description="screen WebSocket: least time between frames")
    transcripts: Path | None = Field(None, description="folder for asciicast recordings of every session")
    transcript_max_bytes: int = Field(50 * 1024 * 1024, ge=4096, description="size cap of one recording")
    pane_host: Literal["tmux", "pty"] | None = Field(
        None,
        description="where agents run: tmux (they outlive a restart of the server; the default when tmux "
        "3.2+ is installed) or pty (children of the server)",
    )
    contain: bool = Field(
        True,
        description="run each agent in its own bubblewrap sandbox (own PID namespace and /dev, no capabilities, "
        "the state folder and the server's secrets hidden, TIOCSTI refused) so that no agent can read or type "
        "into another pane; where bubblewrap cannot run, serve says what is lost; --no-contain turns it off",
    )
    backend: Literal["auto", "pyte", "ghostty"] = Field(
        "auto",
        description="screen emulator: auto (ghostty wherever its wheel installed, else pyte; logged at start), "
        "ghostty (libghostty-vt, ~100x faster) or pyte (pure Python, always installed)",
    )
    log_json: bool = Field(False, description="log JSON lines instead of text")
    metrics_public: bool = Field(False, description="serve /metrics without the token (it needs it by default)")
    cluster_url: str | None = Field(
        None, description="NATS server to join (nats://host:4222): one view over many nodes; needs `panewatch[cluster]`"
    )
    node: str | None = Field(None, description="this node's name in the cluster (default: the host name)")
    cluster_creds: Path | None = Field(None, description="NATS credentials file (.creds) of this node")
    cluster_tls_ca: Path | None = Field(None, description="CA bundle that signs the NATS server's certificate")
    cluster_tls_cert: Path | None = Field(None, description="client certificate for NATS (mutual TLS)")
    cluster_tls_key: Path | None = Field(None, description="key of the client certificate")
    push_subject: str | None = Field(
        None,
        description="VAPID subject of Web Push (a mailto: or https: URL the push services can reach you at; "
        "default: public_url when https, else mailto:panewatch@localhost, which Apple's push service refuses)",
    )
    push_ack_s: float = Field(
        60.0, gt=0, le=86_400, description="Web Push: a push not acknowledged (shown) this long escalates"
    )
    push_escalate: list[str] = Field(
        default_factory=list,
        description='Web Push: where an unacknowledged push escalates, in order, once per prompt: "device:NAME" '
        '(a device pushed only then), "webhook" (notify_webhook), "command" (notify_command); a sink named here '
        "gets blocked prompts only by escalation while any device is subscribed",
    )
    push_kinds: list[str] = Field(
        default_factory=lambda: ["blocked"],
        description='Web Push: the notifications pushed: "blocked", "idle" (a turn ended), "desktop" (the agent\'s own)',
    )
    push_ttl_s: int = Field(3600, ge=0, le=28 * 86_400, description="Web Push: how long a push service keeps a push")
    push_allow_loopback: bool = Field(
        False, description="Web Push: accept http:// push endpoints on loopback (a stand-in push service, for tests)"
    )
    ledger_days: int = Field(
        0,
        ge=0,
        le=36_500,
        description="the ledger keeps decisions this many days (0: forever); pruning keeps its chain",
    )
    tls_cert: Path | None = Field(None, description="TLS certificate (PEM) to serve https:// with; needs tls_key")
    tls_key: Path | None = Field(None, description="private key (PEM) of tls_cert")
    insecure_http: bool = Field(
        False,
        description="serve plain http on an address other than loopback (refused otherwise: the token, "
        "logins and answers would cross the network readable)",
    )
    config: Path | None = Field(None, description="TOML file with any of these options")

    @field_validator("token_file")
    @classmethod
    def _file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a file")
        return value

    @field_validator("tls_cert", "tls_key")
    @classmethod
    def _pem(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"{value} is not a file")
        return value

    @field_validator("push_subject")
    @classmethod
    def _subject(cls, value: str | None) -> str | None:
        """Push services (Apple's first) drop pushes whose VAPID subject is not a contact URL."""
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme == "mailto" and "@" in parts.path and not parts.netloc:
            return value
        if parts.scheme == "https" and parts.hostname:
            return value
        raise ValueError("must be a mailto: address (mailto:you@example.com) or an https: URL")

    @field_validator("push_escalate")
    @classmethod
    def _chain(cls, value: list[str]) -> list[str]:
        for step in value:
            if step not in ("webhook", "command") and not (step.startswith("device:") and len(step) > 7):
                raise ValueError(f'unknown step {step!r}: give "device:NAME", "webhook" or "command"')
        return value

    @field_validator("push_kinds")
    @classmethod
    def _kinds(cls, value: list[str]) -> list[str]:
        bad = set(value) - {"blocked", "idle", "desktop"}
        if bad:
            raise ValueError(f'unknown kind {sorted(bad)[0]!r}: give "blocked", "idle" or "desktop"')
        return value

    @model_validator(mode="after")
    def _tls_pair(self) -> Settings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both, or neither")
        return self

    @field_validator("manifests", "transcripts", "state_dir")
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


# --- every option as a flag, and errors as one line ---------------------------------------------


class ConfigError(ValueError):
    """A configuration that cannot be used, said in one line naming the option and its origin."""


#: Shorter flags the issue tracker and the README use for some options.
ALIASES: dict[str, tuple[str, ...]] = {"cluster_url": ("--cluster",), "policy_file": ("--policy",)}

#: Options whose values are never repeated back in an error message.
SECRET_FIELDS = frozenset({"token"})


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/panewatch``, else ``~/.local/state/panewatch``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "panewatch"


def _list_fields() -> set[str]:
    return {n for n, f in Settings.model_fields.items() if get_origin(f.annotation) is list}


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    return "PANEWATCH_" + field.upper()


def _metavar(annotation: Any) -> str | None:
    choices = [a for a in get_args(annotation) if isinstance(a, str)] if get_origin(annotation) is Literal else []
    return "{" + ",".join(choices) + "}" if choices else None


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per ``Settings`` field, generated so that a new option is never forgotten.

    Values stay strings here: pydantic validates them with the same rules as the
    environment and the file, so every source gets the same one-line error.
    """
    for name, field in Settings.model_fields.items():
        default = "none" if field.default is None else field.get_default(call_default_factory=True)
        help_text = f"{field.description} (env {env_name(name)}; default {default})"
        kwargs: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        if field.annotation is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif get_origin(field.annotation) is list:
            kwargs.update(action="append", metavar="VALUE")
            kwargs["help"] = (
                f"{field.description}; repeat the flag for several (env {env_name(name)} as a JSON list; default none)"
            )
        elif Path in get_args(field.annotation):
            kwargs["metavar"] = (
                "FILE" if name in ("config", "token_file", "tls_cert", "tls_key", "policy_file") else "DIR"
            )
        else:
            kwargs["metavar"] = _metavar(field.annotation) or name.split("_")[-1].upper()
        aliases = ALIASES.get(name, ())
        parser.add_argument(flag_name(name), *aliases, **kwargs)


def flags_from_namespace(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line (absent ones are left to the other sources)."""
    return {name: getattr(args, name) for name in Settings.model_fields if hasattr(args, name)}


def _origin(name: str, flags: dict[str, Any], config_path: str | None) -> str:
    if name in flags:
        return flag_name(name)
    if env_name(name) in os.environ:
        return env_name(name)
    if config_path:
        return f"{name} in {config_path}"
    return "default"


def _one_line(exc: ValidationError, flags: dict[str, Any], config_path: str | None) -> str:
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err["loc"]]
        name = loc[0] if loc else "?"
        where = (
            _origin(name, flags, config_path)
            if name in Settings.model_fields
            else (f"in {config_path}" if config_path else "")
        )
        shown = "input" in err and not isinstance(err["input"], dict) and name not in SECRET_FIELDS
        got = f" (got {err['input']!r})" if shown else ""
        msg = err["msg"] if name in Settings.model_fields else "unknown option"
        parts.append(f"{'.'.join(loc)} ({where}): {msg}{got}" if where else f"{'.'.join(loc)}: {msg}{got}")
    return "; ".join(parts)


def settings_or_error(flags: dict[str, Any]) -> Settings:
    """``load_settings`` whose every failure is a ``ConfigError`` with a one-line message."""
    given = {k: v for k, v in flags.items() if v is not None}
    config_path = given.get("config") or os.environ.get("PANEWATCH_CONFIG")
    try:
        return load_settings(**given)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, given, config_path and str(config_path))) from None
    except SettingsError as exc:  # a value the environment source could not even parse (JSON lists)
        found = re.search(r'field "(\w+)"', str(exc))
        name = found.group(1) if found else None
        hint = " as a JSON list, e.g. '[\"http://a\"]'" if name in _list_fields() else ""
        raise ConfigError(f"{name} ({env_name(name)}): cannot parse the value{hint}" if name else str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {config_path} is not valid TOML: {exc}") from None
    except (ValueError, OSError) as exc:
        raise ConfigError(" ".join(str(exc).split())) from None


def options_table() -> str:
    """The README's table of options, made from the model so the two cannot drift apart."""
    rows = ["| flag | environment | TOML key | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = (
            "—"
            if default is None
            else ("[]" if default == [] else str(default).lower() if isinstance(default, bool) else str(default))
        )
        flag = flag_name(name) if field.annotation is not bool else f"{flag_name(name)} / --no-{flag_name(name)[2:]}"
        key = "—" if name == "config" else f"`{name}`"
        meaning = field.description or ""
        if get_origin(field.annotation) is list:
            meaning += " (flag repeated; env a JSON list, e.g. `'[\"http://a\"]'`)"
        rows.append(f"| `{flag}` | `{env_name(name)}` | {key} | `{shown}` | {meaning} |")
    return "\n".join(rows)
