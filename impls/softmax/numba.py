"""Numba softmax over the last dim: a group of threads per row (several rows a block when
short; rows.py), four 16-byte chunks in flight per thread (rowchunks), rows indexed
flat, exp in fp32; 2·R·C·s bytes. The elements' exp (three_pass, on_chip) is 2^(d·log2 e) by
the hardware's ex2, for 16-bit outputs shifted by 2^64, which the row's sum cancels
(functions.row_exp), as the CUDA kernels take it.
  three_pass: max, sum of exp(x - max), output: x read three times (the later reads mostly
              from L2).
  online:     the (max, sum) pair rescaled as the max grows, merged across the group by the
              same rule (groups.online_merge): x read twice.
  on_chip:    the row kept in shared memory as fp32 between its passes: x read once (rows up
              to 48 KiB of fp32 a block; a longer row is an error, as it is no on-chip row).
The group (and so the bits) is tuned per row length and dtype.
  naive:      one block of 256 threads a row, a column at a time (naive.py), the same three
              passes with the accurate exp: the first kernel, to show the gap."""
import math

from numba import cuda, float32, uint32

from harness.registry import impl
from impls._frameworks.numba.device import load, store
from impls._frameworks.numba.functions import row_exp
from impls._frameworks.numba.groups import NEG_INF, group_max, group_online, group_sum, online_add
from impls._frameworks.numba.naive import BLOCK, block_per_row
from impls._frameworks.numba.primitives import inlined, max_nan
from impls._frameworks.numba.rowchunks import (CACHED, KEPT, READ, cache_step, load_step, put_chunk, refetch_step,
                                               row_setup, row_words, step_of, step_values, value_of, width)
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import (CHUNKS, KEEPS, MAX_CHUNK, STEP_MAX, STEP_WORDS, launch,
                                          row_launcher)

THREE_PASS, ONLINE, ON_CHIP = 0, 1, 2
VARIANTS = {"three_pass": THREE_PASS, "online": ONLINE, "on_chip": ON_CHIP}


@inlined
def _softmax(x, xw, xp, y, yw, yp, rows, cols, group, kind, algorithm, whole):
    cache = cuda.shared.array(0, float32)
    words = cuda.local.array(STEP_WORDS, uint32)
    values = cuda.local.array(STEP_MAX, float32)
    out = cuda.local.array(MAX_CHUNK, float32)
    lane, n, start, chunks, base, x_wide, x_word = row_setup(x, xp, cache, group, rows, cols)
    y_wide, y_word = row_words(y, yp, start)
    span = width(x)
    # First pass: the max (and, online, the sum of exp(x - max) as the max grows). A kept row's
    # passes run once on every lane, unguarded (a lane past the row holds -inf: it adds nothing
    # to the max or the sum and stores nothing): guarded, its second pass's exps were written on
    # some lanes only, which kept the first pass's values alive beside them (60 registers in
    # bf16 on sm_90, 48 unguarded; the norms take fewer guarded: 40 against 48-62).
    m, d = NEG_INF, float32(0)
    k = lane
    while k < chunks or kind == KEPT:
        load_step(words, x, xw, x_wide, x_word, start, k, group, n, NEG_INF, whole)
        for u in range(step_values(x)):
            v = value_of(x, words, u)
            if kind == CACHED:
                values[u] = v         # only here: a value written where it is not read keeps it alive
            if algorithm == ONLINE:
                m, d = online_add(m, d, v)
            else:
                m = max_nan(m, v)
        if kind == CACHED:
            cache_step(values, x, cache, base, chunks, k, group, n, whole)
        if kind == KEPT:
            break                     # one step covers the row
        k = uint32(k + step_of(x, group))
    if algorithm == ONLINE:
        m, d = group_online(m, d, group)
    else:
        m = group_max(m, group)
        # Second pass: the sum of exp(x - max), from registers, the cache or x again; what is
        # kept (registers, cache) becomes exp(x - max), as fp32.
        k = lane
        while k < chunks or kind == KEPT:
            refetch_step(kind, words, values, x, xw, x_wide, x_word, start, cache, base, chunks, k, group, n, NEG_INF,
                         whole)
            # Unmasked: a column past the row is -inf (load_step's fill), its exp(-inf - m) = 0
            # adds nothing to d (where m is -inf or NaN every term is NaN, masked or not).
            for u in range(step_values(x)):
                v = values[u] if kind == CACHED else value_of(x, words, u)
                values[u] = row_exp(x, v - m)
                d += values[u]
            if kind == CACHED:
                cache_step(values, x, cache, base, chunks, k, group, n, whole)
            if kind == KEPT:
                break
            k = uint32(k + step_of(x, group))
        d = group_sum(d, group)
    # Last pass: exp(x - max) / sum (kept values are exp(x - max) already, but online's).
    scale = float32(1) / d
    exps = algorithm != ONLINE and kind != READ
    k = lane
    while k < chunks or kind == KEPT:
        refetch_step(kind, words, values, x, xw, x_wide, x_word, start, cache, base, chunks, k, group, n, NEG_INF,
                     whole)
        for u in range(CHUNKS):
            for t in range(span):
                j = u * span + t
                if exps:
                    out[t] = values[j] * scale
                elif algorithm == ONLINE:
                    v = values[j] if kind == CACHED else value_of(x, words, j)
                    out[t] = math.exp(v - m) * scale
                else:
                    out[t] = row_exp(x, value_of(x, words, j) - m) * scale
            put_chunk(y, yw, y_wide, y_word, start, uint32(k + uint32(u * group)), n, out, whole)
        if kind == KEPT:
            break
        k = uint32(k + step_of(x, group))


