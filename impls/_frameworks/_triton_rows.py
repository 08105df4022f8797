"""Triton device functions shared by the row kernels (softmax, norms, the chain).
Kept apart from triton.py (the framework's plumbing), which must import without Triton."""
import triton
import triton.language as tl


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
def sum_of_squares(x_ptr, base, cols, BLOCK: tl.constexpr):
    """sum(x²) of a row too long to hold on chip, in BLOCK-wide tiles, fp32 lanes."""
    c = tl.arange(0, BLOCK)
    squares = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_ptr + base + start + c, mask=start + c < cols, other=0.0).to(tl.float32)
        squares += x * x
    return tl.sum(squares, 0)
