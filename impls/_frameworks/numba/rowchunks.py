"""A row's chunks on the device (rows.py gives the rule of who takes which): this thread's
place in its row's group, a chunk's load and store (16 bytes at once where the row allows),
a step's chunks from the row's cache or from x, and the cache in shared memory.

A chunk is 16 bytes of a row: ``width(a)`` columns (8 of a 16-bit type, 4 of fp32); the
row's chunk k is its columns width·k .. width·k + width - 1. Thread ``lane`` of the group
takes chunks lane, lane + group, ..., CHUNKS of them a step (k + u·group for u < CHUNKS), as
``values[width·u ..]``: ``step_values(a)`` values a step (32 of a 16-bit type, 16 of fp32). A chunk past
the row's end is ``fill``. Values live in local arrays the kernels index by constants only
(every loop here has a trip count the type fixes), so that they stay in registers.

In-row indices (lane, chunk, column, cache slot) are 32-bit. Numba does every integer
operation in 64 bits, whatever its operands' widths (uint32 + uint32 is a uint64); an index
cast back to uint32 where it is made lets LLVM narrow the arithmetic to 32-bit instructions
(a 64-bit add or compare is two, a 64-bit multiply several). Only a row's start (its first
flat element and word) is 64-bit. So a row has fewer than 2^31 columns (rows.row_launcher
refuses longer ones).

``n`` is the row's column count as this thread sees it: 0 for a row past the batch, which
visits nothing but still joins its group's reductions (they synchronise the block)."""
from numba import cuda, int64, uint32, uint64

from impls._frameworks.numba.device import (inlined, load, load_pair, per_word, shared_address, shared_load,
                                            shared_store, store, store_pair, word_bits, word_values)
from impls._frameworks.numba.rows import CHUNKS


@inlined
def width(a):
    """Columns a chunk of a holds: 16 bytes (8 of a 16-bit type, 4 of fp32)."""
    return 2 * per_word(a)


@inlined
def step_values(a):
    """Values a thread takes a step: CHUNKS chunks (32 of a 16-bit type, 16 of fp32)."""
    return CHUNKS * width(a)


