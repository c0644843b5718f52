"""cli.py: the `config` verb, and --config before or after any verb."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support_homes import cli, script_env, write_config


def test_config_prints_the_configuration_in_effect_as_yaml(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "compaction.yaml"
    path.write_text(
        "huey:\n  workers: 5\n  redis_url: redis://:s3cret-pw@cache.local:6379/1\nlogging:\n  level: warning\n"
    )
    env = script_env(path, TIMMY_STATE_DIR=str(tmp_path / "state"))
    done = cli("config", env=env)
    assert done.returncode == 0, done.stderr
    assert "s3cret-pw" not in done.stdout and "redis://:***@cache.local:6379/1" in done.stdout
    assert done.stdout.startswith(f"# timmy-compactor configuration in effect; source: {path}\n")
    assert "# overridden by the environment: TIMMY_STATE_DIR\n" in done.stdout
    shown = yaml.safe_load(done.stdout)
    assert shown["huey"]["workers"] == 5 and shown["huey"]["state_dir"] == str(tmp_path / "state")
    assert shown["logging"] == {"format": "auto", "level": "warning"}
    assert shown["compaction"]["trigger_threshold"] == 0.6  # the defaults of what the file leaves out
    assert set(shown) == {"compaction", "model", "sessions", "huey", "export", "logging", "hermes"}
    again = tmp_path / "again.yaml"  # what it prints is a config file that gives the same configuration
    again.write_text(done.stdout)
    assert yaml.safe_load(cli("config", "--config", str(again), env=env).stdout) == shown

    done = cli("config", "--json", env=env)
    data = json.loads(done.stdout)
    assert data["huey"]["redis_url"] == "redis://:***@cache.local:6379/1" and data["source"] == str(path)
    assert cli("config", "--get", "huey.redis_url", env=env).stdout == "redis://:***@cache.local:6379/1\n"
    assert cli("config", "--check", env=env).stdout == f"config OK: {path}\n"
    done = cli("config", env=script_env(path, TIMMY_LOG_LEVEL="chatty"))
    assert done.returncode == 2
    assert done.stderr == (
        "timmy-compactor: error: TIMMY_LOG_LEVEL: expected one of debug, info, warning, error, got 'chatty'\n"
    )


def test_config_flag_before_or_after_the_verb(tmp_path: Path) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("huey:\n  workers: 5\n")
    second.write_text("huey:\n  workers: 7\n")
    env = script_env()
    env.pop("TIMMY_COMPACTOR_CONFIG", None)
    assert cli("--config", str(first), "config", "--get", "huey.workers", env=env).stdout == "5\n"
    assert cli("config", "--config", str(first), "--get", "huey.workers", env=env).stdout == "5\n"
    assert cli("--config", str(first), "config", "--config", str(second), "--get", "huey.workers", env=env).stdout == (
        "7\n"  # the one nearer the verb's options wins
    )
    config, _ = write_config(tmp_path / "home")
    done = cli("--config", str(config), "status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessions_dir"] == str(tmp_path / "home" / "hermes" / "sessions")
