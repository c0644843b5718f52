"""hermes/engine.py: the `timmy` engine inside Hermes, without running Hermes: entry point, refusals, orphans."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import pending_session
from timmy_compactor.config import Config, HueySection, load_config

pytest.importorskip("agent.context_engine", reason="hermes-agent is not installed (pip install -e '.[hermes]')")
pytestmark = pytest.mark.hermes


def test_the_plugin_entry_point_exposes_register_and_the_engine() -> None:
    import timmy_compactor.hermes as plugin
    from timmy_compactor.hermes.engine import TimmyContextEngine

    assert callable(plugin.register) and plugin.TimmyContextEngine is TimmyContextEngine

    class Ctx:
        engine: object = None

        def register_context_engine(self, engine: object) -> None:
            self.engine = engine

    ctx = Ctx()
    plugin.register(ctx)
    assert isinstance(ctx.engine, TimmyContextEngine)


def test_a_refusal_to_compact_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    from timmy_compactor.hermes.engine import TimmyContextEngine

    engine = TimmyContextEngine(Config())
    engine.update_model("test-model", 65_536)
    messages: list[object] = [{"role": "user", "content": "hi"}, 7]  # not a message: the engine refuses
    with caplog.at_level(logging.WARNING, logger="timmy_compactor.hermes"):
        assert engine.compress(messages) == messages
    assert engine.last_failure
    (record,) = [r for r in caplog.records if r.name == "timmy_compactor.hermes"]
    assert "compaction refused" in record.getMessage() and engine.last_failure in record.getMessage()


def test_one_window_rule_before_and_after_hermes_names_the_model() -> None:
    """Before `update_model`, compress and has_content_to_compress both take the window our config
    resolves; after it, the window update_model settled on."""
    import dataclasses

    from timmy_compactor.config import ModelSection
    from timmy_compactor.hermes.engine import TimmyContextEngine

    engine = TimmyContextEngine(Config(model=dataclasses.replace(ModelSection(), context_window=8_192)))
    assert engine._window() == 8_192
    engine.update_model("test-model", 65_536)
    assert engine._window() == 8_192  # our config sets it
    engine = TimmyContextEngine(Config())
    engine.update_model("test-model", 32_000)
    assert engine._window() == 32_000  # Hermes' window for the model


def _engine(state: object) -> object:
    import dataclasses

    from timmy_compactor.config import HueySection
    from timmy_compactor.hermes.engine import TimmyContextEngine

    engine = TimmyContextEngine(Config(huey=dataclasses.replace(HueySection(), state_dir=str(state))))
    engine.update_model("test-model", 16_000)
    return engine


def _long_run(steps: int) -> list[dict[str, object]]:
    import json

    from tests.support import assistant, call, tool, user

    raw: list[dict[str, object]] = [user("start")]
    for i in range(steps):
        raw.append(assistant(f"step {i}", call(f"c{i}", "terminal", command=f"cat /srv/f{i}.log")))
        raw.append(tool(f"c{i}", json.dumps({"output": f"line of f{i}\n" * 40, "exit_code": 0})))
    return raw


def _through_state_db(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """What `hermes --resume` loads: the same messages, with Hermes' own keys added."""
    return [{**m, "timestamp": 1_700_000_000.0 + k} for k, m in enumerate(messages)]


