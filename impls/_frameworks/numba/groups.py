"""Reductions over a group of threads, and the states they merge (sum, NaN-propagating max,
Welford's (count, mean, M2), online softmax's (max, sum of exp(x - max))): one factory,
``group_reduction``, parameterised by the state's merge.

A *group* is ``group`` consecutive threads of a block (a power of two from 1 to 1024; the block
holds blockDim / group groups). Within a warp the states meet by xor shuffles, every lane
ending with the same bits (a merge that is not commutative in its bits takes the lower lane's
state first); past a warp through shared memory, each warp's state read back in warp order.
The tree depends on ``group`` only: the bits of a row never depend on how many rows a block
or a launch holds. Every thread of the block must call a reduction (they synchronise).
"""
import linecache
import math

from numba import cuda, float32, int32, uint32

from impls._frameworks.numba.primitives import max_nan

FULL_MASK = 0xFFFFFFFF
WARP = 32
MAX_WARPS = 32            # 1024 threads a block
NEG_INF = float32(-math.inf)


# --- the states and their merges: merge(a0, .., b0, ..) of two states of one to three fp32 ---

@cuda.jit(device=True)
def add(a, b):
    return a + b


@cuda.jit(device=True)
def welford_merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Chan et al.'s merge of two (count, mean, M2) states. An empty side returns the other:
    also keeps inf · 0 (a mean past ~1.8e19 squared) out of a thread's first merge."""
    if n_a == float32(0):
        return n_b, mean_b, m2_b
    if n_b == float32(0):
        return n_a, mean_a, m2_a
    n = n_a + n_b
    delta = mean_b - mean_a
    share = n_b / n
    return n, mean_a + delta * share, m2_a + m2_b + delta * delta * n_a * share


@cuda.jit(device=True)
def online_merge(m_a, d_a, m_b, d_b):
    """Two (max, sum of exp(x - max)) states as one; an all -inf state (d = 0) adds nothing."""
    m = max_nan(m_a, m_b)
    if m == NEG_INF:
        return m, float32(0)
    return m, d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m)


@cuda.jit(device=True)
def online_add(m, d, x):
    """One element into a running (max, sum of exp(x - max)); -inf adds nothing."""
    if x == NEG_INF:
        return m, d
    if x > m or x != x:
        return x, d * math.exp(m - x) + float32(1)
    return m, d + math.exp(x - m)


# --- where a thread is in its warp and group --------------------------------------------------
# Past a warp, each warp's state goes through shared memory, indexed in 32 bits (unsigned):
# Numba's 64-bit signed indices (wrapped around when negative) and a division by the group for
# its first warp took 40-43 live registers in the block reduction of rmsnorm's kept bf16 kernel.

@cuda.jit(device=True)
def _xor(v, offset):
    return cuda.shfl_xor_sync(FULL_MASK, v, int32(offset))


@cuda.jit(device=True)
def _lower_lane(offset):
    """Whether this lane is the lower of the pair an xor step of ``offset`` joins."""
    return (cuda.threadIdx.x & offset) == 0


@cuda.jit(device=True)
def _warp_of():
    return uint32(uint32(cuda.threadIdx.x) >> uint32(5))


@cuda.jit(device=True)
def _group_start_warp(group):
    """The group's first warp (group a power of two of at least a warp): tid // group · group // WARP."""
    return uint32(uint32(uint32(cuda.threadIdx.x) & uint32(~uint32(uint32(group) - uint32(1)))) >> uint32(5))


@cuda.jit(device=True)
def _group_warps(group):
    return uint32(uint32(group) >> uint32(5))


@cuda.jit(device=True)
def _is_warp_leader():
    return (uint32(cuda.threadIdx.x) & uint32(WARP - 1)) == uint32(0)


# --- the reduction, one shape for every state ------------------------------------------------
# Written once below for a state ``s0, s1, ..``; group_reduction spells its components out, a
# scalar each: the code of a reduction written by hand for that state (a tuple state, built and
# taken apart in loops, compiles to other branches and instructions).

_REDUCE = """
def reduce({state}, group):
    offset = min(group, WARP) // 2
    while offset > 0:
        {other} = {shuffles}
        if {lower_first}:
            {state} = merge({state}, {other})
        else:
            {state} = merge({other}, {state})
        offset //= 2
    if group <= WARP:
        return {state}
{slots}
    if _is_warp_leader():
{publish}
    cuda.syncthreads()
    first = _group_start_warp(group)
    {state} = {slots_first}
    w = uint32(1)
    while w < _group_warps(group):
        i = uint32(first + w)
        {state} = merge({state}, {slots_i})
        w = uint32(w + uint32(1))
    cuda.syncthreads()
    return {state}
"""


def group_reduction(merge, components: int, ordered: bool = False):
    """The device function ``reduce(s0, .., group)`` that gives every thread of the group the
    merge of the group's states (``components`` fp32 each) by ``merge(a0, .., b0, ..)``;
    ``ordered``: the merge is not commutative in its bits, so the lower lane's state goes first.
    Past a warp, each component through a shared array of its own, a slot a warp."""
    names = range(components)
    source = _REDUCE.format(
        state=", ".join(f"s{j}" for j in names), other=", ".join(f"o{j}" for j in names),
        shuffles=", ".join(f"_xor(s{j}, offset)" for j in names),
        lower_first="_lower_lane(offset)" if ordered else "True",
        slots="\n".join(f"    slots{j} = cuda.shared.array(MAX_WARPS, float32)" for j in names),
        publish="\n".join(f"        slots{j}[_warp_of()] = s{j}" for j in names),
        slots_first=", ".join(f"slots{j}[first]" for j in names), slots_i=", ".join(f"slots{j}[i]" for j in names))
    filename = f"<group_reduction of {merge.__name__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)   # for tracebacks
    scope = {**globals(), "merge": merge}
    exec(compile(source, filename, "exec"), scope)
    return cuda.jit(device=True)(scope["reduce"])


group_sum = group_reduction(add, 1)                                  # (v, group)
group_max = group_reduction(max_nan, 1)                              # (v, group)
group_welford = group_reduction(welford_merge, 3, ordered=True)      # (count, mean, M2, group)
group_online = group_reduction(online_merge, 2, ordered=True)        # (max, sum of exp(x - max), group)
