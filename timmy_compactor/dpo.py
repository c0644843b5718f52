"""Mine DPO pairs from raw sessions: where the user corrected the assistant's answer.

A pair is (prompt, rejected, chosen): the conversation up to a user request, the assistant's final
answer to it that the user then corrected, and the final answer the assistant gave after the
correction — kept only when the user did not correct that one too. Deterministic rules, checked in
this order on the user message that follows an answer (case-insensitive):

| rule | matches | does not match |
|---|---|---|
| `negation` | "no, that's wrong", "No. Use X", "nope", "wrong —" | "no worries", "no thanks", "no problem", "not bad" |
| `thats_wrong` | "that's wrong", "that is incorrect", "this isn't right" | "that's right", "nothing wrong" |
| `not_what_i_asked` | "not what I asked/meant/wanted" | "exactly what I wanted" |
| `actually` | "actually, use port 8080" (at the start) | "actually, thanks!", "it actually works" |
| `instead` | "use /etc/hosts instead", "instead, read dev.yaml" | a question: "why not X instead?" |
| `try_again` | "try again", "that didn't work", "still failing", "doesn't work" | "works now, thanks" |
| `retry` | the same request again (≥ 90 % similar to the previous user message) | a different request |
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.facts import text_of

Message = dict[str, Any]

_POLITE = re.compile(r"^\s*(?:no\s+(?:worries|problem|thanks|thank you|need|rush|prob)|not bad|nothing wrong)\b", re.I)
_PRAISE_AFTER = re.compile(r"^\W*(?:thanks|thank you|great|perfect|nice|good|that works|works|awesome|lgtm)\b", re.I)
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "negation",
        re.compile(r"^\s*(?:no|nope|nah|wrong)\b(?:\s*[,.!:;—–-]|\s+(?:it|that|this|you|use|read|do)\b)", re.I),
    ),
    (
        "thats_wrong",
        re.compile(
            r"\b(?:that|this|it)(?:'s|\s+is|\s+isn't|\s+is\s+not)\s+(?:wrong|incorrect|not\s+(?:right|correct))\b|\b(?:that|this|it)\s+isn't\s+right\b",
            re.I,
        ),
    ),
    ("not_what_i_asked", re.compile(r"\bnot\s+what\s+i\s+(?:asked|meant|wanted|said)\b", re.I)),
    ("actually", re.compile(r"^\s*actually\b[\s,]*(?P<rest>.*)", re.I | re.S)),
    ("instead", re.compile(r"\binstead\b(?!\s+of\s+thank)", re.I)),
    (
        "try_again",
        re.compile(
            r"\b(?:try\s+again|didn't\s+work|did\s+not\s+work|doesn't\s+work|does\s+not\s+work|still\s+(?:broken|failing|fails|wrong|not\s+working))\b",
            re.I,
        ),
    ),
)
RETRY_SIMILARITY = 0.9


@dataclass(frozen=True, kw_only=True)
class Pair:
    rule: str
    prompt_end: int  # messages[: prompt_end + 1] is the prompt (ends with the user request)
    rejected: int  # index of the corrected assistant answer
    correction: int  # index of the user's correction
    chosen: int  # index of the accepted answer


def correction_rule(message: str, previous_request: str | None) -> str | None:
    """The name of the first rule the user message matches, or None."""
    text = message.strip()
    if not text or _POLITE.match(text):
        return None
    for name, pattern in RULES:
        match = pattern.search(text)
        if not match:
            continue
        if name == "actually" and _PRAISE_AFTER.match(match.group("rest") or ""):
            continue
        if name == "instead" and text.endswith("?") and text.lower().startswith(("why", "should", "could", "would")):
            continue
        return name
    if previous_request and difflib.SequenceMatcher(None, text.lower(), previous_request.strip().lower()).ratio() >= (
        RETRY_SIMILARITY
    ):
        return "retry"
    return None


def _turns(messages: Sequence[Message]) -> list[tuple[int, int | None]]:
    """(user index, index of the turn's final assistant answer or None), per turn."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    turns = []
    for k, u in enumerate(users):
        end = users[k + 1] if k + 1 < len(users) else len(messages)
        answer = None
        for i in range(end - 1, u, -1):
            m = messages[i]
            if m.get("role") == "assistant" and text_of(m.get("content")).strip() and not m.get("tool_calls"):
                answer = i
                break
        turns.append((u, answer))
    return turns


def mine_pairs(messages: Sequence[Message]) -> list[Pair]:
    turns = _turns(messages)
    pairs = []
    for k in range(1, len(turns)):
        (request, rejected), (correction, chosen) = turns[k - 1], turns[k]
        if rejected is None or chosen is None:
            continue
        rule = correction_rule(text_of(messages[correction].get("content")), text_of(messages[request].get("content")))
        if rule is None:
            continue
        if k + 1 < len(turns):
            following = text_of(messages[turns[k + 1][0]].get("content"))
            if correction_rule(following, text_of(messages[correction].get("content"))):
                continue  # the "chosen" answer was corrected too; the next pair covers it
        pairs.append(Pair(rule=rule, prompt_end=request, rejected=rejected, correction=correction, chosen=chosen))
    return pairs
