"""Progress of long row loops, for whoever listens: rows done, rate and time left.

A 1M-row run spends minutes in single loops over blocks of rows (exact
searches, the methods' predictions) that would otherwise print nothing.  The
caller who wants to hear of them (the pipeline's tasks) wraps its work in
:func:`reporting`; the library's block loops go through :func:`track`, which
hands back the blocks untouched when no one listens (it only checks, before
each block, whether the process is ending: :func:`stop_all_loops`).  The listener lives in a :class:`~contextvars.ContextVar`:
it covers the code run in the same context (thread or task), not threads the
loops start themselves, nor other processes (a Dask worker sets its own).
Numba kernels cannot call back into Python, so progress is counted per block.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import islice

from threadpoolctl import threadpool_limits

from ..errors import InvalidParameterError

MIN_ROWS_ENV = "PLL_PROGRESS_MIN_ROWS"
DEFAULT_MIN_ROWS = 100_000
"""Loops over fewer rows (``$PLL_PROGRESS_MIN_ROWS`` overrides) stay quiet unless they run longer than the
interval between two lines: most end within seconds, but a crowd of tied rows can make a small search slow."""
DEFAULT_EVERY_SECONDS = 20.0
"""Seconds between two lines of one loop; its last line comes when it ends, whatever the interval."""


def blocks(n_rows, step):
    """Consecutive slices of at most ``step`` rows that cover ``range(n_rows)``."""
    return [slice(s, min(s + step, n_rows)) for s in range(0, n_rows, step)]


BLOCK_BYTES = 32 * 2**20
"""Rows per block are chosen so that a block's work arrays (rows, k, l) stay near this size."""


