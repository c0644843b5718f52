"""`timmy-compactor <verb>`: the command line. Verbs and flags here are a contract."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from timmy_compactor import __version__
from timmy_compactor.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, TimmyError
from timmy_compactor.show import add_show

if TYPE_CHECKING:
    from timmy_compactor.config import Config


def _config(args: argparse.Namespace) -> Config:
    """The configuration this command's --config names (loaded when a verb runs, not to parse its flags)."""
    from timmy_compactor.config import load_config

    return load_config(args.config)


def _print_json(data: Any) -> None:
    sys.stdout.write(orjson.dumps(data, default=str).decode() + "\n")


def _human_report(outcome: dict[str, Any]) -> str:
    name = Path(outcome["path"]).name
    if outcome["action"] in ("below_threshold", "removed_stale"):
        stale = " (stale view removed)" if outcome["action"] == "removed_stale" else ""
        return (
            f"{name}: {outcome['tokens_before']:,} tokens = {outcome['usage_before']:.0%} of "
            f"{outcome['context_window']:,}, below the {outcome['trigger_threshold']:.0%} threshold; "
            f"no view written{stale} (use --force to compact anyway)"
        )
    if outcome["action"] == "unchanged":
        return f"{name}: view is current, nothing to do"
    cut = 1 - outcome["tokens_after"] / outcome["tokens_before"] if outcome["tokens_before"] else 0
    lines = [
        f"{name}: {outcome['tokens_before']:,} → {outcome['tokens_after']:,} tokens (-{cut:.0%}), "
        f"{outcome['messages_before']} → {outcome['messages_after']} messages, "
        f"{'verified' if outcome['verified'] else 'NOT verified'}, {outcome['elapsed_ms']:.1f} ms"
    ]
    if outcome["rules"]:
        lines.append("  rules: " + ", ".join(f"{k} {v}" for k, v in outcome["rules"].items()))
    if outcome["action"] == "failed":
        lines.append(f"  no view written: {outcome['reason']}")
    elif outcome.get("view"):
        lines.append(f"  view: {outcome['view']}")
    return "\n".join(lines)


def cmd_compact(args: argparse.Namespace) -> int:
    from timmy_compactor.compactor import Action, Outcome, compact_file, compact_session, prepare, read_compactable
    from timmy_compactor.sessions.files import encode_json

    config = _config(args)
    raw = Path(args.raw)
    if args.out == "-":
        session = read_compactable(raw)
        prepared = prepare(session, config)
        result, elapsed = compact_session(session, config, force=args.force, prepared=prepared)
        action: Action = "printed" if result.compacted else ("failed" if result.report.triggered else "below_threshold")
        outcome = Outcome(
            path=raw, action=action, report=result.report, elapsed_ms=elapsed, reason=result.report.failure
        )
        if result.compacted:
            from timmy_compactor.compactor import view_meta
            from timmy_compactor.sessions.files import build_view

            view, _ = build_view(session, result, view_meta(config, prepared.tool_schema_tokens))
            sys.stdout.buffer.write(encode_json(view))
            sys.stdout.flush()
        report_stream = sys.stderr
    else:
        outcome = compact_file(raw, config, force=args.force, out=Path(args.out) if args.out else None)
        report_stream = sys.stdout
    data = outcome.as_dict() | {"trigger_threshold": config.compaction.trigger_threshold}
    if args.json:
        report_stream.write(orjson.dumps(data, default=str).decode() + "\n")
    else:
        report_stream.write(_human_report(data) + "\n")
    return EXIT_FAILED if outcome.action == "failed" else EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    from timmy_compactor.compactor import measure
    from timmy_compactor.sessions.files import read_session

    config = _config(args)
    session = read_session(Path(args.raw))
    usage = measure(session, config)
    data = {
        "path": str(session.path),
        "session_id": session.session_id,
        "model": session.model,
        "messages": len(session.messages),
        "user_turns": sum(1 for m in session.messages if m.get("role") == "user"),
        "tokens": usage.tokens,
        "context_window": usage.context_window,
        "usage": round(usage.usage, 4),
        "pressure_level": usage.pressure_level,
        "trigger_threshold": usage.trigger_threshold,
        "above_threshold": usage.above_threshold,
    }
    if args.json:
        _print_json(data)
    else:
        level = f", pressure level {data['pressure_level']}%" if data["pressure_level"] else ""
        print(
            f"{session.path.name}: {usage.tokens:,} tokens of {usage.context_window:,} ({usage.usage:.1%}){level}; "
            f"{data['messages']} messages, {data['user_turns']} user turns; "
            f"{'above' if usage.above_threshold else 'below'} the {usage.trigger_threshold:.0%} threshold"
        )
    return EXIT_OK


