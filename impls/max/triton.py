"""Triton max: the sum's persistent 1-D reduction (impls/sum/triton.py) with a
NaN-propagating maximum. Max is exact and order-free: atomic and two-pass give the same
bits every run, NaN included (canonicalised to +NaN before the atomic)."""
from harness.registry import impl
from impls.sum.triton import reduce_1d


@impl("max", "triton", variant="two_pass")
def bind_two_pass(x, out):
    return reduce_1d(x, out, is_max=True, atomic=False)


@impl("max", "triton", variant="atomic")
def bind_atomic(x, out):
    return reduce_1d(x, out, is_max=True, atomic=True)