def row_blocks(n_rows, bytes_per_row):
    """Slices over ``n_rows`` whose per-block memory stays near :data:`BLOCK_BYTES`."""
    return blocks(n_rows, max(1, BLOCK_BYTES // max(int(bytes_per_row), 1)))


@dataclass(frozen=True)
class Progress:
    """Where one loop stands: ``done`` of ``total`` rows after ``seconds``; ``str()`` gives the console line."""

    what: str
    done: int
    total: int
    seconds: float

    @property
    def rate(self):
        """Rows per second so far; None before the clock has moved."""
        return self.done / self.seconds if self.seconds > 0 else None

    @property
    def seconds_left(self):
        """Seconds to the end at the rate so far; None without a rate or before any row is done."""
        rate = self.rate
        return (self.total - self.done) / rate if rate else None

    def __str__(self):
        line = f"{self.what}: {self.done:,} / {self.total:,} rows ({100 * self.done // self.total}%)"
        if self.rate is not None:
            line += f", {self.rate:,.0f} rows/s"
        if self.done == self.total:
            return f"{line}, done in {duration(self.seconds)}"
        if self.seconds_left is not None:
            line += f", about {duration(self.seconds_left)} left"
        return line


def duration(seconds):
    """``seconds`` as people say it: ``40 s``, ``3 min``, ``1 h 5 min``."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def min_rows_from_env():
    """The row threshold of :data:`MIN_ROWS_ENV`, or :data:`DEFAULT_MIN_ROWS` when it is unset."""
    text = os.environ.get(MIN_ROWS_ENV)
    if text is None:
        return DEFAULT_MIN_ROWS
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidParameterError(f"{MIN_ROWS_ENV} must be a non-negative whole number of rows, got {text!r}")
    return value


_REPORTING: ContextVar[bool] = ContextVar("pll_progress_reporting", default=False)
"""True while a loop of this context reports: loops inside it stay quiet.  Per context, not per listener, so that
loops run side by side in threads that share a listener (:func:`contextvars.copy_context`) each report."""


class _Listener:
    """What :func:`reporting` installed: where the lines go, and when."""

    def __init__(self, callback, min_rows, every_seconds, clock, stop):
        self.callback, self.min_rows, self.every_seconds, self.clock = callback, min_rows, every_seconds, clock
        self.stop = stop

    def follow(self, blocks, what):
        total = sum(b.stop - b.start for b in blocks)
        if not (_REPORTING.get() or total == 0):
            blocks = self._report(blocks, what, total)
        return blocks if self.stop is None else self._stoppable(blocks, what)

    def _stoppable(self, blocks, what):
        for b in blocks:
            if self.stop():
                raise Stopped(f"{what}: stopped at row {b.start:,}, as asked")
            yield b

    def _report(self, blocks, what, total):
        """Lines every ``every_seconds``, and at the end of a loop of ``min_rows`` rows or of one that spoke."""
        _REPORTING.set(True)
        try:
            start = last = self.clock()
            done, spoke = 0, total >= self.min_rows
            for b in blocks:
                yield b
                done += b.stop - b.start
                now = self.clock()
                if (done == total and spoke) or now - last >= self.every_seconds:
                    last, spoke = now, True
                    self.callback(Progress(what, done, total, now - start))
        finally:
            _REPORTING.set(False)


class Stopped(Exception):
    """A loop stopped between two blocks because its listener asked it to (another stage of its run failed),
    or because the process is ending (:func:`stop_all_loops`)."""


_LISTENER: ContextVar[_Listener | None] = ContextVar("pll_progress_listener", default=None)

_STOP_ALL = threading.Event()


def stop_all_loops(stop=True):
    """Ask every loop of this process, listened to or not, in any thread, to stop at its next block (False: no longer).

    For a process that is told to end (SIGTERM, Ctrl-C): a per-listener ``stop``
    reaches only the loops run where its listener was set, not those of other
    runs' threads (a grid's executions) or of threads without a listener.
    """
    (_STOP_ALL.set if stop else _STOP_ALL.clear)()


def stopping_all():
    """True once :func:`stop_all_loops` asked every loop to stop."""
    return _STOP_ALL.is_set()


def _until_stopped(row_slices, what):
    for b in row_slices:
        if _STOP_ALL.is_set():
            raise Stopped(f"{what}: stopped at row {b.start:,}, as asked")
        yield b


@contextmanager
def reporting(callback, min_rows=None, every_seconds=DEFAULT_EVERY_SECONDS, clock=time.monotonic, stop=None):
    """Within this block, loops call ``callback`` with a :class:`Progress` as they go.

    Every loop reports every ``every_seconds`` (at block ends); one over at
    least ``min_rows`` rows, or one that has reported, also when it ends: a
    short loop that ends within the interval says nothing.  A loop that runs inside another reporting loop stays quiet:
    the outer one already counts those rows.  With ``stop``, every loop (of
    any size) asks it before each block and raises :class:`Stopped` when it
    answers true: a run whose stage failed ends its other stages within a
    block instead of computing on for minutes.

    Parameters
    ----------
    callback : callable
        Called with one :class:`Progress`, e.g. to log ``str(progress)``.
    min_rows : int, optional
        Default: :data:`MIN_ROWS_ENV` from the environment, else :data:`DEFAULT_MIN_ROWS`.
    every_seconds : float
    clock : callable
        Seconds, monotonic (tests pass their own).
    stop : callable, optional
        Returns true when the loops should stop.

    Examples
    --------
    >>> lines = []
    >>> with reporting(lambda p: lines.append(str(p)), min_rows=10, clock=iter([0, 2, 4]).__next__):
    ...     for rows in track(blocks(20, 10), "squares"):
    ...         pass
    >>> lines
    ['squares: 20 / 20 rows (100%), 5 rows/s, done in 4 s']
    """
    min_rows = min_rows_from_env() if min_rows is None else min_rows
    token = _LISTENER.set(_Listener(callback, min_rows, every_seconds, clock, stop))
    try:
        yield
    finally:
        _LISTENER.reset(token)


def track(row_slices, what):
    """``row_slices`` to loop over, reporting the rows done after each slice when someone listens.

    Parameters
    ----------
    row_slices : list of slice
        Consecutive blocks of rows, e.g. from :func:`blocks`.
    what : str
        Names the loop in the lines, e.g. ``"exact search"``.
    """
    listener = _LISTENER.get()
    return _until_stopped(row_slices if listener is None else listener.follow(row_slices, what), what)


def track_in_parallel(work, row_slices, what, threads=None):
    """Call ``work(block)`` for every block of ``row_slices``, on one thread per CPU, as :func:`track` reports.

    For loops whose blocks write disjoint rows and spend their time in NumPy
    calls that release the GIL (products, partitions).  Each thread gets a
    single-threaded BLAS: with a BLAS thread pool of its own for every small
    product, the pools' threads spin between products on the cores the
    other threads need.  A block counts as done (and the loop may be
    stopped) once it has finished; an error in ``work`` is raised here.

    Parameters
    ----------
    work : callable
        Takes one slice.
    row_slices : list of slice
    what : str
    threads : int, optional
        Default: the CPU count.
    """
    threads = min(len(row_slices), threads or os.cpu_count() or 1)
    if threads <= 1:
        for rows in track(row_slices, what):
            work(rows)
        return
    upcoming = iter(row_slices)
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(threads) as pool:
        running = deque(pool.submit(work, rows) for rows in islice(upcoming, threads))
        for _ in track(row_slices, what):  # the oldest block still running, in order
            running.popleft().result()
            running.extend(pool.submit(work, rows) for rows in islice(upcoming, 1))
