"""The anchors of a message: what the anchor index keeps of it once its step is folded (spec §2a).

- the files and folders of the run its tool calls name, each marked when the call wrote it, and its
  URLs (`fold.paths`: never a word of a script, a heredoc, a diff's `a/`/`b/` prefix or a placeholder;
  nothing from prose); of a tool result, the file Hermes saved it to and the files `patch` patched;
- every tool name called;
- the key error lines of every tool result (`core.keylines`; exit code 0 included) -- never of the
  assistant's prose or of tool-call arguments --, a failing command's exit code before the first
  (`exit 2: ModuleNotFoundError: …`, or `exit 2` alone when it printed none); and one exemplar of each
  error template it printed (`keylines.error_lines`), which the index lists as it has room;
- identifiers: from user and assistant text outside code (fenced blocks, `inline spans`) and from the
  plain words of a command (not a `sed`/`awk` script, a `python -c` program, a heredoc): commit SHAs and
  other hex ids of 7+ characters, UUIDs, issue/PR numbers, tickets, versions, ports and upper-case
  `KEY=value` settings; from anywhere in a call's arguments, code included, only what is an id wherever
  it stands (a commit, a UUID, a ticket). A credential in text or a command appears as its
  `credential_ref:<hash>`. A bare `#12` is no identifier: it is how the engine names raw message 12.
Recall's own traffic (`timmy_recall` calls and answers) leaves only its tool name: what an answer quotes
is anchored where it was first said, and a call's ref or query is no fact of the session.
Each message is read once (the reading is kept in `RawFacts`, across compactions when the caller
keeps its `Readings`). Short texts (what a message says, a command's plain words) are read redacted;
long ones (arguments, outputs) are read raw, and each piece kept is redacted with its surroundings
(`fold.kept`): no secret becomes an anchor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from timmy_compactor.core.facts import RECALL_TOOL, RawFacts, call_name, tool_calls
from timmy_compactor.core.fold.kept import BLOCK_START, WHOLE, kept, redacted_source
from timmy_compactor.core.fold.paths import Mention, call_arguments_of, call_mentions, message_mentions, plain_words
from timmy_compactor.core.keylines import KeyLine
from timmy_compactor.core.redact import REF_PREFIX
from timmy_compactor.core.text import char_runs, run_marks, text_of
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
_STRONG_PATTERNS = (_UUID, _HEX, _TRACKER)  # ids wherever they stand, code included
_INLINE_CODE = re.compile(r"`[^`\n]*`")
MAX_ID_CHARS = 120


@dataclass(frozen=True, slots=True)
class Anchors:
    refs: tuple[str, ...] = ()  # paths and URLs, as the index keeps them
    edited: tuple[str, ...] = ()  # those of `refs` the message wrote
    tools: tuple[str, ...] = ()
    key_lines: tuple[KeyLine, ...] = ()
    identifiers: tuple[str, ...] = ()  # as the index keeps them: read redacted, or kept (`fold.kept`)
    error_lines: tuple[str, ...] = ()  # one exemplar per error template: listed as room allows, not promised

    def __bool__(self) -> bool:
        return bool(self.refs or self.tools or self.key_lines or self.identifiers or self.error_lines)


_NONE = Anchors()


def strong_identifiers(text: str) -> list[str]:
    """The identifiers of `text` that are ids wherever they stand (commits, UUIDs, issues, tickets)."""
    return identifiers(text, _STRONG_PATTERNS)


def identifiers(text: str, patterns: tuple[re.Pattern[str], ...] = _ID_PATTERNS) -> list[str]:
    """Identifiers in `text`, in order of first appearance, without duplicates (nor one inside another:
    `PR #12` is one identifier, not also `#12`)."""
    found: list[tuple[int, int, str]] = []
    for pattern in _gated(text, patterns):
        for match in _matches(pattern, text):
            value = match.group(0).strip()
            if pattern is _HEX and (value.isdigit() or value.isalpha() or _after_ref(text, match.start())):
                continue  # a plain number or word, not an id; or the hash of a credential ref
            if pattern is _TRACKER and value.split("-")[0] in _NOT_ISSUE_PREFIXES:
                continue  # UTF-8, SHA-256: a name, not a ticket
            if len(value) <= MAX_ID_CHARS:  # never a cut one: a longer match is not an identifier
                found.append((match.start(), -match.end(), value))
    if not found:  # most texts
        return []
    found.sort()
    kept: list[str] = []
    end = -1
    for start, negative_end, value in found:
        if start < end:
            continue
        kept.append(value)
        end = -negative_end
    return list(dict.fromkeys(kept))


_HEX_MARKS = run_marks("0123456789abcdef")  # hex runs found in bytes: `re` tried `_HEX` at every a-f (3x slower)


def _names_a_port(text: str) -> bool:
    return "ort" in text or "ORT" in text or "localhost" in text or "127.0.0.1" in text or "0.0.0.0" in text


# What a text must hold for a pattern to match in it (`in` runs at GB/s, a pattern at ~10 MB/s; a gate
# pattern starts with a literal, which `re` finds as fast as `in`).
_GATES: dict[re.Pattern[str], str | re.Pattern[str] | Callable[[str], bool]] = {
    _CREDENTIAL_REF: REF_PREFIX,
    _UUID: re.compile(r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"),
    _TRACKER: re.compile(r"-\d(?<=[A-Z0-9]-\d)"),  # `-` first: `re` skips to each; a capital or digit before it
    _SETTING: "=",
    _PORT: _names_a_port,  # `or` of `in` tests: 4x faster than a search for any of the words
    _VERSION: re.compile(r"\.\d"),  # both forms hold a dot before a digit
}


_DIGIT = re.compile(r"\d")
_NEEDS_DIGIT = frozenset(map(id, (_HEX, _ISSUE, _TRACKER, _PORT, _VERSION)))  # a hex id of letters alone is a word
# Each gate as a literal to look for with `in`, or a test (a search: its match or None)
Gate = tuple[re.Pattern[str], str | None, Callable[[str], object] | None]
_GATE_TESTS: dict[int, tuple[str | None, Callable[[str], object] | None]] = {  # by id: a pattern hashes its source
    id(pattern): (gate, None)
    if isinstance(gate, str)
    else (None, gate.search if isinstance(gate, re.Pattern) else gate)
    for pattern, gate in _GATES.items()
}


def _has_digit(text: str) -> bool:
    if not text.isascii():
        return _DIGIT.search(text) is not None
    return (  # `in` finds a character at memchr speed: 2x faster than a search of `[0-9]` (callgrind)
        "0" in text
        or "1" in text
        or "2" in text
        or "3" in text
        or "4" in text
        or "5" in text
        or "6" in text
        or "7" in text
        or "8" in text
        or "9" in text
    )


def _may_match(pattern: re.Pattern[str], text: str, digits: bool | None = None) -> bool:
    """Whether `pattern` may match in `text` (`digits`: whether it holds a digit, if known)."""
    key = id(pattern)
    if key in _NEEDS_DIGIT and not (digits if digits is not None else _DIGIT.search(text) is not None):
        return False
    literal, test = _GATE_TESTS.get(key, (None, None))
    return (literal is None or literal in text) and (test is None or bool(test(text)))


def _gate_plan(patterns: tuple[re.Pattern[str], ...]) -> tuple[list[Gate], list[Gate]]:
    """The gates of `patterns` for a text without a digit, and for a text with one."""
    gates = [(pattern, *_GATE_TESTS.get(id(pattern), (None, None))) for pattern in patterns]
    return [gate for gate in gates if id(gate[0]) not in _NEEDS_DIGIT], gates


_PLANS = {id(patterns): (patterns, _gate_plan(patterns)) for patterns in (_ID_PATTERNS, _STRONG_PATTERNS)}


def _gated(text: str, patterns: tuple[re.Pattern[str], ...]) -> list[re.Pattern[str]]:
    """The patterns of `patterns` that may match in `text` (`_may_match`), with one digit search for all:
    most short texts (prose, a command's words) hold none, which five of the patterns need."""
    known = _PLANS.get(id(patterns))
    without, with_digit = known[1] if known is not None and known[0] is patterns else _gate_plan(patterns)
    gates = with_digit if _has_digit(text) else without
    return [
        pattern
        for pattern, literal, test in gates
        if (literal is None or literal in text) and (test is None or test(text))
    ]


# Where a match can start, found in C: `re` tries each pattern below at every position where its first
# character class matches (every hex digit, capital, digit, `p`, `i`, `t`…), a scan for what each match
# holds (its `=`, its first `.` before a digit, the dashes of a UUID, an issue word and its number) is
# 5-20x faster, and each candidate is matched where it stands.
_ISSUE_AT = tuple(  # each issue word before its number, in the lower-cased text: a literal start is found fastest
    (word, re.compile(re.escape(word) + r"[ \t-]?#?\d"))
    for word in ("pr", "pull request", "issue", "ticket", "bug", "gh", "mr")
)
_UUID_DASH = re.compile(r"-(?=[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-)")  # a UUID's first dash
_DOT_DIGIT = re.compile(r"\.\d")
_SETTING_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """`pattern.finditer(text)`, found faster: hex runs checked for their edges, tickets from their `-`,
    and the other patterns but credential refs matched only where one may start (`_starts_of`)."""
    if pattern is _HEX:
        for start, end in char_runs(text, _HEX_MARKS, 7):
            # a run longer than 40 is no id: `_HEX` looks behind and ahead for a word character
            if end - start <= 40 and (found := _HEX.match(text, start)) is not None and found.end() == end:
                yield found
    elif pattern is _TRACKER:
        yield from _tracker_matches(text)
    elif pattern is _CREDENTIAL_REF:
        yield from pattern.finditer(text)
    else:
        starts = _starts_of(pattern, text)
        if starts is None:
            yield from pattern.finditer(text)
            return
        done = 0
        for pos in sorted(starts):
            if pos >= done and (found := pattern.match(text, pos)) is not None:
                done = found.end()
                yield found


def _starts_of(pattern: re.Pattern[str], text: str) -> set[int] | None:
    """Every position where `pattern` may match in `text` (None: any, for a text whose lower-cased form
    has another length, where positions differ)."""
    if pattern is _UUID:
        return {dash.start() - 8 for dash in _UUID_DASH.finditer(text, 8)}
    if pattern is _SETTING:  # a match starts where the run of capitals, digits and `_` before an `=` starts
        return {start for at in _found_at(text, ("=",)) if (start := _run_start(text, at, _SETTING_CHARS, 42)) < at}
    if pattern is _VERSION:  # where the digits before a version's first dot start, or the `v` before them
        starts = set()
        for dot in _DOT_DIGIT.finditer(text):
            start = dot.start()
            while start and text[start - 1].isdecimal():
                start -= 1
            if start < dot.start():
                starts.add(start - 1 if start and text[start - 1] == "v" else start)
        return starts
    low = text.lower()
    if len(low) != len(text):
        return None
    if pattern is _ISSUE:
        return {found.start() for word, at in _ISSUE_AT if word in low for found in at.finditer(low)}
    return _found_at(low, ("port",)) | _found_at(text, _PORT_WORDS)  # `_PORT`


def _run_start(text: str, end: int, chars: frozenset[str], longest: int) -> int:
    """Where the run of `chars` that ends at `end` starts (`end` - `longest` - 1 when it is longer)."""
    start = end
    while start > end - longest - 1 and start and text[start - 1] in chars:
        start -= 1
    return start


_TRACKER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_DASH_DIGIT = re.compile(r"-\d")
_PORT_WORDS = ("localhost", "127.0.0.1", "0.0.0.0")


def _tracker_matches(text: str) -> Iterator[re.Match[str]]:
    """`_TRACKER.finditer(text)` from each `-` before a digit: a match starts where the run of capitals and
    digits before that `-` starts (a word character before it is a word, no ticket)."""
    done = 0
    for dash in _DASH_DIGIT.finditer(text):
        at = dash.start()
        start = at
        while start > done and at - start <= 10 and text[start - 1] in _TRACKER_CHARS:
            start -= 1
        if start >= done and (found := _TRACKER.match(text, start)) is not None and found.end() > at:
            done = found.end()
            yield found


def _found_at(text: str, words: tuple[str, ...]) -> set[int]:
    """Where each of `words` stands in `text` (overlaps too)."""
    starts: set[int] = set()
    for word in words:
        pos = text.find(word)
        while pos >= 0:
            starts.add(pos)
            pos = text.find(word, pos + 1)
    return starts


def _after_ref(text: str, start: int) -> bool:
    return start >= len(REF_PREFIX) and text.startswith(REF_PREFIX, start - len(REF_PREFIX))


def anchors_of(facts: RawFacts, index: int) -> Anchors:
    anchors: Anchors = facts.read("anchors", index, _anchors)
    return anchors


def _anchors(facts: RawFacts, index: int) -> Anchors:
    message: Message = facts.messages[index]
    role = message.get("role")
    if role == "tool" and facts.answers_recall(index):
        return _NONE
    if role == "tool":  # the file Hermes saved a long output to is where recall finds it in full
        refs, edited = _kept_paths(message_mentions(message))
        key_lines, templates = facts.outcome(index).anchored_lines, facts.error_templates(index)
        if not (refs or key_lines or templates):  # most results
            return _NONE
        return Anchors(refs=refs, edited=edited, key_lines=key_lines, error_lines=templates)
    if role not in ("user", "assistant"):
        return _NONE
    every_call = tool_calls(message)
    names = [call_name(c) for c in every_call]
    calls = [c for c, name in zip(every_call, names, strict=True) if name != RECALL_TOOL]  # `is_recall_call`
    # What a message says and the plain words of a command are short: read redacted (a credential there
    # becomes its reference). A call's other text is long (heredocs, file contents): read raw for commits,
    # UUIDs and tickets only, each kept if its surroundings redact it whole.
    found = identifiers(facts.redacted(outside_code(text_of(message.get("content")))))
    mentions: list[tuple[Mention, str]] = []
    for call in calls:
        read = call_arguments_of(call)
        args = read[1]
        for value in args.values():
            if isinstance(value, str):
                found += [k for piece in strong_identifiers(value) if (k := kept(value, piece))]
        command = command_of(args)
        if command:  # a word's credential may be recognised only by its neighbours (`Client('AC…', '<token>')`)
            words = identifiers(_plain_words_redacted(facts, command))
            found += [k for piece in words if (k := kept(command, piece))]
        mentions += call_mentions(call, read)
    refs, edited = _kept_paths(mentions)
    tools = [name for name in names if name]
    return Anchors(refs=refs, edited=edited, tools=tuple(dict.fromkeys(tools)), identifiers=tuple(dict.fromkeys(found)))


def command_of(args: dict[str, object]) -> str:
    """The first of a call's `command` and `cmd` arguments that is a string, or ''."""
    command, cmd = args.get("command"), args.get("cmd")
    if isinstance(command, str) and isinstance(cmd, str):  # both: the first written
        return command if next(key for key in args if key in ("command", "cmd")) == "command" else cmd
    return command if isinstance(command, str) else cmd if isinstance(cmd, str) else ""


def _plain_words_redacted(facts: RawFacts, command: str) -> str:
    """The plain words of `command`, redacted. A short command is redacted whole, once for its words and
    for every piece kept of it (`kept` checks a piece against the same redaction)."""
    if len(command) <= WHOLE and BLOCK_START not in command:
        return " ".join(plain_words(redacted_source(command)))
    return facts.redacted(" ".join(plain_words(command)))


def _kept_paths(mentions: list[tuple[Mention, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The spellings of `mentions` the index may keep (no credential), and those of them written."""
    refs: dict[str, bool] = {}
    for mention, source in mentions:
        shown = kept(source, mention.path)
        if shown:
            refs[shown] = refs.get(shown, False) or mention.edited
    return tuple(refs), tuple(path for path, edited in refs.items() if edited)


def outside_code(text: str) -> str:
    """`text` without its code: fenced blocks (```…```) and inline spans (`…`) -- what a message says,
    not the code it shows (`MY_ENV_VAR=MY_VALUE cd …` in an instruction is an example, not a setting)."""
    if "`" not in text:
        return text
    if "```" in text:
        text = "\n".join(text.split("```")[::2])
    return _INLINE_CODE.sub(" ", text)
