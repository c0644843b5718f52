"""`huey_consumer tasks.huey`: the sidecar's Huey app, built once from the configuration.

The app is built in `timmy_compactor.tasks` (from `$TIMMY_COMPACTOR_CONFIG`, then
`$XDG_CONFIG_HOME/timmy-compactor/compaction.yaml`, then the defaults); this module names the same
objects for the consumer and for older scripts. From Python, prefer the package's module, which any
Python that has the package can import:

    huey_consumer tasks.huey
    python -c "from timmy_compactor.tasks import enqueue; print(enqueue('<id>').get(blocking=True))"
"""

from __future__ import annotations

from timmy_compactor.tasks import *  # noqa: F403 -- the same names, one list of them
from timmy_compactor.tasks import __all__  # noqa: F401 -- what `from tasks import *` gives
