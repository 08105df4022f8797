"""Numba softmax over the last dim: a group of threads per row (several rows a block when
short; rows.py), four 16-byte chunks in flight per thread (rowchunks), rows indexed
flat, exp in fp32; 2·R·C·s bytes. The elements' exp (three_pass, on_chip) is 2^(d·log2 e) by
the hardware's ex2, for 16-bit outputs shifted by 2^64, which the row's sum cancels
(device.row_exp), as the CUDA kernels take it.
  three_pass: max, sum of exp(x - max), output: x read three times (the later reads mostly
              from L2).
  online:     the (max, sum) pair rescaled as the max grows, merged across the group by the
              same rule (device.online_merge): x read twice.
  on_chip:    the row kept in shared memory as fp32 between its passes: x read once (rows up
              to 48 KiB of fp32 a block; a longer row is an error, as it is no on-chip row).
The group (and so the bits) is tuned per row length and dtype."""
import math

from numba import cuda, float32, uint32

from harness.registry import impl
from impls._frameworks.numba.device import (NEG_INF, group_max, group_online, group_sum, inlined, max_nan, online_add,
                                            row_exp)
from impls._frameworks.numba.rowchunks import (cache_base, cache_step, kept, load_step, step_values, put_chunk, row_of,
                                               row_words, step_of, width)
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import CHUNKS, MAX_CHUNK, STEP_MAX, grid, row_launcher, shared_bytes, whole
from impls._frameworks.numba.runtime import Launch, word_views

THREE_PASS, ONLINE, ON_CHIP = 0, 1, 2
VARIANTS = {"three_pass": THREE_PASS, "online": ONLINE, "on_chip": ON_CHIP}


@inlined
def _softmax(x, xw, xp, y, yw, yp, rows, cols, group, cached, algorithm, whole):
    cache = cuda.shared.array(0, float32)
    values = cuda.local.array(STEP_MAX, float32)
    out = cuda.local.array(MAX_CHUNK, float32)
    lane, slot, n, start, chunks = row_of(x, group, rows, cols)
    base = cache_base(x, cache, slot, chunks)
    x_wide, x_word = row_words(x, xp, start)
    y_wide, y_word = row_words(y, yp, start)
    in_registers = kept(x, chunks, group)
    span = width(x)
    # First pass: the max (and, online, the sum of exp(x - max) as the max grows).
    m, d = NEG_INF, float32(0)
    k = lane
    while k < chunks:
        load_step(values, x, xw, x_wide, x_word, start, k, group, n, NEG_INF, cache, base, chunks, False, whole)
        for u in range(step_values(x)):
            if algorithm == ONLINE:
                m, d = online_add(m, d, values[u])
            else:
                m = max_nan(m, values[u])
        if cached and not in_registers:
            cache_step(values, x, cache, base, chunks, k, group, n, whole)
        k = uint32(k + step_of(x, group))
    if algorithm == ONLINE:
        m, d = group_online(m, d, group)
    else:
        m = group_max(m, group)
        # Second pass: the sum of exp(x - max), from registers, the cache or x again; what is
        # kept (registers, cache) becomes exp(x - max).
        k = lane
        while k < chunks:
            if not in_registers:
                load_step(values, x, xw, x_wide, x_word, start, k, group, n, NEG_INF, cache, base, chunks, cached,
                          whole)
            # Unmasked: a column past the row is -inf (load_step's fill), its exp(-inf - m) = 0
            # adds nothing to d (where m is -inf or NaN every term is NaN, masked or not).
            for u in range(step_values(x)):
                values[u] = row_exp(x, values[u] - m)
                d += values[u]
            if cached and not in_registers:
                cache_step(values, x, cache, base, chunks, k, group, n, whole)
            k = uint32(k + step_of(x, group))
        d = group_sum(d, group)
    # Last pass: exp(x - max) / sum (kept values are exp(x - max) already, but online's).
    scale = float32(1) / d
    exps = algorithm != ONLINE and (cached or in_registers)
    k = lane
    while k < chunks:
        if not in_registers:
            load_step(values, x, xw, x_wide, x_word, start, k, group, n, NEG_INF, cache, base, chunks, cached, whole)
        for u in range(CHUNKS):
            for t in range(span):
                if exps:
                    out[t] = values[u * span + t] * scale
                elif algorithm == ONLINE:
                    out[t] = math.exp(values[u * span + t] - m) * scale
                else:
                    out[t] = row_exp(x, values[u * span + t] - m) * scale
            put_chunk(y, yw, y_wide, y_word, start, uint32(k + uint32(u * group)), n, out, whole)
        k = uint32(k + step_of(x, group))


# One kernel per variant and row kind (rows.whole: whole, 16-byte aligned chunks, or any rows),
# the algorithm, whether the row is cached and the row kind constants of its code.
def _kernel(algorithm, whole_rows):
    on_chip = algorithm == ON_CHIP

    def kernel(x, xw, xp, y, yw, yp, rows, cols, group):
        _softmax(x, xw, xp, y, yw, yp, rows, cols, group, on_chip, algorithm, whole_rows)
    kernel.__name__ = kernel.__qualname__ = f"_{NAMES[algorithm]}{'_whole' if whole_rows else ''}"
    return cuda.jit(cache=True)(kernel)


NAMES = {v: k for k, v in VARIANTS.items()}
KERNELS = {(algorithm, w): _kernel(algorithm, w) for algorithm in NAMES for w in (True, False)}


def _register(variant: str, algorithm: int):
    on_chip = algorithm == ON_CHIP

    @impl("softmax", "numba", variant=variant)
    def bind(x, out):
        cols = x.shape[1]

        def make(config, args, rows):
            if on_chip and not (config["cached"] or config["kept"]):
                raise ValueError(f"softmax on_chip: a {cols}-column row does not fit in 48 KiB of shared memory "
                                 "as fp32; the three_pass and online variants take it")
            return Launch(KERNELS[algorithm, whole(args, cols)], grid(config, rows), config["threads"],
                          (*word_views(*args), rows, cols, config["group"]), shared_bytes(config, cols),
                          device=x.device)
        return row_launcher(("softmax", variant), f"softmax {variant}", (x, out),
                            scratch(cols, x.dtype, x.device, 1, 0), make, cacheable=on_chip)
    return bind


for _variant, _algorithm in VARIANTS.items():
    _register(_variant, _algorithm)
