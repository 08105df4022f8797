"""Numba LayerNorm: a group of threads per row (several rows a block when short; rows.py),
UNROLL loads in flight per thread, statistics in fp32, the row kept in shared memory for
its later passes where it fits (x read once), else read again (from L2); 2·R·H·s + 2·H·s bytes.
  welford:  each step's UNROLL values as one (count, mean, M2) state, merged into the thread's
            running state, the states merged across the group (Chan et al.): one pass for
            the statistics, one division per step, not per element.
  two_pass: the mean, then sum((x - mean)²).
  naive:    E[x²] - E[x]² in one pass: the negative control the large_mean inputs must fail.
The group (and so the bits) is tuned per row length and dtype."""
import numpy as np
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import group_sum, group_welford, load, rsqrt, store, welford_merge
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import UNROLL, grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import Launch, view

WELFORD, TWO_PASS, NAIVE = 0, 1, 2
VARIANTS = {"welford": WELFORD, "two_pass": TWO_PASS, "naive": NAIVE}


@cuda.jit(cache=True)
def _layernorm(x, weight, bias, y, rows, cols, eps, group, cached, algorithm):
    cache = cuda.shared.array(0, float32)
    values = cuda.local.array(UNROLL, float32)
    tid = cuda.threadIdx.x
    lane, slot = tid % group, tid // group
    row = cuda.blockIdx.x * (cuda.blockDim.x // group) + slot
    end = cols if row < rows else 0      # a row past the batch still joins the block's reductions
    base = slot * cols
    n, mean, m2 = float32(0), float32(0), float32(0)     # naive: n, sum, sum of squares
    c = lane
    while c < end:
        count = 0
        for u in range(UNROLL):
            cc = c + u * group
            if cc < end:
                values[u] = load(x, (row, cc))
                count += 1
            else:
                values[u] = float32(0)
        step_sum = float32(0)
        for u in range(UNROLL):
            step_sum += values[u]
            if cached and c + u * group < end:
                cache[base + c + u * group] = values[u]
        if algorithm == WELFORD:
            step_mean = step_sum / float32(count)
            step_m2 = float32(0)
            for u in range(UNROLL):   # all UNROLL, masked: a constant trip count keeps values in registers
                if c + u * group < end:
                    deviation = values[u] - step_mean
                    step_m2 += deviation * deviation
            n, mean, m2 = welford_merge(n, mean, m2, float32(count), step_mean, step_m2)
        elif algorithm == NAIVE:
            mean += step_sum
            for u in range(UNROLL):
                m2 += values[u] * values[u]
        else:
            mean += step_sum
        c += UNROLL * group
    if algorithm == WELFORD:
        n, mean, m2 = group_welford(n, mean, m2, group)
        variance = m2 / float32(cols)
    elif algorithm == NAIVE:
        mean = group_sum(mean, group) / float32(cols)
        variance = group_sum(m2, group) / float32(cols) - mean * mean
    else:
        mean = group_sum(mean, group) / float32(cols)
        squares = float32(0)
        c = lane
        while c < end:
            for u in range(UNROLL):
                cc = c + u * group
                if cc < end:
                    values[u] = cache[base + cc] if cached else load(x, (row, cc))
            for u in range(UNROLL):
                if c + u * group < end:
                    deviation = values[u] - mean
                    squares += deviation * deviation
            c += UNROLL * group
        variance = group_sum(squares, group) / float32(cols)
    rstd = rsqrt(variance + eps)
    c = lane
    while c < end:
        for u in range(UNROLL):
            cc = c + u * group
            if cc < end:
                values[u] = cache[base + cc] if cached else load(x, (row, cc))
        for u in range(UNROLL):
            cc = c + u * group
            if cc < end:
                store(y, (row, cc), (values[u] - mean) * rstd * load(weight, cc) + load(bias, cc))
        c += UNROLL * group


def _register(variant: str, algorithm: int):
    @impl("layernorm", "numba", variant=variant)
    def bind(x, weight, bias, eps, out):
        cols = x.shape[1]

        def make(config, args, rows):
            xs, w, b, y = args
            return Launch(_layernorm, grid(config, rows), config["threads"],
                          (view(xs), view(w), view(b), view(y), rows, cols, np.float32(eps), config["group"],
                           config["cached"], algorithm), shared_bytes(config, cols), device=x.device)
        return row_launcher(("layernorm", variant), f"layernorm {variant}", (x, weight, bias, out),
                            scratch(cols, x.dtype, x.device, 1, 2), make, cacheable=True)
    return bind


for _variant, _algorithm in VARIANTS.items():
    _register(_variant, _algorithm)
