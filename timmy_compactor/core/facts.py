"""What a message says that the engine promises to keep: paths, URLs, tool names, errors.

Rules use these functions to decide what to carry into a summary line, and `verify` uses the
same functions to check that it was carried, so the two can never disagree on what a path is.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from timmy_compactor.core.depth import MAX_DEPTH, nesting_depth
from timmy_compactor.core.keylines import KeyLine, exit_code, key_lines_of, read_errors, template, with_exit_code
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.text import decode_json, lines_holding, readable, string_leaves, text_of
from timmy_compactor.core.types import Message

URL_RE = re.compile(r"\b(?:https?|ftp|wss?|file)://[^\s\"'<>`\\)\]}]+")
# A path has a slash between name characters (`a/b`, `/etc/hosts`, `~/x`, `./run.sh`).
PATH_RE = re.compile(r"(?<![\w/:.~-])(?:~/[\w.@+-]+|(?:~|\.{1,2})?/?[\w.@+-]+/[\w.@+-]+)(?:/[\w.@+-]+)*/?")
ERROR_LINE_RE = re.compile(
    r"Traceback \(most recent call last\)|(?:Error|Exception)\b|\berror\b|\bERROR\b|\bfatal\b|"
    r"\bFAILED\b|\bFAIL:|No such file or directory|command not found|Permission denied|"
    r"\bnot found\b|\bpanic:",
)
# Every match of ERROR_LINE_RE contains one of these (lower-cased); `in` scans far faster than re.
_ERROR_KEYWORDS = (
    "error",
    "exception",
    "traceback",
    "fatal",
    "fail",
    "no such file",
    "not found",
    "denied",
    "panic",
)

_FAILED_PREFIX_RE = re.compile(r"^\s*(?:Error\b|ERROR\b|error:|Traceback \(most recent call last\)|Exception\b)")
PERSISTED_OUTPUT = "<persisted-output>"  # found by `in`: a literal regex search is several times slower
RECALL_TOOL = "timmy_recall"
"""The recall tool's name inside Hermes. Its calls and answers are the engine's own traffic, no fact of
the session: what it quotes back is read where it was first said, never again from its answer."""


def tool_calls(message: Message) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def call_name(call: dict[str, Any]) -> str:
    fn = call.get("function")
    return str(fn.get("name", "")) if isinstance(fn, dict) else ""


def call_arguments(call: dict[str, Any]) -> str:
    fn = call.get("function")
    args = fn.get("arguments", "") if isinstance(fn, dict) else ""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def decoded_arguments(call: dict[str, Any]) -> Any:
    """A call's arguments as JSON (an object or array), or None: none, not JSON, or nested deeper than
    the core's walks go (`text.decode_json`, the one bounded reader)."""
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if isinstance(args, str):
        return decode_json(args)
    return args if isinstance(args, dict | list) and nesting_depth(args) <= MAX_DEPTH else None


def is_recall_call(call: dict[str, Any]) -> bool:
    return call_name(call) == RECALL_TOOL


def recall_answers(messages: Sequence[Message]) -> set[int]:
    """The indices of the recall answers among `messages`: tool results named so, or answering a recall
    call of the assistant message their step began with. One pass: a step of n parallel calls is not
    walked back n times."""
    return scan_recall_answers(messages, 0, set(), [])[0]


def scan_recall_answers(
    messages: Sequence[Message], start: int, found: set[int], open_ids: list[Any]
) -> tuple[set[int], list[Any]]:
    """`recall_answers` of `messages` read on from `start`: `found` (added to) and the ids of the recall
    calls of the step open there (a list: an id may be any JSON value, unhashable too)."""
    for index in range(start, len(messages)):
        message = messages[index]
        if message.get("role") != "tool":
            open_ids = [c.get("id") for c in tool_calls(message) if is_recall_call(c)]
        elif RECALL_TOOL in (message.get("name"), message.get("tool_name")) or message.get("tool_call_id") in open_ids:
            found.add(index)
    return found, open_ids


