"""Triton LayerNorm: y = (x - mean) · rsqrt(var + eps) · g + b, statistics in fp32.

Bytes: read x, g, b; write y. Rows of up to 32768 elements stay in registers (x read
once); longer rows take a column loop and read x again to normalise.

  welford   Chan et al.'s parallel Welford: statistics (count, mean, M2) of groups of the
            row, merged pairwise by an associative combine (_chan_merge) in tl.reduce's
            tree. On chip the groups are LANES runs of the row; in the column loop each
            lane keeps a running Welford update over the tiles. Stable for any mean.
  two_pass  mean first, then the sum of (x - mean)²: stable; in the column loop x is read
            three times (mean, variance, output).
  naive     E[x²] - E[x]² from one pass: the sums are large when |mean| >> std and their
            difference loses every digit. The NEGATIVE CONTROL: it must fail 'large_mean'.
"""
import torch
import triton
import triton.language as tl

from harness.registry import impl
from impls._frameworks._triton_rows import load_row, store_row
from impls._frameworks.triton import configured, row_block, row_kwargs, row_programs, tune_rows

LANES = 64   # groups of the on-chip Welford merge (and the width of its tl.reduce tree)


@triton.jit
def _chan_merge(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    """Combine the (mean, M2, count) of two groups (Chan, Golub & LeVeque)."""
    n = n_a + n_b
    frac_b = tl.where(n == 0, 0.0, n_b / tl.maximum(n, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * frac_b, m2_a + m2_b + delta * delta * n_a * frac_b, n


@triton.jit
def _row_stats(x, cols, mask, VARIANT: tl.constexpr, BLOCK: tl.constexpr, LANES_: tl.constexpr):
    """(mean, biased variance) of one on-chip row ``x`` (masked lanes hold 0)."""
    if VARIANT == 0:
        # LANES_ groups of BLOCK // LANES_ contiguous elements (neighbouring registers and
        # lanes: the in-group sums stay inside warps), each with its own count, mean and M2
        # (centred on the group mean), then Chan-merged across the groups in a tree.
        x2 = tl.reshape(x, [LANES_, BLOCK // LANES_])
        m2d = tl.reshape(mask, [LANES_, BLOCK // LANES_]).to(tl.float32)
        n_g = tl.sum(m2d, 1)
        mean_g = tl.sum(x2, 1) / tl.maximum(n_g, 1.0)
        dev = (x2 - mean_g[:, None]) * m2d
        m2_g = tl.sum(dev * dev, 1)
        mean, m2, n = tl.reduce((mean_g, m2_g, n_g), 0, _chan_merge)
        var = m2 / cols
    elif VARIANT == 1:
        mean = tl.sum(x, 0) / cols
        dev = tl.where(mask, x - mean, 0.0)
        var = tl.sum(dev * dev, 0) / cols
    else:
        mean = tl.sum(x, 0) / cols
        var = tl.sum(x * x, 0) / cols - mean * mean   # cancels: the negative control
    return mean, var


@triton.jit
def _layernorm(x_ptr, g_ptr, b_ptr, y_ptr, rows, cols, eps, programs,
               VARIANT: tl.constexpr, BLOCK: tl.constexpr, ON_CHIP: tl.constexpr,
               EVEN: tl.constexpr, LANES_: tl.constexpr,
               LOAD: tl.constexpr, STORE: tl.constexpr):
    """VARIANT 0: welford, 1: two_pass, 2: naive."""
    pid = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    if ON_CHIP:
        cmask = c < cols
        g = tl.load(g_ptr + c, mask=cmask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=cmask, other=0.0).to(tl.float32)
    for row in range(pid, rows, programs):
        base = tl.cast(row, tl.int64) * cols
        if ON_CHIP:
            x = load_row(x_ptr, base, c, cols, 0.0, EVEN, LOAD)
            mean, var = _row_stats(x, cols, cmask, VARIANT, BLOCK, LANES_)
            store_row(y_ptr, base, c, cols, (x - mean) * tl.math.rsqrt(var + eps) * g + b, EVEN, STORE)
        else:
            if VARIANT == 0:   # a running Welford update per lane, then the lanes merged
                n = tl.zeros([BLOCK], tl.float32)
                mean_l = tl.zeros([BLOCK], tl.float32)
                m2_l = tl.zeros([BLOCK], tl.float32)
                for start in range(0, cols, BLOCK):
                    mask = start + c < cols
                    x = tl.load(x_ptr + base + start + c, mask=mask, other=0.0).to(tl.float32)
                    n_new = n + mask.to(tl.float32)
                    delta = tl.where(mask, x - mean_l, 0.0)
                    mean_l += delta / tl.maximum(n_new, 1.0)
                    m2_l += delta * tl.where(mask, x - mean_l, 0.0)
                    n = n_new
                mean, m2, total = tl.reduce((mean_l, m2_l, n), 0, _chan_merge)
                var = m2 / cols
            elif VARIANT == 1:
                s = tl.zeros([BLOCK], tl.float32)
                for start in range(0, cols, BLOCK):
                    s += tl.load(x_ptr + base + start + c, mask=start + c < cols, other=0.0).to(tl.float32)
                mean = tl.sum(s, 0) / cols
                s2 = tl.zeros([BLOCK], tl.float32)
                for start in range(0, cols, BLOCK):
                    mask = start + c < cols
                    x = tl.load(x_ptr + base + start + c, mask=mask, other=0.0).to(tl.float32)
                    dev = tl.where(mask, x - mean, 0.0)
                    s2 += dev * dev
                var = tl.sum(s2, 0) / cols
            else:
                s = tl.zeros([BLOCK], tl.float32)
                s2 = tl.zeros([BLOCK], tl.float32)
                for start in range(0, cols, BLOCK):
                    x = tl.load(x_ptr + base + start + c, mask=start + c < cols, other=0.0).to(tl.float32)
                    s += x
                    s2 += x * x
                mean = tl.sum(s, 0) / cols
                var = tl.sum(s2, 0) / cols - mean * mean
            rstd = tl.math.rsqrt(var + eps)
            for start in range(0, cols, BLOCK):
                mask = start + c < cols
                x = tl.load(x_ptr + base + start + c, mask=mask, other=0.0).to(tl.float32)
                g = tl.load(g_ptr + start + c, mask=mask, other=0.0).to(tl.float32)
                b = tl.load(b_ptr + start + c, mask=mask, other=0.0).to(tl.float32)
                y = (x - mean) * rstd * g + b
                tl.store(y_ptr + base + start + c, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=STORE)


VARIANTS = {"welford": 0, "two_pass": 1, "naive": 2}


def layernorm_launcher(x, weight, bias, eps, out, variant: str):
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError("the Triton layernorm takes contiguous [rows, cols] tensors")
    rows, cols = x.shape
    code = VARIANTS[variant]
    block, on_chip = row_block(cols, custom_combine=code == 0)
    block = max(block, LANES)          # the on-chip Welford groups need BLOCK >= LANES
    even = on_chip and block == cols

    def run(cfg, args, n_rows):
        xx, gg, bb, yy = args
        programs = row_programs(cfg, n_rows, xx.device)
        _layernorm[(programs,)](xx, gg, bb, yy, n_rows, cols, eps, programs, VARIANT=code, BLOCK=block,
                                ON_CHIP=on_chip, EVEN=even, LANES_=LANES, **row_kwargs(cfg))

    def scratch(n_rows):
        xs = torch.randn(n_rows, cols, device=x.device).to(x.dtype)
        return xs, weight, bias, torch.empty_like(xs)

    cfg = tune_rows(("layernorm", code, cols, x.dtype), cols, block, x.dtype, x.device, scratch, run)
    return configured(lambda: run(cfg, (x, weight, bias, out), rows),
                      {**cfg, "BLOCK": block, "on_chip": on_chip})


@impl("layernorm", "triton", variant="welford")
def bind_welford(x, weight, bias, eps, out):
    return layernorm_launcher(x, weight, bias, eps, out, "welford")


@impl("layernorm", "triton", variant="two_pass")
def bind_two_pass(x, weight, bias, eps, out):
    return layernorm_launcher(x, weight, bias, eps, out, "two_pass")


@impl("layernorm", "triton", variant="naive")
def bind_naive(x, weight, bias, eps, out):
    return layernorm_launcher(x, weight, bias, eps, out, "naive")
