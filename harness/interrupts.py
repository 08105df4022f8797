"""SIGINT, taken once. A sweep's time limit is GNU ``timeout --signal=INT``, which signals
the command and then the whole process group: the harness gets the same SIGINT twice, the
second while it is still saving what the first cut: the echo, landing in the handler that
merges a cell's finished processes, would turn finished processes into error and skipped
records. ``sigint_once`` raises
KeyboardInterrupt for a SIGINT as Python does, and ignores one arriving within
``echo_s`` of the last: that is the echo. A later one (a second Ctrl-C) interrupts again.
The worker process ignores SIGINT altogether (harness.worker): its parent stops it.
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
