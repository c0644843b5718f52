"""hermes/setup.py + cli.py: `hermes enable|disable|status`, leaving a Hermes home as they found it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support_homes import cli
from timmy_compactor.cli import main


def test_hermes_enable_on_a_config_that_is_not_a_mapping_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.yaml").write_text("- just\n- a list\n")
    assert main(["hermes", "enable", "--hermes-home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("timmy-compactor: error: ") and err.count("\n") == 1 and "not a mapping" in err


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


def test_hermes_status_creates_nothing_at_the_path_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support import listing

    typo = tmp_path / "hermse"
    assert main(["hermes", "status", "--hermes-home", str(typo)]) == 2
    assert "no Hermes home there" in capsys.readouterr().err
    assert not typo.exists()
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\n")
    before = listing(home)
    assert main(["hermes", "status", "--hermes-home", str(home)]) == 1  # not enabled
    assert listing(home) == before and sorted(p.name for p in home.iterdir()) == ["config.yaml"]
    assert main(["hermes", "enable", "--hermes-home", str(home)]) == 0  # the loader in the copy sees it
    capsys.readouterr()
    before = listing(home)
    assert main(["hermes", "status", "--hermes-home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "ACTIVE" in out
    assert "trigger: 0.85 of the window (Hermes' threshold: " in out  # which and why:
    assert "floored at 64,000 tokens: 0.98 of 65,536 tokens, capped at 0.85: room for the answer)" in out
    assert listing(home) == before


def test_hermes_status_says_whether_the_engine_can_keep_its_raw_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    (home / "config.yaml").write_text("model:\n  default: x\n")
    config = tmp_path / "compaction.yaml"
    for state, writable in ((tmp_path / "state", True), (tmp_path / "blocker" / "state", False)):
        config.write_text(json.dumps({"huey": {"state_dir": str(state)}}))
        (tmp_path / "blocker").write_text("a file where a directory would be")  # ENOTDIR, for root too
        main(["hermes", "status", "--hermes-home", str(home), "--json", "--config", str(config)])
        shown = json.loads(capsys.readouterr().out)
        assert shown["raw_log_dir"] == str(state / "hermes-engine") and shown["raw_log_writable"] is writable
        assert not state.exists()  # checking creates nothing


def test_hermes_status_names_our_enable_command(tmp_path: Path) -> None:
    pytest.importorskip("hermes_cli")
    home = tmp_path / "hermes"
    home.mkdir()
    done = cli("hermes", "status", "--hermes-home", str(home))
    assert done.returncode == 1, done.stderr
    assert "NOT active" in done.stdout
    assert "timmy-compactor hermes enable" in done.stdout and "hermes plugins enable" not in done.stdout
    done = cli("hermes", "status", "--hermes-home", str(home), "--json")
    status = json.loads(done.stdout)
    assert status["hint"] == "to activate it: timmy-compactor hermes enable"
    assert "hermes plugins enable" not in done.stdout
    assert sorted(p.name for p in home.iterdir()) == []  # status creates nothing


def test_hermes_enable_then_disable_leaves_a_home_as_it_was(tmp_path: Path) -> None:
    """No config.yaml before: none after (not `{}`), no record, no backup; a disable with nothing
    enabled writes nothing, backups included."""
    pytest.importorskip("ruamel.yaml")
    from tests.support import listing

    home = tmp_path / "hermes"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    before = listing(home)
    done = cli("hermes", "enable", "--hermes-home", str(home))
    assert done.returncode in (0, 1), done.stderr  # 1: hermes-agent missing, status says so
    assert "engine: timmy" in (home / "config.yaml").read_text()
    done = cli("hermes", "disable", "--hermes-home", str(home))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("disabled the timmy context engine: removed ")
    assert listing(home) == before

    for _ in range(2):  # nothing enabled: no write, no backup
        done = cli("hermes", "disable", "--hermes-home", str(home))
        assert done.returncode == 0 and "already disabled, nothing changed" in done.stdout
        assert listing(home) == before

    users = "# mine\nmodel:\n  default: qwen  # local\n"
    (home / "config.yaml").write_text(users)
    before = listing(home)
    for _ in range(2):
        assert cli("hermes", "disable", "--hermes-home", str(home)).returncode == 0
        assert listing(home) == before  # no sections added, no backup

    cli("hermes", "enable", "--hermes-home", str(home))
    assert cli("hermes", "disable", "--hermes-home", str(home)).returncode == 0
    assert (home / "config.yaml").read_text() == users
    backups = sorted(p.name for p in home.glob("config.yaml.timmy-backup-*"))
    assert 1 <= len(backups) <= 2  # enable's and disable's (one name when both fall in one second)


def test_hermes_enable_refuses_a_path_with_no_hermes_home_unless_asked_to_create_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33: `enable --hermes-home <typo>` made a new home and said ACTIVE while `status` refused it."""
    typo = tmp_path / "hermse"
    for action in ("enable", "disable"):
        assert main(["hermes", action, "--hermes-home", str(typo)]) == 2
        err = capsys.readouterr().err
        assert f"{typo}: no Hermes home there" in err and err.count("\n") == 1
    assert "hermes enable --create" in main_err(typo, capsys)
    assert not typo.exists()
    pytest.importorskip("ruamel.yaml")
    assert main(["hermes", "enable", "--create", "--hermes-home", str(typo)]) in (0, 1)  # 1: no hermes-agent
    assert "engine: timmy" in (typo / "config.yaml").read_text()


def main_err(home: Path, capsys: pytest.CaptureFixture[str]) -> str:
    main(["hermes", "enable", "--hermes-home", str(home)])
    return capsys.readouterr().err
