"""An independent checker of the engine's promises, for the evaluation.

It shares no code with the engine's verification (`timmy_compactor.core.verify`, `core.facts`,
`core.rules`, `core.lines` are not imported; a test checks this), so a bug in the engine's own
extraction cannot hide the same bug here. It checks a view against the raw messages:
- every user message byte-identical and in order;
- the last `tail_steps` steps (a user message, or an assistant message with its tool results)
  byte-identical;
- every tool name called, every path and URL in user/assistant text and tool-call arguments -- of a
  message the view folded (a range an index chunk or a `[folded #a–#b …]` line names), only those of
  its tool-call arguments that can be nothing but a file (a name with an extension, or `/x`, `./x`,
  `~/x`), outside heredoc bodies, quoted strings and `echo`, and no placeholder or `/dev/…` (spec §2a:
  the index holds the files of the run, nothing from prose or scripts) --, and the
  key error lines of every tool output that has them (a command that exits 0 may print an error),
  present somewhere in the view's text -- as written, or as the redaction writes it (the anchor index
  redacts what it lists) -- or, for a fact of a range the index condensed, named by its condensed line
  (`### #a–#b (condensed): …`, one recall away);
- no orphan tool call or result (a call still waiting for its result at the very end is not one).
Recall's own traffic (`timmy_recall` calls and answers) promises nothing but its tool name: an answer
quotes other messages, whose facts are checked where they were said.

Key error lines come from the one reader the engine uses too (`core.keylines`, spec §2a).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from timmy_compactor.core.keylines import key_error_lines
from timmy_compactor.core.pairs import orphans
from timmy_compactor.core.redact import redact_text
from timmy_compactor.core.types import Message

_URL = re.compile(r"https?://[^\s\"'<>`)\]]+")
_PATH = re.compile(r"(?:~|\.{1,2})?/?[A-Za-z0-9_.@+-]+(?:/[A-Za-z0-9_.@+-]+)+/?")
_CONDENSED = re.compile(r"^### #(\d+)(?:–#(\d+))? \(condensed\)", re.M)
_FOLDED = re.compile(r"^### #(\d+)(?:–#(\d+))?[ :]|\[folded #(\d+)(?:–#(\d+))?", re.M)
_HEREDOC_BODY = re.compile(r"<<-?[ \t]*(['\"]?)(\w+)\1[^\n]*\n.*?^[ \t]*\2[ \t]*$", re.S | re.M)
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"|\b(?:echo|printf)\b[^;&|\n]*")
_FILE_LIKE = re.compile(r"(?:^|/)[\w@+-][\w.@+-]*\.[A-Za-z0-9_]{1,12}$")
RECALL_TOOL = "timmy_recall"  # the engine's recall tool, spelled here too: this checker shares no code with it


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(p.get("text") if isinstance(p, dict) else p) for p in content)
    return "" if content is None else str(content)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            decoded = json.loads(value) if value.lstrip()[:1] in ("{", "[") else None
        except ValueError:
            decoded = None
        return _strings(decoded) if decoded is not None else [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _refs(text: str) -> set[str]:
    urls = set(_URL.findall(text))
    rest = _URL.sub(" ", text)
    paths = {p for word in rest.split() if "/" in word for p in _PATH.findall(word) if any(c.isalpha() for c in p)}
    return urls | paths


def _call_files(arguments: Any) -> set[str]:
    """The paths of a folded call's arguments that can be nothing but files (see the module's doc)."""
    text = "\n".join(_QUOTED.sub(" ", _HEREDOC_BODY.sub("\n", s)) for s in _strings(arguments))
    found = {ref[2:] if ref.startswith("./") and "/" in ref[2:] else ref for ref in _refs(text)}  # one spelling
    return {
        ref
        for ref in found
        if "://" in ref
        or (
            (_FILE_LIKE.search(ref.rstrip("/")) or ref.startswith(("/", "./", "~/", "../")))
            and "path/to" not in ref.lower()
            and not ref.startswith("/dev/")
        )
    }


def folded_ranges(text: str) -> set[int]:
    """Raw indices the view names by an index chunk or a fold line (their facts are in the index)."""
    covered: set[int] = set()
    for match in _FOLDED.finditer(text):
        first = int(match.group(1) or match.group(3))
        covered.update(range(first, int(match.group(2) or match.group(4) or first) + 1))
    return covered


def _steps(messages: Sequence[Message]) -> list[list[int]]:
    out: list[list[int]] = []
    i = 0
    while i < len(messages):
        group = [i]
        ids = {c.get("id") for c in messages[i].get("tool_calls") or [] if isinstance(c, dict)}
        i += 1
        while (
            ids and i < len(messages) and messages[i].get("role") == "tool" and messages[i].get("tool_call_id") in ids
        ):
            group.append(i)
            i += 1
        out.append(group)
    return out


@dataclass
class Verdict:
    users_verbatim: bool = True
    tail_verbatim: bool = True
    tool_names: tuple[int, int] = (0, 0)  # kept, total
    refs: tuple[int, int] = (0, 0)
    error_lines: tuple[int, int] = (0, 0)
    orphans: int = 0
    lost: list[str] = field(default_factory=list)

    @property
    def kept(self) -> int:
        return (
            int(self.users_verbatim)
            + int(self.tail_verbatim)
            + self.tool_names[0]
            + self.refs[0]
            + self.error_lines[0]
            + int(self.orphans == 0)
        )

    @property
    def total(self) -> int:
        return 3 + self.tool_names[1] + self.refs[1] + self.error_lines[1]

    @property
    def all_kept(self) -> bool:
        return self.kept == self.total


def condensed_ranges(text: str) -> set[int]:
    """Raw indices the view names only by a condensed index line (one recall away)."""
    covered: set[int] = set()
    for match in _CONDENSED.finditer(text):
        first = int(match.group(1))
        covered.update(range(first, int(match.group(2) or first) + 1))
    return covered


def _name(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    return str(function.get("name", "")) if isinstance(function, dict) else ""


def check(raw: Sequence[Message], view: Sequence[Message], tail_steps: int = 3) -> Verdict:
    verdict = Verdict()
    dump = json.dumps
    raw_users = [dump(m) for m in raw if m.get("role") == "user"]
    verdict.users_verbatim = raw_users == [dump(m) for m in view if m.get("role") == "user"]
    if not verdict.users_verbatim:
        verdict.lost.append("user messages changed, dropped or reordered")
    steps = _steps(raw)[-tail_steps:]
    tail = [raw[i] for group in steps for i in group]
    verdict.tail_verbatim = [dump(m) for m in view[len(view) - len(tail) :]] == [dump(m) for m in tail]
    if not verdict.tail_verbatim:
        last = "the last step is" if tail_steps == 1 else f"the last {tail_steps} steps are"
        verdict.lost.append(f"{last} not byte-identical")
    haystack = "\n".join(s for m in view for s in _strings(m.get("content")))
    haystack += "\n" + "\n".join(
        f"{c.get('function', {}).get('name')}\n" + "\n".join(_strings(c.get("function", {}).get("arguments", "")))
        for m in view
        for c in m.get("tool_calls") or []
        if isinstance(c, dict)
    )
    recallable = condensed_ranges(haystack)
    promised: tuple[set[str], set[str], set[str]] = (set(), set(), set())
    one_recall_away: tuple[set[str], set[str], set[str]] = (set(), set(), set())
    recall_ids = {c.get("id") for m in raw for c in m.get("tool_calls") or [] if _name(c) == RECALL_TOOL}
    folded = folded_ranges(haystack)
    for k, m in enumerate(raw):
        names, refs, errors = one_recall_away if k in recallable else promised
        in_index = k in folded and m.get("role") != "user"
        for c in m.get("tool_calls") or []:
            if isinstance(c, dict):
                names.add(_name(c))
                arguments = c.get("function", {}).get("arguments", "")
                if _name(c) != RECALL_TOOL:
                    refs |= _call_files(arguments) if in_index else _refs("\n".join(_strings(arguments)))
        if m.get("role") in ("user", "assistant") and not in_index:
            refs |= _refs(_text(m.get("content")))
        recall_answer = m.get("tool_call_id") in recall_ids or RECALL_TOOL in (m.get("name"), m.get("tool_name"))
        if m.get("role") == "tool" and not recall_answer:
            errors |= {line.text for line in key_error_lines(m.get("content"))}
    for label, items, recall in zip(("tool_names", "refs", "error_lines"), promised, one_recall_away, strict=True):
        missing = sorted(
            x for x in items if x and x not in haystack and redact_text(x) not in haystack and x not in recall
        )
        setattr(verdict, label, (len(items) - len(missing), len(items)))
        verdict.lost += [f"{label[:-1]} lost: {x[:80]}" for x in missing[:5]]
    verdict.orphans = orphans(view)
    if verdict.orphans:
        verdict.lost.append(f"{verdict.orphans} orphan tool call(s)/result(s)")
    return verdict
