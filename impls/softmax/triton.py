"""Triton softmax, three ways. Compulsory bytes 2·R·C·s; what differs is how often x is read.

  on_chip     the row (up to 32768 elements) is loaded once into registers: max, exp, sum
              and the scaling all come from there. 2 accesses per element: the roof.
              Longer rows cannot stay on chip and take the online column loop.
  online      pass 1 keeps a running (max m, sum d) per lane, rescaling d by exp(m_old - m)
              whenever m grows (Milakov & Gimelshein), then merges the lanes' pairs with an
              associative combine; pass 2 re-reads x and writes. 3 accesses per element.
  three_pass  max, then sum of exp(x - max), then write: 4 accesses per element.

exp is tl.exp of x - max: it compiles to one multiply by log2(e) and ex2.approx.f32
(MUFU.EX2), the folding the seed text asks for, applied to x - max and never to x alone
(x·log2(e) - max·log2(e) would lose the digits that the subtraction keeps). tl.exp2 would
compile to ex2.approx.ftz.f32, which flushes subnormal probabilities to zero: the harness
caught exactly that on the H200 (fp32, 'large_magnitude').
A row that is all -inf gives max = -inf and x - max = NaN: NaN out, as in PyTorch.
"""
import torch
import triton
import triton.language as tl

from harness.registry import impl
from impls._frameworks.triton.device import load_row, store_row
from impls._frameworks.triton.launch import configured
from impls._frameworks.triton.rows import ROW_TILE, row_block, row_choice, row_launcher

_NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def _online_combine(m0, d0, m1, d1):
    """Merge two (max, sum of exp(x - max)) pairs. Associative and commutative, so it can
    go through tl.reduce's tree. A lane that saw only -inf has d = 0 and contributes 0."""
    m = tl.maximum(m0, m1)
    s0 = tl.where(m0 == _NEG_INF, 0.0, tl.exp(m0 - m))
    s1 = tl.where(m1 == _NEG_INF, 0.0, tl.exp(m1 - m))
    return m, d0 * s0 + d1 * s1


@triton.jit
def _softmax_row(x_ptr, y_ptr, row, cols, VARIANT: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr,
                 LOAD: tl.constexpr, STORE: tl.constexpr):
    """One row's softmax, by VARIANT (see _softmax)."""
    c = tl.arange(0, BLOCK)
    base = tl.cast(row, tl.int64) * cols
    if VARIANT == 0:
        x = load_row(x_ptr, base, c, cols, float("-inf"), EVEN, LOAD)
        numerator = tl.exp(x - tl.max(x, 0))
        if not EVEN:   # 0 past the row, known at compile time: no exp, add or store for the padding
            numerator = tl.where(c < cols, numerator, 0.0)
        store_row(y_ptr, base, c, cols, numerator * (1.0 / tl.sum(numerator, 0)), EVEN, STORE)
    else:
        if VARIANT == 1:   # online: one pass for (max, sum)
            m = tl.full([BLOCK], float("-inf"), tl.float32)
            d = tl.zeros([BLOCK], tl.float32)
            for start in range(0, cols, BLOCK):
                x = tl.load(x_ptr + base + start + c, mask=start + c < cols,
                            other=float("-inf")).to(tl.float32)
                m_new = tl.maximum(m, x)
                rescale = tl.where(m_new == _NEG_INF, 0.0, tl.exp(m - m_new))
                p = tl.where(m_new == _NEG_INF, 0.0, tl.exp(x - m_new))
                d = d * rescale + p
                m = m_new
            row_max, row_sum = tl.reduce((m, d), 0, _online_combine)
        else:              # three-pass: max, then sum
            m = tl.full([BLOCK], float("-inf"), tl.float32)
            for start in range(0, cols, BLOCK):
                x = tl.load(x_ptr + base + start + c, mask=start + c < cols,
                            other=float("-inf")).to(tl.float32)
                m = tl.maximum(m, x)
            row_max = tl.max(m, 0)
            d = tl.zeros([BLOCK], tl.float32)
            for start in range(0, cols, BLOCK):
                x = tl.load(x_ptr + base + start + c, mask=start + c < cols,
                            other=float("-inf")).to(tl.float32)
                d += tl.exp(x - row_max)
            row_sum = tl.sum(d, 0)
        inv_sum = 1.0 / row_sum
        for start in range(0, cols, BLOCK):
            mask = start + c < cols
            x = tl.load(x_ptr + base + start + c, mask=mask, other=float("-inf")).to(tl.float32)
            y = tl.exp(x - row_max) * inv_sum
            tl.store(y_ptr + base + start + c, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=STORE)


@triton.jit
def _softmax(x_ptr, y_ptr, rows, cols, programs, COLS: tl.constexpr,
             VARIANT: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr, EVEN: tl.constexpr,
             PERSISTENT: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr):
    """VARIANT 0: on chip (the row fits in BLOCK), 1: online, 2: three-pass. One row per
    program step (ROWS == 1): a softmax row already keeps exp units busy between loads."""
    cols = COLS if COLS else cols   # a masked row: its length at compile time (static_cols)
    tl.static_assert(ROWS == 1)
    pid = tl.program_id(0)
    if PERSISTENT:
        for row in range(pid, rows, programs):
            _softmax_row(x_ptr, y_ptr, row, cols, VARIANT, BLOCK, EVEN, LOAD, STORE)
    else:   # one program per row: straight-line code (_triton_rows: one_tile)
        _softmax_row(x_ptr, y_ptr, pid, cols, VARIANT, BLOCK, EVEN, LOAD, STORE)


VARIANTS = {"on_chip": 0, "online": 1, "three_pass": 2}
MAX_ROWS = 1   # one row a tile


def softmax_launcher(x, out, variant: str):
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError("the Triton softmax takes contiguous [rows, cols] tensors")
    rows, cols = x.shape
    code = VARIANTS[variant]
    block, on_chip = row_block(cols)
    note = ""
    if code == 0 and not on_chip:
        code, note = 1, f"rows of {cols} > {block} do not fit on chip: online column loop"
    elif code != 0:
        block = min(block, ROW_TILE)   # looped: tiles; a short row is one
    even = code == 0 and block == cols

    def bind(cfg, args, n_rows):
        xx, yy = args
        return row_launcher(_softmax, cfg, n_rows, xx.device, xx, yy, n_rows, cols, VARIANT=code, BLOCK=block,
                            EVEN=even)

    def scratch(n_rows):
        xs = torch.randn(n_rows, cols, device=x.device).to(x.dtype)
        return xs, torch.empty_like(xs)

    ran = [k for k, v in VARIANTS.items() if v == code][0]
    cfg = row_choice(("softmax", ran), rows, cols, block, code == 0, x.dtype, x.device, scratch, bind, max_rows=MAX_ROWS)
    config = {**cfg, "BLOCK": block, "variant_run": ran}
    if note:
        config["note"] = note
    return configured(bind(cfg, (x, out), rows), config)


@impl("softmax", "triton", variant="on_chip")
def bind_on_chip(x, out):
    return softmax_launcher(x, out, "on_chip")


@impl("softmax", "triton", variant="online")
def bind_online(x, out):
    return softmax_launcher(x, out, "online")


@impl("softmax", "triton", variant="three_pass")
def bind_three_pass(x, out):
    return softmax_launcher(x, out, "three_pass")
