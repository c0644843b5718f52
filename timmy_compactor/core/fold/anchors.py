"""The anchors of a message: what the anchor index keeps of it once its step is folded (spec §2a).

- every path and URL the engine promises (user/assistant text, tool-call arguments), and the file
  Hermes saved a long tool output to;
- every tool name called;
- the key error lines of every tool result (`core.keylines`; exit code 0 included) -- never of the
  assistant's prose or of tool-call arguments --, a failing command's exit code before the first
  (`exit 2: ModuleNotFoundError: …`, or `exit 2` alone when it printed none); and one exemplar of each
  error template it printed (`keylines.error_lines`), which the index lists as it has room;
- identifiers from user and assistant text and tool-call arguments: commit SHAs and other hex ids of
  7+ characters, UUIDs, issue/PR numbers, versions, ports and upper-case `KEY=value` settings. Not
  lower-case assignments or comparisons from code, and only the first 1,000 characters of each call's
  arguments (a heredoc's code is not where ids are). A credential appears as its `credential_ref:<hash>`.
  A bare `#12` is no identifier: it is how the engine names raw message 12 (`PR #12`, `issue #12` are).
Recall's own traffic (`timmy_recall` calls and answers) leaves only its tool name: what an answer quotes
is anchored where it was first said, and a call's ref or query is no fact of the session.
Each message is read once (the reading is kept in `RawFacts`, across compactions when the caller
keeps its `Readings`), from the redacted text: no secret becomes an anchor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from timmy_compactor.core.facts import (
    RawFacts,
    call_arguments,
    call_name,
    is_recall_call,
    persisted_output_paths,
    tool_calls,
)
from timmy_compactor.core.keylines import KeyLine, error_lines
from timmy_compactor.core.redact import REF_PREFIX, redact_text
from timmy_compactor.core.text import readable, text_of
from timmy_compactor.core.types import Message

# Each pattern begins with the class of its first character and looks behind only after it (`(?<!\w.)`
# is "no word character before the first one", as a leading `\b` would say): `re` then jumps to the
# candidate positions in C, where a leading lookbehind or `\b` is tried at every position (2-15x slower).
_HEX = re.compile(r"[0-9a-f](?<![\w/.#-].)[0-9a-f]{6,39}(?![\w/(-])")
_UUID = re.compile(
    r"[0-9a-fA-F](?<![\w-].)[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"
)
_ISSUE = re.compile(  # the first letter says which word it is
    r"[PpIiTtBbGM](?<!\w.)"
    r"(?:(?<=[Pp])(?:[Rr]|ull [Rr]equest)|(?<=[Ii])ssue|(?<=[Tt])icket|(?<=[Bb])ug|(?<=G)H|(?<=M)R)[ \t-]?#?\d{1,7}\b"
)
_TRACKER = re.compile(r"[A-Z](?<!\w.)[A-Z0-9]{1,9}-\d{1,6}\b")  # JIRA-12, CVE-2021
_NOT_ISSUE_PREFIXES = frozenset({"UTF", "SHA", "ISO", "MD", "AES", "RSA", "TLS", "SSL", "HTTP", "X", "IEEE"})
# a setting's value whole or not at all: a longer value is not cut into a fact that was never said
_SETTING = re.compile(r"[A-Z](?<![\w.$-].)[A-Z0-9_]{2,40}=[\w./:@~+-][^\s,;'\"`)\]}]{0,79}(?![^\s,;'\"`)\]}])")
_PORT = re.compile(
    r"[Pp1l0](?<!\w.)(?:(?<=[Pp])[Oo][Rr][Tt][ \t]*[:=]?[ \t]*\d{2,5}\b"
    r"|(?:(?<=l)ocalhost|(?<=1)27\.0\.0\.1|(?<=0)\.0\.0\.0):\d{2,5}\b)"
)
_VERSION = re.compile(
    r"[v\d](?<![\w.].)(?:(?<=v)\d+(?:\.\d+){1,3}|(?<=\d)\d*\.\d+\.\d+)(?:[-+][0-9A-Za-z.]+)?(?![\w.])"
)
_CREDENTIAL_REF = re.compile(re.escape(REF_PREFIX) + r"[0-9a-f]+")
_ID_PATTERNS = (_CREDENTIAL_REF, _UUID, _HEX, _ISSUE, _TRACKER, _SETTING, _PORT, _VERSION)
MAX_ID_CHARS = 120
ARGUMENT_ID_CHARS = 1_000  # of each tool call's arguments, read for identifiers


@dataclass(frozen=True, slots=True)
class Anchors:
    refs: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    key_lines: tuple[KeyLine, ...] = ()
    identifiers: tuple[str, ...] = ()
    error_lines: tuple[str, ...] = ()  # one exemplar per error template: listed as room allows, not promised

    def __bool__(self) -> bool:
        return bool(self.refs or self.tools or self.key_lines or self.identifiers or self.error_lines)


def identifiers(text: str) -> list[str]:
    """Identifiers in `text`, in order of first appearance, without duplicates (nor one inside another:
    `PR #12` is one identifier, not also `#12`)."""
    found: list[tuple[int, int, str]] = []
    for pattern in _ID_PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(0).strip()
            if pattern is _HEX and (value.isdigit() or value.isalpha() or _after_ref(text, match.start())):
                continue  # a plain number or word, not an id; or the hash of a credential ref
            if pattern is _TRACKER and value.split("-")[0] in _NOT_ISSUE_PREFIXES:
                continue  # UTF-8, SHA-256: a name, not a ticket
            if len(value) <= MAX_ID_CHARS:  # never a cut one: a longer match is not an identifier
                found.append((match.start(), -match.end(), value))
    found.sort()
    kept: list[str] = []
    end = -1
    for start, negative_end, value in found:
        if start < end:
            continue
        kept.append(value)
        end = -negative_end
    return list(dict.fromkeys(kept))


def _after_ref(text: str, start: int) -> bool:
    return start >= len(REF_PREFIX) and text.startswith(REF_PREFIX, start - len(REF_PREFIX))


def anchors_of(facts: RawFacts, index: int) -> Anchors:
    anchors: Anchors = facts.read("anchors", index, _anchors)
    return anchors


def _anchors(facts: RawFacts, index: int) -> Anchors:
    message: Message = facts.messages[index]
    role = message.get("role")
    if role == "tool" and facts.answers_recall(index):
        return Anchors()
    if role == "tool":  # the file Hermes saved a long output to is where recall finds it in full
        persisted = tuple(persisted_output_paths(message.get("content")))
        outcome = facts.outcome(index)
        return Anchors(
            refs=persisted, key_lines=outcome.anchored_lines, error_lines=error_lines(message.get("content"))
        )
    if role not in ("user", "assistant"):
        return Anchors()
    calls = tool_calls(message)
    # Identifiers come from what the agent says and from the head of what it runs: a command names a
    # commit or a ticket in its first line, a heredoc that follows is code (its assignments are noise).
    text = readable(text_of(message.get("content")))
    for call in calls:
        if not is_recall_call(call):
            text += "\n" + _head(readable(call_arguments(call)), ARGUMENT_ID_CHARS)
    text = redact_text(text)  # what the index keeps is read from the redacted text: no secret becomes an id
    tools = [name for name in (call_name(c) for c in calls) if name]
    return Anchors(
        refs=tuple(facts.safe_refs(index)),
        tools=tuple(dict.fromkeys(tools)),
        identifiers=tuple(identifiers(text)),
    )


def _head(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, less a word the limit would cut (no id read half)."""
    if len(text) <= limit:
        return text
    if not text[limit].isspace():
        return text[: max(text.rfind(" ", 0, limit), text.rfind("\n", 0, limit), 0)]
    return text[:limit]
