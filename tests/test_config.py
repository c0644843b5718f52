"""Config: validation naming the key, lookup order, the repository file, context-window resolution."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from timmy_compactor.cli import main
from timmy_compactor.config import (
    DEFAULT_CONTEXT_WINDOW,
    Config,
    ConfigError,
    default_config_yaml,
    load_config,
    parse_config,
    resolve_context_window,
)

REPO_CONFIG = Path(__file__).resolve().parents[1] / "config" / "compaction.yaml"


def load_text(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, env=env or {})


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("compation:\n  enabled: true\n", "'compation'"),
        ("compaction:\n  bogus: 1\n", "'compaction.bogus'"),
        ("compaction:\n  context_window: 9000\n", "'compaction.context_window'"),  # derived, set under model:
        ("model:\n  window: 9000\n", "'model.window'"),
        ("huey:\n  redis: x\n", "'huey.redis'"),
        ("sessions:\n  directory: /x\n", "'sessions.directory'"),
        ("export:\n  every: 1\n", "'export.every'"),
        ("logging:\n  colour: true\n", "'logging.colour'"),
    ],
)
def test_unknown_keys_are_rejected_by_name(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    message = str(info.value)
    assert f"unknown key {key}" in message and str(tmp_path / "c.yaml") in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("compaction:\n  trigger_threshold: high\n", "compaction.trigger_threshold"),
        ("compaction:\n  protect_last_n_turns: five\n", "compaction.protect_last_n_turns"),
        ("compaction:\n  protect_last_n_turns: true\n", "compaction.protect_last_n_turns"),
        ("compaction:\n  keep_tool_summary: maybe\n", "compaction.keep_tool_summary"),
        ("compaction:\n  max_tool_output_chars: 1.5\n", "compaction.max_tool_output_chars"),
        ("model:\n  fallback_models: small\n", "model.fallback_models"),
        ("model:\n  context_windows: {x: big}\n", "model.context_windows"),
        ("huey:\n  backend: mysql\n", "huey.backend"),
        ("huey:\n  workers: [2]\n", "huey.workers"),
        ("logging:\n  level: loud\n", "logging.level"),
        ("sessions: [a, b]\n", "sessions"),
    ],
)
def test_wrong_types_are_rejected_by_name(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=r"\b" + key.replace(".", r"\.") + r"\b") as info:
        load_text(tmp_path, text)
    assert str(tmp_path / "c.yaml") in str(info.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("compaction:\n  trigger_threshold: 1.5\n", "compaction.trigger_threshold"),
        ("compaction:\n  max_tail_ratio: 0\n", "compaction.max_tail_ratio"),
        ("compaction:\n  min_tail_steps: -1\n", "compaction.min_tail_steps"),
        ("compaction:\n  max_tool_output_chars: 10\n", "compaction.max_tool_output_chars"),
        ("compaction:\n  strategy: magic\n", "compaction.strategy"),
        ("model:\n  context_window: 100\n", "model.context_window"),
        ("model:\n  context_windows: {tiny: 0}\n", "model.context_windows['tiny']"),
    ],
)
def test_out_of_range_values_are_rejected_by_name(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    assert key in str(info.value)


def test_the_cli_reports_a_bad_config_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("compaction:\n  trigger_treshold: 0.5\n")
    assert main(["config", "--config", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "unknown key 'compaction.trigger_treshold'" in err and str(bad) in err


def test_empty_file_and_empty_sections_mean_defaults(tmp_path: Path) -> None:
    assert load_text(tmp_path, "").compaction == Config().compaction
    config = load_text(tmp_path, "compaction:\n  # enabled: false\nmodel:\n")
    assert config.compaction == Config().compaction and config.model == Config().model
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_text(tmp_path, "- a\n- b\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_text(tmp_path, "compaction: [\n")


def test_a_retired_key_in_an_old_file_is_ignored(tmp_path: Path) -> None:
    config = load_text(tmp_path, "compaction:\n  ledger_role: user\n  protect_last_n_turns: 2\n")
    assert config.compaction.protect_last_n_turns == 2
    assert "ledger_role" not in yaml.safe_load(default_config_yaml())["compaction"]


def test_lookup_order_flag_then_env_then_user_file_then_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("TIMMY_COMPACTOR_CONFIG", raising=False)
    assert load_config().source == "built-in defaults"
    assert load_config().compaction.trigger_threshold == 0.60
    user = tmp_path / ".timmy" / "timmy-config" / "compaction.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("compaction:\n  trigger_threshold: 0.7\n")
    assert load_config().compaction.trigger_threshold == 0.7 and load_config().source == str(user)
    env_file = tmp_path / "env.yaml"
    env_file.write_text("compaction:\n  trigger_threshold: 0.8\n")
    monkeypatch.setenv("TIMMY_COMPACTOR_CONFIG", str(env_file))
    assert load_config().compaction.trigger_threshold == 0.8
    flag = tmp_path / "flag.yaml"
    flag.write_text("compaction:\n  trigger_threshold: 0.9\n")
    assert load_config(flag).compaction.trigger_threshold == 0.9
    monkeypatch.setenv("TIMMY_COMPACTOR_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read config"):
        load_config()


def test_the_cli_flag_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    env_file = tmp_path / "env.yaml"
    env_file.write_text("compaction:\n  bogus: 1\n")
    monkeypatch.setenv("TIMMY_COMPACTOR_CONFIG", str(env_file))
    assert main(["config"]) == 2
    flag = tmp_path / "flag.yaml"
    flag.write_text("compaction:\n  enabled: false\n")
    capsys.readouterr()
    assert main(["config", "--check", "--config", str(flag)]) == 0
    assert capsys.readouterr().out == f"config OK: {flag}\n"


def test_the_repository_file_is_exactly_the_built_in_defaults() -> None:
    loaded = load_config(REPO_CONFIG, env={})
    assert dataclasses.replace(loaded, source="x") == dataclasses.replace(Config(), source="x")
    # and it spells out every key, so it documents them all
    written = yaml.safe_load(REPO_CONFIG.read_text(encoding="utf-8"))
    defaults = yaml.safe_load(default_config_yaml())
    assert {s: set(v) for s, v in written.items()} == {s: set(v) for s, v in defaults.items()}
    assert parse_config(defaults, "generated") == dataclasses.replace(Config(), source="generated")


def test_environment_overrides_for_containers(tmp_path: Path) -> None:
    config = load_config(env={"HERMES_HOME": str(tmp_path / "h"), "TIMMY_STATE_DIR": str(tmp_path / "s")})
    assert config.hermes_home == tmp_path / "h" and config.sessions_dir == tmp_path / "h" / "sessions"
    assert config.state_dir == tmp_path / "s"
    with pytest.raises(ConfigError, match="TIMMY_HUEY_BACKEND"):
        load_config(env={"TIMMY_HUEY_BACKEND": "kafka"})


@pytest.fixture
def hermes_home(tmp_path: Path) -> Path:
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "context_length_cache.yaml").write_text(
        "context_lengths:\n"
        '  "qwen-14b@http://127.0.0.1:8080/v1": 32768\n'
        '  "qwen-14b@http://gpu-box:8000/v1": 131072\n'
        '  "small-3b@http://127.0.0.1:8080/v1": 8192\n'
    )
    return home


def config_for(tmp_path: Path, home: Path, model: str = "") -> Config:
    return load_text(tmp_path, f"sessions:\n  hermes_home: {home}\n{model}")


def test_window_default_is_65536(tmp_path: Path, hermes_home: Path) -> None:
    assert DEFAULT_CONTEXT_WINDOW == 65_536
    assert resolve_context_window(config_for(tmp_path, hermes_home), "unknown-model") == 65_536
    assert resolve_context_window(config_for(tmp_path, hermes_home), None) == 65_536


def test_window_from_hermes_cache_by_model_and_base_url(tmp_path: Path, hermes_home: Path) -> None:
    config = config_for(tmp_path, hermes_home)
    assert resolve_context_window(config, "qwen-14b", "http://127.0.0.1:8080/v1") == 32_768
    assert resolve_context_window(config, "qwen-14b", "http://gpu-box:8000/v1") == 131_072
    assert config.settings_for("qwen-14b", "http://gpu-box:8000/v1").context_window == 131_072


def test_window_from_the_cache_found_through_hermes_home(tmp_path: Path, hermes_home: Path) -> None:
    config = load_config(env={"HERMES_HOME": str(hermes_home)})
    assert resolve_context_window(config, "small-3b", "http://127.0.0.1:8080/v1") == 8_192


def test_window_table_then_context_window_then_cache(tmp_path: Path, hermes_home: Path) -> None:
    url = "http://127.0.0.1:8080/v1"
    flat = config_for(tmp_path, hermes_home, "model:\n  context_window: 100000\n")
    assert resolve_context_window(flat, "qwen-14b", url) == 100_000
    table = config_for(
        tmp_path, hermes_home, "model:\n  context_window: 100000\n  context_windows: {qwen-14b: 50000}\n"
    )
    assert resolve_context_window(table, "qwen-14b", url) == 50_000
    assert resolve_context_window(table, "other", url) == 100_000


def test_a_fallback_chain_takes_its_smallest_window(tmp_path: Path, hermes_home: Path) -> None:
    chain = config_for(
        tmp_path, hermes_home, "model:\n  context_windows: {big: 131072, small: 16384}\n  fallback_models: [small]\n"
    )
    assert resolve_context_window(chain, "big") == 16_384
    via_cache = config_for(tmp_path, hermes_home, "model:\n  fallback_models: [small-3b]\n")
    assert resolve_context_window(via_cache, "qwen-14b", "http://gpu-box:8000/v1") == 8_192
    unknown = config_for(tmp_path, hermes_home, "model:\n  context_windows: {big: 131072}\n  fallback_models: [x]\n")
    assert resolve_context_window(unknown, "big") == 65_536


def test_a_broken_hermes_cache_is_ignored(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    for data in (b"context_lengths: [1, 2]\n", b"{{{", b"context_lengths:\n  'qwen-14b@x': big\n", b"\xff\xfe"):
        (home / "context_length_cache.yaml").write_bytes(data)
        assert resolve_context_window(config_for(tmp_path, home), "qwen-14b", "x") == 65_536


def test_window_from_hermes_config_before_its_cache(tmp_path: Path, hermes_home: Path) -> None:
    """Issue 16.1: our config, then Hermes' `model.context_length` for that model, then its cache, then 65,536."""
    url = "http://127.0.0.1:8080/v1"
    (hermes_home / "config.yaml").write_text(
        "model:\n  default: qwen-14b\n  provider: custom\n  context_length: 131072\n"
        "custom_providers:\n  - name: box\n    base_url: http://127.0.0.1:8080/v1\n"
        "    models:\n      small-3b: {context_length: 16384}\n"
    )
    config = config_for(tmp_path, hermes_home)
    assert resolve_context_window(config, "qwen-14b", url) == 131_072  # not the cache's 32,768
    assert resolve_context_window(config, None) == 131_072  # a session of no known model runs Hermes' model
    assert resolve_context_window(config, "small-3b", url) == 16_384  # custom_providers' per-model length
    assert resolve_context_window(config, "unknown-model") == 65_536  # another model: not Hermes' setting
    ours = config_for(tmp_path, hermes_home, "model:\n  context_window: 100000\n")
    assert resolve_context_window(ours, "qwen-14b", url) == 100_000
    table = config_for(tmp_path, hermes_home, "model:\n  context_windows: {qwen-14b: 50000}\n")
    assert resolve_context_window(table, "qwen-14b", url) == 50_000


