"""A copy that says what it is doing while it binds, as a compiler does
(harness.run.progress), and takes a moment to do it.

    HARNESS_PLUGINS=tests.plugins.phases harness op=copy impl=phases
"""
import time

from harness.run import progress
from harness.registry import OURS, Framework, impl

SAID = "compiling phases copy: 3 kernels"


class Phases(Framework):
    name = "phases"
    role = OURS


@impl("copy", "phases")
def bind(x, out):
    progress.phase(SAID)
    time.sleep(0.2)
    return lambda: out.copy_(x)
