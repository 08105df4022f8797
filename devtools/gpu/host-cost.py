"""Does a framework loaded into the case process slow the harness's timer? (issue 32: a Triton
tuning key's measures took 5x longer after CuPy, Numba, torch.compile and Liger had run in
the process.) Times one small kernel by the tuner's budget, then loads each framework in turn
(import and one call) and times it again, printing the wall seconds of a measure, its
samples, late samples, the host's time to queue a sample, and the GC's state."""
import gc
import time

import torch

from harness import tuner
from harness.timing import CudaTimer, TimingBudget

dev = torch.device("cuda", 0)
timer = CudaTimer(dev)
timer.MIN_SPIN_US = tuner.EFFORTS["fast"].min_spin_us
x = torch.randn(16, 4096, device=dev)
out = torch.empty_like(x)


def launch():
    torch.mul(x, 2.0, out=out)


def report(label):
    budget = TimingBudget(warmup_ms=2, min_samples=10, max_samples=300, max_seconds=0.15, graph_below_bytes=0,
                          target_interval=0.02)
    walls = []
    for _ in range(5):
        began = time.perf_counter()
        t = timer.time(launch, budget, 1 << 30)
        walls.append(time.perf_counter() - began)
    host = timer.host_us(launch)
    began = time.perf_counter()
    gc.collect()
    print(f"{label:28} measure {min(walls) * 1e3:6.1f}-{max(walls) * 1e3:6.1f} ms, samples {t.samples}, "
          f"late {t.late_samples}, host {host:6.1f} us/sample, gc objects {len(gc.get_objects())}, "
          f"full gc {(time.perf_counter() - began) * 1e3:.0f} ms, gen2 runs {gc.get_stats()[2]['collections']}", flush=True)


report("torch only")
import triton  # noqa: E402,F401
report("+ triton")
import cupy  # noqa: E402
cupy.asarray(torch.ones(4, device=dev)).sum()
report("+ cupy")
from numba import cuda  # noqa: E402


@cuda.jit
def twice(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] *= 2


twice[1, 32](cuda.as_cuda_array(torch.ones(32, device=dev)))
report("+ numba")
f = torch.compile(lambda a: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6), dynamic=False)
f(x)
report("+ torch.compile")
from liger_kernel.ops.rms_norm import rms_norm_forward  # noqa: E402
rms_norm_forward(torch.randn(64, 4096, device=dev), torch.ones(4096, device=dev), 1e-6, 0.0, "llama", None)
report("+ liger")
gc.freeze()
report("+ gc.freeze()")