def searchable_text(message: Message) -> str:
    """All text of a message where a promised fact may appear."""
    parts = [readable(text_of(message.get("content")))]
    for call in tool_calls(message):
        parts.append(call_name(call))
        parts.append(readable(call_arguments(call)))
    return "\n".join(parts)


def paths_and_urls(text: str) -> list[str]:
    """Paths and URLs in `text`, in order of first appearance, without duplicates."""
    if "/" not in text:
        return []
    # Paths and URLs never contain whitespace: scan only the words that hold a slash (7x faster).
    words = " ".join(word for word in text.split() if "/" in word)
    urls = URL_RE.findall(words)
    rest = URL_RE.sub(" ", words)
    found = urls + [p for p in PATH_RE.findall(rest) if _looks_like_path(p)]
    return list(dict.fromkeys(found))


def _looks_like_path(candidate: str) -> bool:
    # `a/b` inside prose or code is common ("and/or", "x/2"); demand a letter on both sides.
    pieces = [p for p in candidate.split("/") if p not in ("", ".", "..", "~")]
    return len(pieces) >= 1 and any(c.isalpha() for c in candidate)


def promised_refs(message: Message, *, redacted: bool = False) -> list[str]:
    """Paths and URLs that must survive: from user/assistant text and tool-call arguments (a recall
    call's are no fact). With `redacted`, those of the redacted text (a line of a key body is no path)."""
    role = message.get("role")
    if role not in ("user", "assistant"):
        return []
    text = readable(text_of(message.get("content")))
    for call in tool_calls(message):
        if not is_recall_call(call):
            text += "\n" + readable(call_arguments(call))
    refs = paths_and_urls(text)
    if not redacted or not refs:
        return refs
    # A ref swallowed by a credential (a line of a key body) is none to keep. Looked up among the refs and
    # slash-words of the redacted text; searched for in it only for a few: a text full of refs would
    # otherwise cost refs × length.
    safe = redact_text(text)
    present = set(paths_and_urls(safe)) | {word.strip(WORD_EDGES) for word in safe.split() if "/" in word}
    shown: list[str] = []
    searches = MAX_REF_SEARCHES
    for ref in refs:
        kept = redact_text(ref)
        if ref in present or kept in present:
            shown.append(kept)
        elif searches > 0:
            searches -= 1
            if ref in safe or kept in safe:
                shown.append(kept)
    return list(dict.fromkeys(shown))


WORD_EDGES = "()[]{}<>\"'`,;:.!?"
MAX_REF_SEARCHES = 32  # refs looked for in the whole redacted text when no word of it is the ref


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    failed: bool
    key_lines: tuple[KeyLine, ...] = ()  # whether the call failed or not (exit 0 may print errors)
    exit_code: int | None = None  # as the result reports it

    @property
    def anchored_lines(self) -> tuple[KeyLine, ...]:
        """The key lines the anchor index lists: a failing command's exit code before the first."""
        return with_exit_code(self.key_lines, self.exit_code)


def tool_outcome(content: Any) -> ToolOutcome:
    """Decide from a tool result whether the call failed, and read its key error lines."""
    text = text_of(content)
    decoded = decode_json(text)
    code = exit_code(text, decoded)
    return _outcome(text, decoded, key_lines_of(text, decoded, code), code)


def tool_reading(content: Any) -> tuple[ToolOutcome, tuple[str, ...]]:
    """`tool_outcome` and the result's error templates (`keylines.error_lines`), read in one pass."""
    text = text_of(content)
    decoded = decode_json(text)
    code = exit_code(text, decoded)
    errors = read_errors(text, decoded, code)
    return _outcome(text, decoded, errors.key_lines, code), errors.templates


