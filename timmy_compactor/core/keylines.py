"""The key error lines of a tool result: the line(s) that say what failed (spec §2a).

One reader serves the `printed:` part of collapsed lines, the anchor index, the verification and the
evaluation's independent checker. Per result, at most two lines:
1. the exception line that closes a traceback (the first and the last traceback if there are several),
   read by structure: the first line after the frames at the header's indent (`ValueError: x`, or a
   bare `StopIteration`, `django.core.exceptions.EmptyResultSet`);
2. else the first line that *starts* like an error (`ValueError: …`, `error:`, `fatal:`, `ERROR:`, a
   timestamped ERROR/FATAL/CRITICAL log line, pytest `E   ` / `FAILED`, a compiler's
   `file:12: error:`, a tool's own fatal line: `patch: **** …`, `make: *** …`, `npm ERR!`) or says
   `No module named`, `command not found`, `No such file or directory` or `Permission denied` --
   skipping lines that look like code or search hits (`raise`, `except`, `print(`, `import`, `NNN-`/`NNN:`
   and `file:NNN:` grep prefixes, diff `+`/`-`); a line of a file read with its number (`12|…`) is judged
   by its text. With it, a tool's fatal line further down (the one that says why the tool stopped);
3. else, for a non-zero exit, `exit N: <last non-empty line>`.
Exit code 0 included: a script that prints `Error: …` and exits 0 still has a key line. The exit code is
read wherever the result reports it (a `<returncode>` after an `<exception>` block, `Exit code: 2`).

`error_lines` reads every distinct error *template* of a result (the line with numbers, hex and ids
folded, `template`): what the anchor index lists beyond the key lines, one exemplar each.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.text import any_of, decode_json, keywords, lines_with, string_leaves, text_of

KEY_LINE_MAX_CHARS = 240
"""How much of a key line is promised to survive (long lines are cut by characters)."""

_TRACEBACK = "Traceback (most recent call last)"
_TOOL_FATAL = r"[\w.+-]++: \*{3,4} \S"  # `patch: **** malformed patch …`, `make: *** [all] Error 2`
_FATAL = re.compile(r"(?:" + _TOOL_FATAL + r"|(?:fatal|FATAL|panic):)")  # why a tool stopped
# possessive (`*+`, `++`) where giving back could not help -- a name's `\w` run is followed by `.`, `:` or
# the end, not by a `\w` -- and the word checked behind the whole name: `re` no longer retries each shorter
# prefix of every name (the old patterns are the oracles of tests/test_keyline_patterns.py)
_EXCEPTION_START = (
    r"(?:[A-Za-z_]\w*+\.)*+[A-Za-z_]\w*+(?:(?<=\wError)|(?<=\wException)|(?<=\wFailure)|(?<=\wFault))"
    r"(?::(?:\s|$)|$)"
)
_STARTS_LIKE_ERROR = re.compile(
    r"(?:" + _EXCEPTION_START + r"|(?:error|Error|ERROR|fatal|Fatal|FATAL|CRITICAL)(?:\[[\w-]+\])?:"
    r"|FAILED\b|FAIL:|ERROR\b|--- FAIL:|npm ERR!|panic:|E: \S"
    r"|" + _TOOL_FATAL + r")"
)
_TIMESTAMPED = (  # 2024-06-03T07:55:00Z ERROR …, [2024-06-03 07:55:00,123] CRITICAL …
    r"\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}[\d:.,]*Z?\]?\s*(?:[-|:]\s*)?\[?(?:ERROR|FATAL|CRITICAL)\b"
)
_COMPILER = r"\S+?:\d+(?::\d+)?:\s*(?:error|fatal error|ERROR)\b"  # a compiler's file:12: error:
_CLOSING = re.compile(  # `ValueError: x`, `django.core.exceptions.EmptyResultSet`, `StopIteration`, `socket.timeout: x`
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*:(?:\s.*)?|[A-Z]\w*)$"
)
_NUMBERED = re.compile(r"\s*\d{1,7}\|")  # a line of a file read with its number (`12|text`)
_PYTEST_E = re.compile(r"E {3}\S")
_SAYS_ERROR = ("No module named", "command not found", "No such file or directory", "Permission denied")
_LOOKS_LIKE_CODE = (
    r"(?:raise\b|except\b|print\(|import\b|from\s++\S++\s++import\b|assert\b|def\b|class\b|return\b|#|//|>>>"
    r"|[\w.\[\]'\"]++\s*+=[^=])"
)
_SEARCH_HIT = (  # `12-`/`12:`, `path:12-`/`path:12:`, `dir/file.ext:`
    # a path is the whole run of path characters before its `:` (the lookahead, which most lines fail), read
    # once: segments taken whole, and the last (`file.ext`, after the last `/`) read on its own
    r"\d++[-:]|(?=[\w./-]++:)(?:\.?/?[\w.-]++(?:/[\w.-]++)*+:\d++[-:]"
    r"|\.?/?[\w.-]++(?:/[\w.-]++(?=/))*+/[\w.-]+\.\w+:)"
)
_VERDICT = re.compile(  # `_starts_like_an_error`'s patterns in its order, in one search (not a call each)
    f"((?:{_COMPILER})|{_TIMESTAMPED})|{_SEARCH_HIT}|{_LOOKS_LIKE_CODE}|({_STARTS_LIKE_ERROR.pattern})"
)
_KEYWORDS = (
    "rror",
    "xception",
    "ailure",
    "Fault",
    "atal",
    "FATAL",
    "CRITICAL",
    "ERROR",
    "FAIL",
    "E   ",
    "ERR!",
    "panic:",
    ": ***",
    "E: ",
    *_SAYS_ERROR,
)
_ANY_KEYWORD = any_of(_KEYWORDS)
_KEYWORD_LINES = keywords(_KEYWORDS)  # the same words, searched line by line in a whole output
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d{1,20})\s*</returncode>")
_EXIT_STATEMENT = re.compile(  # `Exit code: 2`, `[Command finished with exit code 1]`, `exit status 1`
    r"\[?(?:[A-Za-z ]{0,40}\bwith )?(?:exit code|exit status|return code|returncode)[: =]*(-?\d{1,9})\.?\]?",
    re.IGNORECASE,
)
_TAG = re.compile(r"</?\w+>")


@dataclass(frozen=True, slots=True)
class KeyLine:
    """A key error line: `text` is as the output printed it (cut); `exit_code`, the exit code written
    before it (`exit 2: …`, or `exit 2` alone for no text): the fallback form, or a failing command's
    first line in the index (`with_exit_code`)."""

    text: str
    exit_code: int | None = None

    def __str__(self) -> str:
        if self.exit_code is None:
            return self.text
        return f"exit {self.exit_code}: {self.text}" if self.text else f"exit {self.exit_code}"


def with_exit_code(lines: tuple[KeyLine, ...], code: int | None) -> tuple[KeyLine, ...]:
    """The key lines of a failing command (`code` non-zero) with its exit code before the first, or
    alone when it printed none (`exit 2`): what the anchor index lists, so the code is in the request."""
    if not code:
        return lines
    if not lines:
        return (KeyLine("", code),)
    return lines if lines[0].exit_code is not None else (KeyLine(lines[0].text, code), *lines[1:])


def key_error_lines(content: Any) -> tuple[KeyLine, ...]:
    """The key error lines of a tool result's content (string, list of parts, or anything else)."""
    text = text_of(content)
    decoded = decode_json(text)
    return key_lines_of(text, decoded, exit_code(text, decoded))


