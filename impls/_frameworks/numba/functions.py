"""The functions the row kernels apply to each element: the softmax's exp and the chain's silu,
each in the form an output type needs (``row_exp``, ``row_silu``: chosen by the array's type, as
device.py's loads and stores are). One code for the GPU and the simulator, on primitives.py's
ex2, fma and reciprocal.
"""
import math

from numba import cuda, float32

from impls._frameworks.numba.device import BF16, FP16, stored
from impls._frameworks.numba.primitives import by_type, ex2, ex2_ftz, fma, rcp_ftz

# --- exp for the softmax's elements --------------------------------------------------------
# exp(d) for d = x - max <= 0 as 2^(d·log2 e), as the CUDA kernels take it (device.cuh):
# ``exp_keep`` for fp32 outputs, ex2.approx.f32 of the product rounded once (subnormal results
# kept: the large_magnitude inputs have them); ``exp_shifted64`` for 16-bit outputs, e^d·2^64
# by one FFMA and ex2.approx.ftz.f32 (no subnormal handling: every result that can reach a
# 16-bit output stays normal there, and results below 2^-190 are 0 in bf16 and fp16 alike).
# The row's sum carries the same 2^64, so e·(1/sum) is the softmax. libdevice's expf took four
# FFMAs and a range check an element.
LOG2E = float32(1.4426950408889634)
SHIFT64 = float32(64)
TWO_M64 = float32(2.0 ** -64)


@cuda.jit(device=True)
def exp_keep(d):
    """e^d for fp32 outputs, subnormal results kept."""
    return ex2(float32(float32(d) * LOG2E))


@cuda.jit(device=True)
def exp_shifted64(d):
    """e^d·2^64 for 16-bit outputs (d <= 0): normal down to d = -131, 0 below."""
    return ex2_ftz(fma(float32(d), LOG2E, SHIFT64))


@cuda.jit(device=True)
def silu16(n):
    """silu for 16-bit outputs, as the CUDA kernels' silu_16 (rmsnorm_silu_mul_add.cuh): e^-|n|
    from exp_shifted64 (scaled by 2^64, normal for |n| < 131) and an approximate reciprocal,
    their 3e-6 relative error within the 16-bit rounding (4e-3 bf16, 5e-4 fp16); for n < 0,
    n·e^n/(1 + e^n) is formed on the scaled e^n and scaled back last, so that a subnormal
    result is rounded once. Selects, not branches."""
    scaled = exp_shifted64(-abs(n))                       # e^-|n| · 2^64
    inv = rcp_ftz(float32(1) + scaled * TWO_M64)          # sigmoid(|n|)
    positive = n >= float32(0)
    return (n if positive else n * scaled) * inv * (float32(1) if positive else TWO_M64)


@cuda.jit(device=True)
def silu(n):
    """n·sigmoid(n) without losing the tail: below -80 as -exp(n + log(-n)), one exp rounded
    once into the (sub)normal result (n·e^n would round e^n into a subnormal first, 2% off at
    -100); for other n < 0 as n·e^n / (1 + e^n), finite where 1 + e^-n overflows."""
    if n < float32(-80):
        return -math.exp(n + math.log(-n))
    if n < float32(0):
        e = math.exp(n)
        return n * e / (float32(1) + e)
    return n / (float32(1) + math.exp(-n))


@by_type
def row_silu(a, n):
    """silu(n) for an output of a's type: silu16 for 16-bit types, the accurate silu for fp32
    (its subnormal results kept)."""
    if stored(a) in (BF16, FP16):
        return lambda a, n: silu16(n)
    return lambda a, n: silu(n)


@by_type
def row_exp(a, d):
    """exp(d) for an output of a's type, up to the factor common to the row (2^64 for 16-bit
    types) that the division by the row's sum cancels."""
    if stored(a) in (BF16, FP16):
        return lambda a, d: exp_shifted64(d)
    return lambda a, d: exp_keep(d)
