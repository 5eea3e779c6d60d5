"""A tracked run's lifetime: an error ends its MLflow run FAILED, an interruption KILLED; and how a command ends
when it is told to (SIGTERM, Ctrl-C): within :data:`STOP_SECONDS`, whatever its threads are doing."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager

from prefect.context import FlowRunContext
from prefect.exceptions import TerminationSignal

from pll.utils.progress import Stopped, stop_all_loops, stopping_all
from pll_pipeline.tasks.progress import stop_stages
from pll_pipeline.tracking.runs import end_run

INTERRUPTIONS = (KeyboardInterrupt, TerminationSignal)
"""Ctrl-C, and SIGTERM as Prefect raises it (a worker cancelling a flow run, ``systemd stop``, ``docker stop``)."""

STOP_SECONDS = 10
"""A command told to end (SIGTERM, SIGINT) has exited this long after the signal at the latest."""
GRACE_SECONDS = 6
"""How long the orderly way out may take (stages stop at their next block, runs end KILLED, servers stop) before
the process is ended by force; the rest of :data:`STOP_SECONDS` is for ending the runs left open."""

_OPEN_RUNS: dict[str, str] = {}  # run id -> tracking URI, of the runs inside ending_on_error in this process
_OPEN_LOCK = threading.Lock()


@contextmanager
def ending_on_error(tracking_uri: str, run_id: str):
    """Within this block, an error ends MLflow run ``run_id`` FAILED and an interruption ends it KILLED.

    An interruption also asks this flow run's stages to stop at their next
    block of rows (:func:`pll_pipeline.tasks.progress.stop_stages`): without that, the
    task runner waits for them to compute to the end before the process can
    exit.  A stage stopped because the process is ending (a grid's execution
    in a thread that sees no signal) counts as an interruption too.
    """
    with _OPEN_LOCK:
        _OPEN_RUNS[run_id] = tracking_uri
    try:
        yield
    except BaseException as exc:
        interrupted = isinstance(exc, INTERRUPTIONS) or (isinstance(exc, Stopped) and stopping_all())
        flow = FlowRunContext.get()
        if interrupted and flow is not None:
            stop_stages(flow.flow_run.id)
        end_run(tracking_uri, run_id, "KILLED" if interrupted else "FAILED")
        raise
    finally:
        with _OPEN_LOCK:
            _OPEN_RUNS.pop(run_id, None)


SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class Interruption:
    """The first SIGTERM or SIGINT a command received, and the one line that says so (said once)."""

    def __init__(self, command: str):
        self.command, self.signum, self.raised = command, None, False
        self._said, self._heard = threading.Lock(), threading.Lock()

    def hear(self, signum: int):
        """Note ``signum`` unless a signal was heard before; ask every row loop to stop."""
        with self._heard:
            self.signum = self.signum or signum
        stop_all_loops()

    def say(self, signum: int) -> int:
        """Print the line for ``signum`` unless it was printed already; the exit status for it (130, 143)."""
        if self._said.acquire(blocking=False):
            verb = "interrupted" if signum == signal.SIGINT else "terminated"
            print(f"pll: {verb} ({SIGNAL_NAMES.get(signum, signum)}): {self.command} stopped; its MLflow runs are "
                  "marked KILLED", file=sys.stderr, flush=True)
        return 128 + signum

    def leave(self, signum: int):
        """Say the line and end the process now, with status 130 or 143.

        Not by returning: the interpreter's exit would wait for stages that no
        stop reaches (an index build) and run exit hooks that may wait on them.
        The temporary server's watchdog and the Dask workers' own stop them.
        """
        code = self.say(signum)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@contextmanager
def interruptible(command: str):
    """Within this block SIGTERM and SIGINT end the command in order, or by force after :data:`GRACE_SECONDS`.

    The first signal raises in the main thread (:class:`KeyboardInterrupt`, or
    Prefect's :class:`~prefect.exceptions.TerminationSignal`, whose handler
    Prefect installs over this one while a flow runs), and every row loop of
    the process stops at its next block (:func:`pll.utils.progress.stop_all_loops`).
    A watcher thread hears of the signal through Python's wakeup descriptor,
    written by the C-level handler whichever Python handler is installed and
    whatever the main thread is doing (a numba kernel delays Python handlers;
    a stage outside any row loop, such as an index build, cannot be stopped,
    and the task runner waits for it).  If the process is still there
    :data:`GRACE_SECONDS` later, the watcher ends the runs still open KILLED,
    prints the line and exits (:meth:`Interruption.leave`, which the command
    calls itself once the interruption reaches it).  Further
    signals are ignored: the way out is under way, and a second Ctrl-C would
    only interrupt it with a traceback.  Yields the :class:`Interruption`.
    """
    interruption = Interruption(command)
    if threading.current_thread() is not threading.main_thread():
        yield interruption
        return

    def on_signal(signum, frame):
        if interruption.raised:
            return
        interruption.raised = True
        interruption.hear(signum)
        raise KeyboardInterrupt if signum == signal.SIGINT else TerminationSignal(signal=signum)

    receiver, sender = socket.socketpair()
    sender.setblocking(False)
    previous = {s: signal.signal(s, on_signal) for s in SIGNAL_NAMES}
    previous_fd = signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(receiver, interruption), name="pll-interruption", daemon=True)
    watcher.start()
    try:
        yield interruption
    finally:
        if interruption.signum is None:
            signal.set_wakeup_fd(previous_fd)
            for s, handler in previous.items():
                signal.signal(s, handler)
            sender.send(b"\0")  # the watcher's cue to end
            watcher.join()
            receiver.close()
            sender.close()
        # Interrupted: the handlers stay (they ignore further signals) and the watcher keeps its deadline, which
        # also covers the interpreter's exit, where it waits for the task runner's threads.


def _watch(receiver: socket.socket, interruption: Interruption):
    """Wait for the first SIGTERM/SIGINT (or the cue 0 to end); give the orderly way out its time; then end."""
    while (signum := receiver.recv(1)[0]) not in SIGNAL_NAMES:
        if signum == 0:
            return
    # The main thread's handler may not have run yet (a kernel holds it): the loops of other threads stop now.
    interruption.hear(signum)
    time.sleep(GRACE_SECONDS)
    _end_open_runs(STOP_SECONDS - GRACE_SECONDS - 1)
    interruption.leave(interruption.signum)


def _end_open_runs(timeout: float):
    """End the runs still open KILLED, giving up after ``timeout`` seconds (a tracking server may not answer)."""
    with _OPEN_LOCK:
        runs = dict(_OPEN_RUNS)

    def end_all():
        for run_id, uri in runs.items():
            try:
                end_run(uri, run_id, "KILLED")
            except Exception:  # noqa: BLE001 - the process ends either way; the run stays RUNNING
                pass

    ender = threading.Thread(target=end_all, daemon=True)
    ender.start()
    ender.join(timeout)
