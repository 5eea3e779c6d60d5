"""Helpers for tests that start real server processes on loopback, and that look for what a process left running."""

import socket
import subprocess
import time

import psutil  # a dependency of distributed


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(processes):
    """Terminate ``processes`` (last started first), killing any that do not exit within 30 s."""
    for proc in reversed(processes):
        proc.terminate()
    for proc in processes:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def descendants(pid):
    """The processes that ``pid`` started and theirs, as ``psutil.Process`` objects (empty once ``pid`` is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _running(process):
    """True unless ``process`` exited; a zombie, exited but not reaped by its new parent yet, counts as exited."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def still_running(processes, timeout):
    """Those of ``processes`` that are still running after waiting up to ``timeout`` s for all of them to exit."""
    deadline = time.monotonic() + timeout
    while (alive := [p for p in processes if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive
