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

from timmy_compactor.core.redact import REF_PREFIX, redact_text
from timmy_compactor.core.text import text_of
from timmy_compactor.core.types import Message

# A sentence ends at `.`, `!` or `?` followed by a space or the end, or at a line break: a dot inside a
# URL, a host name or a version (`https://docs.python.org/3.12`) does not end it.
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?![\s.!?]|$))+[.!?]*")
_FACT = re.compile(
    r"^\s*(?:(?:the|our|my|your)\s+)?(?P<key>[A-Za-z][\w-]*(?:\s+[A-Za-z][\w-]*){0,2}?)\s*(?:\bis\b|\bare\b|=|:)\s*"
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
        rf"^\s*(?:please\s+|we\s+|i\s+)?(?:have\s+|'ve\s+)?(?:change|switch|set|update|move|rename|migrate)"
        rf"(?:e?d)?\s+{_KEY}\s+(?:over\s+)?(?:from\s+\S+\s+)?(?:to|=|into)\s+{_VALUE}",
        re.I,
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
# Corrections that do not name the key ("we switched to Y", "use Y instead", "no longer X, use Y"): they
# supersede the fact whose value was X, else the fact stated last.
_KEYLESS = (
    re.compile(
        rf"^\s*(?:we\s+|i\s+)?(?:have\s+|'ve\s+)?(?:switched|moved|migrated|changed)\s+(?:over\s+)?"
        rf"(?:from\s+(?P<old>\S+?)[,.;:]?\s+)?to\s+{_VALUE}",
        re.I,
    ),
    re.compile(
        r"^\s*(?:let'?s\s+|please\s+|we\s+)?use\s+(?P<value>[^\s,.;:!]+)\s+instead(?:\s+of\s+(?P<old>[^\s,.;:!]+))?"
        r"\s*[.!]?\s*$",
        re.I,
    ),
    re.compile(
        r"^\s*(?:it'?s\s+|it\s+is\s+|we'?re\s+)?no\s+longer\s+(?:on\s+|using\s+)?(?P<old>[^\s,.;:]+)[,;:]?\s+"
        rf"(?:(?:we\s+)?use\s+|it'?s\s+|it\s+is\s+|now\s+)?{_VALUE}",
        re.I,
    ),
)
LAST_KEY = "\0last"  # a keyless correction's key before `extract` resolves it
WAS = "\0was:"

_NOT_KEYS = frozenset(
    {"it", "this", "that", "there", "what", "which", "who", "here", "he", "she", "they", "we", "i", "you", "one"}
    | {"answer", "question", "problem", "issue", "note", "reason", "result", "thing", "idea", "plan", "goal"}
    | {"todo", "decision", "from", "longer"}
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


@dataclass(frozen=True, slots=True)
class _Said:
    """What one user or assistant message contributes to the ledger (independent of its neighbours)."""

    role: str
    has_text: bool
    question: str | None
    credentials: tuple[str, ...]
    decisions: tuple[str, ...]
    obligations: tuple[str, ...]
    facts: tuple[tuple[str, str], ...]


def _read(message: Message) -> _Said | None:
    role = message.get("role")
    if role not in ("user", "assistant"):
        return None
    text = redact_text(text_of(message.get("content")))
    decisions: list[str] = []
    obligations: list[str] = []
    facts: list[tuple[str, str]] = []
    for sentence in (s.strip() for s in _SENTENCE.findall(text)):
        if not sentence:
            continue
        if _DECISION.search(sentence):
            decisions.append(sentence[:200])
        if _OBLIGATION.search(sentence):
            obligations.append(sentence[:200])
        keyless = _keyless(sentence)
        if keyless and not sentence.rstrip().endswith("?"):
            facts.append(keyless)
            continue
        match = _fact(sentence)
        if match and not sentence.rstrip().endswith("?"):
            key = " ".join(match.group("key").lower().split()).removesuffix(" instead")
            if key.split()[0] not in _NOT_KEYS and len(key) <= 40:
                facts.append((key, match.group("value").strip(" .!")))
    return _Said(
        role=str(role),
        has_text=bool(text.strip()),
        question=" ".join(text.split())[:200] if role == "user" and "?" in text else None,
        credentials=tuple(dict.fromkeys(_REF.findall(text))),
        decisions=tuple(decisions),
        obligations=tuple(obligations),
        facts=tuple(facts),
    )


def extract(messages: Sequence[Message], indices: Sequence[int], memo: dict[int, _Said | None] | None = None) -> Ledger:
    """Build the ledger of `messages[i] for i in indices`; `memo` keeps each message's reading across calls."""
    ledger = Ledger()
    memo = {} if memo is None else memo
    pending_question: tuple[str, int] | None = None
    for i in indices:
        if i not in memo:
            memo[i] = _read(messages[i])
        said = memo[i]
        if said is None:
            continue
        for ref in said.credentials:
            ledger.credentials.setdefault(ref, i)
        if said.role == "assistant" and said.has_text and pending_question is not None:
            pending_question = None  # answered
        if said.role == "user":
            if pending_question is not None:
                ledger.questions.append(pending_question)
            pending_question = (said.question, i) if said.question else None
        ledger.decisions.extend((text, i) for text in said.decisions)
        ledger.obligations.extend((text, i) for text in said.obligations)
        for key, value in said.facts:
            resolved = _resolve(ledger, key)
            if resolved:
                ledger.facts.setdefault(resolved, []).append((value, i))
    if pending_question is not None:
        ledger.questions.append(pending_question)
    return ledger


def _keyless(sentence: str) -> tuple[str, str] | None:
    """(key marker, new value) of a correction that does not name its key, or None."""
    stripped = _CORRECTION_PREFIX.sub("", sentence)
    named = next((m for p in _CORRECTIONS if (m := p.match(stripped))), None)
    if named and named.group("key").lower().split()[0] not in _NOT_KEYS:
        return None  # it names its key
    for pattern in _KEYLESS:
        match = pattern.match(sentence) or pattern.match(stripped)  # "No longer X" starts like "no, …"
        if match:
            old = match.group("old")
            return (WAS + old.lower() if old else LAST_KEY), match.group("value").strip(" .!")
    return None


def _resolve(ledger: Ledger, key: str) -> str | None:
    """The key a fact belongs to: its own, the one whose current value it names as old, or the last one."""
    if not key.startswith("\0"):
        return key
    if key.startswith(WAS):
        old = key.removeprefix(WAS)
        for name, values in reversed(list(ledger.facts.items())):
            if values[-1][0].lower() == old:
                return name
    if not ledger.facts:
        return None
    return max(reversed(list(ledger.facts)), key=lambda name: ledger.facts[name][-1][1])  # ties: stated last


def _fact(sentence: str) -> re.Match[str] | None:
    """A key/value statement, plain ("the server is beta") or phrased as a correction."""
    sentence = _CORRECTION_PREFIX.sub("", sentence)
    for pattern in _CORRECTIONS:
        match = pattern.match(sentence)
        if match:
            return match
    return _FACT.match(sentence)
