"""`fold.shell.commands` reads a piece and the blanks after it in one match, and a bare word alone without
joining pieces: its commands are those of the reader it replaced (`reference` below: one match per piece
or run of blanks, every piece through the same chain of tests), on any text. And the faster tests `fold.paths`
reads a command's words with give the answers of those they replaced."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from tests.test_properties import examples
from timmy_compactor.core.fold.paths import _has_letter
from timmy_compactor.core.fold.shell import commands, split_heredocs

_PIECE = re.compile(
    r"""'[^']*'?|"(?:[^"\\]|\\.)*"?|\\.?|&&|\|\||[0-9]*>>|[0-9]*>&[0-9-]*|&>|[0-9]*>\|?|<<<|<<-?|<|[;|&()\n]|"""
    r"""[^\s'"\\;|&<>()]+|[ \t\r\f\v]+""",
    re.S,
)
_REDIRECTS = {"<": "<", "<<": "<<", "<<-": "<<", "<<<": "<<<", "&>": ">"}
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})
Read = tuple[tuple[tuple[str, bool], ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def reference(text: str) -> list[Read]:  # the reader as it was, kept whole to compare with
    """Each command as (words with whether some of each was quoted, writes, reads, heredoc bodies)."""
    shell, bodies = split_heredocs(text)
    found: list[Read] = []
    words: list[tuple[str, bool]] = []
    writes: list[str] = []
    reads: list[str] = []
    mine: list[str] = []
    pending = ""
    word: list[str] = []
    quoted = False

    def end_word() -> None:
        nonlocal word, quoted, pending
        if not word:
            return
        value = "".join(word)
        if pending in (">", "<"):
            (writes if pending == ">" else reads).append(value)
        elif pending == "<<":
            if bodies:
                mine.append(bodies.pop(0))
        elif pending != "<<<":
            words.append((value, quoted))
        pending, word, quoted = "", [], False

    def end_command() -> None:
        nonlocal words, writes, reads, mine
        end_word()
        if words or writes or reads or mine:
            found.append((tuple(words), tuple(writes), tuple(reads), tuple(mine)))
        words, writes, reads, mine = [], [], [], []

    for match in _PIECE.finditer(shell):
        piece = match.group(0)
        first = piece[0]
        if first in " \t\r\f\v":
            end_word()
        elif piece in _SEPARATORS:
            end_command()
        elif first in "<>&" or (first.isdigit() and (">" in piece or "<" in piece) and not piece.isalnum()):
            end_word()
            pending = "" if ">&" in piece else _REDIRECTS.get(piece.lstrip("0123456789"), ">")
        elif first == "'":
            word.append(piece[1:-1] if piece.endswith("'") and len(piece) > 1 else piece[1:])
            quoted = True
        elif first == '"':
            inner = piece[1:-1] if piece.endswith('"') and len(piece) > 1 else piece[1:]
            word.append(re.sub(r"\\([\\\"$`])", r"\1", inner) if "\\" in inner else inner)
            quoted = True
        elif first == "\\":
            if piece != "\\\n":
                word.append(piece[1:])
        else:
            word.append(piece)
    end_command()
    return found


def read(text: str) -> list[Read]:
    return [
        (tuple((w, i in c.quoted) for i, w in enumerate(c.words)), c.writes, c.reads, c.bodies)
        for c in commands.__wrapped__(text)
    ]


_WORDS = ("cat", "<<EOF", "<<-'X'", "EOF", "X", "2>&1", "2>", ">>", "&>", "<<<", ">|", "x.py", "a b", "\\\n")
_TEXTS = st.lists(
    st.text("ab1 2\t\n'\"\\;|&<>()-=\r\v\xa0\x1cé٣*$`.#/", max_size=12) | st.sampled_from(_WORDS), max_size=16
).map("".join) | st.text("ab1 2\t\n;|&()-=\r\v\f*$`.#/", max_size=40)  # words and separators alone: a fast path


@examples(3_000)
@given(_TEXTS)
@example("cat > a.py <<'EOF'\nx = 1\nEOF\npython a.py 2>&1 | tail -5")
@example("echo '' \\")  # an empty quoted word; a trailing backslash is an empty word
@example("a\xa0b > ; c")  # a space no blank: no word ends; a redirection waiting past a `;`
@example("cd /x && ls|wc -l;(a)&b\r\f\vc ||d\n")
def test_commands_read_as_the_reference_reads(text: str) -> None:
    assert read(text) == reference(text)


@examples(1_000)
@given(st.text("aZ1_./-~é٣²ſ ", max_size=12))
def test_a_letter_is_found_as_str_isalpha_finds_one(text: str) -> None:
    """`paths._has_letter` looks for an ASCII letter by a search when the text is ASCII: the same answer."""
    assert _has_letter(text) == any(c.isalpha() for c in text)
