"""docker-compose.yml and the README's compose command (issue 17.4)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.support import REPO

COMPOSE = REPO / "docker-compose.yml"


def readme_compose_commands() -> list[str]:
    """The compose commands the README and its docs/ pages give."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    found = [line.strip().strip("`") for line in re.findall(r"[^\n`]*docker compose up[^\n`]*", text)]
    return [line for line in found if "#" not in line.split("docker compose up")[0]]  # not in a comment


def test_readme_compose_command_runs_in_bash() -> None:
    """`UID=… docker compose up` fails in bash (UID is read-only); the README's command must not."""
    commands = readme_compose_commands()
    assert commands
    for command in commands:
        script = f'docker() {{ echo "uid=$TIMMY_UID gid=$TIMMY_GID"; }}\n{command}'
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=False)
        assert proc.returncode == 0 and "readonly" not in proc.stderr, (command, proc.stderr)
        assert re.match(r"uid=\d+ gid=\d+", proc.stdout), (command, proc.stdout)


def test_compose_file_uses_variables_bash_does_not_own() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    assert not re.search(r"\$\{(UID|GID|EUID|PPID)\b", text)
    services = yaml.safe_load(text)["services"]
    for name in ("consumer", "watcher"):
        assert services[name]["user"] == "${TIMMY_UID:-1000}:${TIMMY_GID:-1000}"


def test_docker_compose_config_validates_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed here (CI with docker runs this)")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["?"])[0][:120]
        pytest.skip(f"the docker compose plugin is not available here (CI with docker runs this): {reason}")
    proc = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"TIMMY_UID": "1000", "TIMMY_GID": "1000", "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"},
    )
    assert proc.returncode == 0, proc.stderr
