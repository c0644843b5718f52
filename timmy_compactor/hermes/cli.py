"""`timmy-compactor hermes enable|disable|status`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from timmy_compactor.hermes.setup import apply, hermes_home, probe


def cmd_hermes(args: argparse.Namespace) -> int:
    home = hermes_home(args.hermes_home)
    if args.action in ("enable", "disable"):
        changed, backup = apply(home, enable=args.action == "enable")
        where = home / "config.yaml"
        if changed:
            print(
                f"{args.action}d the timmy context engine in {where}" + (f" (backup: {backup.name})" if backup else "")
            )
        else:
            print(f"{where}: already {args.action}d, nothing changed")
        if args.action == "disable":
            return 0
    status = probe(home)
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
    return 0 if status.get("active") else 1


def register_cli(sub: Any, verb: Any) -> None:
    p = verb("hermes", "switch Hermes to the timmy context engine, or check that it would load")
    p.add_argument("action", choices=["enable", "disable", "status"])
    p.add_argument("--hermes-home", metavar="DIR", help="default: $HERMES_HOME or ~/.hermes")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_hermes)
