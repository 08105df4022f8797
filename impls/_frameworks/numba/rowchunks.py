"""A row's chunks on the device (rows.py gives the rule of who takes which): this thread's
place in its row's group, a chunk's load and store through 8-byte words, a step's chunks
from the row's cache or from x, and the cache in shared memory.

A row's chunk k is its columns 4k .. 4k+3; thread ``lane`` of the group takes chunks lane,
lane + group, ... CHUNKS of them a step (k + u·group for u < CHUNKS), as
``values[4u .. 4u+3]``; a chunk past the row's end is ``fill``.

In-row indices (lane, chunk, column, cache slot) are 32-bit. Numba does every integer
operation in 64 bits, whatever its operands' widths (uint32 + uint32 is a uint64); an index
cast back to uint32 where it is made lets LLVM narrow the arithmetic to 32-bit instructions
(a 64-bit add or compare is two, a 64-bit multiply several). Only a row's start (its first
flat element and word) is 64-bit. So a row has fewer than 2^31 columns (rows.row_launcher
refuses longer ones).

``n`` is the row's column count as this thread sees it: 0 for a row past the batch, which
visits nothing but still joins its group's reductions (they synchronise the block)."""
from numba import cuda, int64, uint32, uint64

from impls._frameworks.numba.device import (CHUNK, from_bits, inlined, load, narrow, pair_bits, store, to_bits,
                                            words_at)
from impls._frameworks.numba.rows import CHUNKS


