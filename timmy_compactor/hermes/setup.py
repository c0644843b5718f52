"""Switch Hermes to the `timmy` context engine, and ask Hermes whether it would load it.

Edits `$HERMES_HOME/config.yaml` safely: a timestamped backup first, the user's other keys and
comments kept (ruamel.yaml round-trip), an atomic replace, and no write at all when nothing
changes. `status` asks Hermes' own plugin loader, in a fresh process, whether it would load our
engine — a wrong name only makes Hermes log a warning and fall back to its LLM compressor.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from timmy_compactor.atomic import atomic_write
from timmy_compactor.errors import TimmyError
from timmy_compactor.host.names import ENGINE_NAME


class HermesConfigError(TimmyError):
    """Hermes' config.yaml cannot be edited (unreadable, not a mapping, ruamel.yaml missing)."""


def _yaml() -> Any:
    try:
        from ruamel.yaml import YAML
    except ImportError:
        raise HermesConfigError(
            "editing Hermes' config.yaml needs ruamel.yaml: pip install 'timmy-compactor[hermes]'"
        ) from None

    yaml = YAML()  # round-trip: keeps comments, order and quoting
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _load(path: Path) -> Any:
    if not path.exists():
        return {}
    yaml = _yaml()
    from ruamel.yaml.error import YAMLError

    try:
        data = yaml.load(path.read_text(encoding="utf-8"))
    except (YAMLError, UnicodeDecodeError) as exc:
        raise HermesConfigError(f"{path}: not readable YAML ({' '.join(str(exc).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HermesConfigError(f"{path}: the top level is not a mapping")
    return data


def _section(data: Any, key: str) -> Any:
    value = data.get(key)
    if not isinstance(value, dict):
        from ruamel.yaml.comments import CommentedMap

        value = CommentedMap()
        data[key] = value
    return value


RECORD_NAME = ".timmy-compactor-enable.json"
"""What `enable` changed in Hermes' config.yaml (key -> the value before, absent = no key), so that
`disable` restores that and only that."""

_ABSENT = {"absent": True}


def _read_record(home: Path) -> dict[str, Any]:
    try:
        record = json.loads((home / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _set(section: Any, key: str, value: Any, record: dict[str, Any], name: str) -> None:
    """Set `section[key]`, remembering the value before (unless already remembered)."""
    if section.get(key) == value:
        return
    record.setdefault(name, {"value": section[key]} if key in section else _ABSENT)
    section[key] = value


def _restore(section: Any, key: str, ours: Any, before: Any) -> None:
    """Put back the value before `enable`, unless the user changed it since."""
    if section.get(key) != ours:
        return
    if not isinstance(before, dict) or before.get("absent"):
        section.pop(key, None)
    else:
        section[key] = before.get("value")


def apply(home: Path, enable: bool) -> tuple[bool, Path | None]:
    """Enable or disable the engine in `home/config.yaml`. Returns (changed, backup path).

    `disable` touches only what is ours (what `enable` recorded, or `context.engine: timmy` and
    `timmy` in `plugins.enabled`): with nothing of ours there it writes nothing, no backup either. A
    config.yaml that `enable` created is removed again when nothing else is left in it."""
    path = home / "config.yaml"
    existed = path.exists()
    data = _load(path)
    before = _dump(data)
    record = _read_record(home)
    if enable:
        _enable(data, record, existed)
    else:
        _disable(data, record)
    after = _dump(data)
    if after == before:
        if not enable:
            (home / RECORD_NAME).unlink(missing_ok=True)  # a record of what is no longer there
        return False, None
    backup = None
    if not enable and record.get("config_absent") and after.strip() in ("", "{}"):
        path.unlink()  # enable created it and nothing else is in it: the home is as it was
        (home / RECORD_NAME).unlink(missing_ok=True)
        return True, None
    home.mkdir(parents=True, exist_ok=True)
    if existed:
        backup = path.with_name(f"config.yaml.timmy-backup-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
    mode = path.stat().st_mode & 0o777 if existed else 0o600
    atomic_write(path, after.encode("utf-8"), mode)
    if enable:
        atomic_write(home / RECORD_NAME, json.dumps(record, default=str).encode("utf-8"), 0o600)
    else:
        (home / RECORD_NAME).unlink(missing_ok=True)
    return True, backup


def _enable(data: Any, record: dict[str, Any], existed: bool) -> None:
    before_data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    context = _section(data, "context")
    plugins = _section(data, "plugins")
    enabled = plugins.get("enabled")
    if not isinstance(enabled, list):
        enabled = []
        plugins["enabled"] = enabled
    created = [k for k in ("context", "plugins", "sessions") if not isinstance(before_data.get(k), dict)]
    if not isinstance(before_data.get("plugins"), dict) or "enabled" not in before_data["plugins"]:
        created.append("plugins.enabled")
    record.setdefault("created", created)
    if not existed:
        record.setdefault("config_absent", True)
    _set(context, "engine", ENGINE_NAME, record, "context.engine")
    if ENGINE_NAME not in enabled:
        enabled.append(ENGINE_NAME)
    # for the sidecar
    _set(_section(data, "sessions"), "write_json_snapshots", True, record, "sessions.write_json_snapshots")


def _disable(data: Any, record: dict[str, Any]) -> None:
    """Undo `enable` on the sections that exist (none is created)."""
    context, plugins, sessions = (data.get(k) if isinstance(data.get(k), dict) else None for k in _SECTIONS)
    if context is not None:
        if "context.engine" in record:
            _restore(context, "engine", ENGINE_NAME, record["context.engine"])
        elif context.get("engine") == ENGINE_NAME:
            context["engine"] = "compressor"
    enabled = plugins.get("enabled") if plugins is not None else None
    if isinstance(enabled, list):
        while ENGINE_NAME in enabled:
            enabled.remove(ENGINE_NAME)
    if sessions is not None and "sessions.write_json_snapshots" in record:
        _restore(sessions, "write_json_snapshots", True, record["sessions.write_json_snapshots"])
    created = record.get("created") or []
    if plugins is not None and "plugins.enabled" in created and isinstance(enabled, list) and not enabled:
        del plugins["enabled"]
    for key in _SECTIONS:  # sections `enable` created, left empty
        if key in created and isinstance(data.get(key), dict) and not data[key]:
            del data[key]


_SECTIONS = ("context", "plugins", "sessions")


def _dump(data: Any) -> str:
    buffer = io.StringIO()
    _yaml().dump(data, buffer)
    return buffer.getvalue()


_PROBE = """
import json
from hermes_cli.config import load_config
from hermes_cli.plugins import get_plugin_context_engine, get_plugin_manager
cfg = load_config()
engine = get_plugin_context_engine()
plugins = {k: {"enabled": p.enabled, "error": p.error} for k, p in get_plugin_manager()._plugins.items()}
print(json.dumps({
    "configured_engine": (cfg.get("context") or {}).get("engine", "compressor"),
    "plugin_engine": getattr(engine, "name", None),
    "plugin": plugins.get("timmy"),
    "write_json_snapshots": bool((cfg.get("sessions") or {}).get("write_json_snapshots")),
}))
"""


def probe(home: Path, python: str | None = None) -> dict[str, Any]:
    """Ask Hermes' own config and plugin loader (in a fresh process) what it would use."""
    env = {**os.environ, "HERMES_HOME": str(home)}
    proc = subprocess.run(
        [python or sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"could not run Hermes' loader: {tail}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["active"] = result["configured_engine"] == ENGINE_NAME and result["plugin_engine"] == ENGINE_NAME
    return result
