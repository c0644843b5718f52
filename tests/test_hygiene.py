"""Issue 29, item 6: recall's own traffic is no fact of the session, Hermes' masks are no credentials,
and a folded failing command keeps its exit code where the model can see and search it."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import Generated, agent_run
from tests.support import assistant, call, terminal, tool, user
from timmy_compactor.compare.promises import check
from timmy_compactor.core.facts import RawFacts
from timmy_compactor.core.fold.anchors import Anchors, anchors_of
from timmy_compactor.core.fold.index import INDEX_HEADER
from timmy_compactor.core.pipeline import compact
from timmy_compactor.core.recall import RECALL_TOOL, lookup, search
from timmy_compactor.core.redact import REF_PREFIX, redact_text
from timmy_compactor.core.text import text_of
from timmy_compactor.core.types import Settings

Message = dict[str, Any]

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# ---------------------------------------------------------------- (b) Hermes' masks are no credentials


def hermes_mask(secret: str, head: int = 6, tail: int = 4, floor: int = 18) -> str:
    """What hermes-agent 0.19 shows instead of a secret (`agent/redact.py`: `_mask_token` is 6/4/18,
    `mask_secret` 4/4/12): `***` when short, else its first and last characters around `...`."""
    return "***" if len(secret) < floor else f"{secret[:head]}...{secret[-tail:]}"


CONTEXTS = [
    "OPENAI_API_KEY={m}",
    "export STRIPE_SECRET_KEY={m}",
    '"api_key": "{m}"',
    "api_key: {m}",
    "secret_key = '{m}'",
    "Authorization: Bearer {m}",
    "x-api-key: {m}",
    "--token {m}",
    "--password {m}",
    "the api secret is {m}",
    "auth_token: {m}",
    "Cookie: session={m}",
    "postgres://admin:{m}@db.example.com/shop",
    "curl -u admin:{m} https://ci.example.com",
    "sshpass -p {m} ssh deploy@host",
    "machine example.com login deploy password {m}",
]


@given(
    secret=st.text(alphabet=ALNUM, min_size=8, max_size=48),
    shape=st.sampled_from([(6, 4, 18), (4, 4, 12)]),
    context=st.sampled_from(CONTEXTS),
)
def test_a_value_hermes_masked_is_kept_as_it_is_where_the_secret_itself_is_redacted(
    secret: str, shape: tuple[int, int, int], context: str
) -> None:
    masked = context.format(m=hermes_mask("sk-" + secret, *shape))
    assert redact_text(masked) == masked
    assert REF_PREFIX in redact_text(context.format(m="sk-" + secret + "Q9z"))  # the same place, a secret


def test_hermes_other_masks_are_kept_too() -> None:
    for text in (
        "GITHUB_TOKEN=«redacted:ghp_…»",
        "api_key: «redacted-secret»",
        "TELEGRAM_BOT_TOKEN=123456789:***",
        "mysql -p*** shop",
        "Set-Cookie: sid=***; Path=/",
        "DATABASE_URL=postgres://app:***@db:5432/app",
        "password: [REDACTED]",
    ):
        assert redact_text(text) == text, text


def test_recall_counts_no_credential_in_a_message_hermes_already_masked() -> None:
    masked = "STRIPE_SECRET_KEY=sk_liv...3a2Z\nDB_PASSWORD=***\nAuthorization: Bearer sk-pro...7890"
    raw = [
        user("check the env"),
        assistant("", call("c1", "terminal", command="cat .env")),
        tool("c1", json.dumps({"output": masked, "exit_code": 0, "error": None})),
    ]
    for answer in (lookup(raw, "#1-#2"), search(raw, "KEY")):
        assert not any("credential" in note for note in answer.notes), answer.notes
        assert REF_PREFIX not in answer.to_json()
    assert "sk_liv...3a2Z" in lookup(raw, "#2").to_json()


# ---------------------------------------------------------------- (a) recall's own traffic is no fact


def with_recalls(messages: list[Message], picks: list[tuple[int, int, bool]]) -> tuple[list[Message], set[int]]:
    """`messages` with recall steps before some of its assistant messages (`picks`: before which, which
    earlier message, by ref or by the first words of that message as query), answered as the engine
    answers; and the indices of those steps' messages."""
    starts = [k for k, m in enumerate(messages) if m.get("role") == "assistant" and k > 1]
    where = {starts[p % len(starts)]: (target, by_ref) for p, target, by_ref in picks} if starts else {}
    out: list[Message] = []
    recall: set[int] = set()
    for k, message in enumerate(messages):
        if k in where:
            target, by_ref = where[k]
            i = target % len(out)
            words = " ".join(text_of(out[i].get("content")).split()[:4]) or "error"
            args = {"ref": f"#{i}-#{len(out) - 1}"} if by_ref else {"query": words}
            answer = lookup(out, args["ref"]) if by_ref else search(out, args["query"])
            recall |= {len(out), len(out) + 1}
            out += [assistant("", call(f"r{k}", RECALL_TOOL, **args)), tool(f"r{k}", answer.to_json(), RECALL_TOOL)]
        out.append(message)
    return out, recall


