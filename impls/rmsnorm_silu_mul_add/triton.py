"""Triton y = silu(rmsnorm(x; g)) · u + r.

  fused    one kernel: per row, x, u, r read once, y written once (4·R·H·s + H·s bytes);
           the norm's statistics and the pointwise tail share the registers. Rows up to
           32768 stay on chip; longer rows (or any, when the tuner finds it faster, as
           torch.compile's kernel does) loop over columns, x read again from L2.
  unfused  this framework's separate kernels: the Triton rmsnorm, then silu, mul and add
           as elementwise kernels, each intermediate rounded to the dtype, written and
           read back: ~10·R·H·s bytes for the same result.
silu(n) = n·sigmoid(n) with one exp, kept accurate where n·e^n is tiny but not zero in
fp32 (see _silu). tl.exp compiles to a multiply by log2(e) and ex2.approx.f32.
"""
import torch
import triton
import triton.language as tl

from harness.registry import impl
from impls._frameworks.triton.device import (load_columns, load_tile, span_offsets, store_tile,
                                            sum_of_squares, tile_offsets)
from impls._frameworks.triton.elementwise import launch_1d
from impls._frameworks.triton.launch import configured
from impls._frameworks.triton.rows import row_block, row_choice, row_config, row_launcher
from impls.rmsnorm.triton import rmsnorm_launcher

# e^-24: for n < 0, silu takes the exp of n + 24 and scales back at the end (see _silu)
_EXP_MINUS_24 = tl.constexpr(3.775134544279098e-11)


@triton.jit
def _silu(n):
    """silu(n) = n·sigmoid(n), one exp. The usual n / (1 + exp(-n)) (PyTorch's too) returns
    0 for n < -88.7, where exp(-n) overflows, though n·e^n is a normal fp32 down to
    n = -91.6 and nonzero to ~-108 (and bf16 has the same range). For n < 0 the exp is
    taken of n + 24, normal down to n = -111, and the product scaled by e^-24 last, so the
    one rounding into the subnormal range is the final one ((n·e)·e^-24, in that order)."""
    e = tl.exp(24.0 - tl.abs(n))   # e^-|n|, scaled by e^24: normal down to n = -111
    # sigmoid(n) = 1 / (1 + e^-n) for n >= 0, e^n / (1 + e^n) for n < 0: the same e^-|n|
    return tl.where(n < 0, n * e * _EXP_MINUS_24, n) / (1.0 + e * _EXP_MINUS_24)


@triton.jit
def _tail(x, inv_rms, g, u, r):
    """silu(x · inv_rms · g) · u + r in fp32 (x and g in fp32; u and r in fp32 or their own
    dtype): one formula for every path of the fused kernel, so that the paths a batch may
    switch between (EARLY or not) give the same bits."""
    return _silu(x * inv_rms * g) * u.to(tl.float32) + r.to(tl.float32)


@triton.jit
def _fused_tile(x_ptr, g_ptr, u_ptr, r_ptr, y_ptr, tile, rows, cols, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr,
                EVEN: tl.constexpr, EARLY: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr,
                ORDERED: tl.constexpr, FULL: tl.constexpr):
    """One tile of ROWS on-chip rows through the whole chain, stored. FULL: every row of the
    tile exists (tile_offsets)."""
    offs, ok = tile_offsets(tile, rows, cols, ROWS, BLOCK, FULL)
    if ORDERED:   # g, u, r, then x: every load out before x's reduction (_triton_rows)
        g = load_columns(g_ptr, cols, BLOCK, EVEN, True)
        u = load_tile(u_ptr, offs, ok, cols, BLOCK, EVEN, LOAD, True)
        r = load_tile(r_ptr, offs, ok, cols, BLOCK, EVEN, LOAD, True)
        x = load_tile(x_ptr, offs, ok, cols, BLOCK, EVEN, LOAD, True)
    else:
        x = load_tile(x_ptr, offs, ok, cols, BLOCK, EVEN, LOAD)
        u = load_tile(u_ptr, offs, ok, cols, BLOCK, EVEN, LOAD)
        r = load_tile(r_ptr, offs, ok, cols, BLOCK, EVEN, LOAD)
        if EARLY:
            g = load_columns(g_ptr, cols, BLOCK, EVEN)
    inv_rms = tl.math.rsqrt(tl.sum(x * x, 1) / cols + eps)
    if not (EARLY or ORDERED):
        g = load_columns(g_ptr, cols, BLOCK, EVEN)
    store_tile(y_ptr, offs, ok, cols, _tail(x, inv_rms[:, None], g, u, r), BLOCK, EVEN, STORE)


