"""The child processes ``pll`` starts (the MLflow UI's server, Prefect's temporary server): started in a group of
their own, waited for until they answer, stopped with their group, and tied to ``pll`` by a watchdog.

The watchdog stops a child process when the process that started it dies, even by SIGKILL.

SIGKILL runs no cleanup in the killed process (no ``finally``, no ``atexit``), so a server that
``pll`` starts would run on for good.  :func:`tie` starts a small process that waits for whichever
of the two exits first, ``pll`` or the child; if ``pll`` does, it stops the child (SIGTERM, then
SIGKILL after ``GRACE_SECONDS``).  It watches both through pidfds (Linux 5.3+), which cannot point
at a reused process id.  ``prctl(PR_SET_PDEATHSIG)`` would need our own ``Popen`` of Prefect's
server command and fires when the *thread* that forked exits, not the process.

Dask's worker processes need no watchdog: they exit by themselves once their parent is gone.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import suppress

from pll.errors import PllError

GRACE_SECONDS = 5
"""How long the child may take to stop after SIGTERM (Prefect's own ``stop()`` waits as long)."""
GROUP_GRACE_SECONDS = 10
"""How long a server's process group may take to stop after SIGTERM before SIGKILL."""


class ServerError(PllError):
    """A server that ``pll`` started exited, or did not answer in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_group(command: list[str], log_path: str, env: dict | None = None) -> subprocess.Popen:
    """``command`` in a process group (session) of its own, its output appended to ``log_path``."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)


def wait_until_healthy(process: subprocess.Popen, health_url: str, what: str, log_path: str, timeout: float) -> None:
    """Return once ``health_url`` answers 200; :class:`ServerError` if ``process`` exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"{what} exited with status {process.returncode} (its log: {log_path})")
        with suppress(OSError):
            with urllib.request.urlopen(health_url, timeout=2) as response:
                if response.status == 200:
                    return
        time.sleep(0.5)
    raise ServerError(f"{what} did not answer within {timeout:.0f} s (its log: {log_path})")


def stop_group(process: subprocess.Popen, grace: float = GROUP_GRACE_SECONDS) -> None:
    """SIGTERM to the process's group, SIGKILL to what is left after ``grace`` seconds."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    with suppress(ProcessLookupError):  # a server may outlive the command that started it (uvicorn)
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def tie(child: subprocess.Popen) -> subprocess.Popen | None:
    """Start the watchdog that stops ``child`` once this process dies; it exits by itself when ``child`` does.

    Returns the watchdog's process, or None where there are no pidfds (not Linux): there ``child``
    stops only when this process exits normally.
    """
    if not hasattr(os, "pidfd_open"):
        return None
    # ``child`` is not reaped yet, so its pid still names it.
    child_fd = os.pidfd_open(child.pid)
    try:
        return subprocess.Popen([sys.executable, "-m", __name__, str(os.getpid()), str(child_fd)],
                                pass_fds=[child_fd], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    finally:
        os.close(child_fd)


def _parent_exit(parent_pid: int) -> int | None:
    """A pidfd that turns readable when ``parent_pid``, this process's parent, exits; None if it is gone already."""
    try:
        fd = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        return None
    # Still our parent after the pidfd was opened: then the pidfd names the parent, not a reused id.
    return fd if os.getppid() == parent_pid else None


def watch(parent_pid: int, child_fd: int) -> None:
    """Wait until the parent or the child exits; in the first case stop the child."""
    # Ctrl-C and a closed terminal reach the whole process group: the parent decides what its child does then.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    parent_fd = _parent_exit(parent_pid)
    if parent_fd is not None:
        ready, _, _ = select.select([parent_fd, child_fd], [], [])
        if child_fd in ready:
            return
    with suppress(ProcessLookupError):
        signal.pidfd_send_signal(child_fd, signal.SIGTERM)
        if not select.select([child_fd], [], [], GRACE_SECONDS)[0]:
            signal.pidfd_send_signal(child_fd, signal.SIGKILL)


if __name__ == "__main__":
    watch(int(sys.argv[1]), int(sys.argv[2]))
