"""`redact_shapes` runs the prefixed formats' patterns only where the runs hold what every match of them holds
(`_PREFIX_HINT`: each format's literal prefix or gate head, looked for from a rare character): the hint finds
something in every match, so the output is the one the patterns alone give."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.credential_table import KINDS, sample
from timmy_compactor.core import secrets_by_shape as shape

PREFIXED = (shape._PREFIXED, shape._PREFIXED_MORE)


@settings(max_examples=3000)
@given(st.sampled_from(PREFIXED).flatmap(lambda pattern: st.from_regex(pattern, fullmatch=True)))
def test_every_match_of_the_prefixed_formats_holds_a_match_of_the_hint(token: str) -> None:
    assert any(pattern.fullmatch(token) for pattern in PREFIXED)
    assert shape._PREFIX_HINT.search(token) is not None


def test_every_prefix_word_alone_is_found() -> None:
    for word in (*shape._PREFIXED_WORDS, *(gate for gate in shape._MORE_GATES if gate not in shape._MORE_HEADS)):
        assert shape._PREFIX_HINT.search(f"x{word}y") is not None, word


def unhinted(text: str) -> str:
    """`redact_shapes` as it was: every pass where its gate finds something in the runs."""
    runs = shape.candidate_runs(text)
    for gate, pattern, replace in shape._PASSES:
        if runs and gate.search("\n".join(text[a:b] for a, b in runs)):
            text, runs = shape._in_runs(pattern, replace, text, runs)
    return text


NEAR = ["/work/src/", "tests/test_", ".py", "_", "-", "sk", "gh", "AKIA", "eyJ", "path", "dapi", "sl.", " ", "\n"]
piece = st.one_of(
    st.sampled_from(PREFIXED).flatmap(lambda pattern: st.from_regex(pattern, fullmatch=True)),
    st.sampled_from(NEAR),
    st.builds(lambda kind, seed: sample(kind, random.Random(seed)).text, st.sampled_from(sorted(KINDS)), st.integers()),
    st.text(max_size=10),
)


@settings(max_examples=600)
@given(st.builds("".join, st.lists(piece, max_size=8)))
def test_the_shapes_with_the_hint_are_the_shapes_without(text: str) -> None:
    assert shape.redact_shapes(text) == unhinted(text)
