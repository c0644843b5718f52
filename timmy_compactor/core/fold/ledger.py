"""The fact sections of the anchor index (seed 003's semantic ledger): facts, decisions, obligations,
superseded facts, unresolved questions and credential refs of the folded history.

Extraction reads user and assistant text, sentence by sentence:
- facts: "<key> is/are/= <value>", "<key>: <value>" and corrections ("actually, the <key> is …",
  "change/switch/set/move the <key> to …", "<key> should be / is now / moved to …", "use <value> as
  the <key>") with a key of 1-3 words; a later value for the same key supersedes the earlier one;
- decisions: "we decided", "decided to", "let's use", "let's go with", "go with", "decision:";
- obligations: "TODO", "remind me", "I need to", "we need to", "don't forget", "make sure", "must",
  and "надо", "нужно", "не забудь", "muss", "tengo que", "hay que", "il faut";
- unresolved questions: a user message with "?" that no assistant text answers before the next user
  message.
All text is redacted first (`redact_text`), so no secret reaches the index: credentials appear as
`credential_ref:<hash>` and are listed under Credential refs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from timmy_compactor.core.facts import call_name, paths_and_urls, text_of, tool_calls
from timmy_compactor.core.redact import REF_PREFIX, redact_text
from timmy_compactor.core.types import Message

TITLE = "Semantic RLE context ledger"
HEADER = f"[CONTEXT LEDGER — REFERENCE ONLY] {TITLE}"
SECTIONS = (
    "Active facts",
    "Decisions",
    "Obligations",
    "Superseded facts",
    "Unresolved questions",
    "Credential refs",
    "Retrieval notes",
)

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_FACT = re.compile(
    r"^\s*(?:(?:the|our|my|your)\s+)?(?P<key>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,2})\s*(?:\bis\b|\bare\b|=|:)\s*"
    r"(?:now\s+|actually\s+)?(?P<value>[^\s].{0,79}?)\s*[.!]?\s*$",
    re.I,
)
_KEY = r"(?:(?:the|our|my|your)\s+)?(?P<key>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,2})"
_VALUE = r"(?P<value>[^\s].{0,79}?)\s*[.!]?\s*$"
_CORRECTION_PREFIX = re.compile(
    r"^\s*(?:actually|correction|sorry|no|oops|update|wait|scratch that)\b[,:;!—-]*\s*", re.I
)
# Other ways people state or correct a value; each gives a key and its (new) value.
_CORRECTIONS = (
    re.compile(
        rf"^\s*(?:please\s+)?(?:change|switch|set|update|move|rename)\s+{_KEY}\s+(?:to|=|into)\s+{_VALUE}", re.I
    ),
    re.compile(
        rf"^\s*{_KEY}\s+(?:should\s+be|must\s+be|will\s+be|has\s+(?:been\s+)?changed\s+to|(?:was\s+)?changed\s+to"
        rf"|(?:was\s+)?moved\s+to|now\s+is|becomes|has\s+become|is\s+no\s+longer\s+\S+,?\s+(?:it'?s|it\s+is))\s+{_VALUE}",
        re.I,
    ),
    re.compile(
        rf"^\s*(?:let'?s\s+|please\s+)?use\s+(?P<value>[^\s,]+)\s+(?:as|for)\s+{_KEY}(?:\s+instead)?\s*[.!]?\s*$", re.I
    ),
    re.compile(rf"^\s*{_KEY}\s*(?:->|→|=>)\s*{_VALUE}", re.I),
)
_NOT_KEYS = frozenset(
    {"it", "this", "that", "there", "what", "which", "who", "here", "he", "she", "they", "we", "i", "you", "one"}
    | {"answer", "question", "problem", "issue", "note", "reason", "result", "thing", "idea", "plan", "goal"}
    | {"todo", "decision"}
)
_DECISION = re.compile(r"\b(?:we\s+decided|decided\s+to|let'?s\s+use|let'?s\s+go\s+with|go\s+with|decision:)", re.I)
_OBLIGATION = re.compile(
    r"\bTODO\b|\bremind\s+me\b|\bi\s+need\s+to\b|\bwe\s+need\s+to\b|\bdon'?t\s+forget\b|\bmake\s+sure\b|\bmust\b"
    r"|надо|нужно|не\s+забудь|\bmuss\b|\btengo\s+que\b|\bhay\s+que\b|\bil\s+faut\b",
    re.I,
)
_REF = re.compile(re.escape(REF_PREFIX) + r"[0-9a-f]{12}")


@dataclass
class Ledger:
    facts: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # key -> [(value, index)], oldest first
    decisions: list[tuple[str, int]] = field(default_factory=list)
    obligations: list[tuple[str, int]] = field(default_factory=list)
    questions: list[tuple[str, int]] = field(default_factory=list)
    credentials: dict[str, int] = field(default_factory=dict)  # ref -> first index
    tools: dict[str, int] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)


def extract(messages: Sequence[Message], indices: Sequence[int]) -> Ledger:
    """Build the ledger of `messages[i] for i in indices` (the cold middle)."""
    ledger = Ledger()
    pending_question: tuple[str, int] | None = None
    for i in indices:
        message = messages[i]
        role = message.get("role")
        for call in tool_calls(message):
            name = call_name(call)
            ledger.tools[name] = ledger.tools.get(name, 0) + 1
        if role not in ("user", "assistant"):
            continue
        text = redact_text(text_of(message.get("content")))
        for ref in _REF.findall(text):
            ledger.credentials.setdefault(ref, i)
        ledger.paths.extend(p for p in paths_and_urls(text) if p not in ledger.paths)
        if role == "assistant" and text.strip() and pending_question is not None:
            pending_question = None  # answered
        if role == "user":
            if pending_question is not None:
                ledger.questions.append(pending_question)
            pending_question = (" ".join(text.split())[:200], i) if "?" in text else None
        for sentence in (s.strip() for s in _SENTENCE.findall(text)):
            if not sentence:
                continue
            if _DECISION.search(sentence):
                ledger.decisions.append((sentence[:200], i))
            if _OBLIGATION.search(sentence):
                ledger.obligations.append((sentence[:200], i))
            match = _fact(sentence)
            if match and not sentence.rstrip().endswith("?"):
                key = " ".join(match.group("key").lower().split()).removesuffix(" instead")
                if key.split()[0] not in _NOT_KEYS and len(key) <= 40:
                    ledger.facts.setdefault(key, []).append((match.group("value").strip(" .!"), i))
    if pending_question is not None:
        ledger.questions.append(pending_question)
    return ledger


def _fact(sentence: str) -> re.Match[str] | None:
    """A key/value statement, plain ("the server is beta") or phrased as a correction."""
    sentence = _CORRECTION_PREFIX.sub("", sentence)
    for pattern in _CORRECTIONS:
        match = pattern.match(sentence)
        if match:
            return match
    return _FACT.match(sentence)
