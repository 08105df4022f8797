"""Triton device functions shared by the row kernels (softmax, norms, the chain).
Kept apart from triton.py (the framework's plumbing), which must import without Triton."""
import triton
import triton.language as tl


# --- one_tile: how a kernel walks its tiles ---------------------------------------------
# A persistent grid (PERSISTENT) loops over tiles pid, pid + programs, ... A grid of one
# program per tile calls the same tile function once, in straight-line code, not as a loop
# of one trip: its first loads then wait on no read of the tile count from the kernel's
# parameters and no branch, and it has no barrier ahead of its first reduction. Triton
# guards the shared memory of a loop's reductions against the previous trip's reads with a
# barrier at the top of the loop body, inserted before LLVM removes a one-trip loop (sm_90
# SASS, LayerNorm two_pass 1x4096 fp32 on 16 warps: 6 barriers as a loop, 5 straight; on
# the H200 at 4096x4096: 34.21 us as a loop, 33.99 straight, beside 33.97 and 33.88 for a
# plain one-row kernel on 16 warps).


@triton.jit
def load_row(ptr, base, c, cols, other, EVEN: tl.constexpr, LOAD: tl.constexpr):
    """One on-chip row as fp32: unmasked when the row fills the block (16-byte vector loads)."""
    if EVEN:
        return tl.load(ptr + base + c, eviction_policy=LOAD).to(tl.float32)
    return tl.load(ptr + base + c, mask=c < cols, other=other, eviction_policy=LOAD).to(tl.float32)


@triton.jit
def store_row(ptr, base, c, cols, y, EVEN: tl.constexpr, STORE: tl.constexpr):
    """Store one row, rounded once into the output's dtype."""
    if EVEN:
        tl.store(ptr + base + c, y.to(ptr.dtype.element_ty), cache_modifier=STORE)
    else:
        tl.store(ptr + base + c, y.to(ptr.dtype.element_ty), mask=c < cols, cache_modifier=STORE)


@triton.jit
def first_pass(x_ptr, base, start, c, cols, ORDERED: tl.constexpr):
    """A looped row's column tile ``start + c`` in the pass that first reads it, as fp32, 0
    past the row: kept in L2 (evict_last) for the passes that read it again; ORDERED: a
    volatile load (see ORDERED below), which takes no cache hint."""
    return tl.load(x_ptr + base + start + c, mask=start + c < cols, other=0.0,
                   eviction_policy="" if ORDERED else "evict_last", volatile=ORDERED).to(tl.float32)


@triton.jit
def sum_of_squares(x_ptr, base, cols, BLOCK: tl.constexpr, SPAN: tl.constexpr, ORDERED: tl.constexpr = False):
    """sum(x²) of a row walked in BLOCK-wide tiles, fp32 lanes. The row is kept in L2
    (evict_last) for the pass that reads it again (evict_first), which then costs L2
    bandwidth, not memory bandwidth. SPAN > 0: the row fits in SPAN columns, a
    compile-time bound: the loop unrolls and all its tiles' loads go out together.
    ORDERED: volatile loads (after the operands' own: see ORDERED below)."""
    c = tl.arange(0, BLOCK)
    squares = tl.zeros([BLOCK], tl.float32)
    end = SPAN if SPAN else cols
    UNROLL: tl.constexpr = SPAN // BLOCK if SPAN else 1   # a static trip count: unrolled in Triton's IR
    for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):
        x = first_pass(x_ptr, base, start, c, cols, ORDERED)
        squares += x * x
    return tl.sum(squares, 0)


