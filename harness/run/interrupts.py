"""SIGINT, taken once. A sweep's time limit is GNU ``timeout --signal=INT``, which signals
the command and then the whole process group: the harness gets the same SIGINT twice, the
second while it is still saving what the first cut: the echo, landing in the handler that
merges a cell's finished processes, would turn finished processes into error and skipped
records. ``sigint_once`` raises
KeyboardInterrupt for a SIGINT as Python does, and ignores one arriving within
``echo_s`` of the last: that is the echo. A later one (a second Ctrl-C) interrupts again.
The worker process ignores SIGINT altogether (harness.run.worker): its parent stops it.
"""
from __future__ import annotations

import contextlib
import signal
import time

ECHO_S = 2.0   # timeout's two signals are microseconds apart; a person's second Ctrl-C is not


@contextlib.contextmanager
def sigint_once(echo_s: float = ECHO_S):
    """Within the block, a SIGINT raises KeyboardInterrupt unless another came within
    ``echo_s`` before it. Restores the previous handler after."""
    last: list[float] = []

    def handler(signum, frame):
        now = time.monotonic()
        if last and now - last[0] < echo_s:
            return
        last[:] = [now]
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class SigintHold:
    """A SIGINT that arrives within the block waits: it is delivered, to the handler that was
    in place, as the block ends or as a ``released()`` block inside it begins. Python raises
    KeyboardInterrupt at whatever line runs when the signal comes; a loop that keeps each
    result (a record written to its file, then logged) holds SIGINT around that work and
    releases it only while it waits on something slow (a case, a tracking server), so an
    interrupt lands where the loop catches it and never between a result and its keeping:
    nothing lost, nothing written twice. A handler, not the signal mask: the mask is per
    thread, and the threads torch and MLflow start would take the signal instead."""

    def __init__(self):
        self.previous = None
        self.pending = False

    def _hold(self, signum, frame) -> None:
        self.pending = True

    def _deliver(self) -> None:
        """The previous handler in place; a SIGINT that waited sent again, to it."""
        signal.signal(signal.SIGINT, self.previous)
        if self.pending:
            self.pending = False
            signal.raise_signal(signal.SIGINT)

    def __enter__(self) -> "SigintHold":
        self.previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def __exit__(self, *exc) -> None:
        self._deliver()

    @contextlib.contextmanager
    def released(self):
        """Within the block a SIGINT is handled as before the hold (and one that waited, at
        its start); held again after it."""
        try:
            self._deliver()
            yield
        finally:
            signal.signal(signal.SIGINT, self._hold)
