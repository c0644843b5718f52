"""The config file's sections as frozen dataclasses (what `compaction.yaml` may hold), `Config` (their whole)
and the context-window lookup a session's settings take."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from timmy_compactor import locations
from timmy_compactor.core.types import Settings
from timmy_compactor.host.home import cached_window, configured_window

DEFAULT_CONTEXT_WINDOW = 65_536


@dataclass(frozen=True, kw_only=True)
class ModelSection:
    context_window: int | None = None  # None: per-model table, Hermes' config.yaml, Hermes' cache, 65,536
    context_windows: dict[str, int] = field(default_factory=dict)  # model name -> tokens
    fallback_models: list[str] = field(default_factory=list)  # the window is the chain's minimum
    tokenizer: str = "rough"  # "rough" (Hermes' estimate) or "hf:/path/to/tokenizer.json"


@dataclass(frozen=True, kw_only=True)
class SessionsSection:
    dir: str = "~/.hermes/sessions"
    hermes_home: str | None = None  # None: the parent of `dir` (where Hermes keeps state.db)


if TYPE_CHECKING:
    DefaultedPath = str
else:
    DefaultedPath = str | None
"""A directory key that is `null` in a file (the platform's default place) and always a path once its
section is built (`__post_init__` fills it in): readers see a `str`."""


@dataclass(frozen=True, kw_only=True)
class HueySection:
    backend: Literal["sqlite", "redis"] = "sqlite"
    # queue file, locks, sidecar records; null: $XDG_STATE_HOME/timmy-compactor (~/.local/state/timmy-compactor)
    state_dir: DefaultedPath = None  # type: ignore[assignment]
    sqlite_path: str | None = None  # None: <state_dir>/huey.db
    redis_url: str = "redis://127.0.0.1:6379/0"
    workers: int = 2
    sweep_every_minutes: int = 5
    debounce_ms: int = 200
    retries: int = 3
    retry_delay_seconds: float = 0.5

    def __post_init__(self) -> None:
        if self.state_dir is None:
            object.__setattr__(self, "state_dir", str(locations.state_dir()))

    @property
    def redis_url_shown(self) -> str:
        """`redis_url` fit for logs and `status`: its password masked."""
        return mask_url_password(self.redis_url)


def mask_url_password(url: str) -> str:
    """`redis://:secret@host:6379/0` as `redis://:***@host:6379/0` (a URL without one unchanged)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL we can take apart: show none of what may be behind an @
        return url.rsplit("@", 1)[-1] if "@" in url else url
    if not password:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


@dataclass(frozen=True, kw_only=True)
class ExportSection:
    enabled: bool = False  # the periodic export copies every conversation elsewhere: opt-in
    dir: DefaultedPath = None  # type: ignore[assignment]  # null: $XDG_DATA_HOME/timmy-compactor/export
    every_minutes: int = 60
    redact_credentials: bool = True

    def __post_init__(self) -> None:
        if self.dir is None:
            object.__setattr__(self, "dir", str(locations.export_dir()))


@dataclass(frozen=True, kw_only=True)
class HermesSection:
    trigger_threshold: float | None = None  # the engine inside Hermes (None: Hermes' own threshold for the window)


@dataclass(frozen=True, kw_only=True)
class LoggingSection:
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


@dataclass(frozen=True, kw_only=True)
class Config:
    compaction: Settings = field(default_factory=Settings)
    model: ModelSection = field(default_factory=ModelSection)
    sessions: SessionsSection = field(default_factory=SessionsSection)
    huey: HueySection = field(default_factory=HueySection)
    export: ExportSection = field(default_factory=ExportSection)
    logging: LoggingSection = field(default_factory=LoggingSection)
    hermes: HermesSection = field(default_factory=HermesSection)
    source: str = "built-in defaults"

    @property
    def sessions_dir(self) -> Path:
        return Path(self.sessions.dir).expanduser()

    @property
    def state_dir(self) -> Path:
        return Path(self.huey.state_dir).expanduser()

    @property
    def engine_raw_dir(self) -> Path:
        """Where the `timmy` engine inside Hermes keeps each session's raw log (sessions/rawstore.py)."""
        return self.state_dir / "hermes-engine"

    @property
    def huey_sqlite_path(self) -> Path:
        return Path(self.huey.sqlite_path).expanduser() if self.huey.sqlite_path else self.state_dir / "huey.db"

    @property
    def hermes_home(self) -> Path:
        if self.sessions.hermes_home:
            return Path(self.sessions.hermes_home).expanduser()
        return self.sessions_dir.parent

    def fingerprint(self) -> str:
        """A short hash of everything that changes the view, recorded in each view."""
        data = dataclasses.asdict(self.compaction) | {"model": dataclasses.asdict(self.model)}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def settings_for(self, model: str | None = None, base_url: str | None = None) -> Settings:
        """The engine settings with the context window resolved for this session's model."""
        window = resolve_context_window(self, model, base_url)
        return dataclasses.replace(self.compaction, context_window=window)


def resolve_context_window(config: Config, model: str | None, base_url: str | None = None) -> int:
    """Per-model table, then `model.context_window`, then the window the user gave Hermes for this
    model (`model.context_length` in its config.yaml), then Hermes' cache, then 65,536.

    With `fallback_models`, the smallest window of the chain: a fallback may take over mid-session.
    """

    def one(name: str | None, url: str | None) -> int:
        if name and name in config.model.context_windows:
            return config.model.context_windows[name]
        if config.model.context_window is not None:
            return config.model.context_window
        configured = configured_window(config.hermes_home, name, url)
        if configured:
            return configured
        if name:
            cached = cached_window(config.hermes_home, name, url)
            if cached:
                return cached
        return DEFAULT_CONTEXT_WINDOW

    windows = [one(model, base_url)] + [one(name, None) for name in config.model.fallback_models]
    return min(windows)
