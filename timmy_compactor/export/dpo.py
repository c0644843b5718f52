"""Mine DPO pairs from a raw session: places where the user corrected the assistant's answer.

A *turn* is a user message and everything up to the next user message; its *answer* is the trailing
run of assistant messages without tool calls at the end of the turn (none if the turn ends on a tool
call or a tool result). A pair is found where turn *k*'s user message corrects turn *k-1*'s answer:

- `prompt`: the messages up to and including turn *k-1*'s user request;
- `rejected`: turn *k-1*'s answer (the one the user corrected);
- `chosen`: turn *k*'s answer — kept only if the next user message does not correct it again (then
  the next pair covers it) or the session ends there, and if it differs from the rejected one.

A user message is a correction when one of these rules matches it, tried in this order on its head
(first 300 characters; case-insensitive). The *strong* rules say outright that the answer was wrong;
the *soft* ones are ignored when the message opens with thanks or praise ("Great, now use Redis
instead…" is a new request, not a correction) or when the answer ended with a question to the user
("Should I delete the logs?" — "No." answers it, it does not correct it).

| rule | kind | matches | does not match |
|---|---|---|---|
| `thats_wrong` | strong | "that's wrong", "this is incorrect", "you're wrong" | "that's right", "is that wrong?" |
| `not_what_i_asked` | strong | "not what I asked / meant / wanted" | "exactly what I wanted" |
| `try_again` | strong | "try again", "that didn't work", "still failing" | "works now, thanks" |
| `negation` | soft | "No, …", "No.", "nope", "wrong —", "no, use …" | "no worries", "no, thanks", "no need" |
| `actually` | soft | "Actually, use port 8080." (at the start) | "actually, great job", "I know" |
| `instead` | soft | "use /etc/hosts instead.", "… instead of guessing" | "why Go uses tabs instead of spaces" |
| `retry` | soft | the same request again: "fix the failng test please" | another request, "continue" ×2 |

A retry has at least 3 words and the same words as the previous request up to case, punctuation,
filler words ("please", "again", "now"…) and typos (at most one word in ten, each ≥ 75 % similar to
the word it replaces); messages over 4,000 characters must match exactly.

Messages Hermes inserts when it compresses a conversation (`[CONTEXT COMPACTION …`,
`[CONTEXT SUMMARY]:`) are neither requests, corrections nor answers: no pair spans one.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from timmy_compactor.core.text import text_of
from timmy_compactor.core.types import Message
from timmy_compactor.host.names import SUMMARY_PREFIXES as HERMES_MARKERS

HEAD_CHARS = 300
RETRY_MIN_WORDS = 3
RETRY_MAX_CHARS = 4000  # longer messages are compared for equality only
TYPO_SIMILARITY = 0.75
FILLER_WORDS = frozenset(("please", "pls", "plz", "again", "now", "just", "can", "could", "would", "you", "ok", "so"))

_STRONG: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "thats_wrong",
        re.compile(
            r"\b(?:that|this|it|your\s+(?:answer|fix|code))\s*(?:'s|’s|\s+is|\s+was)\s+"
            r"(?:(?:completely|totally|still|just|also)\s+)?(?:wrong|incorrect|not\s+(?:right|correct))\b"
            r"|\b(?:that|this|it)\s+(?:isn't|isn’t|wasn't|wasn’t)\s+(?:right|correct)\b"
            r"|\byou(?:'re|’re|\s+are)\s+wrong\b",
            re.I,
        ),
    ),
    ("not_what_i_asked", re.compile(r"\bnot\s+what\s+i\s+(?:asked|meant|wanted|said|requested)\b", re.I)),
    (
        "try_again",
        re.compile(
            r"\btry\s+again\b"
            r"|\b(?:didn't|didn’t|did\s+not|doesn't|doesn’t|does\s+not|don't|don’t|do\s+not)\s+work\b"
            r"|\bstill\s+(?:broken|failing|fails|failed|wrong|crashing|crashes|not\s+working)\b",
            re.I,
        ),
    ),
)
_SOFT: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "negation",
        re.compile(
            r"^(?:no|nope|nah|wrong)\b"
            r"(?:\s*(?:[,.!:;—–-]|$)|\s+(?:it|that|this|you|use|read|do|don't|not|the|i\s+said)\b)",
            re.I,
        ),
    ),
    ("actually", re.compile(r"^actually\b", re.I)),
    (
        "instead",
        re.compile(
            r"^instead\b|\binstead\s*(?:[.!?,;:—–)-]|$)"
            r"|\binstead\s+of\s+(?:that|this|it|guessing|assuming|inventing|making|hard-?coding|what\s+you)\b",
            re.I,
        ),
    ),
)
# "No worries", "No, thanks", "no need": a polite no, not a correction.
_POLITE_NO = re.compile(
    r"^(?:no|nope|nah)\W*(?:worries|problem|prob|thanks|thank\s+you|thx|need|rush|that's\s+(?:all|fine|it)"
    r"|all\s+good|it's\s+fine|i'm\s+good|more|other|further)\b",
    re.I,
)
_PRAISE = re.compile(
    r"^(?:actually\W*)?(?:thanks|thank\s+you|thx|great|perfect|nice|good\s+(?:job|work)|awesome|excellent|cool"
    r"|lgtm|looks\s+good|that\s+works|works|well\s+done|love\s+it|brilliant)\b",
    re.I,
)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S | re.I)
_NORMALISE = re.compile(r"[\W_]+")


@dataclass(frozen=True, kw_only=True)
class Pair:
    """Raw message indices of one correction: `messages[: prompt_end + 1]` is the prompt."""

    rule: str
    prompt_end: int  # the user request whose answer was corrected
    rejected: tuple[int, ...]  # its answer (the trailing assistant message(s) of that turn)
    correction: int  # the user message that corrected it
    chosen: tuple[int, ...]  # the answer to the correction


def _head(text: str) -> str:
    return text.strip()[:HEAD_CHARS]


def _words(text: str) -> str:
    return _NORMALISE.sub(" ", text.lower()).strip()


def _asks_user(answer: str) -> bool:
    """The answer ends with a question to the user ("Should I also delete the logs?")."""
    text = _THINK.sub("", answer).rstrip().rstrip("*_`) ")
    return text.endswith("?")


def _typo(a: str, b: str) -> bool:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= TYPO_SIMILARITY


def is_retry(message: str, previous_request: str | None) -> bool:
    """The same request again: the same words up to case, punctuation, filler words and typos."""
    if not previous_request:
        return False
    a, b = _words(message).split(), _words(previous_request).split()
    if len(a) < RETRY_MIN_WORDS:
        return False
    if a == b:
        return True
    if max(len(" ".join(a)), len(" ".join(b))) > RETRY_MAX_CHARS:
        return False
    a, b = [w for w in a if w not in FILLER_WORDS], [w for w in b if w not in FILLER_WORDS]
    only_a, only_b = list((Counter(a) - Counter(b)).elements()), list((Counter(b) - Counter(a)).elements())
    if not only_a and not only_b:
        return a == b  # the same words, filler aside: a retry only in the same order
    if len(only_a) != len(only_b) or len(only_a) > max(1, len(a) // 10):
        return False
    return all(any(_typo(w, v) for v in only_b) for w in only_a) and all(
        any(_typo(w, v) for v in only_a) for w in only_b
    )


def correction_rule(message: str, previous_request: str | None = None, answer: str | None = None) -> str | None:
    """The name of the first rule the user `message` matches, or None.

    `previous_request` is the user message the corrected answer replied to (for `retry`); `answer` is
    that answer's text (a soft rule does not fire when it ended with a question to the user).
    """
    head = _head(message)
    if not head or head.startswith(HERMES_MARKERS):
        return None
    for name, pattern in _STRONG:
        if pattern.search(head):
            return name
    if _PRAISE.match(head) or (answer is not None and _asks_user(answer)):
        return None
    for name, pattern in _SOFT:
        if pattern.search(head):
            if name == "negation" and _POLITE_NO.match(head):
                continue
            return name
    if is_retry(message, previous_request):
        return "retry"
    return None


@dataclass(frozen=True)
class _Turn:
    user: int
    answer: tuple[int, ...]  # empty: the turn has no final answer
    usable: bool  # False: the turn starts with, or contains, a Hermes compaction marker


def _is_marker(message: Message) -> bool:
    return text_of(message.get("content")).lstrip().startswith(HERMES_MARKERS)


def turns(messages: Sequence[Message]) -> list[_Turn]:
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    out = []
    for k, start in enumerate(users):
        end = users[k + 1] if k + 1 < len(users) else len(messages)
        answer: list[int] = []
        i = end - 1
        while i > start and messages[i].get("role") == "assistant" and not messages[i].get("tool_calls"):
            answer.append(i)
            i -= 1
        answer.reverse()
        if not any(text_of(messages[j].get("content")).strip() for j in answer):
            answer = []
        usable = not any(_is_marker(messages[j]) for j in range(start, end))
        out.append(_Turn(user=start, answer=tuple(answer), usable=usable))
    return out


def _text(messages: Sequence[Message], indices: Sequence[int]) -> str:
    return "\n".join(text_of(messages[i].get("content")) for i in indices)


def mine_pairs(messages: Sequence[Message]) -> list[Pair]:
    """Every correction pair in `messages`, in order. Pure and deterministic."""
    all_turns = turns(messages)
    pairs = []
    for k in range(1, len(all_turns)):
        asked, corrected = all_turns[k - 1], all_turns[k]
        if not (asked.usable and corrected.usable and asked.answer and corrected.answer):
            continue
        request = text_of(messages[asked.user].get("content"))
        correction = text_of(messages[corrected.user].get("content"))
        rule = correction_rule(correction, request, _text(messages, asked.answer))
        if rule is None:
            continue
        if k + 1 < len(all_turns):
            following = text_of(messages[all_turns[k + 1].user].get("content"))
            if correction_rule(following, correction, _text(messages, corrected.answer)):
                continue  # the user corrected the "chosen" answer too; the next pair covers it
        if _words(_text(messages, asked.answer)) == _words(_text(messages, corrected.answer)):
            continue  # the same answer again: no preference to learn
        pairs.append(
            Pair(
                rule=rule,
                prompt_end=asked.user,
                rejected=asked.answer,
                correction=corrected.user,
                chosen=corrected.answer,
            )
        )
    return pairs