def test_a_resumed_session_keeps_its_refs_and_recall(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from timmy_compactor.core.recall import lookup

    raw = _long_run(120)
    first = _engine(tmp_path)
    first.on_session_start("s1", hermes_home=str(tmp_path))
    context = first.compress(raw[:121])
    context = first.compress(context + raw[121:201])
    assert first.raw.messages == raw[:201]
    # a new Hermes process resumes the session from its database, then goes on
    second = _engine(tmp_path)
    second.on_session_start("s1", hermes_home=str(tmp_path))
    assert second.get_status()["raw_log_resumed"] is True
    answer = json.loads(second.handle_tool_call("timmy_recall", {"ref": "#141"}))
    assert answer == json.loads(lookup(raw, "#141").to_json())  # the message #141 always was
    resumed = second.compress(_through_state_db(context) + raw[201:])
    assert second.raw.messages[: len(raw)] == raw and second.raw.restarts == 0
    assert resumed == first.compress(context + raw[201:])  # as if Hermes had never restarted


def test_a_session_id_rotated_at_a_compaction_keeps_the_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = _long_run(60)
    engine = _engine(tmp_path)
    engine.on_session_start("old")
    context = engine.compress(raw)
    engine.on_session_start("new", boundary_reason="compression", old_session_id="old")
    assert engine.raw.messages == raw
    engine.compress([*context, {"role": "user", "content": "and now?"}])
    assert engine.raw.restarts == 0 and len(engine.raw.messages) == len(raw) + 1
    later = _engine(tmp_path)
    later.on_session_start("new")
    assert later.raw.messages == engine.raw.messages
    # a different conversation (/new) starts a new log
    engine.on_session_reset()
    engine.on_session_start("other", old_session_id="new")
    assert engine.raw.messages == []


def test_a_store_that_cannot_be_written_warns_once_and_compaction_goes_on(tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the state dir should be")
    engine = _engine(blocker)
    engine.on_session_start("s1")
    raw = _long_run(60)
    with caplog.at_level(logging.WARNING, logger="timmy_compactor.hermes"):
        context = engine.compress(raw)
        engine.compress([*context, {"role": "user", "content": "next"}])
    assert len(context) < len(raw) and engine.last_failure is None
    warnings = [r.getMessage() for r in caplog.records if "raw log" in r.getMessage()]
    assert len(warnings) == 1 and "not-a-dir" in warnings[0], warnings
    assert engine.get_status()["raw_log_save_failure"]


def _hermes_repaired(messages: list[dict[str, object]]) -> tuple[list[dict[str, object]], int]:
    import copy

    from agent.agent_runtime_helpers import repair_message_sequence

    held = copy.deepcopy(messages)
    repairs = repair_message_sequence(None, held)
    return held, repairs


_ROLES = st.sampled_from(["user", "assistant", "assistant_call", "text_assistant"])


@given(shape=st.lists(_ROLES, min_size=1, max_size=12))
def test_the_engine_shapes_a_list_as_hermes_keeps_it(shape: list[str]) -> None:
    """Hermes merges consecutive assistant messages of its history in place before every request;
    `as_hermes_keeps_it` gives the same list (on copies), so Hermes finds nothing left to change."""
    from tests.support import assistant, call, tool, user
    from timmy_compactor.hermes.engine import as_hermes_keeps_it

    messages: list[dict[str, object]] = []
    for k, kind in enumerate(shape):
        if kind == "user":
            if messages and messages[-1]["role"] == "user":
                continue  # Hermes would merge two user turns too: not what the engine produces
            messages.append(user(f"u{k}"))
        elif kind == "assistant_call":
            messages += [assistant(f"a{k}", call(f"c{k}", "terminal", command="ls")), tool(f"c{k}", "out")]
        elif kind == "text_assistant":
            messages.append(assistant(f"[tool: terminal(ls) → ok, 3 chars, #{k}–#{k + 1}]"))
        else:
            messages.append(assistant(""))
    before = json.dumps(messages)
    shaped, _ = as_hermes_keeps_it(messages)
    assert json.dumps(messages) == before  # the input is not edited
    repaired, _ = _hermes_repaired(messages)
    assert shaped == repaired
    assert _hermes_repaired(shaped)[1] == 0


def test_a_summary_line_before_a_kept_step_does_not_restart_the_log(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Compacted mid-turn, the `[tool: …]` summary sits right before the first kept assistant step.
    What Hermes passes back (after its own repair, and after editing its dicts in place) must still
    continue the engine's log."""
    import copy

    from tests.support import user

    raw = _long_run(90)
    expected = copy.deepcopy(raw)
    engine = _engine(tmp_path)
    engine.on_session_start("s1")
    context = engine.compress(raw)
    held, repairs = _hermes_repaired(context)
    assert repairs == 0
    for message in context:  # Hermes marks (and may merge into) the dicts it holds
        message["_db_persisted"] = True
        if message.get("role") == "assistant":
            message["content"] = (message.get("content") or "") + " edited by the host"
    engine.compress([*held, user("next")])
    assert engine.raw.restarts == 0
    assert engine.raw.messages == [*expected, user("next")]  # the host's edits did not reach the log


def _cut_at_last_user(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    """What Hermes' `/retry` and `/undo` do to the history: drop the last user message and all after it."""
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    return messages[:last]


def test_a_retry_of_a_compacted_turn_keeps_the_numbering_of_what_came_before(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A long turn is compacted while it runs; the user retries it. Hermes cuts its history at that
    turn's user message (inside what the engine returned) and asks again. The log drops the raw
    messages of the abandoned attempt and goes on: earlier refs keep their meaning."""
    import copy

    from tests.support import assistant, call, tool, user
    from timmy_compactor.core.recall import lookup

    first_turns = _long_run(40)  # user "start" + 40 steps
    retried = user("Turn 2: do it again")
    attempt = [
        m
        for i in range(60)
        for m in (
            assistant(f"try {i}", call(f"t{i}", "terminal", command=f"cat /srv/t{i}.log")),
            tool(f"t{i}", json.dumps({"output": f"line of t{i}\n" * 40, "exit_code": 0})),
        )
    ]
    engine = _engine(tmp_path)
    engine.on_session_start("s1")
    context = engine.compress(copy.deepcopy([*first_turns, retried, *attempt]))
    assert any(m.get("content") == retried["content"] for m in context)  # the turn's user message was kept
    before = copy.deepcopy(engine.raw.messages[: len(first_turns)])
    again = [retried, assistant("Done at once.")]
    engine.compress([*_cut_at_last_user(context), *copy.deepcopy(again)])
    assert engine.raw.restarts == 0 and engine.raw.truncations == 1, engine.get_status()
    assert engine.raw.messages == [*before, *again]  # the abandoned attempt is gone, nothing renumbered
    assert json.loads(engine.handle_tool_call("timmy_recall", {"ref": "#21"})) == json.loads(
        lookup(first_turns, "#21").to_json()
    )
    # and the next process finds the same log on disk
    later = _engine(tmp_path)
    later.on_session_start("s1")
    assert later.raw.messages == [*before, *again]


def test_a_list_the_host_rewrote_is_a_restart_not_a_cut(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A list that continues with messages the engine wrote (its summaries) was not cut by Hermes: the
    log cannot tell what is raw there, so it starts again (and says so) rather than guess."""
    raw = _long_run(60)
    engine = _engine(tmp_path)
    engine.on_session_start("s1")
    context = engine.compress(raw)
    rewritten = [{"role": "user", "content": "a different first message"}, *context[1:]]
    engine.compress(rewritten)
    assert engine.raw.truncations == 0 and engine.raw.restarts == 1


# ---------------------------------------------------------------- a call awaiting its result


@pytest.mark.hermes
def test_the_engine_never_returns_a_new_orphan(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agent.context_engine", reason="hermes-agent is not installed")
    from timmy_compactor.core.types import Result
    from timmy_compactor.hermes import engine as engine_module

    engine = engine_module.TimmyContextEngine(Config())
    engine.update_model("test-model", 65_536)
    engine.context_length = 4_096
    raw = pending_session()
    out = engine.compress(raw)
    assert engine.last_failure is None and out != raw
    assert engine_module.unpaired(out) <= engine_module.unpaired(raw) == set()
    assert out[-1] == raw[-1]  # the awaited call stays, as the last message

    real = engine_module.compact

    def leaves_an_orphan(messages: Any, settings: Any, **kwargs: Any) -> Result:
        result = real(messages, settings, **kwargs)
        broken = [m for m in result.messages if m.get("role") != "assistant" or not m.get("tool_calls")]
        return Result(messages=broken, report=result.report, sources=result.sources)

    monkeypatch.setattr(engine_module, "compact", leaves_an_orphan)
    assert engine.compress(raw) == raw  # refused, the messages as they are
    assert engine.last_failure is not None and "without its pair" in engine.last_failure


def test_inside_hermes_the_trigger_is_hermes_own_unless_our_config_sets_one(tmp_path: Path) -> None:
    """Issue 29 item 3: 0.85 of a 64k window (Hermes' threshold), 0.75 of a 200k one, our file's
    value when it sets one; get_status says which and why."""
    from timmy_compactor.hermes.engine import TimmyContextEngine

    config = Config(huey=HueySection(state_dir=str(tmp_path / "state")))
    engine = TimmyContextEngine(config)
    engine.update_model(model="m", context_length=64_000)
    assert engine.threshold_percent == 0.85 and engine.threshold_tokens == 54_400
    assert "0.85" in engine.get_status()["trigger_reason"]
    engine.update_model(model="m", context_length=200_000)
    assert engine.threshold_percent == 0.75
    path = tmp_path / "compaction.yaml"
    path.write_text("hermes:\n  trigger_threshold: 0.6\n")
    mine = TimmyContextEngine(dataclasses.replace(load_config(path, env={}), huey=config.huey))
    mine.update_model(model="m", context_length=64_000)
    assert mine.threshold_percent == 0.6 and str(path) in mine.get_status()["trigger_reason"]
