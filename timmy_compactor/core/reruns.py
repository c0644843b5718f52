"""When a later tool call makes an earlier output stale (issue 30, item 3): the same command run again, or
the same file read again.

"The same" is narrow on purpose, so that no output is called stale that still says something new:
- a command: the same tool with the same arguments, whitespace in them normalised (`python x.py` run
  again, wherever it stands later in the session);
- a file read: `cat`, `nl`, `head` or `sed -n 'A,Bp'` of one path as the whole command (after an optional
  `cd DIR &&`, which a relative path is read against), or a read tool (`read_file` and the like) of a
  path. A later read supersedes an earlier one of the same file when it covers the lines the earlier
  one showed (a whole-file read covers every range; a range covers the same or a smaller one).
A file written between the two reads (a write tool of that path, `sed -i`, a redirection or `tee` into
it) still makes the later read the current one; the supersession names the last such write.
Only the first newer run is named, so what it says is a function of the messages up to that run: it is
the same at every later compaction.
"""

from __future__ import annotations

import bisect
import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.facts import (
    RawFacts,
    call_arguments,
    call_name,
    decoded_arguments,
    is_recall_call,
    tool_calls,
)

READ_TOOLS = frozenset({"read_file", "view_file", "open_file", "view", "cat"})
WRITE_TOOLS = frozenset({"write_file", "patch", "edit_file", "str_replace", "str_replace_editor", "apply_patch"})
_CD = re.compile(r"^cd\s+(\S+)\s*&&\s*")
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+))?p$")
_READER = re.compile(r"(?:cat|nl|head|sed)\s")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)")
_SEGMENTS = re.compile(r"&&|\|\||[;|\n]")
_IN_PLACE = re.compile(r"-\w*i")
_WRITE_MARK = re.compile(r"sed\s+(?:-\w+\s+)*-i|>>?|\btee\b|\bpatch\b|\bmv\b|\bcp\b|\btruncate\b")

Span = tuple[int, int] | None  # the lines a read showed (first, last); None: the whole file


@dataclass(frozen=True, slots=True)
class Run:
    """What one tool call did, as far as supersession asks: its key (tool and normalised arguments),
    and the file it read (with the lines) or wrote, if any."""

    key: str
    read: str | None = None
    span: Span = None
    writes: tuple[str, ...] = ()  # the files it may have written: a write tool's path, a command's targets


@dataclass(frozen=True, slots=True)
class Newer:
    """The first later run that supersedes an output: where its result is, and the last write of the
    file in between (for a read)."""

    of: int  # the raw index of the output it supersedes
    result: int
    read: bool
    edited_at: int | None = None


def run_of(call: dict[str, Any]) -> Run:
    name = call_name(call)
    arguments = call_arguments(call)
    decoded: Any = decoded_arguments(call)
    if decoded is None:  # not JSON, or nested deeper than the encoders below go: the text itself
        decoded = arguments if arguments.strip() else {}
    command = decoded.get("command", decoded.get("cmd")) if isinstance(decoded, dict) else None
    if isinstance(command, str):
        flat = " ".join(command.split())
        read, span = _shell_read(command)
        writes = tuple(_write_targets(command)) if _WRITE_MARK.search(command) else ()
        return Run(f"{name}\x00{flat}", read, span, writes)
    key = f"{name}\x00{' '.join(json.dumps(decoded, sort_keys=True, ensure_ascii=False).split())}"
    path = decoded.get("path", decoded.get("file_path")) if isinstance(decoded, dict) else None
    if not isinstance(path, str) or not path:
        return Run(key)
    if name in WRITE_TOOLS:
        return Run(key, writes=(posixpath.normpath(path),))
    if name in READ_TOOLS:
        return Run(key, posixpath.normpath(path), _tool_span(decoded))
    return Run(key)


def _tool_span(arguments: dict[str, Any]) -> Span:
    offset, limit = arguments.get("offset"), arguments.get("limit")
    if offset is None and limit is None:
        return None
    first = offset if isinstance(offset, int) and offset > 0 else 1
    last = first + limit - 1 if isinstance(limit, int) and limit > 0 else 1 << 30
    return (first, last)


def _shell_read(command: str) -> tuple[str | None, Span]:
    """The file a command only reads, and which lines: `cat PATH`, `nl PATH`, `head [-n N] PATH`,
    `sed -n 'A,Bp' PATH`, each alone after an optional `cd DIR &&`."""
    text = command.strip()
    where = _CD.match(text)
    base = where.group(1) if where else ""
    text = text[where.end() :] if where else text
    if any(mark in text for mark in ("|", ";", "&", ">", "<", "$(", "`", "\n")):
        return None, None
    if not _READER.match(text):
        return None, None
    found = _read_words(_words(text))
    if found is None:
        return None, None
    path, span = found
    return posixpath.normpath(posixpath.join(base, path)), span


def _read_words(words: list[str]) -> tuple[str, Span] | None:
    if len(words) < 2 or words[-1].startswith("-"):
        return None
    program, options, path = words[0], words[1:-1], words[-1]
    if program in ("cat", "nl") and all(option in ("-n", "-A", "-v") for option in options):
        return path, None
    if program == "head":
        lines = _head_lines(options)
        return (path, (1, lines)) if lines else None
    if program == "sed" and len(options) == 2 and options[0] == "-n":
        match = _SED_RANGE.match(options[1])
        if match:
            first = int(match.group(1))
            return path, (first, int(match.group(2) or first))
    return None


def _head_lines(options: list[str]) -> int | None:
    if not options:
        return 10
    if len(options) == 1 and options[0][:1] == "-" and options[0][1:].isdigit():
        return int(options[0][1:])
    if len(options) == 2 and options[0] == "-n" and options[1].isdigit():
        return int(options[1])
    return None


