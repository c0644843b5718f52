"""`huey_consumer tasks.huey`: the sidecar's Huey app, built once from the configuration.

The app lives in `timmy_compactor.sidecar.app`; this module only builds it from the environment
(`$TIMMY_COMPACTOR_CONFIG`, then `$XDG_CONFIG_HOME/timmy-compactor/compaction.yaml`, then the defaults) and
names its parts, so these keep working:

    huey_consumer tasks.huey
    python -c "from tasks import compact_session; compact_session('/path/to/session_<id>.json')"
"""

from __future__ import annotations

import sys

from timmy_compactor.config import load_config
from timmy_compactor.errors import EXIT_BAD_INPUT, TimmyError
from timmy_compactor.sidecar.app import make_app

try:
    app = make_app(load_config())
except TimmyError as exc:  # a bad config, an unwritable state dir: one line for huey_consumer, not a traceback
    print(f"timmy-compactor: error: {exc}", file=sys.stderr)
    raise SystemExit(EXIT_BAD_INPUT) from None
config = app.config
huey = app.huey
records = app.records
compact_session = app.compact_session
compact_db_session = app.compact_db_session
sweep_sessions = app.sweep_sessions
session_export = app.session_export
periodic_sweep = app.periodic_sweep
periodic_export = app.periodic_export

__all__ = [
    "app",
    "compact_db_session",
    "compact_session",
    "config",
    "huey",
    "periodic_export",
    "periodic_sweep",
    "records",
    "session_export",
    "sweep_sessions",
]