@cuda.jit(device=True)
def row_of(x, group, rows, cols):
    """(lane, slot, n, start, chunks): this thread's lane in its row's group, the row's slot in
    the block, its columns (0 past the batch), its first flat element and its chunk count."""
    tid = uint32(cuda.threadIdx.x)
    g = uint32(group)
    lane = uint32(tid & uint32(g - uint32(1)))      # group: a power of two
    slot = uint32(tid // g)
    row = int64(cuda.blockIdx.x) * int64(uint32(cuda.blockDim.x) // g) + int64(slot)
    n = uint32(cols) if row < rows else uint32(0)
    w = uint32(width(x))
    return lane, slot, n, row * cols, uint32((n + uint32(w - uint32(1))) // w)


@cuda.jit(device=True)
def row_words(a, phase, start):
    """(wide, word): whether the row starting at flat element ``start`` of a starts on a
    16-byte boundary (``phase``: a's first such element, -1 when a has no word view), and the
    index of its first word."""
    rel = start - phase
    wide = phase >= 0 and rel >= 0 and rel % width(a) == 0
    return wide, uint64(rel // per_word(a)) if wide else uint64(0)


@inlined
def unpack_pair(values, o, a, b0, b1):
    """values[o .. o + width) = the elements of words b0 and b1 as fp32."""
    lo, hi = word_values(a, b0), word_values(a, b1)
    half = per_word(a)
    for t in range(half):
        values[o + t] = lo[t]
        values[o + half + t] = hi[t]


@inlined
def chunk_into(values, o, a, w, wide, word, start, k, n, fill, whole):
    """values[o .. o + width) = chunk k of the row at ``start`` as fp32, those from column n on
    ``fill``. ``whole`` (a constant of the kernel's code: rows.whole): every chunk below n is
    whole and 16-byte aligned, so a chunk is one predicated 16-byte load (fill's bits where it
    is past the row), nothing else. Otherwise one 16-byte load when the row is aligned and the
    chunk whole, else element by element (the same values)."""
    span = width(a)
    c = uint32(k * uint32(span))
    i = word + uint64(uint32(k * uint32(2)))
    if whole:
        b0 = b1 = fill_bits(a, fill)
        if c < n:
            b0, b1 = load_pair(w, i)
        unpack_pair(values, o, a, b0, b1)
        return
    if c >= n:
        for t in range(span):
            values[o + t] = fill
        return
    if wide and uint32(c + uint32(span)) <= n:
        b0, b1 = load_pair(w, i)
        unpack_pair(values, o, a, b0, b1)
        return
    e = uint64(start) + uint64(c)      # unsigned: Numba wraps a negative signed index around
    for t in range(span):
        values[o + t] = load(a, e + uint64(t)) if uint32(c + uint32(t)) < n else fill


@cuda.jit(device=True)
def fill_bits(a, fill):
    """A word of ``fill`` in a's type (four 16-bit or two fp32 elements)."""
    return word_bits(a, fill, fill, fill, fill)


@inlined
def put_chunk(a, w, wide, word, start, k, n, out, whole):
    """Columns of chunk k of the row at ``start`` (those below n) = out[0 .. width), each
    rounded once into a's type (a pair of 16-bit ones by one cvt: device.word_bits): one
    16-byte store where the chunk is whole and aligned."""
    span = width(a)
    c = uint32(k * uint32(span))
    if c >= n:
        return
    if whole or (wide and uint32(c + uint32(span)) <= n):
        half = per_word(a)
        store_pair(w, word + uint64(uint32(k * uint32(2))), word_bits(a, out[0], out[1], out[2], out[3]),
                   word_bits(a, out[half], out[half + 1], out[half + 2], out[half + 3]))
        return
    e = uint64(start) + uint64(c)
    for t in range(span):
        if uint32(c + uint32(t)) < n:
            store(a, e + uint64(t), out[t])


# --- the row's cache in shared memory: column width·k + t at slot base + t·chunks + k, so
# that a warp's threads, on consecutive chunks, touch consecutive words (no bank conflicts).
# Addressed in bytes from the shared offset (device.shared_address): 32-bit arithmetic. -----

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


# --- a step: CHUNKS chunks a thread, into (or from) a local array of fp32 (rows.STEP_MAX) that the
# kernels index by constants only, so that it lives in registers ----------------------------

@inlined
def load_step(values, x, xw, wide, word, start, k, group, n, fill, cache, base, chunks, cached, whole):
    """values[width·u ..] = chunk k + u·group of the row for u < CHUNKS: from its cache when
    ``cached``, else from x; past the row's end ``fill``."""
    span = width(x)
    for u in range(CHUNKS):
        ku = uint32(k + uint32(u * group))
        if cached:
            cache_get(values, u * span, cache, base, chunks, ku, n, fill, span, whole)
        else:
            chunk_into(values, u * span, x, xw, wide, word, start, ku, n, fill, whole)


@inlined
def cache_step(values, x, cache, base, chunks, k, group, n, whole):
    """The step's chunks (load_step's) into the row's cache."""
    span = width(x)
    for u in range(CHUNKS):
        cache_put(cache, base, chunks, uint32(k + uint32(u * group)), n, values, u * span, span, whole)


@cuda.jit(device=True)
def step_of(x, group):
    """Chunks a step advances a thread by: CHUNKS·group."""
    return uint32(uint32(CHUNKS) * uint32(group))


@cuda.jit(device=True)
def kept(x, chunks, group):
    """Whether one step covers the row: its values then stay in the step's registers for the
    later passes (neither the cache nor x read again)."""
    return chunks <= step_of(x, group)


@inlined
def in_row(x, k, u, group, t, n, whole):
    """Whether element t of chunk k + u·group (column width·(k + u·group) + t) lies in the row.
    In a whole row's kernel (every chunk below n whole) a test of the chunk: one a chunk, not one
    an element."""
    c = uint32(uint32(k + uint32(u * group)) * uint32(width(x)))
    if whole:
        return c < n
    return uint32(c + uint32(t)) < n
