"""host/tools.py: the tool schemas Hermes' requests carry, counted in each state.db session's tokens."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import make_state_db, tool_session
from tests.support_homes import config_for, db_status
from timmy_compactor.compactor import compact_to_view, measure
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.host import tools as hermes_tools
from timmy_compactor.sessions.files import META_KEY
from timmy_compactor.sessions.names import snapshot_path, view_path
from timmy_compactor.sessions.statedb import StateDB, db_session

FAKE_TOOLS = [
    {
        "type": "function",
        "function": {"name": "terminal", "description": "Run a shell command. " * 200, "parameters": {}},
    }
]


def messages_tokens(messages: list[dict[str, Any]]) -> int:
    return request_tokens(messages, "You are terse.")


def test_a_state_db_session_counts_hermes_tool_schemas(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = tool_session(4)
    make_state_db(home / "state.db", "s1", messages)
    monkeypatch.setattr(hermes_tools, "hermes_tool_schemas", lambda _home, platform="cli": FAKE_TOOLS)
    config = config_for(home, tmp_path)
    session = db_session(StateDB(home / "state.db"), "s1", snapshot_path(config.sessions_dir, "s1"))
    with_tools = request_tokens(session.messages, "You are terse.", FAKE_TOOLS)
    assert with_tools > messages_tokens(session.messages) + 1_000
    assert measure(session, config).tokens == with_tools
    status, _ = db_status(config, "s1")
    assert status.tokens == with_tools
    outcome = compact_to_view(session, config, force=True)
    assert outcome.report is not None and outcome.report.tokens_before == with_tools


def test_a_compaction_is_prepared_once(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tool schemas and the token counter are worked out once per compaction, not per question."""
    from timmy_compactor import compactor

    make_state_db(home / "state.db", "s1", tool_session(4))
    monkeypatch.setattr(hermes_tools, "hermes_tool_schemas", lambda _home, platform="cli": FAKE_TOOLS)
    calls: dict[str, int] = {"request_extras": 0, "make_counter": 0}
    for name in calls:
        real = getattr(compactor, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(compactor, name, counted)
    config = config_for(home, tmp_path)
    session = db_session(StateDB(home / "state.db"), "s1", snapshot_path(config.sessions_dir, "s1"))
    outcome = compact_to_view(session, config, force=True, skip_if_current=True)
    assert outcome.report is not None and outcome.report.triggered  # checked for currency, then compacted
    assert calls == {"request_extras": 1, "make_counter": 1}


def test_without_hermes_a_state_db_session_counts_the_documented_estimate(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = tool_session(4)
    make_state_db(home / "state.db", "s1", messages)
    monkeypatch.setattr(hermes_tools, "hermes_importable", lambda: False)
    hermes_tools._cache.clear()
    config = config_for(home, tmp_path)
    status, _ = db_status(config, "s1")
    session = db_session(StateDB(home / "state.db"), "s1", snapshot_path(config.sessions_dir, "s1"))
    assert hermes_tools.TOOLS_ESTIMATE_TOKENS == 11_500
    assert status.tokens == messages_tokens(session.messages) + 11_500
    outcome = compact_to_view(session, config, force=True)
    assert outcome.report is not None and outcome.report.tokens_before == status.tokens
    hermes_tools._cache.clear()


def test_a_snapshot_keeps_counting_its_own_tools(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hermes_tools, "hermes_tool_schemas", lambda *_a, **_k: pytest.fail("not asked"))
    assert hermes_tools.request_extras(FAKE_TOOLS, "file", home) == (FAKE_TOOLS, 0)
    assert hermes_tools.request_extras(None, "file", home) == (None, 0)
    assert hermes_tools.request_extras(FAKE_TOOLS, "state.db", home) == (FAKE_TOOLS, 0)


@pytest.mark.hermes
def test_hermes_schemas_come_from_the_installed_hermes_without_touching_its_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("model_tools", reason="hermes-agent is not installed")
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    hermes = tmp_path / "hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text("platform_toolsets:\n  cli: [terminal, file]\n")
    hermes_tools._cache.clear()
    tools = hermes_tools.hermes_tool_schemas(hermes)
    assert tools is not None
    names = {t["function"]["name"] for t in tools}
    assert {"terminal", "read_file", "write_file", "patch"} <= names
    assert "browser_navigate" not in names  # only the configured toolsets
    assert sorted(p.name for p in hermes.iterdir()) == ["config.yaml"]  # nothing written into Hermes' home
    assert list(fake_home.iterdir()) == []  # and no ~/.hermes
    # Hermes' default CLI toolsets: the documented estimate is of the same size
    (hermes / "config.yaml").unlink()
    default = hermes_tools.hermes_tool_schemas(hermes)
    assert default is not None
    tokens = request_tokens([], None, default)
    assert 0.6 * hermes_tools.TOOLS_ESTIMATE_TOKENS < tokens < 1.4 * hermes_tools.TOOLS_ESTIMATE_TOKENS
    hermes_tools._cache.clear()


@pytest.fixture
def set_toolsets(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Real Hermes reading `home`, the user's own home out of its reach: the returned function writes
    `platform_toolsets` into its config.yaml. Its schema cache is emptied before and after."""
    pytest.importorskip("model_tools", reason="hermes-agent is not installed")
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    hermes_tools._cache.clear()

    def set_toolsets(platforms: str) -> None:
        (home / "config.yaml").write_text(f"platform_toolsets:\n{platforms}")

    yield set_toolsets
    hermes_tools._cache.clear()


@pytest.mark.hermes
def test_a_change_of_hermes_toolsets_makes_the_next_sweep_rebuild_a_state_db_view(
    home: Path, tmp_path: Path, set_toolsets: Callable[[str], None]
) -> None:
    """No row of the session moves; only the toolsets Hermes enables (so the schemas every request
    carries) change. The next sweep finds the session stale and rebuilds its view. Real Hermes."""
    from timmy_compactor.sidecar import sweep, work
    from timmy_compactor.sidecar.records import Records

    set_toolsets("  cli: [terminal, file, web]\n")
    make_state_db(home / "state.db", "s1", tool_session(40))
    config = config_for(home, tmp_path, window=20_000)
    records = Records(config.state_dir)
    view = view_path(config.sessions_dir, "s1")

    def tools_tokens_in_view() -> Any:
        return json.loads(view.read_text())[META_KEY].get("tool_schema_tokens")

    assert sweep.sweep_sources(config, records).stale == ["s1"]
    assert work.process("s1", config, records).action == "written"
    first = tools_tokens_in_view()
    assert sweep.sweep_sources(config, records).stale == []  # nothing changed: nothing to do
    assert db_status(config, "s1")[0].view == "fresh"

    set_toolsets("  cli: [terminal]\n")  # fewer toolsets
    assert db_status(config, "s1")[0].view == "stale"
    assert sweep.sweep_sources(config, records).stale == ["s1"]
    result = work.process("s1", config, records)
    assert result.action == "written" and result.report is not None
    first, second = int(first), int(tools_tokens_in_view())
    assert 0 < second < first
    assert result.report["tokens_before"] == request_tokens(
        db_session(StateDB(home / "state.db"), "s1", snapshot_path(config.sessions_dir, "s1")).messages,
        "You are terse.",
        hermes_tools.hermes_tool_schemas(home),
    )
    assert sweep.sweep_sources(config, records).stale == []
    assert db_status(config, "s1")[0].view == "fresh"


def test_a_state_db_session_counts_the_toolsets_of_the_platform_it_ran_on(
    home: Path, tmp_path: Path, set_toolsets: Callable[[str], None]
) -> None:
    """A gateway session (Telegram, …) carries the toolsets Hermes enables for that platform, not the
    CLI's: `sessions.source` says which. Real Hermes."""
    set_toolsets("  cli: [terminal, file, web]\n  telegram: [terminal]\n")
    make_state_db(home / "state.db", "tg1", tool_session(10), platform="telegram")
    config = config_for(home, tmp_path, window=20_000)
    session = db_session(StateDB(home / "state.db"), "tg1", snapshot_path(config.sessions_dir, "tg1"))
    assert session.platform == "telegram"
    telegram, cli = hermes_tools.hermes_tool_schemas(home, "telegram"), hermes_tools.hermes_tool_schemas(home, "cli")
    assert telegram and cli and len(telegram) < len(cli)
    assert measure(session, config).tokens == request_tokens(session.messages, "You are terse.", telegram)
