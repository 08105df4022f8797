"""Numba softmax over the last dim: a group of threads per row (several rows a block when
short; rows.py), UNROLL loads in flight per thread, exp in fp32; 2·R·C·s bytes.
  three_pass: max, sum of exp(x - max), output: x read three times (the later reads mostly
              from L2).
  online:     the (max, sum) pair rescaled as the max grows, merged across the group by the
              same rule (device.online_merge): x read twice.
  on_chip:    the row kept in shared memory as fp32 between its passes: x read once (rows up
              to 48 KiB of fp32 a block; a longer row is an error, as it is no on-chip row).
The group (and so the bits) is tuned per row length and dtype."""
import math

from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import NEG_INF, group_max, group_online, group_sum, load, max_nan, online_add, store
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import UNROLL, grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import Launch, view

THREE_PASS, ONLINE, ON_CHIP = 0, 1, 2
VARIANTS = {"three_pass": THREE_PASS, "online": ONLINE, "on_chip": ON_CHIP}


@cuda.jit(cache=True)
def _softmax(x, y, rows, cols, group, cached, algorithm):
    cache = cuda.shared.array(0, float32)
    values = cuda.local.array(UNROLL, float32)
    tid = cuda.threadIdx.x
    lane, slot = tid % group, tid // group
    row = cuda.blockIdx.x * (cuda.blockDim.x // group) + slot
    end = cols if row < rows else 0      # a row past the batch still joins the block's reductions
    base = slot * cols
    # First pass: the max (and, online, the sum of exp(x - max) as the max grows).
    m, d = NEG_INF, float32(0)
    c = lane
    while c < end:
        for u in range(UNROLL):
            cc = c + u * group
            values[u] = load(x, (row, cc)) if cc < end else NEG_INF
        for u in range(UNROLL):
            if algorithm == ONLINE:
                m, d = online_add(m, d, values[u])
            else:
                m = max_nan(m, values[u])
            if cached and c + u * group < end:
                cache[base + c + u * group] = values[u]
        c += UNROLL * group
    if algorithm == ONLINE:
        m, d = group_online(m, d, group)
    else:
        m = group_max(m, group)
        # Second pass: the sum of exp(x - max), from the cache or from x again.
        c = lane
        while c < end:
            for u in range(UNROLL):
                cc = c + u * group
                if cc < end:
                    values[u] = cache[base + cc] if cached else load(x, (row, cc))
            for u in range(UNROLL):
                cc = c + u * group
                if cc < end:
                    e = math.exp(values[u] - m)
                    d += e
                    if cached:
                        cache[base + cc] = e
            c += UNROLL * group
        d = group_sum(d, group)
    # Last pass: exp(x - max) / sum.
    scale = float32(1) / d
    c = lane
    while c < end:
        for u in range(UNROLL):
            cc = c + u * group
            if cc < end:
                values[u] = cache[base + cc] if cached else math.exp(load(x, (row, cc)) - m)
        for u in range(UNROLL):
            cc = c + u * group
            if cc < end:
                store(y, (row, cc), values[u] * scale)
        c += UNROLL * group


def _register(variant: str, algorithm: int):
    on_chip = algorithm == ON_CHIP

    @impl("softmax", "numba", variant=variant)
    def bind(x, out):
        cols = x.shape[1]

        def make(config, args, rows):
            if on_chip and not config["cached"]:
                raise ValueError(f"softmax on_chip: a {cols}-column row does not fit in 48 KiB of shared memory "
                                 "as fp32; the three_pass and online variants take it")
            xs, y = args
            return Launch(_softmax, grid(config, rows), config["threads"],
                          (view(xs), view(y), rows, cols, config["group"], config["cached"], algorithm),
                          shared_bytes(config, cols), device=x.device)
        return row_launcher(("softmax", variant), f"softmax {variant}", (x, out),
                            scratch(cols, x.dtype, x.device, 1, 0), make, cacheable=on_chip)
    return bind


for _variant, _algorithm in VARIANTS.items():
    _register(_variant, _algorithm)
