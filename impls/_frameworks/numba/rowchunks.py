"""A row's chunks on the device (rows.py gives the rule of who takes which): this thread's
place in its row's group, a chunk's load and store (16 bytes at once where the row allows),
a step's chunks from x or from the row's cache, and the cache in shared memory.

A chunk is 16 bytes of a row: ``width(a)`` columns (8 of a 16-bit type, 4 of fp32); the
row's chunk k is its columns width·k .. width·k + width - 1. Thread ``lane`` of the group
takes chunks lane, lane + group, ..., CHUNKS of them a step (k + u·group for u < CHUNKS).
A step from x is held as its raw 32-bit words (``words[4·u ..]``: rows.STEP_WORDS, a 16-bit
pair or one fp32 each), converted to fp32 where a pass uses a value (``value_of``: one
instruction for bf16, none for fp32): a kept 16-bit row takes 16 registers, not the 32 of its
fp32 values, and the conversion is exact, so a value's bits are the same whichever way it is
held. A step from the cache is fp32 (``values``). A chunk past the row's end is ``fill``.
Local arrays are indexed by constants only (every loop here has a trip count the type fixes),
so that they stay in registers.

A kernel is compiled for one *keep* (rows.keep, a constant of its code: where the row is
held between passes): KEPT, one step of the group covers the row, held in registers for the
later passes; CACHED, the row kept in shared memory as fp32; READ, read again from x each
pass. Each keep's kernel holds its own code alone (one kernel branching on it took 61-64
registers in bf16 on sm_90: the registers of the longest path).

In-row indices (lane, chunk, column, cache slot, a chunk's byte offset) are 32-bit. Numba does
every integer operation in 64 bits, whatever its operands' widths (uint32 + uint32 is a
uint64); an index cast back to uint32 where it is made lets LLVM narrow the arithmetic to
32-bit instructions (a 64-bit add or compare is two, a 64-bit multiply several). Only a row's
start (its first flat element and word) is 64-bit. So a row has fewer than 2^31 columns and
2^32 bytes (rows.row_launcher refuses longer ones).

``n`` is the row's column count as this thread sees it: 0 for a row past the batch, which
visits nothing but still joins its group's reductions (they synchronise the block)."""
from numba import cuda, int64, uint32, uint64

from impls._frameworks.numba.device import (LOW16, element_bits, exact_bits, from_bits, narrow, pair_bits, per_word, store,
                                            to_bits)
from impls._frameworks.numba.primitives import (bits_float, inlined, load_chunk, shared_address, shared_load,
                                                shared_store, store_chunk)
from impls._frameworks.numba.rows import CHUNK_BYTES, CHUNKS
from impls._frameworks.numba.rows import CACHED, KEPT, READ  # noqa: F401 - the keeps, for the kernels


@inlined
def width(a):
    """Columns a chunk of a holds: 16 bytes (8 of a 16-bit type, 4 of fp32)."""
    return 2 * per_word(a)


@inlined
def step_values(a):
    """Values a thread takes a step: CHUNKS chunks (32 of a 16-bit type, 16 of fp32)."""
    return CHUNKS * width(a)