def _raw_bytes(session: Any) -> bytes | None:
    """The raw file's own bytes when they are still the ones the view was made from (byte-exact)."""
    from timmy_compactor.sessions.files import SessionError, read_regular, sha256_bytes

    if session.source != "file":
        return None
    try:
        data: bytes = read_regular(session.path)
    except (OSError, SessionError):
        return None
    return data if sha256_bytes(data) == session.sha256 else None


def cmd_restore(args: argparse.Namespace) -> int:
    from timmy_compactor.atomic import atomic_write
    from timmy_compactor.compactor import restore_file
    from timmy_compactor.sessions.files import encode_json

    document, session = restore_file(Path(args.view), _config(args))
    data = _raw_bytes(session) or encode_json(document)
    if args.out in (None, "-"):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        atomic_write(Path(args.out), data)
        print(f"restored {Path(args.view).name} → {args.out}", file=sys.stderr)
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    from timmy_compactor.config import effective_config, effective_config_yaml

    config = _config(args)
    if args.check:  # one line, for scripts and a start-up check (huey_consumer.sh's: among its log lines)
        if args.as_log:
            from timmy_compactor import logs

            logs.configure(config.logging.format, config.logging.level)
            logs.get_logger(__name__).info("config_ok", source=config.source)
        else:
            print(f"config OK: {config.source}")
        return EXIT_OK
    if args.get:  # one value, for scripts: `timmy-compactor config --get huey.workers`
        value: Any = effective_config(config)
        for part in args.get.split("."):
            if not isinstance(value, dict) or part not in value:
                raise TimmyError(f"config --get: no key {args.get!r}")
            value = value[part]
        print(orjson.dumps(value).decode() if isinstance(value, dict | list | bool) or value is None else value)
        return EXIT_OK
    if args.json:
        _print_json(effective_config(config) | {"source": config.source})
    else:
        sys.stdout.write(effective_config_yaml(config))
    return EXIT_OK


CONFIG_HELP = (
    "config file (default: $TIMMY_COMPACTOR_CONFIG, $XDG_CONFIG_HOME/timmy-compactor/compaction.yaml, "
    "built-in defaults)"
)


def _epilog() -> str:
    from timmy_compactor import locations
    from timmy_compactor.config import CONFIG_ENV, ENV_OVERRIDES, USER_CONFIG

    overrides = "\n".join(f"  {name:<22} {key}" for name, key in ENV_OVERRIDES)
    return f"""configuration file:
  --config F (before or after the verb), else ${CONFIG_ENV},
  else $XDG_CONFIG_HOME/timmy-compactor/compaction.yaml (here: {locations.user_config_file()}),
  else the old {USER_CONFIG} (with a notice), else the built-in defaults;
  `timmy-compactor config` prints the configuration in effect
state (queue, locks, records): huey.state_dir, default {locations.DESCRIBED["state"]}
export: export.dir, default {locations.DESCRIBED["export"]}

environment variables:
  {CONFIG_ENV:<22} the config file
{overrides}

exit status:
  0    done (including "below the threshold, no view written")
  1    done, but something failed: a view that did not verify, sessions an export
       left out, `hermes status` not active, a failed `eval-ledger` check
  2    bad input, config or usage (one line on stderr naming the file or flag)
  3-5  `status --check`: no sidecar runs on this home (3), the queue is unreachable (4),
       sessions fail (5)
  130  interrupted (Ctrl-C)

`timmy-compactor <verb> --help` describes a verb."""


