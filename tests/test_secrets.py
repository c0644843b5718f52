"""Secrets never reach the logs or `status`: the password in a Redis URL, and credentials inside a
session that cannot be compacted. Real processes (the CLI, huey_consumer, huey_consumer.sh), real
files; every byte they print or log is searched."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.support import Sidecar, free_port, tool_session, wait_for

PASSWORD = "s3cretPassw0rd"
AWS_KEY_ID = "AKIAQWERTYUIOPASDF12"  # the shape of an AWS access key id (fake)
GITHUB_TOKEN = "ghp_" + "Zx9" * 12  # the shape of a GitHub personal token (fake)
SECRETS = (PASSWORD, AWS_KEY_ID, GITHUB_TOKEN)


def run(car: Sidecar, *argv: str) -> str:
    proc = car.cli(*argv)
    return f"$ {' '.join(argv)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"


def leaks(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def test_a_redis_password_is_never_printed_or_logged(tmp_path: Path) -> None:
    url = f"redis://:{PASSWORD}@127.0.0.1:{free_port()}/0"  # nothing listens there
    car = Sidecar(tmp_path, "redis", redis_url=url)
    (car.sessions / "session_a.json").write_text(json.dumps({"session_id": "a", "messages": tool_session(4)}))
    out = [
        run(car, "status"),
        run(car, "status", "--json"),
        run(car, "sweep"),
        run(car, "enqueue", str(car.sessions / "session_a.json")),
        run(car, "watch", "--check-backend"),
        run(car, "config", "--json"),
        run(car, "config", "--get", "huey.redis_url"),
        run(car, "config", "--get", "huey"),
    ]
    car.start("consumer")  # huey_consumer with Redis down: warns about the queue it cannot reach
    try:
        assert wait_for(lambda: "queue_unreachable" in car.logs["consumer"].read_text(), timeout=60), car.log_text()
    finally:
        car.stop_all()
    text = "\n".join(out) + "".join(log.read_text() for log in car.logs.values())
    assert "redis://:***@127.0.0.1:" in text  # the URL is still named, its password masked
    assert "unreachable" in out[0] and "not reachable" in out[2]
    assert json.loads(out[5].split("\n", 1)[1])["huey"]["redis_url"].startswith("redis://:***@127.0.0.1:")
    assert out[6].split("\n", 1)[1].startswith("redis://:***@127.0.0.1:")  # issue 21: config output too
    assert leaks(text) == [], text


def test_credentials_in_sessions_that_cannot_be_compacted_never_reach_logs_or_status(tmp_path: Path) -> None:
    car = Sidecar(tmp_path, "sqlite", window=8_000)
    secret = f"aws {AWS_KEY_ID} github {GITHUB_TOKEN}"
    messages = tool_session(40)
    messages[0]["content"] = f"deploy with {secret}"
    broken = json.dumps({"session_id": "broken", "messages": messages})
    (car.sessions / "session_broken.json").write_text(broken[: len(broken) // 2])  # malformed: cut mid-write
    odd = tool_session(40)
    odd[3]["role"] = secret  # a role the engine does not know: kept verbatim in the view, never in a log
    (car.sessions / "session_odd.json").write_text(json.dumps({"session_id": "odd", "messages": odd}))
    shapeless = {"session_id": "shapeless", "messages": {"note": secret}}  # messages that are no list
    (car.sessions / "session_shapeless.json").write_text(json.dumps(shapeless))
    old = time.time() - 60  # not "still being written"
    for path in car.sessions.iterdir():
        os.utime(path, (old, old))

    out = [run(car, "sweep", "--now", "--all"), run(car, "status"), run(car, "status", "--json")]
    assert "3 session(s) — bad_input 2, written 1" in out[0], out[0]  # two refused, the odd one compacted
    for path in car.sessions.glob("compacted_*"):
        path.unlink()
    (car.state / "sidecar.db").unlink()  # forget: the consumer meets them afresh
    car.start("consumer")
    try:
        for name in ("broken", "odd", "shapeless"):
            out.append(run(car, "enqueue", str(car.sessions / f"session_{name}.json")))
        log = car.logs["consumer"]
        assert wait_for(lambda: log.read_text().count('"session_unreadable"') >= 2, timeout=60), car.log_text()
        assert wait_for((car.sessions / "compacted_session_odd.json").exists, timeout=60), car.log_text()
        out += [run(car, "status"), run(car, "status", "--json")]
    finally:
        car.stop_all()
    text = "\n".join(out) + "".join(log.read_text() for log in car.logs.values())
    for name in ("broken", "odd", "shapeless"):  # each is named, never quoted
        assert f"session_{name}.json" in text
    assert leaks(text) == [], text
    for path in car.state.rglob("*"):  # what status reads back later
        if path.is_file():
            assert leaks(path.read_bytes().decode(errors="replace")) == [], path


def test_the_password_of_a_url_is_masked_and_the_rest_kept() -> None:
    from timmy_compactor.config import mask_url_password

    assert mask_url_password(f"redis://:{PASSWORD}@10.0.0.5:6380/2") == "redis://:***@10.0.0.5:6380/2"
    assert mask_url_password(f"rediss://app:{PASSWORD}@cache.internal/0") == "rediss://app:***@cache.internal/0"
    assert mask_url_password("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert mask_url_password("redis://app@127.0.0.1:6379/0") == "redis://app@127.0.0.1:6379/0"
    assert PASSWORD not in mask_url_password(f"redis://:{PASSWORD}@[::1:6379/0")  # not parseable: no userinfo