@triton.jit
def _fused_row(x_ptr, g_ptr, u_ptr, r_ptr, y_ptr, row, cols, eps, BLOCK: tl.constexpr, EARLY: tl.constexpr,
               SPAN: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr, ORDERED: tl.constexpr):
    """One row in BLOCK-wide column tiles: sum(x²), then x again (from L2) with g, u and r."""
    c = tl.arange(0, BLOCK)
    end = SPAN if SPAN else cols
    UNROLL: tl.constexpr = SPAN // BLOCK if SPAN else 1   # a static trip count: unrolled in Triton's IR
    WHOLE: tl.constexpr = (EARLY or ORDERED) and SPAN > 0   # the second pass holds the whole row
    base = tl.cast(row, tl.int64) * cols
    if WHOLE:   # g, u and r in flight with x's first pass
        span = span_offsets(SPAN, BLOCK)
        m = span < cols
        g = tl.load(g_ptr + span, mask=m, other=0.0, volatile=ORDERED)
        u = tl.load(u_ptr + base + span, mask=m, other=0.0, eviction_policy="" if ORDERED else LOAD,
                    volatile=ORDERED)
        r = tl.load(r_ptr + base + span, mask=m, other=0.0, eviction_policy="" if ORDERED else LOAD,
                    volatile=ORDERED)
    inv_rms = tl.math.rsqrt(sum_of_squares(x_ptr, base, cols, BLOCK, SPAN, ORDERED) / cols + eps)
    if WHOLE:
        x = tl.load(x_ptr + base + span, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
        y = _tail(x, inv_rms, g.to(tl.float32), u, r)
        tl.store(y_ptr + base + span, y.to(y_ptr.dtype.element_ty), mask=m, cache_modifier=STORE)
    else:
        for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):   # x again, from L2
            m = start + c < cols
            x = tl.load(x_ptr + base + start + c, mask=m, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            g = tl.load(g_ptr + start + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
            # u and r are read once: with streaming hints (LOAD) they need not
            # displace the rows x keeps in L2 for this pass
            u = tl.load(u_ptr + base + start + c, mask=m, other=0.0, eviction_policy=LOAD).to(tl.float32)
            r = tl.load(r_ptr + base + start + c, mask=m, other=0.0, eviction_policy=LOAD).to(tl.float32)
            y = _tail(x, inv_rms, g, u, r).to(y_ptr.dtype.element_ty)
            tl.store(y_ptr + base + start + c, y, mask=m, cache_modifier=STORE)


@triton.jit
def _fused(x_ptr, g_ptr, u_ptr, r_ptr, y_ptr, rows, cols, eps, programs, COLS: tl.constexpr,
           ROWS: tl.constexpr, BLOCK: tl.constexpr, ON_CHIP: tl.constexpr, EVEN: tl.constexpr,
           EARLY: tl.constexpr, SPAN: tl.constexpr, PERSISTENT: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr,
           ORDERED: tl.constexpr = False):
    """EARLY: g (and, on a looped row that fits in SPAN, the whole of g, u and r) loaded
    with x's first pass rather than after its reduction: one memory latency for a small
    batch, more live registers. ORDERED: g, u, r and x (a looped row's first pass) by
    volatile loads in that order, so that ptxas issues them all before x's reduction
    (_triton_rows). SPAN (looped rows): a static bound for the column loops,
    as in the rmsnorm. LOAD: the eviction policy of the operands read once (x, u and r on
    chip; u and r in a looped row, whose x is kept in L2 for its second pass)."""
    cols = COLS if COLS else cols   # a masked row: its length at compile time (static_cols)
    pid = tl.program_id(0)
    if ON_CHIP:   # tiles of ROWS rows, as the Triton rmsnorm
        if PERSISTENT:
            for tile in range(pid, tl.cdiv(rows, ROWS), programs):
                _fused_tile(x_ptr, g_ptr, u_ptr, r_ptr, y_ptr, tile, rows, cols, eps, ROWS, BLOCK, EVEN, EARLY, LOAD,
                            STORE, ORDERED, False)
        else:   # one program per tile: straight-line code (_triton_rows: one_tile)
            _fused_tile(x_ptr, g_ptr, u_ptr, r_ptr, y_ptr, pid, rows, cols, eps, ROWS, BLOCK, EVEN, EARLY, LOAD, STORE,
                        ORDERED, ROWS == 1)
    else:   # ROWS == 1: one row at a time, BLOCK-wide column tiles
        if PERSISTENT:
            for row in range(pid, rows, programs):
                _fused_row(x_ptr, g_ptr, u_ptr, r_ptr, y_ptr, row, cols, eps, BLOCK, EARLY, SPAN, LOAD, STORE, ORDERED)
        else:
            _fused_row(x_ptr, g_ptr, u_ptr, r_ptr, y_ptr, pid, cols, eps, BLOCK, EARLY, SPAN, LOAD, STORE, ORDERED)


@triton.jit
def _apply(a_ptr, b_ptr, offs, mask, OP: tl.constexpr, LOAD: tl.constexpr):
    a = tl.load(a_ptr + offs, mask=mask, eviction_policy=LOAD).to(tl.float32)
    if OP == 0:
        return _silu(a)
    b = tl.load(b_ptr + offs, mask=mask, eviction_policy=LOAD).to(tl.float32)
    if OP == 1:
        return a * b
    return a + b


@triton.jit
def _pointwise(a_ptr, b_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr,
               LOAD: tl.constexpr, STORE: tl.constexpr):
    """OP 0: y = silu(a), 1: y = a · b, 2: y = a + b; in fp32, rounded once into y.
    Full tiles go unmasked (16-byte vector accesses), the ragged last one masked."""
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        y = _apply(a_ptr, b_ptr, offs, None, OP, LOAD)
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), cache_modifier=STORE)
    else:
        mask = offs < n
        tl.store(y_ptr + offs, _apply(a_ptr, b_ptr, offs, mask, OP, "").to(y_ptr.dtype.element_ty), mask=mask)


