"""Numba chain y = silu(rmsnorm(x; g)) · u + r.
  fused:   one kernel: the row's rsqrt(mean(x²) + eps) (the Numba RMSNorm's first pass, the
           row kept in shared memory where it fits), then silu(n)·u + r per element in fp32,
           rounded once: 4·R·H·s + H·s bytes.
  unfused: the Numba RMSNorm, then silu, mul and add as elementwise kernels, each
           intermediate rounded to the dtype, written and read back (~10·R·H·s bytes)."""
import numpy as np
import torch
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks._launch import configured, scratch
from impls._frameworks.numba.device import load, silu, store
from impls._frameworks.numba.launch import UNROLL as FLAT_UNROLL
from impls._frameworks.numba.launch import blocks_for, tuned, with_grid
from impls._frameworks.numba.rows import UNROLL, grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import SIMULATED, Launch, view
from impls.rmsnorm.numba import bind as rmsnorm_bind
from impls.rmsnorm.numba import row_rstd

SILU, MUL, ADD = 0, 1, 2


@cuda.jit(cache=True)
def _fused(x, weight, u, r, y, rows, cols, eps, group, cached):
    cache = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    lane, slot = tid % group, tid // group
    row = cuda.blockIdx.x * (cuda.blockDim.x // group) + slot
    end = cols if row < rows else 0      # a row past the batch still joins the block's reductions
    base = slot * cols
    rstd = row_rstd(x, row, end, cols, eps, group, lane, cache, base, cached)
    values = cuda.local.array(UNROLL, float32)
    gates = cuda.local.array(UNROLL, float32)
    residuals = cuda.local.array(UNROLL, float32)
    c = lane
    while c < end:
        for k in range(UNROLL):
            cc = c + k * group
            if cc < end:
                values[k] = cache[base + cc] if cached else load(x, (row, cc))
                gates[k] = load(u, (row, cc))
                residuals[k] = load(r, (row, cc))
        for k in range(UNROLL):
            cc = c + k * group
            if cc < end:
                store(y, (row, cc), silu(values[k] * rstd * load(weight, cc)) * gates[k] + residuals[k])
        c += UNROLL * group


@cuda.jit(cache=True)
def _step(a, b, y, n, operation):
    """One elementwise step of the unfused chain: silu(a), a·b or a + b, rounded into y's type."""
    first = cuda.local.array(FLAT_UNROLL, float32)
    second = cuda.local.array(FLAT_UNROLL, float32)
    block = cuda.blockDim.x
    step = cuda.gridDim.x * block * FLAT_UNROLL
    start = cuda.blockIdx.x * block * FLAT_UNROLL + cuda.threadIdx.x
    while start < n:
        for k in range(FLAT_UNROLL):
            i = start + k * block
            if i < n:
                first[k] = load(a, i)
                second[k] = load(b, i) if operation != SILU else float32(0)
        for k in range(FLAT_UNROLL):
            i = start + k * block
            if i < n:
                if operation == SILU:
                    store(y, i, silu(first[k]))
                elif operation == MUL:
                    store(y, i, first[k] * second[k])
                else:
                    store(y, i, first[k] + second[k])
        start += step


@impl("rmsnorm_silu_mul_add", "numba", variant="fused")
def bind_fused(x, weight, u, r, eps, out):
    cols = x.shape[1]

    def make(config, args, rows):
        xs, w, us, rs, y = args
        return Launch(_fused, grid(config, rows), config["threads"],
                      (view(xs), view(w), view(us), view(rs), view(y), rows, cols, np.float32(eps), config["group"],
                       config["cached"]), shared_bytes(config, cols), device=x.device)
    return row_launcher(("rmsnorm_silu_mul_add", "fused"), "rmsnorm_silu_mul_add fused", (x, weight, u, r, out),
                        scratch(cols, x.dtype, x.device, 3, 1), make, cacheable=True)


def _flat(t: torch.Tensor) -> torch.Tensor:
    if not t.is_contiguous():
        raise ValueError("the unfused chain's elementwise steps take contiguous rows; got strides "
                         f"{tuple(t.stride())} for shape {tuple(t.shape)}")
    return t.view(-1)


@impl("rmsnorm_silu_mul_add", "numba", variant="unfused")
def bind_unfused(x, weight, u, r, eps, out):
    normed, activated, product = (torch.empty_like(x) for _ in range(3))
    norm = rmsnorm_bind(x, weight, eps, normed)

    def step(operation, a, b, y):
        a, b, y = _flat(a), _flat(b), _flat(y)
        views, n = (view(a), view(b), view(y)), a.numel()

        def make(config):
            blocks = blocks_for(n, config, a.device)
            return with_grid(Launch(_step, blocks, config["threads"], (*views, n, operation), device=a.device),
                             blocks=blocks)
        return tuned(("numba", "chain step", operation, a.dtype, n), f"chain step {operation} {a.dtype} {n}", make,
                     a.device)
    silu_step, mul, add = step(SILU, normed, normed, activated), step(MUL, activated, u, product), \
        step(ADD, product, r, out)

    def launch():
        norm()
        silu_step()
        mul()
        add()
    config = {"rmsnorm": norm.config, "silu": silu_step.config, "mul": mul.config, "add": add.config}
    return configured(launch, {**config, "simulated": True} if SIMULATED else config)
