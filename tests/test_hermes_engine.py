"""The `timmy` engine inside Hermes, without running Hermes: the entry point, and a refusal that is logged."""

from __future__ import annotations

import logging

import pytest

from timmy_compactor.config import Config

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
    messages = [{"role": "user", "content": "hi"}, {"role": "narrator", "content": "x" * 50}]
    with caplog.at_level(logging.WARNING, logger="timmy_compactor.hermes"):
        assert engine.compress(messages) == messages
    assert engine.last_failure
    (record,) = [r for r in caplog.records if r.name == "timmy_compactor.hermes"]
    assert "compaction refused" in record.getMessage() and engine.last_failure in record.getMessage()


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
