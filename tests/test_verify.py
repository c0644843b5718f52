"""Verification fails closed: a rule that breaks a promise (or raises) gives no view, and says why."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import assistant, call, listing, padding_turns, terminal, tool, user, write_session
from timmy_compactor.cli import main
from timmy_compactor.core import pipeline
from timmy_compactor.core.draft import Draft, RuleCounts
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.index import Index
from timmy_compactor.core.partition import Partition
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.types import Entry, Settings
from timmy_compactor.core.verify import IN_TEXT, NOWHERE, SETTLED, _where, identical, verify

CONFIG = Settings(context_window=8_000, protect_last_n_turns=2, target_after=None)  # the rules alone


def session() -> list[dict]:
    messages = [user("start with /srv/app/main.py"), assistant("ok")]
    messages += [
        assistant("Checking https://example.org/spec and /srv/app/a.py", call("c1", "terminal", command="make")),
        tool("c1", terminal("\n".join(f"l{i}" for i in range(200)) + "\nfatal: build broke", exit_code=2)),
        user("and now?"),
        assistant("", call("c2", "read_file", path="/srv/app/b.py")),
        tool("c2", json.dumps({"content": "1|x = 1\n" * 300}), "read_file"),
        assistant("Done with /srv/app/b.py"),
    ]
    return messages + padding_turns(6)


def broken(edit: Callable[[Draft], Draft]) -> Callable[[Draft, Settings], tuple[Draft, RuleCounts]]:
    def rule(draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
        return edit(draft), {"broken": 1}

    return rule


def with_rule(monkeypatch: pytest.MonkeyPatch, rule: Callable[[Draft, Settings], tuple[Draft, RuleCounts]]) -> None:
    monkeypatch.setattr(pipeline, "AFTER_FOLD", (*pipeline.AFTER_FOLD, rule))


def replace_middle(draft: Draft, index: int, message: dict | None) -> Draft:
    middle = list(draft.middle)
    if message is None:
        del middle[index]
    else:
        middle[index] = Entry(message, middle[index].sources)
    return draft.with_middle(middle)


def find(draft: Draft, predicate: Callable[[dict], bool]) -> int:
    return next(k for k, e in enumerate(draft.middle) if predicate(e.message))


def drop_user(draft: Draft) -> Draft:
    return replace_middle(draft, find(draft, lambda m: m["role"] == "user"), None)


def edit_user(draft: Draft) -> Draft:
    k = find(draft, lambda m: m["role"] == "user")
    return replace_middle(draft, k, {**draft.middle[k].message, "content": "and now ?"})


def reorder_keys_of_user(draft: Draft) -> Draft:
    k = find(draft, lambda m: m["role"] == "user")
    return replace_middle(draft, k, dict(reversed(list(draft.middle[k].message.items()))))


def touch_tail(draft: Draft) -> Draft:
    last = draft.tail[-1]
    return dataclasses.replace(
        draft, tail=(*draft.tail[:-1], Entry({**last.message, "content": "changed"}, last.sources))
    )


def lose_path(draft: Draft) -> Draft:
    k = find(draft, lambda m: "Done with" in str(m.get("content")))
    return replace_middle(draft, k, {"role": "assistant", "content": "Done."})


def lose_tool_name(draft: Draft) -> Draft:
    k = find(draft, lambda m: "read_file(" in str(m.get("content")))
    return replace_middle(draft, k, {"role": "assistant", "content": "[tool: ok, #5–#6] /srv/app/b.py"})


def lose_error_line(draft: Draft) -> Draft:
    k = find(draft, lambda m: m["role"] == "tool")
    return replace_middle(draft, k, {**draft.middle[k].message, "content": terminal("cut", exit_code=2)})


def orphan_result(draft: Draft) -> Draft:
    k = find(draft, lambda m: bool(m.get("tool_calls")))
    message = {key: v for key, v in draft.middle[k].message.items() if key != "tool_calls"}
    return replace_middle(draft, k, message)


def late_system(draft: Draft) -> Draft:
    k = find(draft, lambda m: "Done with" in str(m.get("content")))
    return replace_middle(draft, k, {**draft.middle[k].message, "role": "system"})


def duplicate_source(draft: Draft) -> Draft:
    return draft.with_middle([*draft.middle, draft.middle[-1]])


def unknown_role(draft: Draft) -> Draft:
    k = find(draft, lambda m: "Done with" in str(m.get("content")))
    return replace_middle(draft, k, {**draft.middle[k].message, "role": "narrator"})


def raise_error(draft: Draft) -> Draft:
    raise RuntimeError("rule exploded")


CASES = {
    "drop a user message": (drop_user, "user messages: 8 in raw, 7 in view"),
    "edit a user message": (edit_user, "user message 2 changed"),
    "reorder a user message's keys": (reorder_keys_of_user, "user message 2 changed"),
    "touch the tail": (touch_tail, "is not byte-identical"),
    "lose a path": (lose_path, "a path/URL of raw #7 was lost"),
    "lose a tool name": (lose_tool_name, "a tool name of raw #5 was lost"),
    "lose an error line": (lose_error_line, "a key error line of raw #3 was lost"),
    "leave an orphan result": (orphan_result, "tool result without its call"),
    "create a late system message": (late_system, "system message after the first position"),
    "account twice": (duplicate_source, "every raw message exactly once"),
    "invent a role": (unknown_role, "unknown role"),
    "raise": (raise_error, "RuntimeError while compacting"),
}


@pytest.mark.parametrize(("edit", "reason"), CASES.values(), ids=CASES.keys())
def test_a_broken_rule_gives_no_view_and_names_the_reason(
    monkeypatch: pytest.MonkeyPatch, edit: Callable[[Draft], Draft], reason: str
) -> None:
    messages = session()
    healthy = pipeline.compact(messages, CONFIG, force=True)
    assert healthy.compacted, healthy.report.failure  # the session itself compacts fine
    with_rule(monkeypatch, broken(edit))
    result = pipeline.compact(messages, CONFIG, force=True)
    assert result.report.triggered and not result.report.verified and not result.compacted
    assert result.report.failure is not None and reason in result.report.failure
    assert result.messages == messages and result.sources == tuple((i,) for i in range(len(messages)))
    assert result.report.tokens_after == result.report.tokens_before


def test_the_cli_writes_no_view_and_keeps_the_last_good_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    raw = write_session(tmp_path / "session_v.json", session())
    config = tmp_path / "rules_only.yaml"  # the rules alone: the broken rule below sees the user messages
    config.write_text("compaction:\n  target_after: null\n", encoding="utf-8")
    assert main(["compact", str(raw), "--force", "--config", str(config)]) == 0
    view = tmp_path / "compacted_session_v.json"
    good = view.read_bytes()
    with_rule(monkeypatch, broken(drop_user))
    capsys.readouterr()
    before = listing(tmp_path)
    assert main(["compact", str(raw), "--force", "--json", "--config", str(config)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["verified"] is False and report["action"] == "failed"
    assert "user messages" in report["reason"]
    assert listing(tmp_path) == before and view.read_bytes() == good


def test_identical_means_same_keys_in_the_same_order() -> None:
    assert identical({"role": "user", "content": "x"}, {"role": "user", "content": "x"})
    assert not identical({"role": "user", "content": "x"}, {"content": "x", "role": "user"})
    assert not identical({"role": "user", "content": "x"}, {"role": "user", "content": "x "})


def test_verify_accepts_the_identity_view() -> None:
    messages = session()
    view = [Entry(m, (i,)) for i, m in enumerate(messages)]
    assert verify(messages, view, Partition(2, 10)) == []


def test_verify_searches_facts_in_the_message_that_stands_for_them() -> None:
    messages = [user("a"), assistant("see /srv/x.py"), assistant("and /srv/y.py"), user("b")]
    moved = [Entry(messages[0], (0,)), Entry({"role": "assistant", "content": "/srv/x.py"}, (1,))]
    moved += [Entry({"role": "assistant", "content": "/srv/y.py"}, (2,)), Entry(messages[3], (3,))]
    assert verify(messages, moved, Partition(1, 3)) == []
    swapped = [moved[0], Entry(moved[2].message, (1,)), Entry(moved[1].message, (2,)), moved[3]]
    problems = verify(messages, swapped, Partition(1, 3))
    assert problems == ["a path/URL of raw #1 was lost", "a path/URL of raw #2 was lost"]


def test_a_fold_found_in_an_earlier_index_is_trusted_only_while_the_new_index_starts_with_it() -> None:
    """Verification reads again only what the index added since the last compaction: a folded message
    found whole in the settled part of an earlier index is not read again while the new index starts
    with that part -- and is, with every fact checked, as soon as it does not (a condensed or rewritten
    index), or when the message at that index is another object."""
    raw = [user("go"), assistant("", call("c1", "terminal", command="cat /srv/app/settings.py")), tool("c1", "x")]
    raw += [user("next")]
    view = [Entry(raw[0], (0,)), Entry({"role": "assistant", "content": "[folded]"}, (1, 2)), Entry(raw[3], (3,))]
    part = Partition(1, 3)
    readings = Readings()
    settled = "### #1–#2: terminal · /srv/app/settings.py"

    def problems(text: str, messages: list[dict] = raw) -> list[str]:
        index = Index(text, settled_chars=len(settled) if text.startswith(settled) else 0)
        facts = RawFacts(messages, readings)
        return verify(messages, view, part, facts, folded=frozenset({1, 2}), index=index)

    assert problems(settled + "\n### #3: later") == []
    assert problems(settled + "\n### #3: later, rewritten") == []  # starts with what was settled
    assert problems("### #1–#2: terminal (condensed)") == ["the index lost a fact of folded raw #1"]
    assert problems(settled) == []
    moved = [*raw[:1], assistant("", call("c1", "terminal", command="cat /srv/app/other.py")), *raw[2:]]
    view[1] = Entry({"role": "assistant", "content": "[folded]"}, (1, 2))
    assert problems(settled + "\n### more", moved) == ["the index lost a fact of folded raw #1"]


def test_an_exemplar_of_its_template_does_not_stand_for_a_key_line() -> None:
    """A key error line is promised as printed: the index listing another line of the same template (other
    numbers) loses it, and the view is refused."""
    output = terminal("worker 7 starting\nERROR worker 7: upstream timed out after 30s", exit_code=1)
    raw = [user("go"), assistant("", call("c1", "terminal", command="run")), tool("c1", output), user("next")]
    view = [Entry(raw[0], (0,)), Entry({"role": "assistant", "content": "[folded]"}, (1, 2)), Entry(raw[3], (3,))]
    head = "### #1–#2: 1 step · terminal ×1\n"

    def problems(text: str) -> list[str]:
        return verify(raw, view, Partition(1, 3), RawFacts(raw), folded=frozenset({1, 2}), index=Index(head + text))

    assert problems("- error: exit 1: ERROR worker 7: upstream timed out after 30s (#2)") == []
    assert problems("- error: exit 1: ERROR worker 3: upstream timed out after 5s (×2, #2, #9)") == [
        "the index lost a fact of folded raw #2"
    ]


_PIECES = st.sampled_from(("a", "b", "ab", "ba", "\n", "#1", "x/y.py", ""))


@given(
    st.lists(_PIECES, max_size=12).map("".join),
    st.integers(0, 30),
    st.lists(st.lists(_PIECES, max_size=3).map("".join), max_size=6),
    st.lists(st.lists(_PIECES, max_size=3).map("".join), max_size=6),
)
def test_where_the_folded_facts_stand_is_what_a_search_of_each_gives(
    text: str, cut: int, needles: list[str], more: list[str]
) -> None:
    """`verify._where` (each needle looked for once per call, where its first occurrence ends) says what
    `in` says of the settled prefix and the whole index text, for needles asked again in a later message."""
    settled = text[:cut]
    ends: dict[str, int] = {}
    for asked in (needles, more, needles + more):
        expected = (
            SETTLED if all(n in settled for n in asked) else IN_TEXT if all(n in text for n in asked) else NOWHERE
        )
        assert _where(asked, text, len(settled), ends) == expected
