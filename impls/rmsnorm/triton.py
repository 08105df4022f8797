"""Triton RMSNorm: y = x · rsqrt(mean(x²) + eps) · g, statistics in fp32.

naive: the tutorial's form, a row per program in one block of next_power_of_2(cols): read
x and g, write y, by a fixed launch rule (impls/_frameworks/triton/naive.py), rows up to
32768. The tuned kernel (variant tuned), below:

Bytes: read x (R·H·s) and g (H·s), write y (R·H·s). A row of up to 32768 elements is
loaded once into registers: the sum of squares and the scaling both come from there, so
x is read exactly once. Each program step takes a tile of ROWS rows (several short rows
per step keep more loads in flight per reduction); g comes from L2 after the first tile.
A persistent grid may prefetch: the next tile's loads overlap this tile's reduction.
Rows whose length is a multiple of the block take unmasked-column, 16-byte vector loads
(EVEN). Looped rows (longer than 32768, or when the tuner finds it faster, as
torch.compile's kernel does): a column loop for the sum of squares that keeps the row in
L2, then a second pass that reads it from there to scale: few registers per thread, many
programs per SM; for a row that fits on chip the loops have a static trip count (SPAN)
and unroll, so the whole row's loads are in flight at once.
"""
import torch
import triton
import triton.language as tl

from harness.registry import impl
from impls._frameworks.triton.device import (first_tile, load_columns_raw, load_tile, span_offsets,
                                            store_tile, sum_of_squares, tile_input, tile_offsets)
from impls._frameworks.triton.launch import configured
from impls._frameworks.triton.naive import row_per_program
from impls._frameworks.triton.rows import (BATCH_ARGS, ROW_OPTIONS, row_block, row_choice, row_config,
                                          row_launcher)


OPTIONS = (*ROW_OPTIONS, "looped_early")   # the switches an on-chip row's config may take


