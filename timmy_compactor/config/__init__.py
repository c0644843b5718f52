"""Configuration: `compaction.yaml`, validated on load (its sections: `sections.py`).

Lookup order for the file: `--config` flag, `$TIMMY_COMPACTOR_CONFIG`, the user's config file
(`$XDG_CONFIG_HOME/timmy-compactor/compaction.yaml`, else the old `~/.timmy/timmy-config/compaction.yaml`
with a notice; see `locations`), then the built-in defaults (identical to the repository's
`config/compaction.yaml`). A few environment variables override single keys, for
containers: `TIMMY_SESSIONS_DIR`, `TIMMY_HUEY_BACKEND`, `TIMMY_REDIS_URL`, `TIMMY_STATE_DIR`, `HERMES_HOME`,
`TIMMY_LOG_LEVEL`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_type_hints

import msgspec
import yaml

from timmy_compactor import locations
from timmy_compactor.config.sections import (
    DEFAULT_CONTEXT_WINDOW,
    Config,
    ExportSection,
    HermesSection,
    HueySection,
    LoggingSection,
    ModelSection,
    SessionsSection,
    mask_url_password,
    resolve_context_window,
)
from timmy_compactor.core.tokens import TextCounter
from timmy_compactor.core.types import Settings
from timmy_compactor.errors import TimmyError
from timmy_compactor.host.home import compression_threshold
from timmy_compactor.host.trigger import Trigger, hermes_trigger

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONTEXT_WINDOW",
    "ENV_OVERRIDES",
    "USER_CONFIG",
    "Config",
    "ConfigError",
    "ExportSection",
    "HermesSection",
    "HueySection",
    "LoggingSection",
    "ModelSection",
    "SessionsSection",
    "default_config_yaml",
    "effective_config",
    "effective_config_yaml",
    "engine_trigger",
    "load_config",
    "make_counter",
    "mask_url_password",
    "parse_config",
    "resolve_context_window",
]

USER_CONFIG = Path("~/.timmy/timmy-config/compaction.yaml")
"""The config file's old place, still read while the new one (`locations.user_config_file()`) does not exist."""
CONFIG_ENV = "TIMMY_COMPACTOR_CONFIG"


class ConfigError(TimmyError, ValueError):
    """A config file that cannot be used; the message names the file and the key."""


# Keys a user may not set in the file: the window is resolved per session from `model:`.
_DERIVED_KEYS: dict[type, set[str]] = {Settings: {"context_window"}}


def _check_keys(data: Any, cls: type, where: str) -> None:
    if not isinstance(data, Mapping):
        return
    hints = get_type_hints(cls)
    allowed = {f.name for f in dataclasses.fields(cls)} - _DERIVED_KEYS.get(cls, set()) - {"source"}
    for key, value in data.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in allowed:
            raise ConfigError(f"unknown key {path!r} (allowed here: {', '.join(sorted(allowed))})")
        if dataclasses.is_dataclass(hints[key]):
            _check_keys(value, hints[key], path)


_SECTIONS = frozenset(f.name for f in dataclasses.fields(Config) if f.name != "source")
RETIRED_KEYS: dict[str, frozenset[str]] = {"compaction": frozenset({"ledger_role"})}
"""Keys that no longer do anything: a file that still sets them loads, and they are ignored."""


def _without_retired(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: {kk: vv for kk, vv in v.items() if kk not in RETIRED_KEYS[k]}
        if k in RETIRED_KEYS and isinstance(v, Mapping)
        else v
        for k, v in data.items()
    }


def parse_config(data: Any, source: str) -> Config:
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping of sections")
    # A section whose keys are all commented out (`compaction:` alone) reads as null: its defaults.
    data = _without_retired({k: {} if v is None and k in _SECTIONS else v for k, v in data.items()})
    try:
        _check_keys(data, Config, "")
        config = msgspec.convert(data, Config)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {str(exc).replace('$.', '')}") from None
    config = _target_follows_trigger(config, data.get("compaction"))
    _check_values(config, source)
    return dataclasses.replace(config, source=source)


def _target_follows_trigger(config: Config, compaction: Any) -> Config:
    """A trigger set below the default `target_after` (0.40) takes the target down with it, unless the
    file sets `target_after` too: a compaction cannot aim above the point that starts it."""
    c = config.compaction
    if isinstance(compaction, Mapping) and "target_after" in compaction:
        return config
    if c.target_after is None or c.target_after <= c.trigger_threshold or c.trigger_threshold <= 0:
        return config
    return dataclasses.replace(config, compaction=dataclasses.replace(c, target_after=c.trigger_threshold))