# One kernel per variant, row shape (rows.whole: whole, 16-byte aligned chunks, or any rows)
# and keep (rows.keep: on_chip caches the row, the others read it again, where one step does not
# cover it), all constants of its code.
def _kernel(algorithm, whole_rows, kind):
    def kernel(x, xw, xp, y, yw, yp, rows, cols, group):
        _softmax(x, xw, xp, y, yw, yp, rows, cols, group, kind, algorithm, whole_rows)
    kernel.__name__ = kernel.__qualname__ = f"_{NAMES[algorithm]}{'_whole' if whole_rows else ''}_{KEEPS[kind]}"
    return cuda.jit(cache=True)(kernel)


NAMES = {v: k for k, v in VARIANTS.items()}
KEEPS_OF = {THREE_PASS: (KEPT, READ), ONLINE: (KEPT, READ), ON_CHIP: (KEPT, CACHED)}
KERNELS = {(algorithm, w, kind): _kernel(algorithm, w, kind) for algorithm in NAMES for w in (True, False)
           for kind in KEEPS_OF[algorithm]}


def _register(variant: str, algorithm: int):
    on_chip = algorithm == ON_CHIP

    @impl("softmax", "numba", variant=variant)
    def bind(x, out):
        cols = x.shape[1]

        def make(config, args, rows):
            if on_chip and not (config["cached"] or config["kept"]):
                raise ValueError(f"softmax on_chip: a {cols}-column row does not fit in 48 KiB of shared memory "
                                 "as fp32; the three_pass and online variants take it")
            return launch(KERNELS, (algorithm,), config, args, rows, (), f"Numba softmax {variant}",
                          KEEPS_OF[algorithm])
        return row_launcher(("softmax", variant), f"softmax {variant}", (x, out),
                            scratch(cols, x.dtype, x.device, 1, 0), make, cacheable=on_chip,
                            keeps=KEEPS_OF[algorithm])
    return bind


for _variant, _algorithm in VARIANTS.items():
    _register(_variant, _algorithm)


@cuda.jit(cache=True)
def _naive(x, y, cols):
    """Row blockIdx in three passes over it: its max, its sum of exp(x - max), the output; each
    thread takes its columns, the block reduces the max and the sum."""
    start = cuda.blockIdx.x * cols
    m = NEG_INF
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        m = max_nan(m, load(x, start + j))
    m = group_max(m, BLOCK)
    d = float32(0)
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        d += math.exp(load(x, start + j) - m)
    d = group_sum(d, BLOCK)
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        store(y, start + j, math.exp(load(x, start + j) - m) / d)


@impl("softmax", "numba", variant="naive")
def bind_naive(x, out):
    return block_per_row(_naive, (x, out), ())