def _outcome(text: str, decoded: Any, key_lines: tuple[KeyLine, ...], code: int | None) -> ToolOutcome:
    failed = bool(code)
    if isinstance(decoded, dict):
        if decoded.get("error") not in (None, "", False):
            failed = True
        if decoded.get("success") is False or decoded.get("ok") is False:
            failed = True
        status = decoded.get("status_code", decoded.get("status"))
        if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
            failed = True
    body = text if decoded is None else "\n".join(string_leaves(decoded))
    if _FAILED_PREFIX_RE.match(body) or "Traceback (most recent call last)" in body:
        failed = True
    if not (failed or key_lines or code is not None):
        return _SUCCEEDED  # most results
    return ToolOutcome(failed=failed, key_lines=key_lines, exit_code=code)


_SUCCEEDED = ToolOutcome(failed=False)


def exit_line(message: Message) -> str:
    """What the anchor index lists first for a failing command's result (`exit 2: ModuleNotFoundError: …`,
    `exit 124`), so that a search finds it by its exit code; "" for any other message."""
    if message.get("role") != "tool":
        return ""
    outcome = tool_outcome(message.get("content"))
    return str(outcome.anchored_lines[0]) if outcome.exit_code else ""


def recall_outcome(content: Any) -> ToolOutcome:
    """A recall answer's outcome: failed when recall could not answer (`{"error": …}`), and no key error
    lines: the lines it quotes are other messages' lines, read where they were said."""
    decoded = decode_json(text_of(content))
    return ToolOutcome(failed=isinstance(decoded, dict) and decoded.get("error") not in (None, "", False))


def iter_error_lines(text: str) -> Iterator[str]:
    """The lines of `text` that read like errors, in order (the keywords found first, `lines_holding`)."""
    low = text.lower()
    if len(low) != len(text):  # a few characters change length when lower-cased: go line by line
        yield from (line for line in text.splitlines() if ERROR_LINE_RE.search(line))
        return
    yield from (line for line in lines_holding(text, _ERROR_KEYWORDS, low) if ERROR_LINE_RE.search(line))


def error_lines(lines: list[str]) -> list[str]:
    """The lines that read like errors (`lines` as from `str.splitlines`, so none holds a newline)."""
    return list(iter_error_lines("\n".join(lines)))


_T = TypeVar("_T")