def _check_values(config: Config, source: str) -> None:
    c = config.compaction
    problems = []
    if not 0 < c.trigger_threshold <= 1:
        problems.append("compaction.trigger_threshold must be in (0, 1]")
    if config.hermes.trigger_threshold is not None and not 0 < config.hermes.trigger_threshold <= 1:
        problems.append("hermes.trigger_threshold must be in (0, 1] or null")
    if not 0 < c.max_tail_ratio <= 1:
        problems.append("compaction.max_tail_ratio must be in (0, 1]")
    for key in ("protect_last_n_turns", "min_tail_steps", "drop_system_after_turn"):
        if getattr(c, key) < 0:
            problems.append(f"compaction.{key} must be >= 0")
    if c.target_after is not None and not 0 < c.target_after <= c.trigger_threshold:
        problems.append(
            f"compaction.target_after must be in (0, trigger_threshold] or null: it is {c.target_after:g} and "
            f"compaction.trigger_threshold is {c.trigger_threshold:g}: lower target_after too, or leave it out "
            "(it then follows the trigger down)"
        )
    if not 0 <= c.fold_quantum <= 1:
        problems.append("compaction.fold_quantum must be in [0, 1]")
    if not 0 <= c.min_free_ratio < 1:
        problems.append("compaction.min_free_ratio must be in [0, 1)")
    if not 0 < c.index_max_ratio <= 1:
        problems.append("compaction.index_max_ratio must be in (0, 1]")
    if c.max_tool_output_chars < 50:
        problems.append("compaction.max_tool_output_chars must be >= 50")
    if c.strategy not in ("rules", "ledger"):
        problems.append("compaction.strategy must be 'rules' or 'ledger'")
    for key, minutes in (
        ("huey.sweep_every_minutes", config.huey.sweep_every_minutes),
        ("export.every_minutes", config.export.every_minutes),
    ):
        if minutes < 1:
            problems.append(f"{key} must be >= 1 (minutes between runs, any number: 90 is every 90 minutes)")
    if config.model.context_window is not None and config.model.context_window < 1024:
        problems.append("model.context_window must be >= 1024")
    for name, window in config.model.context_windows.items():
        if window < 1024:
            problems.append(f"model.context_windows[{name!r}] must be >= 1024")
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    chosen = path or env.get(CONFIG_ENV)
    candidate = Path(chosen).expanduser() if chosen else locations.config_file()
    if candidate is not None:
        try:
            text = candidate.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{candidate}: cannot read config ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{candidate}: config is not UTF-8 text") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{candidate}: invalid YAML{_yaml_problem(exc)}") from None
        config = parse_config(data, str(candidate))
    else:
        config = Config()
    return _apply_env(config, env)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Where the YAML goes wrong and what is wrong, in words: `at line 3, column 1: expected ..., found
    the end of the file` (PyYAML's `<stream end>` and `"<unicode string>"` are its internals)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = str(getattr(exc, "problem", None) or exc)
    context = getattr(exc, "context", None)
    said = f"{context}, {problem}" if context else problem
    for internal, words in (
        ("<stream end>", "the end of the file"),
        ("<block end>", "the end of a block"),
        ("end of stream", "end of the file"),
    ):
        said = said.replace(f"'{internal}'", words).replace(internal, words)
    return f"{where}: {' '.join(said.split())} (check the indentation and the quotes there)"


ENV_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("HERMES_HOME", "sessions.hermes_home (and sessions.dir: $HERMES_HOME/sessions)"),
    ("TIMMY_SESSIONS_DIR", "sessions.dir"),
    ("TIMMY_HUEY_BACKEND", "huey.backend"),
    ("TIMMY_REDIS_URL", "huey.redis_url"),
    ("TIMMY_STATE_DIR", "huey.state_dir"),
    ("TIMMY_LOG_LEVEL", "logging.level"),
)
"""The environment variables that override one key each, and the key."""

_LOG_LEVELS = ("debug", "info", "warning", "error")


