"""Run a command that exits with the script that started it: `python -m
timmy_compactor.sidecar.with_parent PARENT_PID COMMAND [ARG…]`.

`huey_consumer.sh` starts the consumer and the watcher through this. On Linux the command gets
SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`, kept across the exec), so a `kill -9` of the
script leaves no consumer or watcher behind to hold the sidecar's lock and refuse the restart (the
consumer stops its workers on SIGTERM; the watcher releases the lock). If the parent is already gone
before that is set, the command is not run at all. Elsewhere the command runs as is.

The command is registered as a process of the sidecar (`sidecar.processes`: a lock file in the state
dir held for its life, naming PARENT_PID as its supervisor), and the consumer's own children (huey's
workers and scheduler) die with it and register alike; a start refuses to run beside any left.
"""

from __future__ import annotations

import os
import signal
import sys

from timmy_compactor.sidecar.processes import FD_ENV, STATE_ENV, SUPERVISOR_ENV, exit_with_parent, register

__all__ = ["exit_with_parent", "main"]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdecimal():
        print("usage: python -m timmy_compactor.sidecar.with_parent PARENT_PID COMMAND [ARG...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[1:]
    exit_with_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the script died before the kernel could be asked: nothing to serve
        print(f"{command[0]}: not started, its parent (pid {parent}) is gone", file=sys.stderr)
        return 1
    _register(parent, " ".join([os.path.basename(command[0]), *command[1:2]]))
    os.execvp(command[0], command)
    return 1  # not reached


def _register(parent: int, what: str) -> None:
    """Register this process (the command keeps the PID and the locked descriptor across the exec)."""
    from timmy_compactor.config import load_config
    from timmy_compactor.errors import TimmyError

    try:
        state_dir = load_config().state_dir
        fd = register(state_dir, parent, what)
    except (TimmyError, OSError) as exc:  # the command itself says what is wrong with the config or state dir
        print(f"{what}: not registered as a process of the sidecar ({exc})", file=sys.stderr)
        return
    os.environ.update({FD_ENV: str(fd), SUPERVISOR_ENV: str(parent), STATE_ENV: str(state_dir)})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
