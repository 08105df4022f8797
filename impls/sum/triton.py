"""Triton sum (and the 1-D reduction that max shares). Reads N·s bytes once, in one launch.

A persistent grid of P programs (PROGRAMS_PER_SM per SM, all resident at once). Each walks
the full tiles i = pid, pid + P, ... with unmasked loads, accumulating BLOCK lanes in fp32
(many independent loads in flight, no reduction inside the loop); the last program also
takes the ragged tail. Then one tree per program (tl.sum, or a maximum that keeps NaN)
gives its partial.
  two_pass: each program stores its partial (4·P bytes) and takes a ticket from a counter;
            the program that takes the last ticket, the last to finish, reads the P partials
            and reduces them in one fixed tree. Same P, same trees: the same bits every time.
  atomic:   each program adds its partial into an accumulator (an fp32 atomic), then takes
            a ticket; the last program moves the total into the result and resets the
            accumulator. The order of the P additions, and so the bits of the sum, change
            from run to run.
Each is one launch, with no finishing kernel over the partials and no memset before the
atomics: at 1000003 elements a launch is most of the time (on the H200, two_pass 9.1 us
per launch, 3.4 us in a CUDA graph). Where one program covers x (n <= BLOCK) it loads x once,
reduces it in one tree and writes the result: no loop, no tail, no ticket. The counter and
accumulator belong to one binding, whose launches run in stream order (each ends with them
reset); two launches of one binding must not overlap.
"""
import triton
import triton.language as tl

from harness.registry import impl
from impls._frameworks.triton.launch import bound_launch, configured, interpreting, next_pow2, sm_count
from impls._frameworks.triton.occupancy import FULL_OCCUPANCY_REGS

# The grid: PROGRAMS_PER_SM programs of WARPS warps (BLOCK elements a tile) on every SM, 2048 threads, all an SM
# runs at once, and only if each thread takes at most 32 registers (MAXNREG, ptxas's cap).
# Uncapped, the two-pass kernel compiles to 40 (its last program's read of the partials),
# six programs fit an SM, and the other two run as a second, part-empty wave: on the H200
# two_pass then ran 1.5-2% behind atomic at 2^28 elements in all six cells (fp32 sum
# 245.9 us against 241.3).
BLOCK, PROGRAMS_PER_SM, WARPS, MAXNREG = 4096, 8, 8, FULL_OCCUPANCY_REGS