def _apply_env(config: Config, env: Mapping[str, str]) -> Config:
    sessions, huey, logging = config.sessions, config.huey, config.logging
    if env.get("HERMES_HOME"):
        home = env["HERMES_HOME"]
        sessions = dataclasses.replace(sessions, hermes_home=home, dir=str(Path(home) / "sessions"))
    if env.get("TIMMY_SESSIONS_DIR"):
        sessions = dataclasses.replace(sessions, dir=env["TIMMY_SESSIONS_DIR"])
    if env.get("TIMMY_HUEY_BACKEND"):
        backend = env["TIMMY_HUEY_BACKEND"]
        if backend not in ("sqlite", "redis"):
            raise ConfigError(f"TIMMY_HUEY_BACKEND: expected 'sqlite' or 'redis', got {backend!r}")
        huey = dataclasses.replace(huey, backend=backend)  # type: ignore[arg-type]
    if env.get("TIMMY_STATE_DIR"):
        huey = dataclasses.replace(huey, state_dir=env["TIMMY_STATE_DIR"])
    if env.get("TIMMY_REDIS_URL"):
        huey = dataclasses.replace(huey, redis_url=env["TIMMY_REDIS_URL"])
    if env.get("TIMMY_LOG_LEVEL"):
        level = env["TIMMY_LOG_LEVEL"].lower()
        if level not in _LOG_LEVELS:
            expected = ", ".join(_LOG_LEVELS)
            raise ConfigError(f"TIMMY_LOG_LEVEL: expected one of {expected}, got {env['TIMMY_LOG_LEVEL']!r}")
        logging = dataclasses.replace(logging, level=level)  # type: ignore[arg-type]
    return dataclasses.replace(config, sessions=sessions, huey=huey, logging=logging)


def make_counter(config: Config) -> TextCounter | None:
    """The exact tokenizer, when configured (`hf:<tokenizer.json>`, loaded offline)."""
    spec = config.model.tokenizer
    if spec == "rough":
        return None
    if spec.startswith("hf:"):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ConfigError("model.tokenizer: 'hf:' needs the 'tokenizers' package") from None
        path = Path(spec[3:]).expanduser()
        if not path.is_file():
            raise ConfigError(f"model.tokenizer: {path} is not a file (a local tokenizer.json is needed)")
        tokenizer = Tokenizer.from_file(str(path))
        return lambda text: len(tokenizer.encode(text).ids)
    raise ConfigError(f"model.tokenizer: expected 'rough' or 'hf:<path to tokenizer.json>', got {spec!r}")


def effective_config(config: Config) -> dict[str, Any]:
    """The configuration in use, as the file's sections (a Redis password masked)."""
    data = dataclasses.asdict(config)
    data.pop("source")
    data["compaction"].pop("context_window")  # resolved per session from `model:`
    data["huey"]["redis_url"] = config.huey.redis_url_shown
    return data


def effective_config_yaml(config: Config) -> str:
    """`effective_config` as YAML, headed by where it came from; loadable as a config file."""
    overrides = [name for name, _ in ENV_OVERRIDES if os.environ.get(name)]
    head = f"# timmy-compactor configuration in effect; source: {config.source}\n"
    if overrides:
        head += f"# overridden by the environment: {', '.join(overrides)}\n"
    return head + yaml.safe_dump(effective_config(config), sort_keys=False)


def default_config_yaml() -> str:
    """The defaults as YAML (what `config/compaction.yaml` holds)."""
    data = dataclasses.asdict(Config())
    data.pop("source")
    data["compaction"].pop("context_window")
    data["huey"]["state_dir"] = data["export"]["dir"] = None  # the platform's places, filled in when loaded
    return yaml.safe_dump(data, sort_keys=False)


def engine_trigger(config: Config, input_window: int) -> Trigger:
    """Inside Hermes: `hermes.trigger_threshold` when set, else Hermes' own threshold for the window,
    at most 0.85 (room for the answer and the next output): the bench chose it (docs/figures.md)."""
    if (ratio := config.hermes.trigger_threshold) is not None:
        return Trigger(ratio, f"hermes.trigger_threshold {ratio:g} ({config.source})")
    hermes = hermes_trigger(input_window, compression_threshold(config.hermes_home))
    if hermes.ratio <= ENGINE_TRIGGER_CAP:
        return hermes
    return Trigger(ENGINE_TRIGGER_CAP, f"{hermes.reason}, capped at {ENGINE_TRIGGER_CAP:g}: room for the answer")


ENGINE_TRIGGER_CAP = 0.85
