"""Triton LayerNorm: y = (x - mean) · rsqrt(var + eps) · g + b, statistics in fp32.

Bytes: read x, g, b; write y. Rows of up to 32768 elements stay in registers (x read
once), in tiles of ROWS rows per program step (as the Triton rmsnorm); longer rows (or any,
when the tuner finds it faster) take a column loop that keeps the row in L2 (evict_last)
and reads it again from there to normalise (evict_first).

  welford   Chan et al.'s parallel Welford: statistics (count, mean, M2) of groups of the
            row, merged pairwise by an associative combine (_chan_merge) in tl.reduce's
            tree. On chip a group is one thread's 16-byte vector of the row (GROUP
            elements), so its count, mean and M2 come from registers with no exchange;
            only the merge crosses threads. In the column loop each lane keeps a running
            Welford update over the tiles. Stable for any mean.
  two_pass  mean first, then the sum of (x - mean)²: stable; in the column loop x is read
            three times (mean, variance, output).
  naive     E[x²] - E[x]² from one pass: the sums are large when |mean| >> std and their
            difference loses every digit. The NEGATIVE CONTROL: it must fail 'large_mean'.
"""
import torch
import triton
import triton.language as tl

from harness.registry import impl
from impls._frameworks.triton.device import (first_pass, first_tile, load_columns_raw, load_tile,
                                            row_sums, span_offsets, store_tile, tile_input, tile_mask, tile_offsets)
from impls._frameworks.triton.launch import configured
from impls._frameworks.triton.rows import ROW_OPTIONS, row_block, row_choice, row_config, row_launcher


