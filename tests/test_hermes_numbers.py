"""Issue 16, "Hermes' numbers": state.db sessions are counted with the tool schemas Hermes sends,
a current snapshot is called current, and a tool call still awaiting its result is no orphan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import assistant, call, make_state_db, tool, tool_session, user, write_session
from timmy_compactor.compactor import compact_to_view, measure
from timmy_compactor.compare.promises import check
from timmy_compactor.config import Config, HueySection, ModelSection, SessionsSection
from timmy_compactor.core.pairs import orphans
from timmy_compactor.core.tokens import request_tokens
from timmy_compactor.host import tools as hermes_tools
from timmy_compactor.sessions.files import META_KEY
from timmy_compactor.sessions.statedb import StateDB, db_session, snapshot_path
from timmy_compactor.sidecar.status import db_session_status, view_orphans

FAKE_TOOLS = [
    {
        "type": "function",
        "function": {"name": "terminal", "description": "Run a shell command. " * 200, "parameters": {}},
    }
]


def config_for(home: Path, tmp: Path, window: int | None = None) -> Config:
    return Config(
        model=ModelSection(context_window=window),
        sessions=SessionsSection(dir=str(home / "sessions"), hermes_home=str(home)),
        huey=HueySection(state_dir=str(tmp / "state")),
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "hermes"
    (home / "sessions").mkdir(parents=True)
    return home


def messages_tokens(messages: list[dict[str, Any]]) -> int:
    return request_tokens(messages, "You are terse.")


# ---------------------------------------------------------------- 16.2: the tool schemas Hermes sends


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
    status, _ = db_session_status(StateDB(home / "state.db"), "s1", config)
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
    status, _ = db_session_status(StateDB(home / "state.db"), "s1", config)
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


# ---------------------------------------------------------------- 16.3: current vs frozen snapshots


def test_a_current_snapshot_is_current_despite_bookkeeping_keys(home: Path, tmp_path: Path) -> None:
    messages = [user("list /srv"), assistant("", call("c1", "terminal", command="ls /srv")), tool("c1", "a b")]
    messages.append(assistant("two entries"))
    make_state_db(home / "state.db", "s1", messages)
    import sqlite3

    db = sqlite3.connect(home / "state.db")
    db.execute("UPDATE messages SET timestamp = 1.7e9 + id")  # database rows carry timestamps
    db.commit()
    db.close()
    snapshot = [
        m
        | {"_db_persisted": True}
        | ({"name": "terminal"} if m["role"] == "tool" else {})
        | (
            {"tool_calls": [c | {"call_id": c["id"], "response_item_id": "r1"} for c in m["tool_calls"]]}
            if m.get("tool_calls")
            else {}
        )
        for m in messages
    ]
    config = config_for(home, tmp_path)
    path = snapshot_path(config.sessions_dir, "s1")
    document = {"session_id": "s1", "model": "test-model", "system_prompt": "You are terse.", "tools": []}
    write_session(path, document | {"messages": snapshot})
    _, state = db_session_status(StateDB(home / "state.db"), "s1", config)
    assert state == "current"
    write_session(path, document | {"messages": snapshot[:-1]})  # a message behind: frozen
    assert db_session_status(StateDB(home / "state.db"), "s1", config)[1] == "frozen"
    changed = [*snapshot[:-1], snapshot[-1] | {"content": "three entries"}]
    write_session(path, document | {"messages": changed})
    assert db_session_status(StateDB(home / "state.db"), "s1", config)[1] == "frozen"


# ---------------------------------------------------------------- 16.5: a call awaiting its result


def pending_session() -> list[dict[str, Any]]:
    """A run whose last message is a tool call Hermes has not written the result of yet."""
    return [*tool_session(12), user("now check /srv/app/last.py"), assistant("", call("cz", "read_file", path="x"))]


def test_the_eval_does_not_count_a_call_awaiting_its_result() -> None:
    raw = pending_session()
    assert orphans(raw) == 0
    verdict = check(raw, raw)
    assert verdict.orphans == 0 and verdict.all_kept
    both = [*raw[:-1], assistant("", call("cy", "terminal", command="ls"), call("cz", "read_file", path="x"))]
    assert orphans([*both, tool("cy", "ok")]) == 0  # one of two results written so far
    assert orphans([*raw, user("stop")]) == 1  # a call the conversation moved on from is one


def test_status_does_not_count_a_call_awaiting_its_result(home: Path, tmp_path: Path) -> None:
    make_state_db(home / "state.db", "s1", pending_session())
    config = config_for(home, tmp_path, window=4_096)
    db = StateDB(home / "state.db")
    outcome = compact_to_view(db_session(db, "s1", snapshot_path(config.sessions_dir, "s1")), config)
    assert outcome.action == "written", outcome.reason
    view = json.loads(outcome.view_path.read_text())  # type: ignore[union-attr]
    assert view["messages"][-1]["tool_calls"][0]["id"] == "cz"
    status, _ = db_session_status(db, "s1", config)
    assert status.view == "fresh" and status.orphans == 0
    broken = tmp_path / "compacted_session_x.json"
    broken.write_text(json.dumps({"messages": [user("a"), tool("c9", "lost"), user("b")], META_KEY: {}}))
    assert view_orphans(broken) == 1


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


# ---------------------------------------------------------------- 16.4: disable undoes enable; a new state.db


def test_disable_restores_what_enable_changed_and_only_that(tmp_path: Path) -> None:
    pytest.importorskip("ruamel.yaml")
    from timmy_compactor.hermes.setup import RECORD_NAME, apply

    home = tmp_path / "hermes"
    home.mkdir()
    original = "# my Hermes\nmodel:\n  default: qwen-14b  # the local one\n  context_length: 131072\n"
    (home / "config.yaml").write_text(original)
    assert apply(home, enable=True)[0]
    enabled = (home / "config.yaml").read_text()
    assert "engine: timmy" in enabled and "write_json_snapshots: true" in enabled
    assert (home / RECORD_NAME).is_file()
    assert apply(home, enable=True) == (False, None)  # already enabled: nothing changes, the record stays
    assert apply(home, enable=False)[0]
    assert (home / "config.yaml").read_text() == original  # snapshots off again: enable turned them on
    assert not (home / RECORD_NAME).exists()

    # what the user had set before is kept, and a change the user made since enable is not undone
    (home / "config.yaml").write_text(
        "context:\n  engine: lcm\nplugins:\n  enabled: [other]\nsessions:\n  write_json_snapshots: true\n"
    )
    apply(home, enable=True)
    apply(home, enable=False)
    assert yaml_of(home) == {
        "context": {"engine": "lcm"},
        "plugins": {"enabled": ["other"]},
        "sessions": {"write_json_snapshots": True},
    }
    (home / "config.yaml").write_text("sessions:\n  write_json_snapshots: false\n")
    apply(home, enable=True)
    text = (home / "config.yaml").read_text().replace("engine: timmy", "engine: mine")
    (home / "config.yaml").write_text(text)
    apply(home, enable=False)
    assert yaml_of(home) == {"context": {"engine": "mine"}, "sessions": {"write_json_snapshots": False}}


def yaml_of(home: Path) -> Any:
    import yaml

    return yaml.safe_load((home / "config.yaml").read_text())


def test_a_brand_new_state_db_is_no_reason_to_upgrade(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from timmy_compactor.export.sources import sessions_to_export
    from timmy_compactor.sessions.statedb import StateDBNotReadyError
    from timmy_compactor.sidecar import dblook

    config = config_for(home, tmp_path)
    for setup in ("", "CREATE TABLE schema_version (version INTEGER);"):
        (home / "state.db").unlink(missing_ok=True)
        db = sqlite3.connect(home / "state.db")  # just created by Hermes: no schema, or no version row yet
        db.executescript(setup)
        db.close()
        with pytest.raises(StateDBNotReadyError):
            StateDB(home / "state.db").check_schema()
        assert dblook.state_db(config) is None
        assert sessions_to_export(tmp_path / "no-sessions", home)[1:] == ([], [])
    assert "upgrade" not in capsys.readouterr().out
    make_state_db(tmp_path / "old.db", "s1", [user("hi")], schema=7)
    with pytest.raises(Exception, match="upgrade timmy-compactor"):
        StateDB(tmp_path / "old.db").check_schema()


# ---------------------------------------------------------------- the tool schemas decide whether a view is current


@pytest.mark.hermes
def test_a_change_of_hermes_toolsets_makes_the_next_sweep_rebuild_a_state_db_view(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No row of the session moves; only the toolsets Hermes enables (so the schemas every request
    carries) change. The next sweep finds the session stale and rebuilds its view. Real Hermes."""
    pytest.importorskip("model_tools", reason="hermes-agent is not installed")
    from timmy_compactor.sidecar import sweep, work
    from timmy_compactor.sidecar.records import Records

    fake_home = tmp_path / "user"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    (home / "config.yaml").write_text("platform_toolsets:\n  cli: [terminal, file, web]\n")
    hermes_tools._cache.clear()
    make_state_db(home / "state.db", "s1", tool_session(40))
    config = config_for(home, tmp_path, window=20_000)
    records = Records(config.state_dir)
    view = work.db_view_path(config, "s1")

    def tools_tokens_in_view() -> Any:
        return json.loads(view.read_text())[META_KEY].get("tool_schema_tokens")

    assert sweep.stale_db_sessions(config, records) == ["s1"]
    assert work.process_db_session("s1", config, records).action == "written"
    first = tools_tokens_in_view()
    assert sweep.stale_db_sessions(config, records) == []  # nothing changed: nothing to do
    assert db_session_status(StateDB(home / "state.db"), "s1", config)[0].view == "fresh"

    (home / "config.yaml").write_text("platform_toolsets:\n  cli: [terminal]\n")  # fewer toolsets
    assert db_session_status(StateDB(home / "state.db"), "s1", config)[0].view == "stale"
    assert sweep.stale_db_sessions(config, records) == ["s1"]
    result = work.process_db_session("s1", config, records)
    assert result.action == "written" and result.report is not None
    first, second = int(first), int(tools_tokens_in_view())
    assert 0 < second < first
    assert result.report["tokens_before"] == request_tokens(
        db_session(StateDB(home / "state.db"), "s1", snapshot_path(config.sessions_dir, "s1")).messages,
        "You are terse.",
        hermes_tools.hermes_tool_schemas(home),
    )
    assert sweep.stale_db_sessions(config, records) == []
    assert db_session_status(StateDB(home / "state.db"), "s1", config)[0].view == "fresh"
    hermes_tools._cache.clear()


def test_a_state_db_session_counts_the_toolsets_of_the_platform_it_ran_on(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway session (Telegram, …) carries the toolsets Hermes enables for that platform, not the
    CLI's: `sessions.source` says which. Real Hermes."""
    pytest.importorskip("model_tools", reason="hermes-agent is not installed")
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    (home / "config.yaml").write_text("platform_toolsets:\n  cli: [terminal, file, web]\n  telegram: [terminal]\n")
    hermes_tools._cache.clear()
    make_state_db(home / "state.db", "tg1", tool_session(10), platform="telegram")
    config = config_for(home, tmp_path, window=20_000)
    session = db_session(StateDB(home / "state.db"), "tg1", snapshot_path(config.sessions_dir, "tg1"))
    assert session.platform == "telegram"
    telegram, cli = hermes_tools.hermes_tool_schemas(home, "telegram"), hermes_tools.hermes_tool_schemas(home, "cli")
    assert telegram and cli and len(telegram) < len(cli)
    assert measure(session, config).tokens == request_tokens(session.messages, "You are terse.", telegram)
    hermes_tools._cache.clear()
