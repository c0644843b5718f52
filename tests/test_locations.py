"""Where the config, the state and the export live (issue 24, item 3): platformdirs' places, the XDG
variables honoured, the old places still read while the new ones do not exist. Through the console
script, with a throwaway HOME and real environment variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import load_sample, write_like_hermes

BIN = Path(sys.executable).parent / "timmy-compactor"


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "TIMMY_"))}
    env.pop("HERMES_HOME", None)
    return env | {"HOME": str(home)} | extra


def run(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *args],
        env=env_for(home, **extra),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def get(home: Path, key: str, **extra: str) -> str:
    done = run(home, "config", "--get", key, **extra)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_defaults_are_the_xdg_places_under_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # platformdirs' defaults on Linux are the places the sidecar always used: old state keeps working
    assert get(home, "huey.state_dir") == str(home / ".local" / "state" / "timmy-compactor")
    assert get(home, "export.dir") == str(home / ".local" / "share" / "timmy-compactor" / "export")
    assert run(home, "config", "--check").stdout == "config OK: built-in defaults\n"
    assert sorted(p.name for p in home.iterdir()) == []  # reading the config creates nothing


def test_xdg_variables_are_honoured(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    xdg = {
        "XDG_STATE_HOME": str(tmp_path / "xs"),
        "XDG_DATA_HOME": str(tmp_path / "xd"),
        "XDG_CONFIG_HOME": str(tmp_path / "xc"),
    }
    assert get(home, "huey.state_dir", **xdg) == str(tmp_path / "xs" / "timmy-compactor")
    assert get(home, "export.dir", **xdg) == str(tmp_path / "xd" / "timmy-compactor" / "export")
    config = tmp_path / "xc" / "timmy-compactor" / "compaction.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("huey:\n  workers: 6\n")
    done = run(home, "config", "--check", **xdg)
    assert done.stdout == f"config OK: {config}\n" and done.stderr == ""
    assert get(home, "huey.workers", **xdg) == "6"
    # the default ~/.config place when XDG_CONFIG_HOME is unset
    default = home / ".config" / "timmy-compactor" / "compaction.yaml"
    default.parent.mkdir(parents=True)
    default.write_text("huey:\n  workers: 4\n")
    assert get(home, "huey.workers") == "4"
    assert get(home, "huey.workers", **xdg) == "6"
    # TIMMY_STATE_DIR still wins over the place
    assert get(home, "huey.state_dir", TIMMY_STATE_DIR=str(tmp_path / "s"), **xdg) == str(tmp_path / "s")
    assert "$XDG_CONFIG_HOME/timmy-compactor/compaction.yaml" in run(home, "--help").stdout


def test_the_old_config_is_read_with_a_one_line_notice_until_the_new_one_exists(tmp_path: Path) -> None:
    home = tmp_path / "home"
    old = home / ".timmy" / "timmy-config" / "compaction.yaml"
    old.parent.mkdir(parents=True)
    old.write_text("huey:\n  workers: 3\n")
    new = home / ".config" / "timmy-compactor" / "compaction.yaml"
    done = run(home, "config", "--get", "huey.workers")
    assert done.returncode == 0 and done.stdout == "3\n"
    assert done.stderr == (f"timmy-compactor: note: reading the config from its old location {old}; move it to {new}\n")
    assert run(home, "config", "--check").stdout == f"config OK: {old}\n"
    # huey_consumer.sh says it once per start: its later commands run with this set
    quiet = run(home, "config", "--get", "huey.workers", TIMMY_LEGACY_CONFIG_NOTED="1")
    assert quiet.stdout == "3\n" and quiet.stderr == ""
    # with XDG_CONFIG_HOME set, the notice names that place
    xdg_new = tmp_path / "xc" / "timmy-compactor" / "compaction.yaml"
    done = run(home, "config", "--check", XDG_CONFIG_HOME=str(tmp_path / "xc"))
    assert str(xdg_new) in done.stderr and str(old) in done.stderr and done.stderr.count("\n") == 1
    new.parent.mkdir(parents=True)
    new.write_text("huey:\n  workers: 5\n")
    done = run(home, "config", "--get", "huey.workers")
    assert done.stdout == "5\n" and done.stderr == ""  # the new place wins, silently


def test_existing_state_and_export_under_the_old_places_keep_working_when_xdg_points_elsewhere(
    tmp_path: Path,
) -> None:
    """A user who set XDG_STATE_HOME before the sidecar honoured it: its queue, records and the
    engine's raw logs stay where they are, until the new place exists."""
    home = tmp_path / "home"
    old_state = home / ".local" / "state" / "timmy-compactor"
    old_state.mkdir(parents=True)
    old_data = home / ".local" / "share" / "timmy-compactor"
    old_data.mkdir(parents=True)
    hermes = tmp_path / "hermes"
    (hermes / "sessions").mkdir(parents=True)
    write_like_hermes(hermes / "sessions" / "session_loc.json", load_sample())
    xdg = {"XDG_STATE_HOME": str(tmp_path / "xs"), "XDG_DATA_HOME": str(tmp_path / "xd"), "HERMES_HOME": str(hermes)}
    assert get(home, "huey.state_dir", **xdg) == str(old_state)
    assert get(home, "export.dir", **xdg) == str(old_data / "export")
    done = run(home, "sweep", "--now", "--json", **xdg)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessions"] == 1
    assert (old_state / "sidecar.db").is_file()
    assert not (tmp_path / "xs").exists()
    status = run(home, "status", "--json", **xdg)
    assert json.loads(status.stdout)["sidecar"]["last_sweep"] is not None  # read from the old place
    # once the new place exists, it is the one
    (tmp_path / "xs" / "timmy-compactor").mkdir(parents=True)
    assert get(home, "huey.state_dir", **xdg) == str(tmp_path / "xs" / "timmy-compactor")