@triton.jit
def _chan_merge(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """Combine the (mean, M2, count) of two groups (Chan, Golub & LeVeque)."""
    n = n_a + n_b
    frac_b = tl.where(n == 0, 0.0, n_b / tl.maximum(n, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * frac_b, m2_a + m2_b + delta * delta * n_a * frac_b, n


@triton.jit
def _welford_groups(x3, m3, cols, GROUP: tl.constexpr, EVEN: tl.constexpr):
    """(mean, biased variance) [ROWS] of on-chip rows viewed as groups ``x3`` [ROWS, BLOCK //
    GROUP, GROUP] (``m3``: 1.0 where an element is in the row): each group's count, mean and
    M2 centred on its own mean, from one thread's registers; then Chan-merged across the
    row's groups in tl.reduce's tree."""
    if EVEN:
        n_g = tl.full([x3.shape[0], x3.shape[1]], GROUP, tl.float32)
        mean_g = tl.sum(x3, 2) / GROUP
        dev = x3 - mean_g[:, :, None]
    else:
        n_g = tl.sum(m3, 2)
        mean_g = tl.sum(x3, 2) / tl.maximum(n_g, 1.0)
        dev = (x3 - mean_g[:, :, None]) * m3
    mean, m2, n = tl.reduce((mean_g, tl.sum(dev * dev, 2), n_g), 1, _chan_merge)
    return mean, m2 / cols


@triton.jit
def _on_chip_tile(x_ptr, g_ptr, b_ptr, y_ptr, ahead, tile, programs, rows, cols, eps, VARIANT: tl.constexpr,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr, GROUP: tl.constexpr,
                  PREFETCH: tl.constexpr, EARLY: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr,
                  ORDERED: tl.constexpr, FOLD: tl.constexpr, FULL: tl.constexpr):
    """One tile of ROWS on-chip rows, normalised and stored; returns what tile_input carries
    to the next tile (PREFETCH). FULL: every row of the tile exists (tile_offsets)."""
    if ORDERED:   # g, b, then x, every load out at once (_triton_rows: ORDERED)
        g = load_columns_raw(g_ptr, cols, BLOCK, EVEN, True)
        b = load_columns_raw(b_ptr, cols, BLOCK, EVEN, True)
        offs, ok = tile_offsets(tile, rows, cols, ROWS, BLOCK, FULL)
        x = load_tile(x_ptr, offs, ok, cols, BLOCK, EVEN, LOAD, True)
    else:   # (the offsets after x's loads are issued, as before ORDERED: the same code)
        x, ahead = tile_input(x_ptr, ahead, tile, programs, rows, cols, ROWS, BLOCK, EVEN, LOAD, PREFETCH, FULL)
        offs, ok = tile_offsets(tile, rows, cols, ROWS, BLOCK, FULL)
        if EARLY:
            g = load_columns_raw(g_ptr, cols, BLOCK, EVEN)
            b = load_columns_raw(b_ptr, cols, BLOCK, EVEN)
    if VARIANT == 0:
        # normalised in the grouped view too: computed from the flat view, y would
        # take the statistics' layout and x would cross threads through shared memory
        shape3: tl.constexpr = [ROWS, BLOCK // GROUP, GROUP]
        x3 = tl.reshape(x, shape3)
        m3 = tl.reshape(tl.broadcast_to(tile_mask(ok, cols, BLOCK, EVEN), [ROWS, BLOCK]).to(tl.float32),
                        shape3)
        mean, var = _welford_groups(x3, m3, cols, GROUP, EVEN)
        if not (EARLY or ORDERED):   # after the statistics: fewer live registers
            g = load_columns_raw(g_ptr, cols, BLOCK, EVEN)
            b = load_columns_raw(b_ptr, cols, BLOCK, EVEN)
        y3 = (x3 - mean[:, None, None]) * tl.math.rsqrt(var + eps)[:, None, None] \
            * tl.reshape(g.to(tl.float32), [1, BLOCK // GROUP, GROUP]) \
            + tl.reshape(b.to(tl.float32), [1, BLOCK // GROUP, GROUP])
        y = tl.reshape(y3, [ROWS, BLOCK])
    else:
        mean = row_sums(x, FOLD) / cols
        if VARIANT == 1:
            dev = x - mean[:, None]
            if not EVEN:
                dev = tl.where(tile_mask(ok, cols, BLOCK, EVEN), dev, 0.0)
            var = row_sums(dev * dev, FOLD) / cols
        else:
            var = tl.sum(x * x, 1) / cols - mean * mean   # cancels: the negative control
        if not (EARLY or ORDERED):
            g = load_columns_raw(g_ptr, cols, BLOCK, EVEN)
            b = load_columns_raw(b_ptr, cols, BLOCK, EVEN)
        y = (x - mean[:, None]) * tl.math.rsqrt(var + eps)[:, None] * g.to(tl.float32) + b.to(tl.float32)
    store_tile(y_ptr, offs, ok, cols, y, BLOCK, EVEN, STORE)
    return ahead


@triton.jit
def _looped_row(x_ptr, g_ptr, b_ptr, y_ptr, row, cols, eps, VARIANT: tl.constexpr, BLOCK: tl.constexpr,
                EARLY: tl.constexpr, SPAN: tl.constexpr, STORE: tl.constexpr, ORDERED: tl.constexpr):
    """One row in BLOCK-wide column tiles: the statistics by VARIANT, then x again (from L2)
    to normalise."""
    c = tl.arange(0, BLOCK)
    end = SPAN if SPAN else cols
    UNROLL: tl.constexpr = SPAN // BLOCK if SPAN else 1   # a static trip count: unrolled in Triton's IR
    WHOLE: tl.constexpr = (EARLY or ORDERED) and SPAN > 0   # the output pass holds the whole row
    base = tl.cast(row, tl.int64) * cols
    if WHOLE:   # g's and b's loads go out with x's first pass, not after the statistics
        span = span_offsets(SPAN, BLOCK)
        g = tl.load(g_ptr + span, mask=span < cols, other=0.0, volatile=ORDERED)
        b = tl.load(b_ptr + span, mask=span < cols, other=0.0, volatile=ORDERED)
    if VARIANT == 0:   # a running Welford update per lane, then the lanes merged
        n = tl.zeros([BLOCK], tl.float32)
        mean_l = tl.zeros([BLOCK], tl.float32)
        m2_l = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):
            mask = start + c < cols
            x = first_pass(x_ptr, base, start, c, cols, ORDERED)
            n_new = n + mask.to(tl.float32)
            delta = tl.where(mask, x - mean_l, 0.0)
            mean_l += delta / tl.maximum(n_new, 1.0)
            m2_l += delta * tl.where(mask, x - mean_l, 0.0)
            n = n_new
        mean, m2, total = tl.reduce((mean_l, m2_l, n), 0, _chan_merge)
        var = m2 / cols
    elif VARIANT == 1:
        # accumulators start at -0.0, the exact identity of + (-0 + x is x for every x;
        # +0 + -0 is +0), as row_sums' fold: written as a product, since Triton emits a
        # -0.0 literal as +0.0, an add the compiler must then keep
        s = tl.zeros([BLOCK], tl.float32) * -1.0
        for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):
            s += first_pass(x_ptr, base, start, c, cols, ORDERED)
        mean = tl.sum(s, 0) / cols
        s2 = tl.zeros([BLOCK], tl.float32) * -1.0
        for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):
            mask = start + c < cols
            # not the first pass's load (evict_last): the compiler merges identical
            # loads and would hold the row in registers across the mean's reduction
            # (sm_90, bf16 16384 in 4096-tiles on 16 warps: 63 registers, not 40)
            x = tl.load(x_ptr + base + start + c, mask=mask, other=0.0).to(tl.float32)
            dev = tl.where(mask, x - mean, 0.0)
            s2 += dev * dev
        var = tl.sum(s2, 0) / cols
    else:
        s = tl.zeros([BLOCK], tl.float32)
        s2 = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):
            x = first_pass(x_ptr, base, start, c, cols, ORDERED)
            s += x
            s2 += x * x
        mean = tl.sum(s, 0) / cols
        var = tl.sum(s2, 0) / cols - mean * mean
    rstd = tl.math.rsqrt(var + eps)
    if WHOLE:   # the same formula element by element as the tile loop below: the same bits
        x = tl.load(x_ptr + base + span, mask=span < cols, other=0.0, eviction_policy="evict_first")
        y = (x.to(tl.float32) - mean) * rstd * g.to(tl.float32) + b.to(tl.float32)
        tl.store(y_ptr + base + span, y.to(y_ptr.dtype.element_ty), mask=span < cols, cache_modifier=STORE)
    else:
        for start in tl.range(0, end, BLOCK, loop_unroll_factor=UNROLL):
            mask = start + c < cols
            x = tl.load(x_ptr + base + start + c, mask=mask, other=0.0,
                        eviction_policy="evict_first").to(tl.float32)
            g = tl.load(g_ptr + start + c, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            b = tl.load(b_ptr + start + c, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            y = (x - mean) * rstd * g + b
            tl.store(y_ptr + base + start + c, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=STORE)


@triton.jit
def _layernorm(x_ptr, g_ptr, b_ptr, y_ptr, rows, cols, eps, programs, COLS: tl.constexpr,
               VARIANT: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr, ON_CHIP: tl.constexpr,
               EVEN: tl.constexpr, GROUP: tl.constexpr, PREFETCH: tl.constexpr, EARLY: tl.constexpr,
               SPAN: tl.constexpr, PERSISTENT: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr,
               ORDERED: tl.constexpr = False, FOLD: tl.constexpr = 0):
    """VARIANT 0: welford, 1: two_pass, 2: naive. PREFETCH, EARLY and ORDERED as in the rmsnorm.
    SPAN (looped rows): a static bound for the column loops, as in the rmsnorm; with EARLY
    there, g and b are loaded whole before the first pass and the output pass takes the row
    in one step (on the H200 the tuner takes it for small batches: 2048-column tiles for
    4096-column rows, 1-2.7% ahead at ~256 MiB).
    FOLD (two_pass, on chip): the sums folded as a column loop of FOLD-wide tiles adds them
    (row_sums), so that an on-chip tile may write a looped config's bits."""
    cols = COLS if COLS else cols   # a masked row: its length at compile time (static_cols)
    pid = tl.program_id(0)
    if ON_CHIP:
        ahead = first_tile(x_ptr, pid, rows, cols, ROWS, BLOCK, EVEN, LOAD, PREFETCH)
        if PERSISTENT:
            for tile in range(pid, tl.cdiv(rows, ROWS), programs):
                ahead = _on_chip_tile(x_ptr, g_ptr, b_ptr, y_ptr, ahead, tile, programs, rows, cols, eps, VARIANT,
                                      ROWS, BLOCK, EVEN, GROUP, PREFETCH, EARLY, LOAD, STORE, ORDERED, FOLD, False)
        else:   # one program per tile: straight-line code (_triton_rows: one_tile)
            _on_chip_tile(x_ptr, g_ptr, b_ptr, y_ptr, ahead, pid, programs, rows, cols, eps, VARIANT, ROWS, BLOCK,
                          EVEN, GROUP, PREFETCH, EARLY, LOAD, STORE, ORDERED, FOLD, ROWS == 1)
    else:   # ROWS == 1: one row at a time, BLOCK-wide column tiles
        if PERSISTENT:
            for row in range(pid, rows, programs):
                _looped_row(x_ptr, g_ptr, b_ptr, y_ptr, row, cols, eps, VARIANT, BLOCK, EARLY, SPAN, STORE, ORDERED)
        else:
            _looped_row(x_ptr, g_ptr, b_ptr, y_ptr, pid, cols, eps, VARIANT, BLOCK, EARLY, SPAN, STORE, ORDERED)


VARIANTS = {"welford": 0, "two_pass": 1, "naive": 2}
OPTIONS = (*ROW_OPTIONS, "looped_early", "predicated")   # the switches an on-chip row's config may take


def layernorm_launcher(x, weight, bias, eps, out, variant: str):
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError("the Triton layernorm takes contiguous [rows, cols] tensors")
    rows, cols = x.shape
    code = VARIANTS[variant]
    block, on_chip = row_block(cols)
    even = on_chip and block == cols
    group = min(block, max(1, 16 // x.dtype.itemsize))   # one 16-byte vector per Welford group

    def bind(cfg, args, n_rows, variant_code=code):
        xx, gg, bb, yy = args
        return row_launcher(_layernorm, cfg, n_rows, xx.device, xx, gg, bb, yy, n_rows, cols, eps,
                            VARIANT=variant_code, BLOCK=block, ON_CHIP=on_chip, EVEN=even, GROUP=group)

    def scratch(n_rows):
        xs = torch.randn(n_rows, cols, device=x.device).to(x.dtype)
        return xs, weight, bias, torch.empty_like(xs)

    # The negative control runs the two-pass kernel's config: its speed is not the point.
    tuned_as = VARIANTS["two_pass"] if code == VARIANTS["naive"] else code
    cfg = row_choice(("layernorm", "two_pass" if tuned_as == VARIANTS["two_pass"] else variant), rows, cols, block,
                     on_chip, x.dtype, x.device, scratch, lambda cfg, args, n: bind(cfg, args, n, tuned_as),
                     options=OPTIONS if on_chip else ())
    config = row_config(cfg, block, on_chip)
    if tuned_as != code:
        config["tuned_as"] = "two_pass"
    return configured(bind(cfg, (x, weight, bias, out), rows), config)

@impl("layernorm", "triton", variant="welford")
def bind_welford(x, weight, bias, eps, out):
    return layernorm_launcher(x, weight, bias, eps, out, "welford")


@impl("layernorm", "triton", variant="two_pass")
def bind_two_pass(x, weight, bias, eps, out):
    return layernorm_launcher(x, weight, bias, eps, out, "two_pass")


@impl("layernorm", "triton", variant="naive")
def bind_naive(x, weight, bias, eps, out):
    return layernorm_launcher(x, weight, bias, eps, out, "naive")