def key_lines_of(text: str, decoded: Any, code: int | None) -> tuple[KeyLine, ...]:
    """`key_error_lines` of a result already read: its text, its JSON value (None if not JSON) and its
    `exit_code`."""
    body = _error_body(text, decoded)
    closings = traceback_closings(body) if _TRACEBACK in body else []
    return _key_lines(body, closings, _starts(body), code)


@dataclass(frozen=True, slots=True)
class ErrorReading:
    key_lines: tuple[KeyLine, ...]  # `key_lines_of`
    templates: tuple[str, ...]  # `error_lines`


def read_errors(text: str, decoded: Any, code: int | None) -> ErrorReading:
    """`key_lines_of` and `error_lines` of a result already read, in one pass over its lines (both look
    at the same traceback closings and the same lines that start like an error)."""
    body = _error_body(text, decoded)
    closings = traceback_closings(body) if _TRACEBACK in body else []
    starts = _starts(body)
    if not (closings or starts or code):
        return _NO_ERRORS  # most outputs
    return ErrorReading(_key_lines(body, closings, starts, code), _exemplars(closings, starts))


_NO_ERRORS = ErrorReading((), ())


def _error_body(text: str, decoded: Any) -> str:
    return text if decoded is None else "\n".join(_leaves_error_first(decoded))


