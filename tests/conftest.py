"""Pytest fixtures and the hypothesis profiles; the helpers they use are in `tests.support`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import RedisServer, Sidecar

settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=30, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        if os.environ.get("TIMMY_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is required (TIMMY_REQUIRE_REDIS=1) but not installed")
        pytest.skip("redis-server not installed (apt-get install -y redis-server)")
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
