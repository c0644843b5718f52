"""A shell command read as simple commands: words, redirections and heredoc bodies (no execution).

Enough of the shell grammar to tell which word of a command is a file it reads or writes: quotes and
escapes, `;` `&&` `||` `|` `&` and newlines between commands, `>`/`>>`/`<` redirections, and heredocs
(`<<EOF … EOF`), whose bodies are cut out first (they are a file's content or a script, not words).
Not a parser: an unbalanced quote ends at the end of the text, `$(…)` and backticks stay inside words.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([\w.-]+)\2")
# A piece of a word (quoted, escaped or bare) or an operator, then the blanks after it (or blanks alone):
# one match per word in most commands. Matched in order, never empty.
_PIECE = re.compile(
    r"""(?:('[^']*'?|"[^"\\]*(?:\\.[^"\\]*)*"?|\\.?|&&|\|\||[0-9]*>>|[0-9]*>&[0-9-]*|&>|[0-9]*>\|?|<<<|<<-?|<|[;|&()\n]|"""
    r"""[^\s'"\\;|&<>()]+)|(?=[ \t\r\f\v]))([ \t\r\f\v]*)""",
    re.S,
)
_REDIRECTS = {"<": "<", "<<": "<<", "<<-": "<<", "<<<": "<<<", "&>": ">"}  # anything else: `>`, `>>`, `>|`
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})
# What makes a command more than words between blanks and separators (`str.split` splits at \x1c-\x1f too)
_NOT_PLAIN = re.compile(r"""["'\\<>\x1c-\x1f]""")
_SEPARATOR = re.compile(r"&&|\|\||[;|&()\n]")
_UNESCAPED = re.compile(r"\\([\\\"$`])")  # what a backslash escapes inside double quotes
# The first characters of every piece but a bare word's (a digit may start a bare word or a `2>` redirection)
_SPECIAL_FIRST = frozenset("'\"\\;|&()<>\n0123456789")


@dataclass(frozen=True, slots=True)
class Command:
    """One simple command: its words (unquoted), the files it redirects into (`>`, `>>`) and from (`<`),
    and the bodies of its heredocs."""

    words: tuple[str, ...]
    writes: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    bodies: tuple[str, ...] = ()
    quoted: tuple[int, ...] = ()  # the positions of the words some of which was in quotes (a glob there is literal)

    @property
    def name(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""


def split_heredocs(text: str) -> tuple[str, list[str]]:
    """`text` without its heredoc bodies (each replaced by the newline that ended its marker's line),
    and the bodies in order."""
    if "<<" not in text:
        return text, []
    out: list[str] = []
    bodies: list[str] = []
    pos = 0
    while (marker := _HEREDOC.search(text, pos)) is not None:
        line_end = text.find("\n", marker.end())
        if line_end < 0:
            break
        strip, delimiter = marker.group(1), marker.group(3)
        body_end, after = _body_end(text, line_end + 1, delimiter, strip=bool(strip))
        out.append(text[pos : line_end + 1])
        bodies.append(text[line_end + 1 : body_end])
        pos = after
    out.append(text[pos:])
    return "".join(out), bodies


def _body_end(text: str, start: int, delimiter: str, *, strip: bool) -> tuple[int, int]:
    """Where a heredoc body that starts at `start` ends, and where the text after its closing line
    starts (the end of the text when it is never closed)."""
    if not strip:  # the closing line is the delimiter alone: found by str.find, no regex compiled
        at = start if text.startswith(delimiter + "\n", start) or text[start:] == delimiter else -1
        if at < 0:
            at = text.find("\n" + delimiter + "\n", start - 1)
            at = at + 1 if at >= 0 else (len(text) - len(delimiter) if text.endswith("\n" + delimiter) else -1)
        return (at, at + len(delimiter)) if at >= 0 else (len(text), len(text))
    close = re.compile(r"^[ \t]*" + re.escape(delimiter) + r"[ \t]*$", re.M).search(text, start)
    return (close.start(), close.end()) if close else (len(text), len(text))


@functools.lru_cache(maxsize=64)  # a call's command is read for its paths and for its ids, one after the other
def commands(text: str) -> tuple[Command, ...]:
    """The simple commands of `text`, in order."""
    if text.isascii() and _NOT_PLAIN.search(text) is None:  # words and separators alone (a third of commands)
        return tuple(Command(tuple(plain)) for part in _SEPARATOR.split(text) if (plain := part.split()))
    shell, bodies = split_heredocs(text)
    found: list[Command] = []
    words: list[str] = []
    quoted_at: list[int] = []
    writes: list[str] = []
    reads: list[str] = []
    mine: list[str] = []
    pending = ""  # a redirection waiting for its target word
    word: list[str] = []  # the pieces of the word being read
    quoted = False
    for piece, blanks in _PIECE.findall(shell):
        first = piece[:1]
        if first not in _SPECIAL_FIRST:  # a bare piece (or blanks alone): most pieces
            if piece:
                if blanks and not word and not pending:  # a bare word alone
                    words.append(piece)
                    continue
                word.append(piece)
        elif piece in _SEPARATORS or first in "<>&" or (first.isdigit() and (">" in piece or "<" in piece)):
            if word:  # the word ends here
                _end_word("".join(word), pending, words, (writes, reads, mine, bodies), quoted_at if quoted else None)
                pending, word, quoted = "", [], False
            if piece not in _SEPARATORS:  # 2>&1: no file
                pending = "" if ">&" in piece else _REDIRECTS.get(piece.lstrip("0123456789"), ">")
                continue
            if words or writes or reads or mine:
                found.append(Command(tuple(words), tuple(writes), tuple(reads), tuple(mine), tuple(quoted_at)))
            words, writes, reads, mine, quoted_at = [], [], [], [], []
            continue
        elif first == "'":
            word.append(piece[1:-1] if piece.endswith("'") and len(piece) > 1 else piece[1:])
            quoted = True
        elif first == '"':
            inner = piece[1:-1] if piece.endswith('"') and len(piece) > 1 else piece[1:]
            word.append(_UNESCAPED.sub(r"\1", inner) if "\\" in inner else inner)
            quoted = True
        elif first == "\\":
            if piece != "\\\n":
                word.append(piece[1:])
        else:  # a bare piece that starts with a digit
            word.append(piece)
        if blanks and word:
            _end_word("".join(word), pending, words, (writes, reads, mine, bodies), quoted_at if quoted else None)
            pending, word, quoted = "", [], False
    if word:
        _end_word("".join(word), pending, words, (writes, reads, mine, bodies), quoted_at if quoted else None)
    if words or writes or reads or mine:
        found.append(Command(tuple(words), tuple(writes), tuple(reads), tuple(mine), tuple(quoted_at)))
    return tuple(found)


def _end_word(
    value: str,
    pending: str,
    words: list[str],
    lists: tuple[list[str], list[str], list[str], list[str]],
    quoted_at: list[int] | None,
) -> None:
    """A word read: a word of the command (its position noted in `quoted_at` when given: some of it was
    quoted), or the target of the redirection `pending` (writes, reads, a heredoc's body taken from the
    bodies still unclaimed)."""
    writes, reads, mine, bodies = lists
    if not pending:
        if quoted_at is not None:
            quoted_at.append(len(words))
        words.append(value)
    elif pending in (">", "<"):
        (writes if pending == ">" else reads).append(value)
    elif pending == "<<" and bodies:
        mine.append(bodies.pop(0))