def facts_of(messages: list[Message]) -> set[str]:
    """Every value the index must keep of `messages`, were they all folded."""
    facts = RawFacts(messages)
    found: set[str] = set()
    for i in range(len(messages)):
        anchors = anchors_of(facts, i)
        found |= {*anchors.refs, *anchors.identifiers, *map(str, anchors.key_lines)}
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gen=agent_run(min_steps=8, max_steps=40),
    picks=st.lists(st.tuples(st.integers(0, 99), st.integers(0, 999), st.booleans()), min_size=1, max_size=4),
)
def test_recall_steps_add_no_fact_the_index_must_keep(gen: Generated, picks: list[tuple[int, int, bool]]) -> None:
    messages, recall = with_recalls(gen.messages, picks)
    assert facts_of(messages) == facts_of(gen.messages)
    facts = RawFacts(messages)
    for i in recall:
        calls = messages[i]["role"] == "assistant"
        assert anchors_of(facts, i) == Anchors(tools=(RECALL_TOOL,) if calls else ())
        assert not facts.outcome(i).key_lines


def test_a_folded_recall_leaves_its_tool_name_and_nothing_it_quoted_in_the_index() -> None:
    messages: list[Message] = [user("fix the billing job")]
    for k in range(60):
        failing = k in (3, 20)
        output = "\n".join(f"line {i}" for i in range(60)) + (
            "\nModuleNotFoundError: No module named 'stripe'" * failing
        )
        messages += [
            assistant(f"step {k}", call(f"c{k}", "terminal", command=f"python run_{k}.py")),
            tool(f"c{k}", terminal(output, exit_code=2 if failing else 0)),
        ]
        if k in (12, 14):  # recall what was folded: by ref (two-digit refs) and by a path no step named
            args = {"ref": "#11"} if k == 12 else {"query": "src/billing/stripe.py PR #4521"}
            answer = lookup(messages, "#6-#11") if k == 12 else search(messages, "stripe")
            messages += [
                assistant("", call(f"r{k}", RECALL_TOOL, **args)),
                tool(f"r{k}", answer.to_json(), RECALL_TOOL),
            ]
    messages.append(assistant("done"))
    recall = {i for i, message in enumerate(messages) if RECALL_TOOL in json.dumps(message)}
    result = compact(messages, Settings(context_window=16_000, index_max_ratio=0.5), force=True)
    assert result.compacted, result.report.failure  # the verifier asks nothing of recall's traffic either
    index = next(m["content"] for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER))
    assert sum(int(n) for n in re.findall(r"timmy_recall ×(\d+)", index)) == 2  # the calls are counted
    named = {int(n) for entry in re.findall(r"\((#\d+(?:, #\d+)?)\)$", index, re.M) for n in re.findall(r"\d+", entry)}
    assert named and not named & recall, index
    assert "src/billing/stripe.py" not in index and "PR #4521" not in index
    assert not re.search(r"- ids: .*(?<![\w ])#\d", index), index  # a bare #N is a ref of ours, never an id
    assert check(messages, result.messages).all_kept


# ---------------------------------------------------------------- (c) a failing command's exit code


def failing_result(output: str, code: int, form: str) -> str:
    if form == "hermes":  # hermes-agent's terminal tool
        return terminal(output, exit_code=code)
    return f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"  # mini-swe-agent's


output_lines = st.lists(
    st.sampled_from(["collecting 3 items", "", "ok", "ValueError: bad total", "E   assert 1 == 2", "Done."]),
    max_size=6,
)


@given(
    lines=output_lines,
    code=st.integers(-1, 255).filter(bool),
    other=st.integers(1, 255),
    form=st.sampled_from(["hermes", "returncode"]),
)
def test_a_failing_command_leaves_its_exit_code_in_the_index_and_a_query_for_it_finds_it(
    lines: list[str], code: int, other: int, form: str
) -> None:
    messages = [
        user("run the tests"),
        assistant("", call("c1", "terminal", command="pytest -x")),
        tool("c1", failing_result("\n".join(lines), code, form)),
        assistant("", call("c2", "terminal", command="true")),
        tool("c2", terminal("fine", exit_code=0)),
    ]
    first = anchors_of(RawFacts(messages), 2).key_lines[0]
    assert str(first) == f"exit {code}" or str(first).startswith(f"exit {code}: ")
    for query in (f"exit {code}", f"exit code {code}", f'"exit_code": {code}', f"returncode {code}"):
        assert [item["ref"] for item in search(messages, query).items] == ["#2"], query
    if other != code:
        assert "#2" not in {item["ref"] for item in search(messages, f"exit {other}").items}
    assert search(messages, "exit 0").total == 0  # a command that succeeded has no exit line


def test_folded_failing_commands_keep_their_exit_codes_in_the_index() -> None:
    messages: list[Message] = [user("fix the billing job")]
    for k in range(60):
        content = terminal("\n".join(f"line {i}" for i in range(60)))
        if k == 3:
            content = terminal("collecting\nModuleNotFoundError: No module named 'stripe'", exit_code=2)
        if k == 5:
            content = terminal("", exit_code=1)  # grep found nothing: no line at all to show
        if k == 7:
            content = "<returncode>124</returncode>\n<output>\n</output>"
        messages += [assistant(f"step {k}", call(f"c{k}", "terminal", command=f"run {k}")), tool(f"c{k}", content)]
    result = compact(messages, Settings(context_window=16_000, index_max_ratio=0.5), force=True)
    assert result.compacted, result.report.failure
    index = next(m["content"] for m in result.messages if str(m.get("content")).startswith(INDEX_HEADER))
    assert "- error: exit 2: ModuleNotFoundError: No module named 'stripe' (#8)" in index
    assert "- error: exit 1 (#12)" in index
    assert "- error: exit 124 (#16)" in index
    assert check(messages, result.messages).all_kept


def test_the_eval_checker_spells_the_recall_tool_as_the_engine_does() -> None:
    from timmy_compactor.compare import promises

    assert promises.RECALL_TOOL == RECALL_TOOL
