"""RMSNorm impls that break the launcher's contract (harness.measure.integrity) while writing the
right answer: each must be caught, labelled with the contract it breaks.

    HARNESS_PLUGINS=tests.plugins.faults harness op=rmsnorm impl=faults
    harness-faults                 # every planted fault and every honest impl, with the rates
"""
import torch
import torch.nn.functional as F

from harness.measure.faultsuite import Expect
from harness.registry import Framework, impl


class Faults(Framework):
    name = "faults"


def _rmsnorm(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


STREAM = "runs work off the current stream"
# (op, impl, variant) -> how the harness must label it (harness.measure.faultsuite)
STALE = "with x refilled in place after bind (fresh values, seed"
EXPECTED = {("rmsnorm", "faults", variant): exp for variant, exp in {
    "private_stream": Expect("invalid", STREAM, gpu_only=True),
    "legacy_stream": Expect("invalid", "ran on the legacy default stream", gpu_only=True),
    "precomputed": Expect("invalid", STALE),
    "copies_input": Expect("invalid", STALE),
    "first_call_only": Expect("invalid", "does not recompute"),
    "writes_input": Expect("invalid", "writes its inputs: x"),
    "skips_when_timed": Expect("invalid", "physically impossible", gpu_only=True),
}.items()}


@impl("rmsnorm", "faults", variant="private_stream")
def private_stream(x, weight, eps, out):
    """Runs on a stream of its own that waits for the current one; the current stream's
    events around the launch then time nothing."""
    side = torch.cuda.Stream(x.device)

    def launch():
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            out.copy_(_rmsnorm(x, weight, eps))
    return launch


@impl("rmsnorm", "faults", variant="legacy_stream")
def legacy_stream(x, weight, eps, out):
    """Runs on the legacy default stream, as CuPy and Numba do when no stream is passed."""
    def launch():
        with torch.cuda.stream(torch.cuda.default_stream(x.device)):
            out.copy_(_rmsnorm(x, weight, eps))
    return launch


@impl("rmsnorm", "faults", variant="precomputed")
def precomputed(x, weight, eps, out):
    """Computes the answer in bind; the launcher only copies it out (a launch at copy speed)."""
    answer = _rmsnorm(x, weight, eps)
    return lambda: out.copy_(answer)


@impl("rmsnorm", "faults", variant="copies_input")
def copies_input(x, weight, eps, out):
    """Takes a copy of x in bind (as a conversion to another framework that is not
    zero-copy would) and computes from the copy."""
    x_copy = x.clone()
    return lambda: out.copy_(_rmsnorm(x_copy, weight, eps))


@impl("rmsnorm", "faults", variant="first_call_only")
def first_call_only(x, weight, eps, out):
    """Computes on its first call only, then returns at once (a cache keyed by pointer)."""
    done = []

    def launch():
        if not done:
            out.copy_(_rmsnorm(x, weight, eps))
            done.append(True)
    return launch


@impl("rmsnorm", "faults", variant="writes_input")
def writes_input(x, weight, eps, out):
    """Right output, but uses x's first element as scratch space afterwards."""
    def launch():
        out.copy_(_rmsnorm(x, weight, eps))
        x.view(-1)[:1].add_(1)
    return launch


# More launches than the harness makes on one bound launcher before it times (the checked
# launch, the contract's four, determinism's 10 in the sweeps and the suite, the full batch):
# the fault suite's timing then warms up past it and samples only empty launches.
HONEST_CALLS = 32


@impl("rmsnorm", "faults", variant="skips_when_timed")
def skips_when_timed(x, weight, eps, out):
    """Right for its first HONEST_CALLS launches, which every check sees, then does nothing:
    the timed launches queue no work. The physical limit catches it beyond the L2, the refill
    after timing at any size (tests/test_honesty.py shows it on a CPU)."""
    calls = [0]

    def launch():
        calls[0] += 1
        if calls[0] <= HONEST_CALLS:
            out.copy_(_rmsnorm(x, weight, eps))
    return launch
