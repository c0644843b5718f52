"""The key error lines of a tool result: the line(s) that say what failed (spec §2a).

One reader serves the `printed:` part of collapsed lines, the anchor index, the verification and the
evaluation's independent checker. Per result, at most two lines:
1. the exception line that closes a traceback (the first and the last traceback if there are several);
2. else the first line that *starts* like an error (`ValueError: …`, `error:`, `fatal:`, `ERROR:`, a
   timestamped ERROR/FATAL/CRITICAL log line, pytest `E   ` / `FAILED`, a compiler's
   `file:12: error:`) or says `No module named`, `command not found`, `No such file or directory` or
   `Permission denied` -- skipping lines that look like code or search hits (`raise`, `except`,
   `print(`, `import`, `NNN-`/`NNN:` and `file:NNN:` grep prefixes, diff `+`/`-`);
3. else, for a non-zero exit, `exit N: <last non-empty line>`.
Exit code 0 included: a script that prints `Error: …` and exits 0 still has a key line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core.text import decode_json, lines_holding, string_leaves, text_of

KEY_LINE_MAX_CHARS = 240
"""How much of a key line is promised to survive (long lines are cut by characters)."""

_TRACEBACK = "Traceback (most recent call last)"
_EXCEPTION_START = r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Failure|Fault)(?::(?:\s|$)|$)"
_STARTS_LIKE_ERROR = re.compile(
    r"(?:" + _EXCEPTION_START + r"|(?:error|Error|ERROR|fatal|Fatal|FATAL|CRITICAL)(?:\[[\w-]+\])?:"
    r"|FAILED\b|ERROR\b|--- FAIL:|npm ERR!|panic:"
    r")"
)
_TIMESTAMPED = re.compile(  # 2024-06-03T07:55:00Z ERROR …, [2024-06-03 07:55:00,123] CRITICAL …
    r"\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}[\d:.,]*Z?\]?\s*(?:[-|:]\s*)?\[?(?:ERROR|FATAL|CRITICAL)\b"
)
_COMPILER = re.compile(r"\S+?:\d+(?::\d+)?:\s*(?:error|fatal error|ERROR)\b")  # a compiler's file:12: error:
_CLOSING = re.compile(  # `ValueError: x`, `django.core.exceptions.ImproperlyConfigured: x`, `KeyboardInterrupt`
    r"[A-Za-z_][\w.]*(?::(?:\s.*)?|(?:Error|Exception|Interrupt|Exit|Failure|Fault))$"
)
_PYTEST_E = re.compile(r"E {3}\S")
_SAYS_ERROR = ("No module named", "command not found", "No such file or directory", "Permission denied")
_LOOKS_LIKE_CODE = re.compile(
    r"(?:raise\b|except\b|print\(|import\b|from\s+\S+\s+import\b|assert\b|def\b|class\b|return\b|#|//|>>>"
    r"|[\w.\[\]'\"]+\s*=[^=])"
)
_SEARCH_HIT = re.compile(r"\d+[-:]|\.?/?[\w.-]+(?:/[\w.-]+)*(?:\.\w+)?:\d+[-:]|\.?/?[\w.-]+(?:/[\w.-]+)+\.\w+:")
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
    *_SAYS_ERROR,
)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d{1,20})\s*</returncode>")
_MARKUP = re.compile(r"</?\w+>(?:.*</\w+>)?")


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
    return key_lines_of(text, decode_json(text))


def key_lines_of(text: str, decoded: Any) -> tuple[KeyLine, ...]:
    """`key_error_lines` of a result already read: its text and its JSON value (None if not JSON)."""
    body = text if decoded is None else "\n".join(_leaves_error_first(decoded))
    found = _traceback_ends(body) if _TRACEBACK in body else []
    if not found:
        line = _first_error_start(body)
        found = [line] if line else []
    if found:
        return tuple(KeyLine(line) for line in found)
    code = exit_code(text, decoded)
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
    return int(match.group(1)) if match else None


def _cut(line: str) -> str:
    return line.strip()[:KEY_LINE_MAX_CHARS]


def _traceback_ends(body: str) -> list[str]:
    """The closing exception line of the first and the last complete traceback."""
    lines = body.splitlines()
    ends: list[str] = []
    k = 0
    while k < len(lines):
        header = lines[k]
        if _TRACEBACK not in header:
            k += 1
            continue
        indent = len(header) - len(header.lstrip())
        k += 1
        while k < len(lines):
            line = lines[k]
            if _TRACEBACK in line:
                break  # a traceback cut short: no closing line
            if len(line) - len(line.lstrip()) <= indent and _CLOSING.match(line.strip()):
                ends.append(_cut(line))
                k += 1
                break
            k += 1
    ends = [line for line in ends if line]
    if len(ends) > 2:
        ends = [ends[0], ends[-1]]
    return list(dict.fromkeys(ends))


def is_key_start(line: str) -> bool:
    """Whether `line` starts like an error (and is not code or a search hit)."""
    if not any(keyword in line for keyword in _KEYWORDS):
        return False
    if _PYTEST_E.match(line):
        return True
    stripped = line.strip()
    if not stripped:
        return False
    if stripped.startswith(("+", "-")) and not stripped.startswith("--- FAIL:"):
        return False  # a diff line
    if _COMPILER.match(stripped) or _TIMESTAMPED.match(stripped):
        return True  # before the search-hit check, which a `file:12:` or date prefix would trip
    if _SEARCH_HIT.match(stripped) or _LOOKS_LIKE_CODE.match(stripped):
        return False
    if _STARTS_LIKE_ERROR.match(stripped):
        return True
    return any(phrase in stripped for phrase in _SAYS_ERROR)


def _first_error_start(body: str) -> str | None:
    for line in lines_holding(body, _KEYWORDS):
        if is_key_start(line):
            return _cut(line)
    return None


def _last_line(body: str) -> str | None:
    for line in reversed(body.splitlines()):
        stripped = line.strip()
        if stripped and not _MARKUP.fullmatch(stripped):
            return _cut(line)
    return None


def _leaves_error_first(decoded: Any) -> Iterator[str]:
    """The strings of a decoded JSON result, its `error` field first (it says what failed)."""
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
        yield decoded["error"]
    yield from string_leaves(decoded)