def test_a_broken_or_odd_hermes_config_is_ignored(tmp_path: Path, hermes_home: Path) -> None:
    url = "http://127.0.0.1:8080/v1"
    for text in ("{{{", "model: qwen-14b\n", "model:\n  context_length: 256K\n", "model:\n  context_length: true\n"):
        (hermes_home / "config.yaml").write_text(text)
        assert resolve_context_window(config_for(tmp_path, hermes_home), "qwen-14b", url) == 32_768


# ---------------------------------------------------------------- a schedule of zero minutes


def test_a_schedule_of_zero_minutes_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "compaction.yaml"
    path.write_text("huey:\n  sweep_every_minutes: 0\n")
    assert main(["config", "--config", str(path)]) == 2
    assert "huey.sweep_every_minutes must be >= 1" in capsys.readouterr().err


def test_a_lower_trigger_alone_takes_target_after_down_with_it(tmp_path: Path) -> None:
    """Issue 33: `trigger_threshold: 0.15` alone was refused for `target_after`, a key the file never set."""
    config = load_text(tmp_path, "compaction:\n  trigger_threshold: 0.15\n")
    assert config.compaction.trigger_threshold == 0.15 and config.compaction.target_after == 0.15
    assert load_text(tmp_path, "compaction:\n  trigger_threshold: 0.7\n").compaction.target_after == 0.40
    both = load_text(tmp_path, "compaction:\n  trigger_threshold: 0.15\n  target_after: 0.1\n")
    assert both.compaction.target_after == 0.1
    rules_only = load_text(tmp_path, "compaction:\n  trigger_threshold: 0.15\n  target_after: null\n")
    assert rules_only.compaction.target_after is None


