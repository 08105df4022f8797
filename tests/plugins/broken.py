"""Deliberately broken impls of rmsnorm: each must be caught by the harness's checks.

    HARNESS_PLUGINS=tests.plugins.broken harness op=rmsnorm impl=broken
"""
import atexit
import os
import time

import torch
import torch.nn.functional as F

from harness.measure.faultsuite import Expect
from harness.registry import Framework, impl


class Broken(Framework):
    name = "broken"


# How the harness must label each (harness.measure.faultsuite); 'lingers' is right, only slow to exit.
EXPECTED = {
    ("rmsnorm", "broken", "wrong"): Expect("fail", "outside tolerance"),
    ("rmsnorm", "broken", "unwritten_tail"): Expect("fail", "NaN where a number was due"),
    ("rmsnorm", "broken", "nondeterministic"): Expect("ok", field="deterministic", value=False),
    ("rmsnorm", "broken", "batch_variant"): Expect("ok", field="batch_invariant", value=False),
    ("rmsnorm", "broken", "raises"): Expect("error", "this kernel always fails"),
    ("rmsnorm", "broken", "crashes"): Expect("crash", "exit code 139"),
    ("rmsnorm", "broken", "hangs"): Expect("timeout", "case_timeout_s"),
    ("rmsnorm", "broken", "illegal_address"): Expect(("error", "crash"), gpu_only=True),
}


def _rmsnorm(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


@impl("rmsnorm", "broken", variant="wrong")
def wrong(x, weight, eps, out):
    """Forgets the weight: a plain wrong answer."""
    return lambda: out.copy_(F.rms_norm(x, (x.shape[-1],), None, eps))


@impl("rmsnorm", "broken", variant="unwritten_tail")
def unwritten_tail(x, weight, eps, out):
    """Writes every row but the last element of the last row."""
    def launch():
        y = _rmsnorm(x, weight, eps)
        flat_out, flat_y = out.view(-1), y.view(-1)
        flat_out[:-1].copy_(flat_y[:-1])
    return launch


@impl("rmsnorm", "broken", variant="nondeterministic")
def nondeterministic(x, weight, eps, out):
    """Right to within a few ulps, but the last bit changes from launch to launch."""
    def launch():   # the jitter is one fp32 ulp, before rounding to x's dtype: within tolerance in any
        y = F.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps)
        jitter = torch.randint(0, 2, y.shape, device=y.device).to(y.dtype)
        out.copy_(torch.nextafter(y, y + jitter))
    return launch


@impl("rmsnorm", "broken", variant="batch_variant")
def batch_variant(x, weight, eps, out):
    """Right, but the bits depend on how many rows share the launch (the sum's order does)."""
    rows = x.shape[0]

    def launch():
        xf = x.float()
        if rows % 2:   # odd batches sum the squares in another order
            ms = xf.square().flip(-1).cumsum(-1)[..., -1:] / x.shape[-1]
        else:
            ms = xf.square().mean(-1, keepdim=True)
        out.copy_((xf * torch.rsqrt(ms + eps) * weight.float()).to(x.dtype))
    return launch


@impl("rmsnorm", "broken", variant="raises")
def raises(x, weight, eps, out):
    def launch():
        raise RuntimeError("this kernel always fails")
    return launch


@impl("rmsnorm", "broken", variant="crashes")
def crashes(x, weight, eps, out):
    """Kills its process, as a segfaulting extension would."""
    return lambda: os._exit(139)


@impl("rmsnorm", "broken", variant="hangs")
def hangs(x, weight, eps, out):
    return lambda: time.sleep(3600)


@impl("rmsnorm", "broken", variant="lingers")
def lingers(x, weight, eps, out):
    """Right, but its process takes a minute to exit, as one that shuts down a pool of
    compile processes at exit (torch.compile's) can."""
    atexit.register(time.sleep, 60)
    return lambda: out.copy_(_rmsnorm(x, weight, eps))


@impl("rmsnorm", "broken", variant="illegal_address")
def illegal_address(x, weight, eps, out):
    """Writes far outside its buffer on the GPU: the CUDA context is lost for the process."""
    import triton
    import triton.language as tl

    @triton.jit
    def _scribble(y_ptr):
        tl.store(y_ptr + (1 << 40), 1.0)

    return lambda: _scribble[(1,)](out)