@triton.jit
def _max_nan(a, b):
    """The maximum that keeps NaN (max.NaN on sm_80 and later); tl.max's maxnum drops it."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _combine(acc, x, IS_MAX: tl.constexpr):
    if IS_MAX:
        return _max_nan(acc, x)
    return acc + x


@triton.jit
def _reduce_lanes(v, IS_MAX: tl.constexpr):
    if IS_MAX:
        # One tree of NaN-keeping maxima (tl.max then a count of the NaN lanes took two
        # trees, two barriers more), and a NaN of either sign out as the canonical +NaN:
        # Triton's float atomic_max orders by sign bit, and only a +NaN wins against all.
        m = tl.reduce(v, 0, _max_nan)
        return tl.where(m != m, float("nan"), m)
    return tl.sum(v, 0)


@triton.jit
def _reduce_1d(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, programs, IS_MAX: tl.constexpr,
               ATOMIC: tl.constexpr, ONE_PROGRAM: tl.constexpr, BLOCK: tl.constexpr,
               P_BLOCK: tl.constexpr):
    if IS_MAX:   # the reduction's identity: what padding lanes and an idle accumulator hold
        identity = float("-inf")
    else:
        identity = 0.0
    if ONE_PROGRAM:   # x fits one tile: one load, one tree, the result (no loop, no tail)
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=identity, eviction_policy="evict_first")
        tl.store(out_ptr, _reduce_lanes(x.to(tl.float32), IS_MAX))
    else:
        pid = tl.program_id(0)
        acc = tl.full([BLOCK], identity, tl.float32)
        full_tiles = n // BLOCK
        for tile in range(pid, full_tiles, programs):
            x = tl.load(x_ptr + tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK),
                        eviction_policy="evict_first").to(tl.float32)
            acc = _combine(acc, x, IS_MAX)
        if pid == programs - 1:
            offs = tl.cast(full_tiles, tl.int64) * BLOCK + tl.arange(0, BLOCK)
            acc = _combine(acc, tl.load(x_ptr + offs, mask=offs < n, other=identity).to(tl.float32), IS_MAX)
        partial = _reduce_lanes(acc, IS_MAX)
        if ATOMIC:   # scratch: the accumulator, holding the identity between launches
            if IS_MAX:
                tl.atomic_max(scratch_ptr, partial, sem="relaxed")
            else:
                tl.atomic_add(scratch_ptr, partial, sem="relaxed")
        else:        # scratch: the P partials
            tl.store(scratch_ptr + pid, partial)
        # The barrier orders whichever thread wrote this program's partial before the
        # thread that takes the ticket; the ticket's release (acq_rel, GPU scope) then
        # publishes the partial to the program that takes the last ticket, whose acquire
        # orders its reads after every other program's write.
        tl.debug_barrier()
        ticket = tl.atomic_add(ticket_ptr, 1, sem="acq_rel", scope="gpu")
        if ticket == programs - 1:
            if ATOMIC:   # read the accumulator where the atomics are done (L2), then reset it
                if IS_MAX:
                    total = tl.atomic_max(scratch_ptr, identity, sem="acq_rel", scope="gpu")
                else:
                    total = tl.atomic_add(scratch_ptr, identity, sem="acq_rel", scope="gpu")
                tl.debug_barrier()
                tl.store(scratch_ptr, identity)
            else:
                offs = tl.arange(0, P_BLOCK)
                # .cg: from L2, where the other SMs' partials are (an SM's L1 is not coherent)
                p = tl.load(scratch_ptr + offs, mask=offs < programs, other=identity, cache_modifier=".cg")
                total = _reduce_lanes(p, IS_MAX)
            tl.store(out_ptr, total)
            tl.store(ticket_ptr, 0)   # ready for the binding's next launch


def _interpreted_block(n: int) -> int:
    """The tile under the interpreter, where each tile of the loop is a Python step: 8192
    elements, and 65536 from 2^20 elements on (the sum's many_terms set, 2^25 + 3 elements,
    then walks 512 tiles in place of 4096: still many tiles to each of the 32 programs)."""
    return 8192 if n < 1 << 20 else 65536


def reduce_1d(x, out, is_max: bool, atomic: bool):
    """Launcher of a 1-D fp32 sum or max of ``x`` into the 0-d fp32 ``out``: one launch."""
    import torch
    n = x.numel()
    # A fixed configuration (not autotuned): P decides which elements share a partial,
    # so a tuned P could change the two-pass result's bits from one process to the next.
    block, warps = (_interpreted_block(n), 4) if interpreting() else (BLOCK, WARPS)
    programs = max(1, min(triton.cdiv(n, block), PROGRAMS_PER_SM * sm_count(x.device)))
    cap = {} if interpreting() else {"maxnreg": MAXNREG}   # a compile option, not a parameter
    cfg = dict(BLOCK=block, num_warps=warps, programs=programs, **cap)
    one = programs == 1
    if atomic:
        scratch = torch.full((1,), float("-inf") if is_max else 0.0, dtype=torch.float32, device=x.device)
    else:
        scratch = torch.empty(programs, dtype=torch.float32, device=x.device)
    ticket = torch.zeros(1, dtype=torch.int32, device=x.device)
    launch = bound_launch(_reduce_1d, (programs,), x, out, scratch, ticket, n, programs, IS_MAX=is_max,
                          ATOMIC=atomic, ONE_PROGRAM=one, BLOCK=block, P_BLOCK=next_pow2(programs),
                          num_warps=warps, **cap)
    launch.ticket = ticket   # for the GPU test that checks it is reset after every launch
    return configured(launch, cfg)


@impl("sum", "triton", variant="two_pass")
def bind_two_pass(x, out):
    return reduce_1d(x, out, is_max=False, atomic=False)


@impl("sum", "triton", variant="atomic")
def bind_atomic(x, out):
    return reduce_1d(x, out, is_max=False, atomic=True)
