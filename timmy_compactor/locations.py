"""Where timmy-compactor keeps its files, per platform (`platformdirs`), with the old places still read.

On Linux these are the XDG base directories: the config file `$XDG_CONFIG_HOME/timmy-compactor/
compaction.yaml` (default `~/.config/…`), the state dir `$XDG_STATE_HOME/timmy-compactor` (default
`~/.local/state/…`: the queue, locks, the sidecar's records, the engine's raw logs) and the data dir
`$XDG_DATA_HOME/timmy-compactor` (default `~/.local/share/…`: the export). macOS and Windows get their
platform's own folders.

Before these, the config lived at `~/.timmy/timmy-config/compaction.yaml`, and state and data at
`~/.local/state/timmy-compactor` and `~/.local/share/timmy-compactor` whatever XDG said. An old place
is used only while the new one does not exist: the config file with a one-line notice naming both, a
directory silently (it holds the queue and the records a running sidecar relies on).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP = "timmy-compactor"
CONFIG_NAME = "compaction.yaml"
LEGACY_CONFIG = Path("~/.timmy/timmy-config") / CONFIG_NAME
LEGACY_STATE_DIR = Path("~/.local/state") / APP
LEGACY_DATA_DIR = Path("~/.local/share") / APP
NOTED_ENV = "TIMMY_LEGACY_CONFIG_NOTED"
"""Set (by huey_consumer.sh, after its first check) so that the processes of one start say the notice once."""

_noted: set[Path] = set()


def user_config_file() -> Path:
    """Where the user's config file belongs: `$XDG_CONFIG_HOME/timmy-compactor/compaction.yaml` on Linux."""
    return platformdirs.user_config_path(APP, appauthor=False) / CONFIG_NAME


def legacy_config_file() -> Path:
    return LEGACY_CONFIG.expanduser()


def config_file() -> Path | None:
    """The user's config file to read: the new place, else the old one (with a notice), else none."""
    new, old = user_config_file(), legacy_config_file()
    if new.exists():
        return new
    if old.exists():
        _notice(old, new)
        return old
    return None


def _notice(old: Path, new: Path) -> None:
    if old in _noted or os.environ.get(NOTED_ENV):
        return
    _noted.add(old)
    print(
        f"timmy-compactor: note: reading the config from its old location {old}; move it to {new}",
        file=sys.stderr,
    )


def _new_or_legacy(new: Path, legacy: Path) -> Path:
    if new != legacy and not new.exists() and legacy.is_dir():
        return legacy
    return new


def state_dir() -> Path:
    """The default `huey.state_dir`: `$XDG_STATE_HOME/timmy-compactor` on Linux (`~/.local/state/…`)."""
    return _new_or_legacy(platformdirs.user_state_path(APP, appauthor=False), LEGACY_STATE_DIR.expanduser())


def data_dir() -> Path:
    """`$XDG_DATA_HOME/timmy-compactor` on Linux (`~/.local/share/…`); the default export is its `export/`."""
    return _new_or_legacy(platformdirs.user_data_path(APP, appauthor=False), LEGACY_DATA_DIR.expanduser())


def export_dir() -> Path:
    return data_dir() / "export"


DESCRIBED = {
    "config": f"$XDG_CONFIG_HOME/{APP}/{CONFIG_NAME} (~/.config/{APP}/{CONFIG_NAME}; the old {LEGACY_CONFIG} "
    "is read while that does not exist)",
    "state": f"$XDG_STATE_HOME/{APP} (~/.local/state/{APP})",
    "export": f"$XDG_DATA_HOME/{APP}/export (~/.local/share/{APP}/export)",
}
"""The default places as the help and the docs say them (Linux; platformdirs' folders elsewhere)."""
