"""Thresholds of glibc's allocator for a ``pll`` process, so that a run's peak memory is its live data.

Below its mmap threshold glibc serves a request from its heaps, and it raises that threshold to the
size of each larger block it frees (up to 32 MiB): once a run has freed one array of some MiB, its
blocks of rows (a few MiB each) come from heaps, where freed space stays with the process for as long
as anything allocated later sits above it.  Stages running side by side interleave such blocks, so
what they free is rarely returned.  Fixed thresholds keep every block of 1 MiB or more in a mapping of
its own, returned to the system when freed.  Measured with ``benchmarks/scale.py``: at 1,000,000 rows
the peak went from 8.48 to 7.38 GiB; at 100,000 rows from 2.69–2.77 to 2.41 GiB, for the same CPU
time within the noise of three runs (167–204 s).
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt's parameters (malloc.h) -> (the value for pll, the environment variable that sets it at start-up)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
SETTINGS = {
    M_MMAP_THRESHOLD: (1 << 20, "MALLOC_MMAP_THRESHOLD_"),
    M_TRIM_THRESHOLD: (16 << 20, "MALLOC_TRIM_THRESHOLD_"),
    M_ARENA_MAX: (2, "MALLOC_ARENA_MAX"),
}


def return_freed_memory() -> bool:
    """Set :data:`SETTINGS` in this process, each unless the user's environment sets it; whether glibc took them.

    Call it first thing, before threads allocate.  A C library without
    ``mallopt`` (not glibc: macOS, musl's stub) is left as it is.
    """
    if not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return all(mallopt(param, value) == 1 for param, (value, variable) in SETTINGS.items() if variable not in os.environ)
