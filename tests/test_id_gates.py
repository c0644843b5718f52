"""The gates of `fold.anchors.identifiers`: a text a gate turns away holds no identifier of its pattern
(a hex run of letters alone matches `_HEX` but is a word, not an id)."""

from __future__ import annotations

import re
import unittest.mock

from hypothesis import example, given
from hypothesis import strategies as st

from tests.test_properties import examples
from timmy_compactor.core.fold.anchors import (
    _HEX,
    _ID_PATTERNS,
    _STRONG_PATTERNS,
    _gated,
    _has_digit,
    _matches,
    _may_match,
    identifiers,
)

# the characters the id patterns are made of, and a few others
_ALPHABET = "0123456789abcdefABCDEFvVxPRTIGMBHport-_.=:#/ \t\nlhsu"
_PIECES = ("v1.2.3", "PR #12", "JIRA-12", "Issue 7", "port 8080", "localhost:80", "API_KEY=x1", "a1b2c3d4e5")
_UUID = "123e4567-e89b-12d3-a456-426614174000"
# where the scans of tickets and ports start: runs of capitals of every length around 10, every case of
# `port`, the addresses, a character that lower-cases to two
_SCANNED = ("ABCDEFGHIJ", "ABCDEFGHIJK", "X9", "_A", "-7", "pOrt", "PORT", "0.0.0.0:", "127.0.0.1:", "localhost", "İ")
# where the other scans start: an `=` after capitals of every length around 41, a version's first dot after
# digits (any script) or a `v`, a UUID's dashes, each issue word before its number
_FROM = (
    "=",
    "A" * 40,
    "B_" * 21,
    "v",
    "1.",
    "١.",
    ".7",
    "-abcd-ef01-2345-",
    "0123abcd",
    "pull request 5",
    "Pull Request #6",
    "GH-7",
    "mr 8",
    "Ticket #9",
    "bug-1",
    "issue 2",
)


_TEXTS = st.lists(
    st.text(_ALPHABET + "٣", max_size=12)  # an Arabic-Indic digit is a digit to `\d`
    | st.text("abcdef", min_size=7, max_size=9)  # a hex run of letters alone: a word, no id
    | st.sampled_from((*_PIECES, _UUID, "DEBUG=true", "v١.٢.٣", "PR #٤٢")),  # no ASCII digit
    max_size=12,
).map("".join)


@examples(2_000)
@given(_TEXTS)
@example("A9-1")  # a ticket's `-` after a digit or a capital: the gate's look behind
@example("AB-7")
@example("x-1 a9-2 _-3 A_-4")  # a `-` before a digit after anything else: no ticket
def test_a_gate_never_turns_away_a_text_its_pattern_matches(text: str) -> None:
    for pattern in _ID_PATTERNS:
        if not _may_match(pattern, text):
            assert pattern.search(text) is None or pattern is _HEX, (pattern.pattern[:30], text)


@examples(2_000)
@given(_TEXTS)
def test_the_gates_change_no_identifier(text: str) -> None:
    """The gates only save work: every pattern read without them finds the same identifiers."""
    gated = [identifiers(text, (pattern,)) for pattern in _ID_PATTERNS]
    with unittest.mock.patch("timmy_compactor.core.fold.anchors._gated", lambda _, patterns: list(patterns)):
        assert [identifiers(text, (pattern,)) for pattern in _ID_PATTERNS] == gated


@examples(2_000)
@given(_TEXTS)
def test_the_patterns_a_text_is_read_for_are_those_its_gates_let_through(text: str) -> None:
    """`_gated` tests every gate of a set of patterns with one digit search: as `_may_match` does each."""
    for patterns in (_ID_PATTERNS, _STRONG_PATTERNS, _ID_PATTERNS[2:5]):
        assert _gated(text, patterns) == [pattern for pattern in patterns if _may_match(pattern, text)]


@examples(2_000)
@given(
    st.lists(
        st.text(_ALPHABET + "é→", max_size=45)
        | st.text("0123456789abcdef", min_size=5, max_size=45)  # hex runs of every length around 7 and 40
        | st.sampled_from((*_PIECES, _UUID, *_SCANNED, *_FROM)),
        max_size=10,
    ).map("".join)
)
@example("ABCDEFGHIJ-7 ABCDEFGHIJK-7 xAB-7 AB-7-7 port 80 pOrt:81 0.0.0.0:82 127.0.0.1:8")
@example("A_B=1 " + "C" * 41 + "=2 " + "D" * 42 + "=3 xE=4 v1.2.3 v1.2 1.2.3.4 a1.2.3 ١.٢.٣ " + _UUID)
def test_the_fast_scans_find_what_the_patterns_find(text: str) -> None:
    """`_matches` finds hex runs through a byte table, tickets from their `-`, the others from where they may
    start (an `=`, a dot, a dash, an issue word, a port word): the same matches."""
    for pattern in _ID_PATTERNS:
        assert [m.span() for m in _matches(pattern, text)] == [m.span() for m in pattern.finditer(text)]


@examples(2_000)
@given(st.text(_ALPHABET + "٣é", max_size=30))
@example("abc9")
@example("٣")  # an Arabic-Indic digit: `\\d`, in a text that is not ASCII
@example("no digit here")
def test_a_text_holds_a_digit_where_the_digit_search_finds_one(text: str) -> None:
    """`_has_digit` tests each ASCII digit with `in`: the same answer as a search of `\\d`."""
    assert _has_digit(text) == (re.search(r"\d", text) is not None)