@cuda.jit(device=True)
def row_of(group, rows, cols):
    """(lane, slot, n, start, chunks): this thread's lane in its row's group, the row's slot in
    the block, its columns (0 past the batch), its first flat element and its chunk count."""
    tid = uint32(cuda.threadIdx.x)
    g = uint32(group)
    lane = uint32(tid & uint32(g - uint32(1)))      # group: a power of two
    slot = uint32(tid // g)
    row = int64(cuda.blockIdx.x) * int64(uint32(cuda.blockDim.x) // g) + int64(slot)
    n = uint32(cols) if row < rows else uint32(0)
    return lane, slot, n, row * cols, uint32((n + uint32(CHUNK - 1)) // uint32(CHUNK))


@cuda.jit(device=True)
def row_words(a, phase, start):
    """(wide, word): whether the row starting at flat element ``start`` of a is word-aligned,
    and the index of its first word."""
    wide, word = words_at(a, phase, start)
    return wide, uint64(word) if wide else uint64(0)


@inlined
def chunk_at(a, w, wide, word, start, k, n, fill, whole):
    """Chunk k of the row at ``start`` as four fp32, those from column n on as ``fill``.
    ``whole`` (a constant of the kernel's code: rows.whole): every chunk below n is whole and
    word-aligned, so a chunk is one predicated load of its words (fill's bits where it is past
    the row), nothing else. Otherwise one word (16-bit types) or two (fp32) when the row is
    word-aligned and the chunk whole, else element by element (the same values)."""
    c = uint32(k * uint32(CHUNK))
    if whole:
        if narrow(a):
            b = fill_bits(a, fill)
            if c < n:
                b = w[word + uint64(k)]
            return unpack16(a, b)
        b0 = b1 = fill_bits(a, fill)
        if c < n:
            i = word + uint64(uint32(k * uint32(2)))
            b0, b1 = w[i], w[i + uint64(1)]
        return unpack32(a, b0, b1)
    if c >= n:
        return fill, fill, fill, fill
    if wide and uint32(c + uint32(CHUNK)) <= n:
        if narrow(a):
            return unpack16(a, w[word + uint64(k)])
        i = word + uint64(uint32(k * uint32(2)))
        return unpack32(a, w[i], w[i + uint64(1)])
    e = uint64(start) + uint64(c)      # unsigned: Numba wraps a negative signed index around
    return (load(a, e), load(a, e + uint64(1)) if uint32(c + uint32(1)) < n else fill,
            load(a, e + uint64(2)) if uint32(c + uint32(2)) < n else fill,
            load(a, e + uint64(3)) if uint32(c + uint32(3)) < n else fill)


@cuda.jit(device=True)
def unpack16(a, b):
    """A word of four 16-bit elements as four fp32 (32-bit halves: one instruction each)."""
    lo, hi = uint32(b), uint32(b >> uint64(32))
    return (from_bits(a, lo & uint32(0xFFFF)), from_bits(a, lo >> uint32(16)),
            from_bits(a, hi & uint32(0xFFFF)), from_bits(a, hi >> uint32(16)))


@cuda.jit(device=True)
def unpack32(a, b0, b1):
    return (from_bits(a, uint32(b0)), from_bits(a, uint32(b0 >> uint64(32))),
            from_bits(a, uint32(b1)), from_bits(a, uint32(b1 >> uint64(32))))


@cuda.jit(device=True)
def fill_bits(a, fill):
    """A word of ``fill`` in a's type (four 16-bit or two fp32 elements)."""
    p = uint64(pair_bits(a, fill, fill)) if narrow(a) else uint64(to_bits(a, fill))
    return p | (p << uint64(32))


@inlined
def put_chunk(a, w, wide, word, start, k, n, v0, v1, v2, v3, whole):
    """Columns 4k .. 4k+3 of the row at ``start`` (those below n) = the four values, each
    rounded once into a's type (a pair of 16-bit ones by one cvt: device.pair_bits)."""
    c = uint32(k * uint32(CHUNK))
    if c >= n:
        return
    if whole or (wide and uint32(c + uint32(CHUNK)) <= n):
        if narrow(a):
            w[word + uint64(k)] = uint64(pair_bits(a, v0, v1)) | (uint64(pair_bits(a, v2, v3)) << uint64(32))
            return
        i = word + uint64(uint32(k * uint32(2)))
        w[i] = uint64(to_bits(a, v0)) | (uint64(to_bits(a, v1)) << uint64(32))
        w[i + uint64(1)] = uint64(to_bits(a, v2)) | (uint64(to_bits(a, v3)) << uint64(32))
        return
    e = uint64(start) + uint64(c)
    store(a, e, v0)
    if uint32(c + uint32(1)) < n:
        store(a, e + uint64(1), v1)
    if uint32(c + uint32(2)) < n:
        store(a, e + uint64(2), v2)
    if uint32(c + uint32(3)) < n:
        store(a, e + uint64(3), v3)


# --- the row's cache in shared memory: column 4k + t at base + t·chunks + k, so that a warp's
# threads, on consecutive chunks, touch consecutive words (no bank conflicts) ----------------

@cuda.jit(device=True)
def cache_base(slot, chunks):
    """The first slot of this row's cache: rows.cached_cols(cols) fp32 slots a row."""
    return uint32(slot * uint32(chunks * uint32(CHUNK)))


@inlined
def cache_put(cache, base, chunks, k, n, v0, v1, v2, v3, whole):
    c = uint32(k * uint32(CHUNK))
    i = uint32(base + k)
    if whole:       # the chunk is whole or past the row
        if c < n:
            cache[i] = v0
            cache[uint32(i + chunks)] = v1
            cache[uint32(i + uint32(2) * chunks)] = v2
            cache[uint32(i + uint32(3) * chunks)] = v3
        return
    if c < n:
        cache[i] = v0
    if uint32(c + uint32(1)) < n:
        cache[uint32(i + chunks)] = v1
    if uint32(c + uint32(2)) < n:
        cache[uint32(i + uint32(2) * chunks)] = v2
    if uint32(c + uint32(3)) < n:
        cache[uint32(i + uint32(3) * chunks)] = v3


@inlined
def cache_get(cache, base, chunks, k, n, fill, whole):
    c = uint32(k * uint32(CHUNK))
    i = uint32(base + k)
    if whole:
        if c < n:
            return cache[i], cache[uint32(i + chunks)], cache[uint32(i + uint32(2) * chunks)], \
                cache[uint32(i + uint32(3) * chunks)]
        return fill, fill, fill, fill
    return (cache[i] if c < n else fill,
            cache[uint32(i + chunks)] if uint32(c + uint32(1)) < n else fill,
            cache[uint32(i + uint32(2) * chunks)] if uint32(c + uint32(2)) < n else fill,
            cache[uint32(i + uint32(3) * chunks)] if uint32(c + uint32(3)) < n else fill)


# --- a step: CHUNKS chunks a thread, into (or from) a local array of 4·CHUNKS fp32 that the
# kernels index by constants only, so that it lives in registers ----------------------------

@inlined
def load_step(values, x, xw, wide, word, start, k, group, n, fill, cache, base, chunks, cached, whole):
    """values[4u .. 4u+3] = chunk k + u·group of the row for u < CHUNKS: from its cache when
    ``cached``, else from x; past the row's end ``fill``."""
    for u in range(CHUNKS):
        ku = uint32(k + uint32(u * group))
        if cached:
            v = cache_get(cache, base, chunks, ku, n, fill, whole)
        else:
            v = chunk_at(x, xw, wide, word, start, ku, n, fill, whole)
        values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = v


@inlined
def cache_step(values, cache, base, chunks, k, group, n, whole):
    """The step's chunks (load_step's) into the row's cache."""
    for u in range(CHUNKS):
        cache_put(cache, base, chunks, uint32(k + uint32(u * group)), n, values[4 * u], values[4 * u + 1],
                  values[4 * u + 2], values[4 * u + 3], whole)


@cuda.jit(device=True)
def step_of(group):
    """Chunks a step advances a thread by: CHUNKS·group."""
    return uint32(uint32(CHUNKS) * uint32(group))


@cuda.jit(device=True)
def kept(chunks, group):
    """Whether one step covers the row: its values then stay in the step's registers for the
    later passes (neither the cache nor x read again)."""
    return chunks <= uint32(uint32(CHUNKS) * uint32(group))


@cuda.jit(device=True)
def in_row(k, u, group, e, n):
    """Whether element e of chunk k + u·group (column 4(k + u·group) + e) lies in the row."""
    return uint32(uint32(k + uint32(u * group)) * uint32(CHUNK) + uint32(e)) < n

