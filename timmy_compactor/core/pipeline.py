"""compact(messages, settings) -> Result: partition, the tiers of spec §2a, verify.

Tiers, each only as far as needed to bring the request under `target_after` × window:
1. the rules on the middle (rules 1–3 and media before the fold, 4 and the pair check after it);
2. fold the oldest steps of the middle into the anchor index;
3. tail relief (`relief`): oversized tool outputs of the tail, except the last step's, are truncated;
4. last resort (`last_resort`): cold user messages are folded into the index too (reported, never silent).
Tiers 3 and 4 break a promise: they run only when the request would stay at the trigger (`_give_way`).
Rules 5 (user messages verbatim) and 6 (the last turns untouched) are not steps here: they hold
because the rules only ever see the middle and skip user messages, and `verify` proves it.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from timmy_compactor.core import unanalysable
from timmy_compactor.core.accounting import Accounting
from timmy_compactor.core.draft import Built, Draft, RuleCounts, user_positions
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.floor import rules_beat_by_fold
from timmy_compactor.core.fold.index import is_index
from timmy_compactor.core.fold.tier import fold, grid_of
from timmy_compactor.core.last_resort import fold_users
from timmy_compactor.core.partition import Partition, min_tail_start, partition
from timmy_compactor.core.readings import Readings
from timmy_compactor.core.relief import relieve_above_trigger, relieve_built, trigger_rooms
from timmy_compactor.core.rules import (
    collapse_assistant,
    collapse_tool_pairs,
    drop_system,
    media,
    redact_middle,
    sanitize_pairs,
    supersede,
    truncate_tool_output,
)
from timmy_compactor.core.tokens import TextCounter
from timmy_compactor.core.types import Entry, Message, Result, Settings, not_messages
from timmy_compactor.core.verify import verify

Rule = Callable[[Draft, Settings], tuple[Draft, RuleCounts]]

BEFORE_FOLD: tuple[Rule, ...] = (
    supersede.apply,  # an output run or read again later -> a header line naming the newer one
    collapse_tool_pairs.apply,  # 1. succeeded call + result -> one line
    truncate_tool_output.apply,  # 2. long outputs -> head + tail + error lines
    drop_system.apply,  # 3. system prompt -> one-line marker after turn N
    media.apply,  # images in the middle -> marker
)
AFTER_FOLD: tuple[Rule, ...] = (
    collapse_assistant.apply,  # 4. consecutive assistant messages -> the last one
    redact_middle.apply,  # optional: credentials in the middle -> credential_ref:<hash>
    sanitize_pairs.apply,  # no orphan tool call/result left behind
)
RULES = BEFORE_FOLD + AFTER_FOLD


@dataclass(frozen=True, slots=True)
class Strategy:
    """How far the tiers go: `fold_all` folds the whole cold middle, `fold_users` its user messages too."""

    fold_all: bool = False
    fold_users: bool = False


STRATEGIES: dict[str, Strategy] = {
    "rules": Strategy(),  # the default: rules, then fold / tail relief / last resort as far as needed
    "ledger": Strategy(fold_all=True, fold_users=True),  # seed 003: the whole cold history as the index
}


def compact(
    messages: Sequence[Message],
    settings: Settings,
    *,
    system_prompt: str | None = None,
    tools: Sequence[Any] | None = None,
    force: bool = False,
    counter: TextCounter | None = None,
    fixed_tokens: int = 0,
    readings: Readings | None = None,
) -> Result:
    """The compacted view of `messages`. Pure: the same input gives the same output.

    `fixed_tokens`: request tokens outside `messages` the caller knows only as a total (Hermes passes
    its estimate of the whole request; the system prompt and tool schemas are the difference).
    `readings`: what an earlier call read of the same messages (a caller whose list only grows, like the
    engine's raw log, passes the same object each time; results are the same with or without it)."""
    readings = readings if readings is not None else Readings()
    acc = Accounting.start(
        messages,
        settings,
        readings=readings,
        system_prompt=system_prompt,
        tools=tools,
        force=force,
        counter=counter,
        fixed_tokens=fixed_tokens,
    )
    unchanged = acc.unchanged
    if not acc.triggered:
        return unchanged(verified=True)
    part = Partition(0, 0)
    try:
        bad = input_problem(messages, settings)
        if bad:
            return unchanged(verified=False, failure=bad)
        raw_messages, stand_ins = messages, unanalysable.stand_ins(messages, readings)
        if stand_ins:  # analysed through a shallow stand-in, put back verbatim below
            messages = [stand_ins.get(i, m) for i, m in enumerate(messages)]
            acc = dataclasses.replace(acc, messages=messages)
        part = partition(messages, settings, counter, acc.raw_sizes, readings)
        facts = RawFacts(messages, readings)
        built = _build(messages, part, settings, acc, facts)
        problems = _verify(messages, built, facts, settings)
        if stand_ins:
            view = unanalysable.put_back(built.view, stand_ins, raw_messages)
            built = dataclasses.replace(built, view=view, counts=built.counts | {unanalysable.NAME: len(stand_ins)})
    except Exception as exc:  # noqa: BLE001 -- fail closed: a bug in a rule must never produce a view
        failure = f"{type(exc).__name__} while compacting"
        return unchanged(verified=False, failure=failure, head_end=part.head_end, tail_start=part.tail_start)
    checked = built.part  # tail relief moves the tail start
    where = {"head_end": checked.head_end, "tail_start": checked.tail_start, "budget_tokens": settings.budget_tokens}
    if problems:
        return unchanged(verified=False, failure="; ".join(problems[:5]), **where)
    result = _result(built, acc, where)
    if not force and (note := _too_little_freed(result, settings, acc.window)):
        return unchanged(verified=True, skipped=True, note=note, **where)
    return result


def _verify(messages: Sequence[Message], built: Built, facts: RawFacts, settings: Settings) -> list[str]:
    """The promises the built view breaks, checked against the partition it was built on."""
    return verify(
        messages,
        built.view,
        built.part,
        facts,
        redacted=settings.redact_credentials,
        folded=built.folded,
        folded_users=built.folded_users,
        index=built.index,
    )


def _result(built: Built, acc: Accounting, where: dict[str, int | None]) -> Result:
    view = built.view
    messages, sources = [e.message for e in view], tuple(e.sources for e in view)
    return acc.result(messages, sources, _sizes(view, acc), verified=True, rules=built.counts, note=built.note, **where)


def _too_little_freed(result: Result, settings: Settings, window: int) -> str | None:
    """Why a view that frees less than `min_free_ratio` of the window is not worth a cache break, or None."""
    freed = result.report.tokens_before - result.report.tokens_after
    if settings.min_free_ratio and freed < settings.min_free_ratio * window:
        return f"would free {freed:,} tokens, less than min_free_ratio of the window: not worth a cache break"
    return None


def _build(messages: Sequence[Message], part: Partition, settings: Settings, acc: Accounting, facts: RawFacts) -> Built:
    """The tiers. `target_after` is only what the fold aims at (how deep, how short a tail); a promise
    (the last tool-calling steps whole, user messages verbatim) gives way only when the request would
    otherwise stay at the trigger (`_give_way`) or not fit the window, and then as little as needed."""
    strategy = STRATEGIES[settings.strategy]
    budget = 0 if strategy.fold_all else settings.budget_tokens
    users_before = part.tail_start if strategy.fold_users else 0
    built, draft = _rules_or_fold(messages, part, settings, acc, facts, budget=budget, users_before=users_before)
    if budget is None or strategy.fold_all:  # rules only (target_after: null), or the ledger's whole fold
        return built
    shortest = min_tail_start(messages, part, settings)
    if acc.view_tokens(built.view) > budget and shortest > part.tail_start:
        # the tail need not be all the turns that fit: its last min_tail_steps steps are the promise
        short = Partition(part.head_end, shortest)
        retry, short_draft = _rules_or_fold(messages, short, settings, acc, facts, budget=budget)
        if acc.view_tokens(retry.view) < acc.view_tokens(built.view):
            built, draft, part = retry, short_draft, short
    built = _give_way(built, draft, part, settings, acc, budget=budget)
    if acc.view_tokens(built.view) > acc.window:  # a request must never be larger than the window
        built = relieve_built(built, draft, settings, acc, room=acc.window, last_step=True)
    total = acc.view_tokens(built.view)
    if total > budget:
        note = f"above the budget ({total:,} > {budget:,} tokens): the head, the index and the last steps exceed it"
        built = dataclasses.replace(built, note=note)
    return built


def _give_way(
    built: Built, draft: Draft, part: Partition, settings: Settings, acc: Accounting, *, budget: int
) -> Built:
    """Tiers 3 and 4, when the request would stay at the trigger: above it, or within a fold quantum under
    it (`crowded`: the next few steps would trigger again, and each compaction re-prefills what it keeps --
    a multi-task session whose user messages fill the window would compact at every other step). The
    last steps' outputs are cut only above the trigger, as far as brings the request out of the crowd if
    they can, else just under the trigger; then user messages fold, as few as bring it to the budget, else
    out of the crowd, else under the trigger."""
    below, crowded = trigger_rooms(settings, acc)
    built = relieve_above_trigger(built, draft, settings, acc)  # tier 3
    users = user_positions(draft.facts.messages, draft.facts.readings)
    cold = users[bisect.bisect_left(users, part.head_end) : bisect.bisect_left(users, part.tail_start)]
    tokens = acc.view_tokens(built.view)
    if tokens <= crowded or built.folded_users or not cold:
        return built
    # the budget, else out of the crowd, else under the trigger (when it is not already)
    rooms: tuple[int, ...] = (min(budget, crowded), crowded, below)[: 3 if tokens > below else 2]

    def refold(users_before: int) -> Built:
        folded = _fold(draft, part, settings, acc, counts=built.counts, users_before=users_before)
        return relieve_above_trigger(folded, draft, settings, acc)

    return fold_users(built, acc, rooms=rooms, cold=cold, refold=refold)  # tier 4


def _rules_or_fold(
    messages: Sequence[Message],
    part: Partition,
    settings: Settings,
    acc: Accounting,
    facts: RawFacts,
    *,
    budget: int | None,
    users_before: int = 0,
) -> tuple[Built, Draft]:
    """Tier 1 (the rules on the middle) or tier 2 (fold the whole cold middle), whichever leaves less,
    and the draft the later tiers work from. The fold comes first: when even the least the rules could
    leave (a collapsed line per tool call) is more than the fold's view, the rules are not run -- on a
    long session they would visit its whole history at every compaction for a view nobody uses."""
    raw = Draft.start(messages, part, facts)
    middle = acc.messages[part.head_end : part.tail_start]
    folded = None
    if budget is not None and any(m.get("role") != "user" for m in middle):
        # the fold takes the whole middle: what the rules make of it does not change the fold's view
        folded = _fold(raw, part, settings, acc, counts={}, users_before=users_before)
        if budget == 0 or rules_beat_by_fold(raw, acc, acc.view_tokens(folded.view)):
            return folded, raw
    draft, counts = _run(BEFORE_FOLD, raw, settings)
    done, after_counts = _run(AFTER_FOLD, draft, settings)
    rules_only = Built(done.entries(), part, counts | after_counts)
    if folded is None or acc.view_tokens(folded.view) > acc.view_tokens(rules_only.view):
        return rules_only, draft
    return dataclasses.replace(folded, counts=counts | folded.counts), draft


def _fold(
    draft: Draft,
    part: Partition,
    settings: Settings,
    acc: Accounting,
    *,
    counts: RuleCounts,
    users_before: int = 0,
) -> Built:
    """Fold the cold middle into the index, up to the last grid point before the tail (the rules take
    the few steps between it and the tail). Deep, not just enough to fit: each compaction re-prefills
    what it keeps after the fold point, about kept / (trigger - kept) tokens per new token, so keeping
    little makes compactions rarer and each one cheaper (issue 22). On the grid, not at the tail start:
    every chunk of the index then covers a whole grid interval and is the same bytes at every later
    compaction, which only appends (issue 29: a partial last chunk was rewritten)."""
    ledger = settings.strategy == "ledger"
    grid = grid_of(draft.facts, acc, part, settings.quantum_tokens)
    stop = part.tail_start if ledger else max((g for g in grid if g <= part.tail_start), default=part.head_end)
    folded = fold(
        draft.facts,
        draft.head,
        part.head_end,
        stop,
        grid=grid,
        index_chars=settings.index_max_chars,
        users_before=users_before,
        ledger=ledger,
    )
    rest = draft.middle[bisect.bisect_left(draft.middle, stop, key=_first_source) :]  # the middle is in order
    ruled, rest_counts = _run(BEFORE_FOLD, dataclasses.replace(draft, middle=rest), settings)
    done, after = _run(AFTER_FOLD, dataclasses.replace(ruled, head=folded.head), settings)
    return Built(
        view=done.head + folded.placed + done.middle + done.tail,
        part=part,
        counts=counts | rest_counts | after | {"fold_steps": folded.steps},
        folded=folded.folded,
        folded_users=folded.folded_users,
        index=folded.index,
    )


def _first_source(entry: Entry) -> int:
    return entry.sources[0]


def _run(rules: Sequence[Rule], draft: Draft, settings: Settings) -> tuple[Draft, RuleCounts]:
    counts: RuleCounts = {}
    for rule in rules:
        draft, fired = rule(draft, settings)
        counts.update(fired)
    return draft, counts


def _sizes(entries: Sequence[Entry], acc: Accounting) -> list[int]:
    return acc.sizes([e.message for e in entries], [e.sources for e in entries])


def input_problem(messages: Sequence[Message], settings: Settings) -> str | None:
    """Why the engine cannot take these messages at all (never quoting them), or None."""
    if settings.strategy not in STRATEGIES:
        return f"unknown strategy {settings.strategy!r} (expected one of {', '.join(STRATEGIES)})"
    return not_messages(messages)


__all__ = ["RULES", "STRATEGIES", "Entry", "compact", "is_index"]
