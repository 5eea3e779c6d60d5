"""Helpers for tests that start real server processes on loopback."""

import socket
import subprocess


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