def _starts(body: str) -> list[str]:
    """The lines of `body` that start like an error (`is_key_start`): of those holding a keyword."""
    lines = lines_with(body, _KEYWORD_LINES)
    return [line for line in lines if _starts_like_an_error(line)] if lines else lines


def _key_lines(body: str, closings: list[str], starts: Iterable[str], code: int | None) -> tuple[KeyLine, ...]:
    """The key lines: the first and last traceback closings, else the first line that starts like an
    error (and a fatal one after it), else a failing command's (`code`) last line."""
    found = list(dict.fromkeys([closings[0], closings[-1]] if len(closings) > 2 else closings))
    if not found:
        found = _error_starts(starts)
    if found:
        return tuple(KeyLine(line) for line in found)
    if code:
        last = _last_line(body)
        return (KeyLine(last, code),) if last else ()
    return ()


def exit_code(text: str, decoded: Any = None) -> int | None:
    """The exit code a tool result reports (`exit_code`/`returncode` of a JSON object, `<returncode>`)."""
    if isinstance(decoded, dict):
        code = decoded.get("exit_code", decoded.get("returncode"))
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    match = _RETURNCODE.search(text[:200])
    if match:
        return int(match.group(1))
    if "<returncode>" in text:  # after an `<exception>` block: the wrapper's, not a line the command printed
        printed = (text.find("<output>"), text.rfind("</output>"))
        for match in _RETURNCODE.finditer(text):
            if printed[0] == -1 or not printed[0] < match.start() < printed[1]:
                return int(match.group(1))
    if decoded is None:
        for line in _end_lines(text):
            statement = _EXIT_STATEMENT.fullmatch(line)
            if statement:
                return int(statement.group(1))
    return None


def _end_lines(text: str) -> tuple[str, ...]:
    """The first and the last non-empty line of `text`, stripped (where a tool states its exit code)."""
    stripped = text.strip()
    if not stripped:
        return ()
    first = stripped[: stripped.find("\n")] if "\n" in stripped else stripped
    return first.strip(), stripped[stripped.rfind("\n") + 1 :].strip()


def _cut(line: str) -> str:
    return line.strip()[:KEY_LINE_MAX_CHARS]


def traceback_closings(body: str) -> list[str]:
    """The closing exception line of every complete traceback, read by structure: the first non-empty
    line after the frames at the header's indent or less. A traceback whose frames are followed by
    anything else (cut short, or mixed with other output) has none."""
    lines = body.splitlines()
    ends: list[str] = []
    k = 0
    while k < len(lines):
        header = lines[k]
        k += 1
        if _TRACEBACK not in header:
            continue
        indent = len(header) - len(header.lstrip())
        while k < len(lines) and (not lines[k].strip() or len(lines[k]) - len(lines[k].lstrip()) > indent):
            k += 1  # the frames (and blank lines between them)
        if k < len(lines) and _TRACEBACK not in lines[k] and _CLOSING.match(lines[k].strip()):
            ends.append(_cut(lines[k]))
    return [line for line in ends if line]