def test_a_target_set_above_the_trigger_is_refused_with_both_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, "compaction:\n  trigger_threshold: 0.15\n  target_after: 0.4\n")
    message = str(info.value)
    assert "target_after" in message and "0.4" in message and "0.15" in message


def test_the_readme_table_names_every_key() -> None:
    """Issue 33: the README's config table lacked `huey.sqlite_path` and `export.redact_credentials`."""
    readme = (REPO_CONFIG.parents[1] / "README.md").read_text(encoding="utf-8")
    rows = "\n".join(line for line in readme.splitlines() if line.startswith("| `"))
    defaults = yaml.safe_load(default_config_yaml())
    missing = [f"{s}.{k}" for s, keys in defaults.items() for k in keys if f"`{s}.{k}`" not in rows]
    assert not missing, missing


def test_invalid_yaml_says_where_and_what_in_words(tmp_path: Path) -> None:
    """Issue 33: `but found '<stream end>' in "<unicode string>"` told a user nothing."""
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, "compaction:\n  trigger_threshold: [0.5\n")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'c.yaml'}: invalid YAML at line 3, column 1: ")
    assert "the end of the file" in message and "<" not in message and "\n" not in message
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, "compaction:\n trigger_threshold: 1\n  enabled: true\n")
    assert "at line 3, column 10: mapping values are not allowed here" in str(info.value)
