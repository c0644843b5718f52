"""The per-line patterns of the key-line reader, rewritten to read a line once (possessive quantifiers,
checks behind) and tried in one search, match exactly what the patterns as first written match, and judge
each line as the reader as first written did: those are the oracles here."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from timmy_compactor.core import keylines

_EXCEPTION_START_AS_WRITTEN = r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Failure|Fault)(?::(?:\s|$)|$)"
_TOOL_FATAL = r"[\w.+-]+: \*{3,4} \S"
_NUMBERED = re.compile(r"\s*\d{1,7}\|")
_PYTEST_E = re.compile(r"E {3}\S")
_TIMESTAMPED = re.compile(
    r"\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}[\d:.,]*Z?\]?\s*(?:[-|:]\s*)?\[?(?:ERROR|FATAL|CRITICAL)\b"
)
_COMPILER = re.compile(r"\S+?:\d+(?::\d+)?:\s*(?:error|fatal error|ERROR)\b")
_SAYS_ERROR = ("No module named", "command not found", "No such file or directory", "Permission denied")
AS_WRITTEN = {
    "_SEARCH_HIT": re.compile(r"\d+[-:]|\.?/?[\w.-]+(?:/[\w.-]+)*(?:\.\w+)?:\d+[-:]|\.?/?[\w.-]+(?:/[\w.-]+)+\.\w+:"),
    "_LOOKS_LIKE_CODE": re.compile(
        r"(?:raise\b|except\b|print\(|import\b|from\s+\S+\s+import\b|assert\b|def\b|class\b|return\b|#|//|>>>"
        r"|[\w.\[\]'\"]+\s*=[^=])"
    ),
    "_STARTS_LIKE_ERROR": re.compile(
        r"(?:" + _EXCEPTION_START_AS_WRITTEN + r"|(?:error|Error|ERROR|fatal|Fatal|FATAL|CRITICAL)(?:\[[\w-]+\])?:"
        r"|FAILED\b|FAIL:|ERROR\b|--- FAIL:|npm ERR!|panic:|E: \S"
        r"|" + _TOOL_FATAL + r")"
    ),
    "_FATAL": re.compile(r"(?:" + _TOOL_FATAL + r"|(?:fatal|FATAL|panic):)"),
}

_PIECES = (
    "/",
    "./",
    "../",
    "//",
    ".",
    "-",
    ":",
    "::",
    "12",
    "7",
    "_",
    "a",
    "Z",
    "é",
    "٣",
    " ",
    "\t",
    "=",
    "==",
    "[0]",
    "'k'",
    '"',
    "py",
    ".py",
    "src/app.py",
    "Error",
    "ValueError",
    "Exception",
    "Failure",
    "Fault",
    "x.y",
    "from",
    "import",
    "raise",
    "print(",
    "#",
    ">>>",
    "error",
    "FATAL",
    "ERROR",
    "FAIL",
    "E",
    "npm ERR!",
    "make: ",
    "make: *** [all] Error 2",
    "patch: **** ",
    "patch.1: ",
    "****",
    " x",
    "***",
    "[E501]",
    "\n",
    "+",
    "--- FAIL:",
    "E   ",
    "E: x",
    "2024-06-03",
    "T07:55:00Z",
    "2024-06-03 07:55:00,123] ",
    ":12: error",
    ":3:",
    "CRITICAL",
    "fatal error",
    "No module named",
    "command not found",
    "12|",
)
lines = st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=14).map("".join)


def starts_like_an_error_as_written(line: str) -> bool:
    numbered = _NUMBERED.match(line)
    if numbered:
        line = line[numbered.end() :]
    if _PYTEST_E.match(line):
        return True
    stripped = line.strip()
    if not stripped:
        return False
    if stripped.startswith(("+", "-")) and not stripped.startswith("--- FAIL:"):
        return False
    if _COMPILER.match(stripped) or _TIMESTAMPED.match(stripped):
        return True
    if AS_WRITTEN["_SEARCH_HIT"].match(stripped) or AS_WRITTEN["_LOOKS_LIKE_CODE"].match(stripped):
        return False
    if AS_WRITTEN["_STARTS_LIKE_ERROR"].match(stripped):
        return True
    return any(phrase in stripped for phrase in _SAYS_ERROR)


def _found(match: re.Match[str] | None) -> tuple[int, int] | None:
    return None if match is None else match.span()


@settings(max_examples=3000)
@given(lines)
def test_each_per_line_pattern_matches_what_it_matched_as_first_written(line: str) -> None:
    for name, as_written in AS_WRITTEN.items():
        written = getattr(keylines, name)
        pattern = re.compile(written) if isinstance(written, str) else written
        assert _found(pattern.match(line)) == _found(as_written.match(line)), name


@settings(max_examples=3000)
@given(lines)
def test_a_line_starts_like_an_error_as_the_reader_as_first_written_judged(line: str) -> None:
    assert keylines._starts_like_an_error(line) == starts_like_an_error_as_written(line)
