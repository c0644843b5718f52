"""`./test.sh` never touches the developer's real home (issue 17.1).

The conftest moves HOME and HERMES_HOME into a throwaway directory at import time, before anything
imports Hermes. The outer test runs an inner pytest session with HOME pointing at an empty
directory standing in for the developer's real home; the inner test imports Hermes (whose import
creates `$HERMES_HOME` and a `state.db`) and runs sidecar verbs with the default configuration.
Afterwards the stand-in home must still be empty.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.support import REPO, pytest_in_child

INNER = "TIMMY_HOME_ISOLATION_INNER"


def test_session_home_is_isolated() -> None:
    real = Path(os.environ["TIMMY_TEST_REAL_HOME"]).resolve()
    assert Path.home().resolve() != real
    assert "HERMES_HOME" not in os.environ  # Hermes' home is then ~/.hermes, inside the throwaway HOME


@pytest.mark.skipif(os.environ.get(INNER) != "1", reason="inner half of test_real_home_stays_empty")
def test_inner_touches_home_as_a_user_would() -> None:
    from timmy_compactor.cli import main

    assert main(["status", "--json"]) == 0
    assert main(["config"]) == 0
    with contextlib.suppress(ImportError):
        import hermes_state  # noqa: F401 -- importing Hermes creates $HERMES_HOME and state.db


def test_real_home_stays_empty(tmp_path: Path) -> None:
    fake_real_home = tmp_path / "home"
    fake_real_home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TIMMY_TEST_REAL_HOME", "HERMES_HOME")}
    env |= {"HOME": str(fake_real_home), INNER: "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = pytest_in_child(f"{Path(__file__).relative_to(REPO)}::test_inner_touches_home_as_a_user_would", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
    assert sorted(p.name for p in fake_real_home.rglob("*")) == []