@triton.jit
def row_sums(v, FOLD: tl.constexpr):
    """Each row's sum of a tile ``v`` [ROWS, BLOCK]. FOLD > 0: the row first folded into
    FOLD-wide tiles, element j + k·FOLD added to element j for k = 1, 2, ... in turn, then
    the [ROWS, FOLD] partial sums reduced: the order in which a column loop of FOLD-wide
    tiles adds a row into its [FOLD] accumulator (started at -0.0, which adds exactly) and
    reduces it. Where each thread holds elements j and j + FOLD (FOLD a multiple of the
    tile's layout repeat: fold_width), the fold is register adds, and the partial sums lie
    across threads and warps as the loop's accumulator does: the same reduction tree, so
    the same bits, which lets the tuner count an on-chip tile and a looped row as one
    family (same_bits) and give each batch size the faster of them."""
    if FOLD:
        return tl.sum(tl.sum(tl.reshape(v, [v.shape[0], v.shape[1] // FOLD, FOLD]), 1), 1)
    return tl.sum(v, 1)


@triton.jit
def span_offsets(SPAN: tl.constexpr, BLOCK: tl.constexpr):
    """Column offsets [SPAN // BLOCK, BLOCK] of a looped row that fits in SPAN columns: its
    column tiles stacked, for a pass that holds the whole row at once (EARLY, a small
    batch). Elementwise work on it gives the bits of the column loop's."""
    return (tl.arange(0, SPAN // BLOCK) * BLOCK)[:, None] + tl.arange(0, BLOCK)[None, :]


# --- tiles of ROWS rows: [ROWS, BLOCK] per step of a program -------------------------
# A program that holds several short rows at once keeps more bytes in flight per
# reduction (each tl.sum across warps is a barrier with no loads outstanding) and pays
# that barrier once for ROWS rows. Each row is still reduced along axis 1 on its own, in
# the same order whichever tile slot it sits in: results do not depend on the batch.

@triton.jit
def tile_offsets(tile, rows, cols, ROWS: tl.constexpr, BLOCK: tl.constexpr, FULL: tl.constexpr = False):
    """Element offsets [ROWS, BLOCK] (int64) of row tile ``tile``, and its row mask [ROWS, 1].
    FULL: every row of the tile exists (a grid of one program per row: the grid is the row
    count), so the mask is constant and the loads and stores go out unpredicated, without
    waiting on a compare with ``rows`` (sm_90, LayerNorm 1x4096 fp32 on 16 warps: the first
    load 5 instructions sooner)."""
    r = tile * ROWS + tl.arange(0, ROWS)
    offs = r.to(tl.int64)[:, None] * cols + tl.arange(0, BLOCK)[None, :]
    if FULL:
        return offs, tl.full([ROWS, 1], True, tl.int1)
    return offs, (r < rows)[:, None]


@triton.jit
def tile_mask(ok, cols, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """The element mask of a tile: its rows, and its columns unless the row fills the block.
    A row-only mask is constant along a row, so the accesses stay 16-byte vectors."""
    if EVEN:
        mask = tl.broadcast_to(ok, [ok.shape[0], BLOCK])
    else:
        mask = ok & (tl.arange(0, BLOCK) < cols)[None, :]
    return mask


@triton.jit
def load_tile_raw(ptr, offs, ok, cols, BLOCK: tl.constexpr, EVEN: tl.constexpr, LOAD: tl.constexpr,
                  ORDERED: tl.constexpr = False):
    """A tile of rows in its own dtype, 0 where masked. ORDERED: a volatile load (below)."""
    return tl.load(ptr + offs, mask=tile_mask(ok, cols, BLOCK, EVEN), other=0.0,
                   eviction_policy="" if ORDERED else LOAD, volatile=ORDERED)   # ptxas: no hint on volatile


@triton.jit
def load_tile(ptr, offs, ok, cols, BLOCK: tl.constexpr, EVEN: tl.constexpr, LOAD: tl.constexpr,
              ORDERED: tl.constexpr = False):
    """A tile of rows as fp32, 0 where masked."""
    return load_tile_raw(ptr, offs, ok, cols, BLOCK, EVEN, LOAD, ORDERED).to(tl.float32)


@triton.jit
def first_tile(ptr, pid, rows, cols, ROWS: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr,
               LOAD: tl.constexpr, PREFETCH: tl.constexpr):
    """Before a tile loop: with PREFETCH, the program's first tile, its loads issued (in its
    own dtype, half the registers of fp32 for 16-bit data); else nothing."""
    if PREFETCH:
        offs, ok = tile_offsets(pid, rows, cols, ROWS, BLOCK)
        ahead = load_tile_raw(ptr, offs, ok, cols, BLOCK, EVEN, LOAD)
    else:
        ahead = 0
    return ahead


@triton.jit
def tile_input(ptr, ahead, tile, programs, rows, cols, ROWS: tl.constexpr, BLOCK: tl.constexpr,
               EVEN: tl.constexpr, LOAD: tl.constexpr, PREFETCH: tl.constexpr, FULL: tl.constexpr = False):
    """This tile's rows as fp32, and what to carry to the next step. With PREFETCH (a
    persistent grid) the next tile's loads are issued here, before this tile's reduction:
    they are in flight while its barriers and stores run, which one program per SM could
    not otherwise overlap. Without, the tile is loaded now."""
    if PREFETCH:
        x = ahead.to(tl.float32)
        offs, ok = tile_offsets(tile + programs, rows, cols, ROWS, BLOCK)
        ahead = load_tile_raw(ptr, offs, ok, cols, BLOCK, EVEN, LOAD)
    else:
        offs, ok = tile_offsets(tile, rows, cols, ROWS, BLOCK, FULL)
        x = load_tile(ptr, offs, ok, cols, BLOCK, EVEN, LOAD)
    return x, ahead


@triton.jit
def store_tile(ptr, offs, ok, cols, y, BLOCK: tl.constexpr, EVEN: tl.constexpr, STORE: tl.constexpr):
    """Store a tile, rounded once into the output's dtype."""
    tl.store(ptr + offs, y.to(ptr.dtype.element_ty), mask=tile_mask(ok, cols, BLOCK, EVEN),
             cache_modifier=STORE)


@triton.jit
def load_columns_raw(ptr, cols, BLOCK: tl.constexpr, EVEN: tl.constexpr, ORDERED: tl.constexpr = False):
    """A per-column operand (a norm's weight or bias) as [1, BLOCK] in its own dtype.
    Loaded in every tile step, from L2 after the first: held across a persistent loop it
    would cost a register per element for the whole kernel, and registers decide how many
    programs (and so how many bytes in flight) fit on an SM. ORDERED: a volatile load (below)."""
    c = tl.arange(0, BLOCK)[None, :]
    if EVEN:
        v = tl.load(ptr + c, volatile=ORDERED)
    else:
        v = tl.load(ptr + c, mask=c < cols, other=0.0, volatile=ORDERED)
    return v


@triton.jit
def load_columns(ptr, cols, BLOCK: tl.constexpr, EVEN: tl.constexpr, ORDERED: tl.constexpr = False):
    """load_columns_raw as fp32."""
    return load_columns_raw(ptr, cols, BLOCK, EVEN, ORDERED).to(tl.float32)


# --- a small batch's loads, all out at once (ORDERED) ---------------------------------
# A row kernel loads x, reduces it, and only then needs its other operands (g, b; the
# chain's g, u, r). Loaded early in the source (EARLY), they still go out late: ptxas
# issues them once x has arrived, in x's registers (sm_90 SASS, LayerNorm 1x4096 bf16 on 8
# warps: g's and b's LDGs sit after x's in-thread sum and four of its shuffles), so a
# batch that starts with a cold L2 waits on memory twice. Volatile loads ptxas keeps in
# program order (ld.volatile, LDG.E.STRONG.SYS: relaxed system-scope loads, served by L2
# like any other for device memory): loaded volatile, the operands first and x last, every
# load of the tile is issued before the first instruction that waits for one. The same
# bits: only the order of the loads moves. A looped row that fits in SPAN (EARLY's whole
# operands) takes it too: there the operands otherwise wait for x's first pass and its
# reduction. Not for large batches: at 1823x781 fp32, where rows are not 16-byte vectors,
# it ran 2-3x slower on the H200 (why is not known: volatile loads skip L1, and there every
# program reads g and b again). The tuner measures it; it is no default.
