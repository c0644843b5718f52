"""`timmy-compactor show SESSION --ref N|N-M | --grep TEXT`: the raw messages a view folded or collapsed,
read from the raw store the view was made from (state.db or the snapshot; with --engine, the raw log
the `timmy` engine kept inside Hermes), bounded like a recall answer."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import Any

from timmy_compactor.errors import EXIT_OK, TimmyError


def _text(item: dict[str, Any]) -> str:
    """What --max-chars bounds in a printed item: a message's text (its content, or its page of it), a
    search's line; the framing (ref, role, ids) is printed apart, like the notes."""
    from timmy_compactor.core.recall import paged_text

    if "line" in item:
        return str(item["line"])
    if "chars" in item:  # a page: its slice of the text
        return str(item["message"]["content"])
    return paged_text(item["message"])[0]  # whole: the text it is paged by (all of it as JSON when ids are long)


def _render_item(item: dict[str, Any]) -> str:
    """One item of a `show` answer as printed: a header line, the message's other parts (ids, calls) as
    one JSON line, then its text as it is."""
    if "line" in item:
        return f"{item['ref']} {item['role']}: {item['line']}\n"
    message = item["message"]
    page = f", {item['paged']} chars {item['chars'][0]}-{item['chars'][1]} of {item['of']}" if "chars" in item else ""
    out = f"── {item['ref']} {message.get('role')}{page} " + "─" * 20 + "\n"
    if rest := {k: v for k, v in message.items() if k not in ("role", "content")}:
        out += json.dumps(rest, ensure_ascii=False) + "\n"
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
    return out + text + ("" if text.endswith("\n") or not text else "\n")


_NOTE_WORDS = (
    (re.compile(r'ref "([^"]+)" with offset (\d+)'), r"--ref '\1' --offset \2"),
    (re.compile(r'ref "([^"]+)" \(not shown yet\)'), r"--ref '\1' (not shown yet)"),
    (re.compile(r"the same query with offset (\d+)"), r"the same --grep with --offset \1"),
    (re.compile(r"a larger max_chars"), "a larger --max-chars"),
)


def _cli_note(note: str) -> str:
    """A recall note in the CLI's words: its options, not the recall tool's parameter names."""
    for pattern, words in _NOTE_WORDS:
        note = pattern.sub(words, note)
    return note


def _cut_line(answer: Any, max_chars: int, by_ref: bool) -> str:
    how = "read on with the --offset its note names"
    if by_ref and answer.total > 1:
        how = "narrow the --ref, " + how
    shown = f"{len(answer.items)} of {answer.total} item(s) shown"
    return f"[answer cut at --max-chars {max_chars} characters of message text: {shown}; {how}, or raise --max-chars]"


def cmd_show(args: argparse.Namespace) -> int:
    from timmy_compactor.compactor import recall_source
    from timmy_compactor.config import load_config
    from timmy_compactor.core.recall import RefError, lookup, search

    config = load_config(args.config)
    session = recall_source(args.session, config, history=args.history, engine=args.engine)
    if not args.engine:
        from timmy_compactor.sessions.rawstore import RawStore

        if RawStore(config.engine_raw_dir).holds(session.session_id):
            print(
                "note: the timmy engine compacted this session inside Hermes; the #N refs the model saw "
                "are read with --engine",
                file=sys.stderr,
            )
    render = None if args.json else _text
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
        print(f"note: {_cli_note(note)}", file=sys.stderr)
    if answer.truncated:
        print(_cut_line(answer, args.max_chars, by_ref=args.grep is None))
    elif not answer.items:
        print("no match")
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


def add_show(verb: Callable[[str, str], argparse.ArgumentParser]) -> None:
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
        help="bound the answer: the message text printed (contents, or --grep's lines; the refs, roles and ids "
        "apart) is at most N characters, with --json the whole JSON object; a cut says so on one more line "
        "(default 6000, a tool answer's size)",
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