class RawFacts:
    """Facts of the raw messages, each computed at most once (per `Readings`)."""

    __slots__ = ("made", "memo", "messages", "readings", "recall_answers", "redactions", "spans_read", "templates")

    def __init__(self, messages: Sequence[Message], readings: Readings | None = None) -> None:
        self.messages = messages
        self.readings = readings if readings is not None else Readings()
        self.memo: dict[str, dict[int, Any]] = {}  # readings of one call only (the ledger's)
        self.made: dict[tuple[str, Hashable], Any] = {}  # `once`: of one call only
        self.redactions: dict[str, str] = {}  # of one call only
        self.templates: dict[str, str] = {}  # of one call only
        self.spans_read: dict[tuple[Any, ...], Any] = {}  # spans found the same objects in this call
        self.recall_answers: set[int] | None = None  # of this call's messages (`answers_recall`)

    def redacted(self, text: str) -> str:
        """`redact_text(text)`, once per text in this call: a path or an id recurs in many messages."""
        found = self.redactions.get(text)
        if found is None:
            found = self.redactions[text] = redact_text(text)
        return found

    def templated(self, line: str) -> str:
        """`keylines.template(line)`, once per line in this call: the index's error entries and what
        condensing compares read the same key lines and exemplars."""
        found = self.templates.get(line)
        if found is None:
            found = self.templates[line] = template(line)
        return found

    def cache(self, name: str) -> dict[int, Any]:
        return self.memo.setdefault(name, {})

    def once(self, name: str, key: Hashable, make: Callable[[], _T]) -> _T:
        """`make()` once per `key` in this call (the folds a compaction tries ask for the same things)."""
        if (name, key) not in self.made:
            self.made[(name, key)] = make()
        found: _T = self.made[(name, key)]
        return found

    def read(self, name: str, index: int, compute: Callable[[RawFacts, int], Any]) -> Any:
        """The reading `name` of message `index`: `compute(self, index)` once per message object there,
        kept in `Readings.tables` (across calls with the same readings; the arguments passed, not a
        closure made: a compaction asks for a few thousand readings)."""
        message = self.messages[index]
        table = self.readings.tables.get(name)
        if table is None:
            table = self.readings.tables[name] = {}
        hit = table.get(index)
        if hit is None or hit[0] is not message:
            hit = table[index] = (message, compute(self, index))
        return hit[1]

    def read_span(self, key: tuple[Any, ...], indices: Sequence[int], compute: Callable[[RawFacts], Any]) -> Any:
        """A reading of several messages (a step), computed once while they are the same objects, and
        their identity checked once per call (each fold a compaction tries reads the same spans)."""
        if key in self.spans_read:
            return self.spans_read[key]
        table = self.readings.spans
        hit = table.get(key)
        if (
            hit is not None
            and len(hit[0]) == len(indices)
            and all(map(operator.is_, hit[0], (self.messages[i] for i in indices)))
        ):
            value = hit[1]
        else:
            value = compute(self)
            table[key] = (tuple(self.messages[i] for i in indices), value)
        self.spans_read[key] = value
        return value

    def refs(self, index: int) -> list[str]:
        refs: list[str] = self.read("refs", index, lambda f, i: promised_refs(f.messages[i]))
        return refs

    def safe_refs(self, index: int) -> list[str]:
        """The refs of the redacted message: what a redacted view or the index promises."""
        refs: list[str] = self.read("safe_refs", index, lambda f, i: promised_refs(f.messages[i], redacted=True))
        return refs

    def answers_recall(self, index: int) -> bool:
        """Whether message `index` is a recall answer (`recall_answers`): the log read on from where the
        readings last left it, once per call."""
        if self.recall_answers is None:

            def read_on(kept: tuple[set[int], list[Any]] | None, seen: int) -> tuple[set[int], list[Any]]:
                found, open_ids = kept if kept is not None else (set(), [])
                return scan_recall_answers(self.messages, seen, found, open_ids)

            self.recall_answers = self.readings.grown("recall_answers", self.messages, read_on)[0]
        return index in self.recall_answers

    def outcome(self, index: int) -> ToolOutcome:
        return self._result_reading(index)[0]

    def error_templates(self, index: int) -> tuple[str, ...]:
        """One exemplar of each error template tool result `index` printed (`keylines.error_lines`)."""
        return self._result_reading(index)[1]

    def _result_reading(self, index: int) -> tuple[ToolOutcome, tuple[str, ...]]:
        reading: tuple[ToolOutcome, tuple[str, ...]] = self.read("outcome", index, _read_result)
        return reading

    def outcome_of(self, message: Message, sources: Sequence[int]) -> ToolOutcome:
        """The outcome of a tool message of the view (cached when it is still the raw one)."""
        if len(sources) == 1 and self.messages[sources[0]] is message:
            return self.outcome(sources[0])
        return self._judged(message.get("content"), sources[0] if sources else None)

    def _judged(self, content: Any, index: int | None) -> ToolOutcome:
        if index is not None and self.answers_recall(index):
            return recall_outcome(content)
        return tool_outcome(content)


def _read_result(facts: RawFacts, index: int) -> tuple[ToolOutcome, tuple[str, ...]]:
    content = facts.messages[index].get("content")
    if facts.answers_recall(index):  # its lines are other messages' lines
        return recall_outcome(content), ()
    return tool_reading(content)


def persisted_output_paths(content: Any) -> list[str]:
    """Files named by Hermes' `<persisted-output>` blocks (the full output lives there)."""
    text = text_of(content)
    if PERSISTED_OUTPUT not in text:
        return []
    return paths_and_urls(readable(text))
