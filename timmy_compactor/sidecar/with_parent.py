"""Run a command that exits with the script that started it: `python -m
timmy_compactor.sidecar.with_parent PARENT_PID COMMAND [ARG…]`.

`huey_consumer.sh` starts the consumer and the watcher through this. On Linux the command gets
SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`, kept across the exec), so a `kill -9` of the
script leaves no consumer or watcher behind to hold the sidecar's lock and refuse the restart (the
consumer stops its workers on SIGTERM; the watcher releases the lock). If the parent is already gone
before that is set, the command is not run at all. Elsewhere the command runs as is.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def exit_with_parent() -> bool:
    """Ask the kernel to send SIGTERM to this process when its parent dies (Linux); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)) == 0


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdecimal():
        print("usage: python -m timmy_compactor.sidecar.with_parent PARENT_PID COMMAND [ARG...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[1:]
    exit_with_parent()
    if os.getppid() != parent:  # the script died before the kernel could be asked: nothing to serve
        print(f"{command[0]}: not started, its parent (pid {parent}) is gone", file=sys.stderr)
        return 1
    os.execvp(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
