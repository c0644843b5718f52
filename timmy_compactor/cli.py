"""`timmy-compactor <verb>`: the command line. Verbs and flags here are a contract."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from timmy_compactor import __version__
from timmy_compactor.config import load_config
from timmy_compactor.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, TimmyError


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
    from timmy_compactor.compactor import Action, Outcome, compact_file, compact_session, read_compactable
    from timmy_compactor.sessions.files import encode_json

    config = load_config(args.config)
    raw = Path(args.raw)
    if args.out == "-":
        session = read_compactable(raw)
        result, elapsed = compact_session(session, config, force=args.force)
        action: Action = "printed" if result.compacted else ("failed" if result.report.triggered else "below_threshold")
        outcome = Outcome(
            path=raw, action=action, report=result.report, elapsed_ms=elapsed, reason=result.report.failure
        )
        if result.compacted:
            from timmy_compactor.compactor import tool_schema_tokens, view_meta
            from timmy_compactor.sessions.files import build_view

            tools_tokens = tool_schema_tokens(session.tools, session.source, config, session.platform)
            view, _ = build_view(session, result, view_meta(config, tools_tokens))
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

    config = load_config(args.config)
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
    from timmy_compactor.sessions.files import sha256_bytes

    if session.source != "file":
        return None
    try:
        data: bytes = session.path.read_bytes()
    except OSError:
        return None
    return data if sha256_bytes(data) == session.sha256 else None


def cmd_restore(args: argparse.Namespace) -> int:
    from timmy_compactor.atomic import atomic_write
    from timmy_compactor.compactor import restore_file
    from timmy_compactor.sessions.files import encode_json

    document, session = restore_file(Path(args.view), load_config(args.config))
    data = _raw_bytes(session) or encode_json(document)
    if args.out in (None, "-"):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        atomic_write(Path(args.out), data)
        print(f"restored {Path(args.view).name} → {args.out}", file=sys.stderr)
    return EXIT_OK


def _render_item(item: dict[str, Any]) -> str:
    """One item of a `show` answer as printed (what --max-chars bounds without --json)."""
    if "line" in item:
        return f"{item['ref']} {item['role']}: {item['line']}\n"
    page = f"{item['paged']} chars {item['chars'][0]}-{item['chars'][1]} of {item['of']} " if "chars" in item else ""
    rule = f"── {item['ref']} {page}" + "─" * 40 + "\n"
    return rule + json.dumps(item["message"], ensure_ascii=False, indent=1) + "\n"


def cmd_show(args: argparse.Namespace) -> int:
    from timmy_compactor.compactor import recall_source
    from timmy_compactor.core.recall import RefError, lookup, search

    config = load_config(args.config)
    session = recall_source(args.session, config, history=args.history, engine=args.engine)
    if not args.engine:
        from timmy_compactor.hermes.rawstore import RawStore

        if RawStore(config.engine_raw_dir).holds(session.session_id):
            print(
                "note: the timmy engine compacted this session inside Hermes; the #N refs the model saw "
                "are read with --engine",
                file=sys.stderr,
            )
    render = None if args.json else _render_item
    try:
        if args.grep is not None:
            answer = search(session.messages, args.grep, max_chars=args.max_chars, render=render, offset=args.offset)
        else:
            answer = lookup(session.messages, args.ref, max_chars=args.max_chars, render=render, offset=args.offset)
    except RefError as exc:
        raise TimmyError(f"{args.session}: {exc}") from None
    if args.json:
        print(answer.to_json())
        return EXIT_OK
    sys.stdout.write("".join(_render_item(item) for item in answer.items))
    for note in answer.notes:  # apart from what --max-chars bounds (with --json, they are in the object)
        print(f"note: {note}", file=sys.stderr)
    if answer.truncated:
        print(
            f"[answer cut at --max-chars {args.max_chars}: {len(answer.items)} of {answer.total} item(s) shown; "
            "narrow the ref or raise --max-chars]"
        )
    elif not answer.items:
        print("no match")
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    from timmy_compactor.config import effective_config, effective_config_yaml

    config = load_config(args.config)
    if args.check:  # one line, for scripts and a start-up check
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


def _int_at_least(low: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer of `low` or more, else an error naming what was given."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "an integer of 0 or more")


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="timmy-compactor",
        description="Deterministic, zero-inference context compaction for Hermes Agent sessions.",
        epilog=_epilog(),
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

    p = verb("compact", "compact a raw session into its view (next to it, or --out)")
    p.add_argument("raw", metavar="RAW", help="a raw session file (session_<id>.json)")
    p.add_argument("--force", action="store_true", help="compact even below the trigger threshold")
    p.add_argument("--out", metavar="PATH|-", help="write the view here ('-' for stdout; the report goes to stderr)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=cmd_compact)

    p = verb("stats", "tokens, window, usage and pressure level of a session")
    p.add_argument("raw", metavar="RAW", help="a raw session file (session_<id>.json)")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.set_defaults(func=cmd_stats)

    p = verb("restore", "rebuild the raw messages a view stands for, checked by hash")
    p.add_argument("view", metavar="VIEW", help="a view (compacted_session_<id>.json)")
    p.add_argument("--out", metavar="PATH|-", help="write the raw session here (default, or '-': stdout)")
    p.set_defaults(func=cmd_restore)

    p = verb("show", "print raw messages a view folded or collapsed: by ref (#N, #N-#M) or by text")
    p.add_argument("session", metavar="SESSION", help="a session id, a raw session file or its view")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--ref", metavar="N|N-M", help="raw message index or range, as the view names them (#12, #40-#44)"
    )
    what.add_argument("--grep", metavar="TEXT", help="the lines of the raw messages that contain TEXT")
    p.add_argument(
        "--max-chars",
        type=_positive_int,
        default=6_000,
        metavar="N",
        help="bound the answer: the items printed (with --json: the whole JSON object) are at most N characters; "
        "a cut says so on one more line (default 6000, a tool answer's size)",
    )
    p.add_argument(
        "--offset",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="--ref: where the first message's text starts (to read on where a cut answer stopped); "
        "--grep: how many matches to skip",
    )
    p.add_argument(
        "--history",
        action="store_true",
        help="state.db sessions: number every row Hermes ever had (archived ones too), not the live rows a view uses",
    )
    p.add_argument(
        "--engine",
        action="store_true",
        help="SESSION is a Hermes session id: the refs the timmy engine showed inside Hermes (its raw log)",
    )
    p.add_argument(
        "--json", action="store_true", help="print the answer as one JSON object (ref, items, truncated, total)"
    )
    p.set_defaults(func=cmd_show)

    p = verb(
        "config",
        "validate and show the effective configuration (file, defaults and environment overrides) as YAML",
    )
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print it as one JSON object (with its source)")
    shown.add_argument("--get", metavar="KEY", help="print one value, e.g. huey.workers")
    shown.add_argument("--check", action="store_true", help="only validate: print one line naming the file used")
    p.set_defaults(func=cmd_config)

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
