"""`timmy-compactor hermes enable|disable|status`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from timmy_compactor.config import engine_trigger, load_config, resolve_context_window
from timmy_compactor.errors import TimmyError
from timmy_compactor.hermes.setup import apply, probe
from timmy_compactor.host.home import hermes_home
from timmy_compactor.host.names import ENGINE_NAME


@contextlib.contextmanager
def _probe_home(home: Path) -> Iterator[Path]:
    """A throwaway copy of what Hermes' loader reads (config.yaml, .env; plugins/ linked): importing
    Hermes creates its home skeleton, and checking must not create anything at the path given."""
    with tempfile.TemporaryDirectory(prefix="timmy-hermes-probe-") as tmp:
        for name in ("config.yaml", ".env"):
            if (home / name).is_file():
                shutil.copy2(home / name, Path(tmp) / name)
        if (home / "plugins").is_dir():
            (Path(tmp) / "plugins").symlink_to((home / "plugins").resolve())
        yield Path(tmp)


def _raw_log_state(directory: Path) -> dict[str, Any]:
    """Where the engine keeps its raw logs and whether it can write there (checking creates nothing)."""
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    writable = existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)
    return {"raw_log_dir": str(directory), "raw_log_writable": writable}


ENABLE_COMMAND = "timmy-compactor hermes enable"
_HERMES_ENABLE = re.compile(r"`?hermes plugins enable \w+`?")


def _point_to_enable(status: dict[str, Any]) -> None:
    """Hermes' loader says to run `hermes plugins enable timmy`, which only loads the plugin (the
    engine also needs `context.engine: timmy`): name the command that does both."""
    plugin = status.get("plugin")
    if isinstance(plugin, dict) and isinstance(plugin.get("error"), str):
        status["plugin"] = plugin | {"error": _HERMES_ENABLE.sub(f"`{ENABLE_COMMAND}`", plugin["error"])}
    if status.get("configured_engine") != ENGINE_NAME or not (isinstance(plugin, dict) and plugin.get("enabled")):
        status["hint"] = f"to activate it: {ENABLE_COMMAND}" + (
            "" if status.get("plugin") is not None else " (and check that the timmy plugin is installed)"
        )


def cmd_hermes(args: argparse.Namespace) -> int:
    home = hermes_home(args.hermes_home)
    create = args.action == "enable" and args.create
    if not home.is_dir() and not create:
        make = f"; to make a new one there: {ENABLE_COMMAND} --create" if args.action == "enable" else ""
        raise TimmyError(f"{home}: no Hermes home there (give --hermes-home DIR or set HERMES_HOME{make})")
    if args.action in ("enable", "disable"):
        changed, backup = apply(home, enable=args.action == "enable")
        where = home / "config.yaml"
        if changed and not where.exists():
            print(f"disabled the timmy context engine: removed {where} (enable had created it, nothing else was in it)")
        elif changed:
            print(
                f"{args.action}d the timmy context engine in {where}" + (f" (backup: {backup.name})" if backup else "")
            )
        else:
            print(f"{where}: already {args.action}d, nothing changed")
        if args.action == "disable":
            return 0
    with _probe_home(home) as copy:
        status = probe(copy)
    config = load_config(args.config)
    config = dataclasses.replace(config, sessions=dataclasses.replace(config.sessions, hermes_home=str(home)))
    status |= _raw_log_state(config.engine_raw_dir)
    status["trigger"] = dataclasses.asdict(engine_trigger(config, resolve_context_window(config, None)))
    if "error" not in status and not status["active"]:
        _point_to_enable(status)
    if args.json:
        print(json.dumps(status))
    elif "error" in status:
        print(f"status: {status['error']} (is hermes-agent installed? pip install 'timmy-compactor[hermes]')")
    else:
        verdict = "ACTIVE: Hermes loads the timmy engine" if status["active"] else "NOT active"
        print(
            f"{verdict} — context.engine={status['configured_engine']!r}, "
            f"plugin engine={status['plugin_engine']!r}, write_json_snapshots={status['write_json_snapshots']}"
        )
        plugin = status.get("plugin") or {}
        if not status["active"] and plugin.get("error"):
            print(f"  plugin: {plugin['error']}")
        if status.get("hint") and ENABLE_COMMAND not in str(plugin.get("error")):
            print(f"  {status['hint']}")
        print(f"  trigger: {status['trigger']['ratio']:.2f} of the window ({status['trigger']['reason']})")
        print(
            f"  engine raw logs (recall across Hermes restarts): {status['raw_log_dir']} — "
            + ("writable" if status["raw_log_writable"] else "NOT writable: #N refs restart when Hermes restarts")
        )
    return 0 if status.get("active") else 1


def register_cli(sub: Any, verb: Any) -> None:
    p = verb("hermes", "switch Hermes to the timmy context engine, or check that it would load")
    p.add_argument(
        "action",
        choices=["enable", "disable", "status"],
        help="enable: edit Hermes' config.yaml (backup first) and check; disable: undo what enable changed; "
        "status: ask Hermes' plugin loader (exit 0 only if it would load the timmy engine)",
    )
    p.add_argument("--hermes-home", metavar="DIR", help="default: $HERMES_HOME or ~/.hermes")
    p.add_argument("--json", action="store_true", help="print the status as one JSON object")
    p.add_argument(
        "--create",
        action="store_true",
        help="enable: make the Hermes home when there is none at the path (a typo is refused)",
    )
    p.set_defaults(func=cmd_hermes)