@inlined
def row_setup(x, xp, cache, group, rows, cols):
    """(lane, n, start, chunks, base, wide, word) of this thread's row, what every row kernel
    begins with: its lane in the row's group, the row's columns (0 past the batch), its first
    flat element and its chunk count, its cache's shared offset (cache_base) and x's
    row_words."""
    tid = uint32(cuda.threadIdx.x)
    g = uint32(group)
    lane = uint32(tid & uint32(g - uint32(1)))      # group: a power of two
    slot = uint32(tid // g)
    row = int64(cuda.blockIdx.x) * int64(uint32(cuda.blockDim.x) // g) + int64(slot)
    n = uint32(cols) if row < rows else uint32(0)
    w = uint32(width(x))
    chunks = uint32((n + uint32(w - uint32(1))) // w)
    start = row * cols
    wide, word = row_words(x, xp, start)
    return lane, n, start, chunks, cache_base(x, cache, slot, chunks), wide, word


@cuda.jit(device=True)
def row_words(a, phase, start):
    """(wide, word): whether the row starting at flat element ``start`` of a starts on a
    16-byte boundary (``phase``: a's first such element, -1 when a has no word view), and the
    index of its first (8-byte) word."""
    rel = start - phase
    wide = phase >= 0 and rel >= 0 and rel % width(a) == 0
    return wide, uint64(rel // per_word(a)) if wide else uint64(0)


@inlined
def offset_of(k):
    """Chunk k's byte offset from its row's first word (32-bit: rows of fewer than 2^32 bytes)."""
    return uint32(k * uint32(CHUNK_BYTES))


@inlined
def fill_word(a, fill):
    """A 32-bit word of ``fill`` (0 or -inf, which every type holds exactly: device.exact_bits,
    a constant) in a's type: two 16-bit elements or one fp32."""
    b = exact_bits(a, fill)
    if narrow(a):
        return uint32(b | (b << uint32(16)))
    return b


@inlined
def value_of(a, words, j):
    """Value j of a chunk or step of a held as words (chunk_words) as fp32: exact."""
    if narrow(a):
        q = words[j // 2]
        return from_bits(a, q & LOW16) if j % 2 == 0 else from_bits(a, q >> uint32(16))
    return bits_float(words[j])


@inlined
def element_or_fill(a, e, c, t, n, fill_bits):
    """The bits of column c + t of the row at flat element e - c (fill's past column n)."""
    return element_bits(a, e + uint64(t)) if uint32(c + uint32(t)) < n else fill_bits


@inlined
def chunk_words(words, o, a, w, wide, word, start, k, n, fill, whole):
    """words[o .. o + 4) = chunk k of the row at ``start`` as its raw words, those from column n
    on ``fill``'s bits. ``whole`` (a constant of the kernel's code: rows.whole): every chunk
    below n is whole and 16-byte aligned, so a chunk is one predicated 16-byte load, nothing
    else. Otherwise one 16-byte load when the row is aligned and the chunk whole, else element
    by element (the same bits)."""
    span = width(a)
    c = uint32(k * uint32(span))
    f = fill_word(a, fill)
    if whole:
        q0 = q1 = q2 = q3 = f
        if c < n:
            q0, q1, q2, q3 = load_chunk(w, word, offset_of(k))
    elif c >= n:
        q0 = q1 = q2 = q3 = f
    elif wide and uint32(c + uint32(span)) <= n:
        q0, q1, q2, q3 = load_chunk(w, word, offset_of(k))
    else:
        e = uint64(start) + uint64(c)      # unsigned: Numba wraps a negative signed index around
        fb = exact_bits(a, fill)
        if narrow(a):
            q0 = uint32(element_or_fill(a, e, c, 0, n, fb) | (element_or_fill(a, e, c, 1, n, fb) << uint32(16)))
            q1 = uint32(element_or_fill(a, e, c, 2, n, fb) | (element_or_fill(a, e, c, 3, n, fb) << uint32(16)))
            q2 = uint32(element_or_fill(a, e, c, 4, n, fb) | (element_or_fill(a, e, c, 5, n, fb) << uint32(16)))
            q3 = uint32(element_or_fill(a, e, c, 6, n, fb) | (element_or_fill(a, e, c, 7, n, fb) << uint32(16)))
        else:
            q0 = uint32(element_or_fill(a, e, c, 0, n, fb))
            q1 = uint32(element_or_fill(a, e, c, 1, n, fb))
            q2 = uint32(element_or_fill(a, e, c, 2, n, fb))
            q3 = uint32(element_or_fill(a, e, c, 3, n, fb))
    words[o] = q0
    words[o + 1] = q1
    words[o + 2] = q2
    words[o + 3] = q3


@inlined
def out_word(a, out, q):
    """Word q of a chunk of a's type from out[...] (fp32), each rounded once (a pair of 16-bit
    ones by one cvt: device.pair_bits)."""
    if narrow(a):
        return pair_bits(a, out[2 * q], out[2 * q + 1])
    return to_bits(a, out[q])


@inlined
def put_chunk(a, w, wide, word, start, k, n, out, whole):
    """Columns of chunk k of the row at ``start`` (those below n) = out[0 .. width), each
    rounded once into a's type: one 16-byte store where the chunk is whole and aligned."""
    span = width(a)
    c = uint32(k * uint32(span))
    if c >= n:
        return
    if whole or (wide and uint32(c + uint32(span)) <= n):
        store_chunk(w, word, offset_of(k), out_word(a, out, 0), out_word(a, out, 1), out_word(a, out, 2),
                    out_word(a, out, 3))
        return
    e = uint64(start) + uint64(c)
    for t in range(span):
        if uint32(c + uint32(t)) < n:
            store(a, e + uint64(t), out[t])


# --- the row's cache in shared memory: column width·k + t at slot base + t·chunks + k, so
# that a warp's threads, on consecutive chunks, touch consecutive words (no bank conflicts).
# Addressed in bytes from the shared offset (primitives.shared_address): 32-bit arithmetic. -----

@cuda.jit(device=True)
def cache_base(x, cache, slot, chunks):
    """The shared offset (bytes) of this row's cache: rows.cached_cols(cols) fp32 slots a row."""
    return uint32(shared_address(cache) + uint32(4) * uint32(slot * uint32(chunks * uint32(width(x)))))


@inlined
def cache_put(cache, base, chunks, k, n, values, o, span, whole):
    c = uint32(k * uint32(span))
    at = uint32(base + uint32(4) * k)
    stride = uint32(uint32(4) * chunks)
    for t in range(span):
        # whole: the chunk is whole or past the row
        if (c < n) if whole else (uint32(c + uint32(t)) < n):
            shared_store(cache, uint32(at + uint32(t) * stride), values[o + t])


@inlined
def cache_get(values, o, cache, base, chunks, k, n, fill, span, whole):
    c = uint32(k * uint32(span))
    at = uint32(base + uint32(4) * k)
    stride = uint32(uint32(4) * chunks)
    for t in range(span):
        inside = (c < n) if whole else (uint32(c + uint32(t)) < n)
        values[o + t] = shared_load(cache, uint32(at + uint32(t) * stride)) if inside else fill


# --- a step: CHUNKS chunks a thread, into (or from) a local array that the kernels index by
# constants only, so that it lives in registers -----------------------------------------------

@inlined
def load_step(words, x, xw, wide, word, start, k, group, n, fill, whole):
    """words[4·u ..] = chunk k + u·group of the row for u < CHUNKS (chunk_words), from x."""
    for u in range(CHUNKS):
        chunk_words(words, 4 * u, x, xw, wide, word, start, uint32(k + uint32(u * group)), n, fill, whole)


@inlined
def cached_step(values, x, cache, base, chunks, k, group, n, fill, whole):
    """values[width·u ..] = chunk k + u·group of the row for u < CHUNKS, from its cache (fp32)."""
    span = width(x)
    for u in range(CHUNKS):
        cache_get(values, u * span, cache, base, chunks, uint32(k + uint32(u * group)), n, fill, span, whole)


@inlined
def refetch_step(kind, words, values, x, xw, wide, word, start, cache, base, chunks, k, group, n, fill, whole):
    """A later pass's step of the row, by its keep (a constant of the kernel): from its cache
    into ``values`` (cached_step) when CACHED, from x again into ``words`` (load_step) when READ;
    a KEPT row's ``words`` hold it already."""
    if kind == CACHED:
        cached_step(values, x, cache, base, chunks, k, group, n, fill, whole)
    elif kind == READ:
        load_step(words, x, xw, wide, word, start, k, group, n, fill, whole)


@inlined
def step_value(x, words, values, j, cached):
    """Value j of the step a pass holds: from the cache's fp32 ``values`` when ``cached`` (a
    constant of the pass), else converted from x's ``words``."""
    if cached:
        return values[j]
    return value_of(x, words, j)


@inlined
def cache_step(values, x, cache, base, chunks, k, group, n, whole):
    """The step's fp32 values (load_step's, converted) into the row's cache."""
    span = width(x)
    for u in range(CHUNKS):
        cache_put(cache, base, chunks, uint32(k + uint32(u * group)), n, values, u * span, span, whole)


@cuda.jit(device=True)
def step_of(x, group):
    """Chunks a step advances a thread by: CHUNKS·group."""
    return uint32(uint32(CHUNKS) * uint32(group))


@inlined
def in_row(x, k, u, group, t, n, whole):
    """Whether element t of chunk k + u·group (column width·(k + u·group) + t) lies in the row.
    In a whole row's kernel (every chunk below n whole) a test of the chunk: one a chunk, not one
    an element."""
    c = uint32(uint32(k + uint32(u * group)) * uint32(width(x)))
    if whole:
        return c < n
    return uint32(c + uint32(t)) < n
