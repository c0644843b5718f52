"""A second level of JSON string escaping, read one level down: a JSON document inside a JSON string
inside a JSON string (a tool result whose output is a JSON document) spells a key and its quotes
`\\\\\\"password\\\\\\": \\\\\\"x\\\\\\"`, which patterns written for plain text and one level of escaping
do not read.

`redact_escaped(text, redact)` finds each line of JSON string body (no bare quote, no control character,
valid escapes only, up to an escaped newline) that holds the mark of a second level -- an escaped
backslash before an escaped quote or before `n`, `r`, `t` -- decodes it one level (`json.loads`: a
left-to-right unescape, surrogate pairs joined), hands the decoded text to `redact`, and, only when that
changed it, writes it back escaped the way the line was: every character in the spelling the line gave
it (raw where the line holds it raw, else its shortest escape there). So the line still decodes to the
redacted text, and every character kept is spelled as before (unless the line spelled one character two
ways: then one of them). A reference or a marker is plain ASCII and needs no escape. A document nested
in a string lies on one line of it (its own newlines are escaped once more); the other lines, already
read by the passes over `text`, are not read again.

Linear in the text: one scan for the lines that hold a mark (in `re`), one decode and one `translate`
per such line. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

# A character of a line of a JSON string body: an escaped newline ends the line (a document nested in
# it lies on one line, its own newlines escaped once more), so only the lines that hold a mark are read.
_PLAIN = r'[^"\\\x00-\x1f]'
_ESCAPED = r'\\(?:["\\/bfrt]|u[0-9a-fA-F]{4})'
_TOKEN = rf"{_PLAIN}|{_ESCAPED}"
_ALIGNED_MARK = r'\\\\(?:\\"|[nrt])'  # an escaped backslash, then `\"`, `n`, `r` or `t`
# One scan in `re`, no Python step per line: the lines without a mark, those of fewer than 7 characters
# (`redact_text` finds nothing there) and what lies between lines are skipped as a whole (possessive, so
# never scanned twice; a mark is looked for at backslashes only); what stops a skip is a line that holds
# a mark, matched whole as `run`.
_SCAN = re.compile(
    rf"(?:(?:{_PLAIN}++|(?!{_ALIGNED_MARK}){_ESCAPED})++(?!{_TOKEN})|(?:{_TOKEN}){{1,6}}+(?!{_TOKEN})"
    rf'|["\x00-\x1f]|\\n|\\(?!["\\/bfnrt]|u[0-9a-fA-F]{{4}}))++'
    rf"|(?P<run>(?:{_PLAIN}++|{_ESCAPED})++)"
)
_MARK = re.compile(_ALIGNED_MARK)  # found anywhere: a cheap gate, a little wider than the aligned mark
_ESCAPE = re.compile(r"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)")


def has_second_level(text: str) -> bool:
    return "\\\\" in text and _MARK.search(text) is not None


def redact_escaped(text: str, redact: Callable[[str], str]) -> str:
    """`text` with each line of a JSON string that holds a second level of escaping decoded one level,
    passed to `redact` and escaped again as it was; the rest of `text` as it is."""
    out: list[str] = []
    last = 0
    for match in _SCAN.finditer(text):
        if match.lastgroup != "run":
            continue
        redacted = _redact_run(match.group("run"), redact)
        if redacted is not None:
            out += (text[last : match.start()], redacted)
            last = match.end()
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _redact_run(run: str, redact: Callable[[str], str]) -> str | None:
    """The line, decoded, redacted and escaped again; None when the redaction changed nothing."""
    decoded = json.loads(f'"{run}"')
    redacted = redact(decoded)
    if redacted == decoded:
        return None
    return redacted.translate(_spelling(run))


def _spelling(run: str) -> dict[int, str]:
    """How the line `run` spells each character it escapes: raw where it holds the character raw (the
    backslash and the quote never), else its shortest escape; letters and digits always raw."""
    table: dict[int, str] = {}
    raw = _ESCAPE.sub("", run)
    for escape in set(_ESCAPE.findall(run)):
        char = json.loads(f'"{escape}"')
        if (char.isascii() and char.isalnum()) or char in raw:
            continue
        known = table.get(ord(char))
        if known is None or len(escape) < len(known):
            table[ord(char)] = escape
    return table


__all__ = ["has_second_level", "redact_escaped"]