@triton.jit
def _rmsnorm_naive(x_ptr, g_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    """Read a row (H elements) and g (H, from L2 after the first rows), write H."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + c, mask=c < cols, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + c, mask=c < cols, other=0.0).to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(x * x, 0) / cols + eps)
    tl.store(y_ptr + row * cols + c, (x * inv_rms * g).to(y_ptr.dtype.element_ty), mask=c < cols)


@triton.jit
def _rms_tile(x_ptr, g_ptr, y_ptr, ahead, tile, programs, rows, cols, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr,
              EVEN: tl.constexpr, PREFETCH: tl.constexpr, EARLY: tl.constexpr, LOAD: tl.constexpr,
              STORE: tl.constexpr, ORDERED: tl.constexpr, FULL: tl.constexpr):
    """One tile of ROWS on-chip rows, normalised and stored; returns what tile_input carries
    to the next tile (PREFETCH). FULL: every row of the tile exists (tile_offsets)."""
    if ORDERED:   # g, then x, both out at once (_triton_rows: ORDERED)
        g = load_columns_raw(g_ptr, cols, BLOCK, EVEN, True)
        offs, ok = tile_offsets(tile, rows, cols, ROWS, BLOCK, FULL)
        x = load_tile(x_ptr, offs, ok, cols, BLOCK, EVEN, LOAD, True)
    else:
        x, ahead = tile_input(x_ptr, ahead, tile, programs, rows, cols, ROWS, BLOCK, EVEN, LOAD, PREFETCH, FULL)
        if EARLY:
            g = load_columns_raw(g_ptr, cols, BLOCK, EVEN)
    inv_rms = tl.math.rsqrt(tl.sum(x * x, 1) / cols + eps)
    if not (EARLY or ORDERED):
        g = load_columns_raw(g_ptr, cols, BLOCK, EVEN)
    # after the reduction (without ORDERED): the offsets' registers are not held across it
    offs, ok = tile_offsets(tile, rows, cols, ROWS, BLOCK, FULL)
    store_tile(y_ptr, offs, ok, cols, x * inv_rms[:, None] * g.to(tl.float32), BLOCK, EVEN, STORE)
    return ahead


@triton.jit
def _rms_row(x_ptr, g_ptr, y_ptr, row, cols, eps, BLOCK: tl.constexpr, EARLY: tl.constexpr, SPAN: tl.constexpr,
             STORE: tl.constexpr, ORDERED: tl.constexpr):
    """One row in BLOCK-wide column tiles: sum(x²), then x again (from L2) to normalise."""
    c = tl.arange(0, BLOCK)
    end = SPAN if SPAN else cols
    UNROLL: tl.constexpr = SPAN // BLOCK if SPAN else 1   # a static trip count: unrolled in Triton's IR
    WHOLE: tl.constexpr = (EARLY or ORDERED) and SPAN > 0   # the second pass holds the whole row
    base = tl.cast(row, tl.int64) * cols
    if WHOLE:   # g's loads go out with x's first pass, not after its reduction
        span = span_offsets(SPAN, BLOCK)
        g = tl.load(g_ptr + span, mask=span < cols, other=0.0, volatile=ORDERED)
    inv_rms = tl.math.rsqrt(sum_of_squares(x_ptr, base, cols, BLOCK, SPAN, ORDERED) / cols + eps)
    if WHOLE:
        x = tl.load(x_ptr + base + span, mask=span < cols, other=0.0, eviction_policy="evict_first")
        y = x.to(tl.float32) * inv_rms * g.to(tl.float32)
        tl.store(y_ptr + base + span, y.to(y_ptr.dtype.element_ty), mask=span < cols, cache_modifier=STORE)
    else:
        for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):
            mask = start + c < cols
            x = tl.load(x_ptr + base + start + c, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            g = tl.load(g_ptr + start + c, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            y = (x * inv_rms * g).to(y_ptr.dtype.element_ty)
            tl.store(y_ptr + base + start + c, y, mask=mask, cache_modifier=STORE)


@triton.jit(do_not_specialize=BATCH_ARGS)
def _rmsnorm(x_ptr, g_ptr, y_ptr, rows, cols, eps, programs, COLS: tl.constexpr,
             ROWS: tl.constexpr, BLOCK: tl.constexpr, ON_CHIP: tl.constexpr, EVEN: tl.constexpr,
             PREFETCH: tl.constexpr, EARLY: tl.constexpr, SPAN: tl.constexpr, PERSISTENT: tl.constexpr,
             LOAD: tl.constexpr, STORE: tl.constexpr, ORDERED: tl.constexpr = False):
    """PREFETCH: the next tile's loads go out before this tile's reduction. EARLY: g is
    loaded with x (one memory latency for a small batch, where it is not in L2 yet) rather
    than after the reduction (fewer live registers); on a looped row that fits in SPAN,
    the whole of g, and the second pass takes the row in one step. ORDERED (in place of
    EARLY and PREFETCH): g and x (a looped row's first pass) by volatile loads, g first, so
    that ptxas issues both before x's reduction (_triton_rows). SPAN (looped rows): a static
    bound for the column loops, see sum_of_squares."""
    cols = COLS if COLS else cols   # a masked row: its length at compile time (static_cols)
    pid = tl.program_id(0)
    if ON_CHIP:
        ahead = first_tile(x_ptr, pid, rows, cols, ROWS, BLOCK, EVEN, LOAD, PREFETCH)
        if PERSISTENT:
            for tile in range(pid, tl.cdiv(rows, ROWS), programs):
                ahead = _rms_tile(x_ptr, g_ptr, y_ptr, ahead, tile, programs, rows, cols, eps, ROWS, BLOCK, EVEN,
                                  PREFETCH, EARLY, LOAD, STORE, ORDERED, False)
        else:   # one program per tile: straight-line code (_triton_rows: one_tile)
            _rms_tile(x_ptr, g_ptr, y_ptr, ahead, pid, programs, rows, cols, eps, ROWS, BLOCK, EVEN, PREFETCH, EARLY,
                      LOAD, STORE, ORDERED, ROWS == 1)
    else:   # ROWS == 1: one row at a time, BLOCK-wide column tiles
        if PERSISTENT:
            for row in range(pid, rows, programs):
                _rms_row(x_ptr, g_ptr, y_ptr, row, cols, eps, BLOCK, EARLY, SPAN, STORE, ORDERED)
        else:
            _rms_row(x_ptr, g_ptr, y_ptr, pid, cols, eps, BLOCK, EARLY, SPAN, STORE, ORDERED)


def rmsnorm_launcher(x, weight, eps, out):
    """A launcher writing rmsnorm(x) into ``out`` (also the first kernel of the unfused chain)."""
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError("the Triton rmsnorm takes contiguous [rows, cols] tensors")
    rows, cols = x.shape
    block, on_chip = row_block(cols)
    even = on_chip and block == cols

    def bind(cfg, args, n_rows):
        xx, gg, yy = args
        return row_launcher(_rmsnorm, cfg, n_rows, xx.device, xx, gg, yy, n_rows, cols, eps,
                            BLOCK=block, ON_CHIP=on_chip, EVEN=even)

    def scratch(n_rows):
        xs = torch.randn(n_rows, cols, device=x.device).to(x.dtype)
        return xs, weight, torch.empty_like(xs)

    cfg = row_choice(("rmsnorm", "tuned"), rows, cols, block, on_chip, x.dtype, x.device, scratch, bind,
                     options=OPTIONS if on_chip else ())
    return configured(bind(cfg, (x, weight, out), rows), row_config(cfg, block, on_chip))


@impl("rmsnorm", "triton", variant="naive")
def bind_naive(x, weight, eps, out):
    return row_per_program(_rmsnorm_naive, "rmsnorm", x, out, weight, out, x.shape[1], eps)


@impl("rmsnorm", "triton", variant="tuned")
def bind(x, weight, eps, out):
    return rmsnorm_launcher(x, weight, eps, out)
