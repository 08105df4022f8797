"""A copy with planted faults, for the nightly job's regression tests (HARNESS_PLUGINS).

Each launch sleeps HARNESS_PLANTED_MS (default 2) milliseconds, plus HARNESS_PLANTED_EXTRA_MS
(a planted slowdown); HARNESS_PLANTED_WRONG=1 plants a wrong result. Read at bind time,
so that each night's jobs (separate Slurm jobs) see their own environment."""
import os
import time

from harness.registry import Framework, impl


class Planted(Framework):
    name = "planted"


@impl("copy", "planted")
def bind(x, out):
    delay = (float(os.environ.get("HARNESS_PLANTED_MS", "2")) +
             float(os.environ.get("HARNESS_PLANTED_EXTRA_MS", "0"))) / 1000
    wrong = os.environ.get("HARNESS_PLANTED_WRONG") == "1"

    def launch():
        time.sleep(delay)
        out.copy_(x)
        if wrong:
            out.view(-1)[-1] = 42.0
    return launch
