"""The anchors of a message: what the anchor index keeps of it once its step is folded (spec §2a).

Every path and URL the engine promises (user/assistant text, tool-call arguments), every tool name,
the first error line of every tool output (exit code 0 included), and identifiers from user and
assistant text and tool-call arguments: hex ids of 7+ characters (commit SHAs), UUIDs, issue/PR
numbers, `KEY=value` / `dotted.key: value` settings, ports and versions. Tool output is too noisy
for identifiers: its paths stay in the `[tool: …]` lines' refs and its error line is kept here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from timmy_compactor.core.facts import (
    ERROR_LINE_MAX_CHARS,
    RawFacts,
    call_arguments,
    call_name,
    iter_error_lines,
    may_hold_errors,
    persisted_output_paths,
    readable,
    text_of,
    tool_calls,
)
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.types import Message

_HEX = re.compile(r"(?<![\w/.-])[0-9a-f]{7,64}(?![\w/-])")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ISSUE = re.compile(r"(?i)\b(?:PR|pull request|issue|ticket|bug|GH)[\s-]?#?\d{1,7}\b|\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b")
_SETTING = re.compile(
    r"(?<![\w.-])(?:[A-Z][A-Z0-9_]{2,40}=[^\s,;'\"`)]{1,80}|[a-z][a-z0-9_-]*(?:[._][a-z0-9_-]+)+\s?[:=]\s?[^\s,;'\"`)]{1,80})"
)
_PORT = re.compile(r"(?i)\bport\s*[:=]?\s*\d{2,5}\b|\b(?:localhost|0\.0\.0\.0):\d{2,5}\b")
_VERSION = re.compile(r"(?<![\w.])(?:v\d+(?:\.\d+){1,3}|\d+\.\d+\.\d+(?:\.\d+)?)(?:[-+][0-9A-Za-z.]+)?(?![\w.])")
_ID_PATTERNS = (_UUID, _HEX, _ISSUE, _SETTING, _PORT, _VERSION)
MAX_ID_CHARS = 120
# What an earlier compaction wrote into an assistant message: its `[tool: name(…) → …, printed: <error
# line>, #a–#b]` lines name a tool and an error line that must survive a later fold too.
_TOOL_LINE = re.compile(r"^\[tool: ([\w.:-]+)\(", re.M)
_PRINTED = re.compile(r"printed: (.+), #\d+(?:–#\d+)?(?:, #\d+(?:–#\d+)?)*\]$", re.M)


@dataclass(frozen=True, slots=True)
class Anchors:
    refs: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    error_line: str | None = None
    identifiers: tuple[str, ...] = ()
    error_lines: tuple[str, ...] = ()  # of assistant text: error lines it carries (earlier compactions)

    def __bool__(self) -> bool:
        return bool(self.refs or self.tools or self.error_line or self.identifiers or self.error_lines)

    def errors(self) -> tuple[str, ...]:
        return ((self.error_line,) if self.error_line else ()) + self.error_lines


def identifiers(text: str) -> list[str]:
    """Identifiers in `text`, in order of first appearance, without duplicates."""
    found: list[tuple[int, str]] = []
    for pattern in _ID_PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(0).strip()
            if pattern is _HEX and (value.isdigit() or value.isalpha()):
                continue  # a plain number or word, not an id
            found.append((match.start(), value[:MAX_ID_CHARS]))
    found.sort()
    return list(dict.fromkeys(value for _, value in found))


def anchors_of(facts: RawFacts, index: int) -> Anchors:
    cache = facts.cache("anchors")
    if index not in cache:
        cache[index] = _anchors(facts, index)
    anchors: Anchors = cache[index]
    return anchors


def _anchors(facts: RawFacts, index: int) -> Anchors:
    message: Message = facts.messages[index]
    role = message.get("role")
    if role == "tool":  # the file Hermes saved a long output to is where recall finds it in full
        persisted = tuple(persisted_output_paths(message.get("content")))
        return Anchors(refs=persisted, error_line=facts.outcome(index).error_line)
    if role not in ("user", "assistant"):
        return Anchors()
    calls = tool_calls(message)
    text = readable(text_of(message.get("content")))
    for call in calls:
        text += "\n" + readable(call_arguments(call))
    text = redact_text(text)  # what the index keeps is read from the redacted text: no secret becomes an id
    tools = [name for name in (call_name(c) for c in calls) if name]
    errors: list[str] = []
    if role == "assistant":
        tools += _TOOL_LINE.findall(text)
        errors += [line.strip()[:ERROR_LINE_MAX_CHARS] for line in _PRINTED.findall(text)]
        prose = "\n".join(line for line in text.splitlines() if not line.startswith("[tool: "))
        if may_hold_errors(prose):
            errors += [line.strip()[:ERROR_LINE_MAX_CHARS] for line in iter_error_lines(prose) if line.strip()]
    return Anchors(
        refs=tuple(facts.safe_refs(index)),
        tools=tuple(dict.fromkeys(tools)),
        identifiers=tuple(identifiers(text)),
        error_lines=tuple(dict.fromkeys(errors)),
    )
