"""What a message says that the engine promises to keep: paths, URLs, tool names, errors.

Rules use these functions to decide what to carry into a summary line, and `verify` uses the
same functions to check that it was carried, so the two can never disagree on what a path is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.redact import redact_text
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
ERROR_LINE_MAX_CHARS = 240
"""How much of an error line is promised to survive (long lines are cut by characters)."""

_RETURNCODE_RE = re.compile(r"<returncode>\s*(-?\d{1,20})\s*</returncode>")
_FAILED_PREFIX_RE = re.compile(r"^\s*(?:Error\b|ERROR\b|error:|Traceback \(most recent call last\)|Exception\b)")
PERSISTED_OUTPUT_RE = re.compile(r"<persisted-output>")


def text_of(content: Any) -> str:
    """The readable text of a message content (string, or list of text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(p.get("text")) if isinstance(p, dict) else text_of(p) for p in content)
    return str(content)


def string_leaves(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON value, depth first, keys excluded (iterative: any depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def decode_json(text: str) -> Any:
    """The JSON value of `text` if it is a JSON object or array, else None."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser allows: treat as plain text
        return None


def readable(text: str) -> str:
    """Text with JSON-encoded payloads decoded, so `\\n` escapes become real lines."""
    decoded = decode_json(text)
    if decoded is None:
        return text
    return "\n".join(string_leaves(decoded))


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
    """Paths and URLs that must survive: from user/assistant text and tool-call arguments. With
    `redacted`, those of the redacted text (a line of a key body is no path to keep)."""
    role = message.get("role")
    if role not in ("user", "assistant"):
        return []
    text = readable(text_of(message.get("content")))
    for call in tool_calls(message):
        text += "\n" + readable(call_arguments(call))
    refs = paths_and_urls(text)
    if not redacted or not refs:
        return refs
    safe = redact_text(text)  # a ref swallowed by a credential (a line of a key body) is none to keep
    shown = [redact_text(ref) for ref in refs if ref in safe or redact_text(ref) in safe]
    return list(dict.fromkeys(shown))


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    failed: bool
    error_line: str | None  # the first error line, whether the call failed or not (exit 0 may print errors)


def tool_outcome(content: Any) -> ToolOutcome:
    """Decide from a tool result whether the call failed, and find its first error line."""
    text = text_of(content)
    decoded = decode_json(text)
    failed = False
    if isinstance(decoded, dict):
        exit_code = decoded.get("exit_code", decoded.get("returncode"))
        if isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0:
            failed = True
        if decoded.get("error") not in (None, "", False):
            failed = True
        if decoded.get("success") is False or decoded.get("ok") is False:
            failed = True
        status = decoded.get("status_code", decoded.get("status"))
        if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
            failed = True
    match = _RETURNCODE_RE.search(text)
    if match and int(match.group(1)) != 0:
        failed = True
    body = text if decoded is None else "\n".join(string_leaves(decoded))
    if _FAILED_PREFIX_RE.match(body) or "Traceback (most recent call last)" in body:
        failed = True
    return ToolOutcome(failed=failed, error_line=first_error_line(body, decoded))


def first_error_line(body: str, decoded: Any = None) -> str | None:
    """The first line that reads like an error, cut to ERROR_LINE_MAX_CHARS."""
    candidates = []
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
        candidates.append(decoded["error"])
    candidates.append(body)
    for text in candidates:
        for line in iter_error_lines("\n".join(text.splitlines())):
            if line.strip():
                return line.strip()[:ERROR_LINE_MAX_CHARS]
    return None


def may_hold_errors(text: str) -> bool:
    low = text.lower()
    return any(keyword in low for keyword in _ERROR_KEYWORDS)


def iter_error_lines(text: str) -> Iterator[str]:
    """The lines of `text` that read like errors, in order.

    `re` scans at ~10 MB/s here, `str.find` at GB/s: find the keywords first, then run the full
    pattern only on the lines that hold one.
    """
    low = text.lower()
    if len(low) != len(text):  # a few characters change length when lower-cased: go line by line
        yield from (line for line in text.splitlines() if ERROR_LINE_RE.search(line))
        return
    starts: set[int] = set()
    for keyword in _ERROR_KEYWORDS:
        pos = low.find(keyword)
        while pos != -1:
            starts.add(text.rfind("\n", 0, pos) + 1)
            pos = low.find(keyword, pos + len(keyword))
    for start in sorted(starts):
        end = text.find("\n", start)
        line = text[start : len(text) if end == -1 else end]
        if ERROR_LINE_RE.search(line):
            yield line


def error_lines(lines: list[str]) -> list[str]:
    """The lines that read like errors (`lines` as from `str.splitlines`, so none holds a newline)."""
    return list(iter_error_lines("\n".join(lines)))


class RawFacts:
    """Facts of the raw messages, each computed at most once during one `compact` call."""

    __slots__ = ("_outcomes", "_refs", "memo", "messages")

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        self._refs: dict[int, list[str]] = {}
        self._outcomes: dict[int, ToolOutcome] = {}
        self.memo: dict[str, dict[int, Any]] = {}  # per-message readings of other modules (the fold's)

    def cache(self, name: str) -> dict[int, Any]:
        return self.memo.setdefault(name, {})

    def refs(self, index: int) -> list[str]:
        if index not in self._refs:
            self._refs[index] = promised_refs(self.messages[index])
        return self._refs[index]

    def safe_refs(self, index: int) -> list[str]:
        """The refs of the redacted message: what a redacted view or the index promises."""
        cache = self.cache("safe_refs")
        if index not in cache:
            cache[index] = promised_refs(self.messages[index], redacted=True)
        refs: list[str] = cache[index]
        return refs

    def outcome(self, index: int) -> ToolOutcome:
        if index not in self._outcomes:
            self._outcomes[index] = tool_outcome(self.messages[index].get("content"))
        return self._outcomes[index]

    def outcome_of(self, message: Message, sources: Sequence[int]) -> ToolOutcome:
        """The outcome of a tool message of the view (cached when it is still the raw one)."""
        if len(sources) == 1 and self.messages[sources[0]] is message:
            return self.outcome(sources[0])
        return tool_outcome(message.get("content"))


def persisted_output_paths(content: Any) -> list[str]:
    """Files named by Hermes' `<persisted-output>` blocks (the full output lives there)."""
    text = text_of(content)
    if not PERSISTED_OUTPUT_RE.search(text):
        return []
    return paths_and_urls(readable(text))