def covers(later: Span, earlier: Span) -> bool:
    if later is None:
        return True
    return earlier is not None and later[0] <= earlier[0] and earlier[1] <= later[1]


def writes_to(run: Run, path: str) -> bool:
    """Whether a run wrote to `path`: a write tool of that path, or a command whose write target (`sed -i`'s
    file, a redirection's, `tee`'s, `cp`'s or `mv`'s last word) is it or ends with its last two parts."""
    short = "/".join(path.split("/")[-2:])
    return any(written in (path, short) or written.endswith("/" + short) for written in run.writes)


def _write_targets(command: str) -> list[str]:
    targets: list[str] = []
    for segment in _SEGMENTS.split(_outside_heredocs(command)):
        words = _words(segment)
        if not words:
            continue
        targets += [words[k + 1] for k, word in enumerate(words[:-1]) if word in (">", ">>")]
        targets += [word.lstrip(">") for word in words if word[:1] == ">" and word.lstrip(">")]
        program = words[0]
        in_place = program == "sed" and any(_IN_PLACE.match(word) for word in words)
        if program in ("cp", "mv", "install", "truncate") or in_place:
            targets.append(words[-1])
        elif program == "tee":
            targets += [word for word in words[1:] if not word.startswith("-")]
    return [posixpath.normpath(target) for target in targets if target]


def _outside_heredocs(command: str) -> str:
    """The lines of a command that are not the body of a heredoc (a script's lines are no commands)."""
    if "<<" not in command:
        return command
    kept: list[str] = []
    until = ""
    for line in command.splitlines():
        if until:
            until = "" if line.strip() == until else until
            continue
        kept.append(line)
        opened = _HEREDOC.search(line)
        until = opened.group(1) if opened else ""
    return "\n".join(kept)


def _words(segment: str) -> list[str]:
    """The words of a shell command, each without the quotes around it (a quoted space splits a word:
    only a command's file names are read here, and those rarely hold one)."""
    return [word.strip("'\"") for word in segment.split()]


def results_of(facts: RawFacts) -> dict[object, int]:
    """Tool call id -> the raw index of its (first) result, found once per call."""
    memo = facts.cache("results_by_call")
    if 0 not in memo:
        found: dict[object, int] = {}
        for i, message in enumerate(facts.messages):
            if message.get("role") == "tool":
                found.setdefault(message.get("tool_call_id"), i)
        memo[0] = found
    results: dict[object, int] = memo[0]
    return results


@dataclass(frozen=True, slots=True)
class Calls:
    """Every tool call from some raw message on (recall's excepted), in order, each as (its message, its
    run, the raw index of its result or None); and where each key, file read and write is among them."""

    calls: tuple[tuple[int, Run, int | None], ...]
    by_key: dict[str, list[int]]
    by_read: dict[str, list[int]]
    writes: list[int]
    places: dict[tuple[int, object], int]  # (raw message, call id) -> the call's place in `calls`

    def place(self, message: int, call: dict[str, Any]) -> int | None:
        return self.places.get((message, call.get("id")))

    def newer(self, at: int) -> Newer | None:
        """What supersedes the output of call `at`, or None when nothing later does."""
        _, run, result = self.calls[at]
        if result is None:
            return None

        def answered(k: int) -> bool:
            return self.calls[k][2] is not None

        found = [_first_after(self.by_key.get(run.key, []), at, answered)]
        if run.read:
            same = self.by_read.get(run.read, [])
            found.append(_first_after(same, at, lambda k: answered(k) and covers(self.calls[k][1].span, run.span)))
        if not any(k is not None for k in found):
            return None
        first = min(k for k in found if k is not None)
        edits = self.writes[bisect.bisect_right(self.writes, at) : bisect.bisect_left(self.writes, first)]
        edited = [self.calls[k][0] for k in edits if run.read and writes_to(self.calls[k][1], run.read)]
        later_result = self.calls[first][2]
        assert later_result is not None
        return Newer(result, later_result, bool(run.read), edited[-1] if edited else None)


def _first_after(positions: list[int], at: int, wanted: Callable[[int], bool]) -> int | None:
    for k in positions[bisect.bisect_right(positions, at) :]:
        if wanted(k):
            return k
    return None


def calls_after(facts: RawFacts, start: int) -> Calls:
    """The tool calls from raw message `start` on, found once per compaction and start."""
    memo = facts.cache("runs_after")
    if start not in memo:
        results = results_of(facts)
        found: list[tuple[int, object, Run, int | None]] = []
        for i in range(start, len(facts.messages)):
            message = facts.messages[i]
            if message.get("role") != "assistant":
                continue
            for call in tool_calls(message):
                if not is_recall_call(call):
                    found.append((i, call.get("id"), _run(facts, i, call), results.get(call.get("id"))))
        by_key: dict[str, list[int]] = {}
        by_read: dict[str, list[int]] = {}
        for k, (_, _, run, _) in enumerate(found):
            by_key.setdefault(run.key, []).append(k)
            if run.read:
                by_read.setdefault(run.read, []).append(k)
        writes = [k for k, (_, _, run, _) in enumerate(found) if run.writes]
        places = {(i, call_id): k for k, (i, call_id, _, _) in enumerate(found)}
        memo[start] = Calls(tuple((i, run, result) for i, _, run, result in found), by_key, by_read, writes, places)
    calls: Calls = memo[start]
    return calls


def _run(facts: RawFacts, index: int, call: dict[str, Any]) -> Run:
    runs: dict[object, Run] = facts.read(
        "runs", index, lambda f, k: {c.get("id"): run_of(c) for c in tool_calls(f.messages[k])}
    )
    return runs.get(call.get("id")) or run_of(call)
