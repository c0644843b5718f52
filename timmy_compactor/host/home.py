"""Hermes' home as this package reads it: where it is, and what its `config.yaml` and its
context-length cache say (the window the user gave a model, whether snapshots are written).

Reading only: `hermes/setup.py` (the plugin) is what edits `config.yaml`. Nothing here imports
Hermes or another module of ours; a file that cannot be read says nothing (None).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


def hermes_home(flag: str | None = None) -> Path:
    """The home a command names: the flag, else `$HERMES_HOME`, else `~/.hermes`."""
    return Path(flag or os.environ.get("HERMES_HOME") or "~/.hermes").expanduser()


def _yaml_file(path: Path) -> Any:
    """A YAML file's data (`{}` when empty), or None when it cannot be read or parsed."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def cached_window(hermes_home: Path, model: str, base_url: str | None) -> int | None:
    """Hermes' own record of a model's context length (`context_length_cache.yaml`)."""
    data = _yaml_file(hermes_home / "context_length_cache.yaml")
    lengths = data.get("context_lengths") if isinstance(data, dict) else None
    if not isinstance(lengths, dict):
        return None
    keys = [f"{model}@{base_url}"] if base_url else []
    keys += [k for k in lengths if isinstance(k, str) and k.split("@", 1)[0] == model]
    for key in keys:
        value = lengths.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def configured_window(hermes_home: Path, model: str | None, base_url: str | None = None) -> int | None:
    """The window the user gave Hermes for this model in `$HERMES_HOME/config.yaml`.

    `model.context_length` applies to Hermes' configured model (`model.default`, or `model.model`),
    so to a session of that model or of no known model; `custom_providers[].models.<model>.
    context_length` to that model (at that provider's `base_url` when both are known).
    """
    data = _yaml_file(hermes_home / "config.yaml")
    if not isinstance(data, dict):
        return None
    section = data.get("model")
    if isinstance(section, dict):
        configured = section.get("default") or section.get("model") or ""
        length = _positive_int(section.get("context_length"))
        if length and (not model or not configured or configured == model):
            return length
    providers = data.get("custom_providers")
    for entry in providers if isinstance(providers, list) else []:
        if not (model and isinstance(entry, dict) and isinstance(entry.get("models"), dict)):
            continue
        url = str(entry.get("base_url") or "").rstrip("/")
        if base_url and url and url != base_url.rstrip("/"):
            continue
        per_model = entry["models"].get(model)
        length = _positive_int(per_model.get("context_length")) if isinstance(per_model, dict) else None
        if length:
            return length
    return None


def snapshots_enabled(hermes_home: Path) -> bool | None:
    """Hermes' `sessions.write_json_snapshots` (None when its config cannot be read)."""
    data = _yaml_file(hermes_home / "config.yaml")
    if data is None:
        return None
    sessions = data.get("sessions") if isinstance(data, dict) else None
    return bool(sessions.get("write_json_snapshots")) if isinstance(sessions, dict) else False


def compression_threshold(hermes_home: Path) -> float | None:
    """Hermes' `compression.threshold` (None when unset, not a number in (0, 1], or unreadable)."""
    data = _yaml_file(hermes_home / "config.yaml")
    section = data.get("compression") if isinstance(data, dict) else None
    value = section.get("threshold") if isinstance(section, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value <= 1 else None
