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
