"""Triton sum (and the 1-D reduction that max shares). Reads N·s bytes once.

Stage 1 is a persistent grid of P programs (a few per SM). Each walks the full tiles
i = pid, pid + P, ... with unmasked loads, accumulating BLOCK lanes in fp32 (many
independent loads in flight, no reduction inside the loop); the last program also takes
the ragged tail. Then one tl.sum/tl.max tree per program.
  two_pass: each program stores its partial; a second one-program kernel reduces the
            P partials (8·P extra bytes). Same P, same tree: the same bits every time.
            Where one program covers x (n <= BLOCK) its partial is the result: one launch.
  atomic:   each program adds its partial straight into the result (an fp32 atomic).
            One launch after a memset, but the order of the P additions, and so the
            bits of the sum, change from run to run.
"""
import triton
import triton.language as tl

from harness.registry import impl
from impls._frameworks.triton import bound_launch, configured, interpreting, next_pow2, sm_count


@triton.jit
def _max_keeping_nan(v):
    """tl.max drops NaN (maxnum); the op says NaN propagates, so count the NaN lanes too."""
    has_nan = tl.sum((v != v).to(tl.int32), 0) > 0
    return tl.where(has_nan, float("nan"), tl.max(v, 0))


@triton.jit
def _reduce_tiles(x_ptr, out_ptr, n, programs, IS_MAX: tl.constexpr, ATOMIC: tl.constexpr,
                  BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if IS_MAX:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    full_tiles = n // BLOCK
    for tile in range(pid, full_tiles, programs):
        x = tl.load(x_ptr + tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK),
                    eviction_policy="evict_first").to(tl.float32)
        if IS_MAX:
            acc = tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
        else:
            acc += x
    if pid == programs - 1:
        offs = tl.cast(full_tiles, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        if IS_MAX:
            x = tl.load(x_ptr + offs, mask=offs < n, other=float("-inf")).to(tl.float32)
            acc = tl.maximum(acc, x, propagate_nan=tl.PropagateNan.ALL)
        else:
            acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    if IS_MAX:
        # A NaN of either sign comes out as the canonical +NaN: Triton's float atomic_max
        # orders by sign bit, and only a +NaN then wins against every other value.
        partial = _max_keeping_nan(acc)
    else:
        partial = tl.sum(acc, 0)
    if ATOMIC:
        if IS_MAX:
            tl.atomic_max(out_ptr, partial, sem="relaxed")
        else:
            tl.atomic_add(out_ptr, partial, sem="relaxed")
    else:
        tl.store(out_ptr + pid, partial)


@triton.jit
def _reduce_partials(p_ptr, out_ptr, programs, IS_MAX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if IS_MAX:
        p = tl.load(p_ptr + offs, mask=offs < programs, other=float("-inf"))
        tl.store(out_ptr, _max_keeping_nan(p))
    else:
        p = tl.load(p_ptr + offs, mask=offs < programs, other=0.0)
        tl.store(out_ptr, tl.sum(p, 0))


def reduce_1d(x, out, is_max: bool, atomic: bool):
    """Launcher of a 1-D fp32 sum or max of ``x`` into the 0-d fp32 ``out``."""
    import torch
    n = x.numel()
    # A fixed configuration (not autotuned): P decides which elements share a partial,
    # so a tuned P could change the two-pass result's bits from one process to the next.
    block, warps = (8192, 4) if interpreting() else (4096, 8)
    programs = max(1, min(triton.cdiv(n, block), 8 * sm_count(x.device)))
    cfg = dict(BLOCK=block, num_warps=warps, programs=programs)
    if atomic:
        init = float("-inf") if is_max else 0.0

        tiles = bound_launch(_reduce_tiles, (programs,), x, out, n, programs, IS_MAX=is_max, ATOMIC=True,
                             BLOCK=block, num_warps=warps)

        def launch():
            out.fill_(init)   # the atomics need a starting value: a memset launch, counted
            tiles()
    elif programs == 1:
        # n <= BLOCK: the one program's partial is the result, stored straight into out.
        # One launch instead of two: at 4096 elements the second launch was a third of
        # the time (r7: 0.65-0.67x torch.sum, which reduces there in one kernel).
        launch = bound_launch(_reduce_tiles, (1,), x, out, n, 1, IS_MAX=is_max, ATOMIC=False,
                              BLOCK=block, num_warps=warps)
    else:
        partials = torch.empty(programs, dtype=torch.float32, device=x.device)
        tiles = bound_launch(_reduce_tiles, (programs,), x, partials, n, programs, IS_MAX=is_max, ATOMIC=False,
                             BLOCK=block, num_warps=warps)
        finish = bound_launch(_reduce_partials, (1,), partials, out, programs, IS_MAX=is_max,
                              BLOCK=next_pow2(programs), num_warps=4)

        def launch():
            tiles()
            finish()
    return configured(launch, cfg)


@impl("sum", "triton", variant="two_pass")
def bind_two_pass(x, out):
    return reduce_1d(x, out, is_max=False, atomic=False)


@impl("sum", "triton", variant="atomic")
def bind_atomic(x, out):
    return reduce_1d(x, out, is_max=False, atomic=True)