Verb = Callable[[str, str], argparse.ArgumentParser]
"""Adds a verb (name, help) and returns its parser."""


def _add_compact(verb: Verb) -> None:
    p = verb("compact", "compact a raw session into its view (next to it, or --out)")
    p.add_argument("raw", metavar="RAW", help="a raw session file (session_<id>.json)")
    p.add_argument("--force", action="store_true", help="compact even below the trigger threshold")
    p.add_argument("--out", metavar="PATH|-", help="write the view here ('-' for stdout; the report goes to stderr)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=cmd_compact)


def _add_stats(verb: Verb) -> None:
    p = verb("stats", "tokens, window, usage and pressure level of a session")
    p.add_argument("raw", metavar="RAW", help="a raw session file (session_<id>.json)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.set_defaults(func=cmd_stats)


def _add_restore(verb: Verb) -> None:
    p = verb("restore", "rebuild the raw messages a view stands for, checked by hash")
    p.add_argument("view", metavar="VIEW", help="a view (compacted_session_<id>.json)")
    p.add_argument("--out", metavar="PATH|-", help="write the raw session here (default, or '-': stdout)")
    p.set_defaults(func=cmd_restore)


def _add_config(verb: Verb) -> None:
    p = verb(
        "config",
        "validate and show the effective configuration (file, defaults and environment overrides) as YAML",
    )
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print it as one JSON object (with its source)")
    shown.add_argument("--get", metavar="KEY", help="print one value, e.g. huey.workers")
    shown.add_argument("--check", action="store_true", help="only validate: print one line naming the file used")
    p.add_argument(
        "--as-log",
        action="store_true",
        help="with --check: that line as a log line (config_ok) in logging.format, as the sidecar's own lines",
    )
    p.set_defaults(func=cmd_config)


CORE_VERBS = ("compact", "stats", "restore", "show", "config")


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser of every verb; with `chosen`, one of `CORE_VERBS`, the extensions' verbs are left out
    (their modules import huey, redis, structlog, watchdog: a verb of ours does not pay for them)."""
    parser = argparse.ArgumentParser(
        prog="timmy-compactor",
        description="Deterministic, zero-inference context compaction for Hermes Agent sessions.",
        epilog=None if chosen in CORE_VERBS else _epilog(),  # the top-level help's
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--config", metavar="F", default=None, help=CONFIG_HELP)
    sub = parser.add_subparsers(dest="verb", required=True, metavar="<verb>")

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        # SUPPRESS: a --config given before the verb is not reset when none follows it
        p.add_argument("--config", metavar="F", default=argparse.SUPPRESS, help=CONFIG_HELP)
        return p

    for add in (_add_compact, _add_stats, _add_restore, add_show, _add_config):
        add(verb)
    if chosen not in CORE_VERBS:
        for register in _extensions():
            register(sub, verb)
    return parser


# Edge modules that add their own verbs: each defines `register_cli(sub, verb)`.
EXTENSION_MODULES: tuple[str, ...] = (
    "timmy_compactor.sidecar.cli",
    "timmy_compactor.hermes.cli",
    "timmy_compactor.export.cli",
    "timmy_compactor.compare.ledger_eval",
    "timmy_compactor.compare.cli",
)


def _extensions() -> list[Any]:
    import importlib

    return [importlib.import_module(name).register_cli for name in EXTENSION_MODULES]


def chosen_verb(argv: Sequence[str]) -> str | None:
    """The verb the arguments name (the first word that is not an option or `--config`'s value)."""
    words = iter(argv)
    for word in words:
        if word == "--config":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(chosen_verb(argv))
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except TimmyError as exc:  # ours: one line that names the thing and says what to do
        print(f"timmy-compactor: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # e.g. --out in a missing or read-only directory: one line, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"timmy-compactor: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