OPTIONS = ("early", "ordered", "looped", "looped_early")   # the switches an on-chip row's config may take


@impl("rmsnorm_silu_mul_add", "triton", variant="fused")
def bind_fused(x, weight, u, r, eps, out):
    if not all(t.is_contiguous() for t in (x, u, r, out)):
        raise ValueError("the Triton chain takes contiguous [rows, cols] tensors")
    rows, cols = x.shape
    block, on_chip = row_block(cols)
    even = on_chip and block == cols

    def bind(cfg, args, n_rows):
        xx, uu, rr, yy = args
        return row_launcher(_fused, cfg, n_rows, xx.device, xx, weight, uu, rr, yy, n_rows, cols, eps,
                            BLOCK=block, ON_CHIP=on_chip, EVEN=even)

    def scratch(n_rows):
        xs = torch.randn(n_rows, cols, device=x.device).to(x.dtype)
        return xs, torch.randn_like(xs), torch.randn_like(xs), torch.empty_like(xs)

    cfg = row_choice(("rmsnorm_silu_mul_add", "fused"), rows, cols, block, on_chip, x.dtype, x.device, scratch, bind,
                     options=OPTIONS if on_chip else ())
    return configured(bind(cfg, (x, u, r, out), rows), row_config(cfg, block, on_chip))


@impl("rmsnorm_silu_mul_add", "triton", variant="unfused")
def bind_unfused(x, weight, u, r, eps, out):
    normed, activated, product = (torch.empty_like(x) for _ in range(3))
    n = x.numel()
    norm = rmsnorm_launcher(x, weight, eps, normed)
    silu = launch_1d(_pointwise, (normed, normed, activated), n, "rmsnorm_silu_mul_add silu", x.device, {"OP": 0})
    mul = launch_1d(_pointwise, (activated, u, product), n, "rmsnorm_silu_mul_add mul", x.device, {"OP": 1})
    add = launch_1d(_pointwise, (product, r, out), n, "rmsnorm_silu_mul_add add", x.device, {"OP": 2})

    def launch():
        norm()
        silu()
        mul()
        add()
    return configured(launch, {"rmsnorm": norm.config, "pointwise": add.config, "kernels": 4})