def is_key_start(line: str) -> bool:
    """Whether `line` starts like an error (and is not code or a search hit)."""
    return _ANY_KEYWORD.search(line) is not None and _starts_like_an_error(line)


def _starts_like_an_error(line: str) -> bool:
    """`is_key_start` of a line that holds one of the keywords."""
    numbered = _NUMBERED.match(line)
    if numbered:
        line = line[numbered.end() :]
    if _PYTEST_E.match(line):
        return True
    stripped = line.strip()
    if not stripped:
        return False
    if stripped.startswith(("+", "-")) and not stripped.startswith("--- FAIL:"):
        return False  # a diff line
    # a compiler's or a timestamped error (group 1: before the search-hit check, which a `file:12:` or date
    # prefix would trip), else a search hit or code (no group), else an error start (group 2)
    verdict = _VERDICT.match(stripped)
    if verdict:
        return verdict.lastindex is not None
    for phrase in _SAYS_ERROR:  # noqa: SIM110 -- a loop, not a generator made per line
        if phrase in stripped:
            return True
    return False


def _error_starts(starts: Iterable[str]) -> list[str]:
    """Of the lines that start like an error (`starts`, in order): the first, and the first tool's fatal
    line after it if another."""
    found: list[str] = []
    for line in starts:
        if not found:
            found.append(_cut(line))
            if _is_fatal(line):
                break
        elif _is_fatal(line) and _cut(line) != found[0]:
            found.append(_cut(line))
            break
    return found


def _is_fatal(line: str) -> bool:
    numbered = _NUMBERED.match(line)
    return bool(_FATAL.match(line[numbered.end() :] if numbered else line.lstrip()))


def _last_line(body: str) -> str | None:
    """The last line with words: a line of markup alone (`<returncode>1</returncode>`) is none."""
    for line in reversed(body.splitlines()):
        stripped = line.strip()
        if stripped and not (_TAG.match(stripped) and not any(c.isalpha() for c in _TAG.sub("", stripped))):
            return _cut(line)
    return None


def _leaves_error_first(decoded: Any) -> Iterator[str]:
    """The strings of a decoded JSON result, its `error` field first (it says what failed)."""
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
        yield decoded["error"]
    yield from string_leaves(decoded)


_FOLDED = re.compile(  # what varies between two lines of one template: ids, hex, numbers
    # each begins with a digit or a hex letter: said first, `re` tries the branches only there (2x faster)
    r"(?=[\da-fA-F])(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|0x[0-9a-fA-F]+|(?<![\w.-])(?=[0-9a-f]*\d)[0-9a-f]{6,}(?![\w-])|\d+)"
)


def template(line: str) -> str:
    """An error line's template: its uuids, hex and numbers folded (`ERROR worker #: timeout after #s`)."""
    return _FOLDED.sub("#", line)


def error_lines(content: Any) -> tuple[str, ...]:
    """One exemplar (the first, cut) of each distinct error template of a tool result, in order: the
    closing line of every traceback, then every line that starts like an error (a pytest `E` line only
    when it names the error, not its `assert …` details)."""
    text = text_of(content)
    decoded = decode_json(text)
    return read_errors(text, decoded, exit_code(text, decoded)).templates


def _exemplars(closings: list[str], starts: list[str]) -> tuple[str, ...]:
    found = closings + [
        _cut(line) for line in starts if not _PYTEST_E.match(line) or _STARTS_LIKE_ERROR.match(line[1:].strip())
    ]
    exemplars: dict[str, str] = {}
    for line in found:
        exemplars.setdefault(template(line), line)
    return tuple(exemplars.values())
