"""The primitives under Numba's CUDA simulator, in numpy: primitives_gpu.py's twins, the same
names and results (primitives.py picks one), but where the GPU's differ: a NaN rounded into
bf16 stays a quiet NaN of its sign (the GPU's cvt gives the canonical NaN), and 2^t and 1/v
are computed in float64 from the same fp32 operand and rounded once: within the hardware's
approximations (2 ulp), not their bits.
"""
import functools

import numpy as np
from numba import cuda

__all__ = ["by_type", "inlined", "float_bits", "bits_float", "rsqrt", "half_from_bits", "half_as_bits", "half_bits",
           "bf16_pair", "half_pair", "f32_to_bf16", "load_chunk", "store_chunk", "shared_address", "shared_load",
           "shared_store", "max_nan", "ex2", "ex2_ftz", "fma", "rcp_ftz"]

SMALLEST_NORMAL = np.float32(1.1754943508222875e-38)


def by_type(choose=None, *, inline="never"):
    """A device function whose code depends on its first argument's element type:
    ``choose(*args)`` returns that code, here chosen at the first call for each element type
    (the simulator runs Python; ``inline`` is the GPU's)."""
    def make(choose):
        chosen = {}

        @functools.wraps(choose)
        def run(a, *args):
            code = chosen.get(a.dtype)
            if code is None:
                code = chosen[a.dtype] = choose(a, *args)
            return code(a, *args)
        return run
    return make(choose) if choose is not None else make


def inlined(func):
    """A device function (the GPU's are inlined into their callers; the simulator runs Python)."""
    return cuda.jit(device=True)(func)


# --- a float's bits and back; fp16 and bf16 ---------------------------------------------------

@cuda.jit(device=True)
def float_bits(x):
    return np.float32(x).view(np.uint32)


@cuda.jit(device=True)
def bits_float(b):
    return np.uint32(b).view(np.float32)


@cuda.jit(device=True)
def rsqrt(v):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.float32(1) / np.sqrt(np.float32(v))


@cuda.jit(device=True)
def half_from_bits(b):
    return np.float32(np.uint16(b).view(np.float16))


@cuda.jit(device=True)
def half_as_bits(h):
    return np.float16(h).view(np.uint16)


@cuda.jit(device=True)
def half_bits(v):
    with np.errstate(over="ignore"):
        return np.uint32(np.float16(v).view(np.uint16))


@cuda.jit(device=True)
def f32_to_bf16(x):
    """fp32 to bf16 bits (int16), rounded to nearest even; a NaN stays a NaN (quieted, sign kept)."""
    b = float_bits(x)
    if (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.int16(np.uint16((b >> np.uint32(16)) | np.uint32(0x0040)))
    rounded = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return np.int16(np.uint16(rounded))


@cuda.jit(device=True)
def bf16_pair(lo, hi):
    """Two fp32 rounded to bf16, as one 32-bit word (``lo`` in the low half)."""
    return np.uint32(np.uint16(f32_to_bf16(lo))) | (np.uint32(np.uint16(f32_to_bf16(hi))) << np.uint32(16))


@cuda.jit(device=True)
def half_pair(lo, hi):
    return half_bits(lo) | (half_bits(hi) << np.uint32(16))


# --- a row kernel's 16-byte chunk, as two 8-byte words -------------------------------------

@cuda.jit(device=True)
def load_chunk(w, word, offset):
    """The 16 bytes at byte ``offset`` (a multiple of 16) from word ``word`` of w (a uint64
    view, 16-byte aligned there) as four uint32, the first in the low bits of the first word."""
    i = np.uint64(word) + np.uint64(offset // 8)
    b0, b1 = np.uint64(w[i]), np.uint64(w[i + np.uint64(1)])
    low = np.uint64(0xFFFFFFFF)
    return (np.uint32(b0 & low), np.uint32(b0 >> np.uint64(32)), np.uint32(b1 & low),
            np.uint32(b1 >> np.uint64(32)))


@cuda.jit(device=True)
def store_chunk(w, word, offset, q0, q1, q2, q3):
    """The 16 bytes at byte ``offset`` from word ``word`` of w = the four uint32 (load_chunk's order)."""
    i = np.uint64(word) + np.uint64(offset // 8)
    w[i] = np.uint64(q0) | (np.uint64(q1) << np.uint64(32))
    w[i + np.uint64(1)] = np.uint64(q2) | (np.uint64(q3) << np.uint64(32))


# --- the row cache: the array, indexed -----------------------------------------------------

@cuda.jit(device=True)
def shared_address(cache):
    """The shared offset of cache[0] (bytes)."""
    return np.uint32(0)


@cuda.jit(device=True)
def shared_load(cache, address):
    return cache[address // 4]


@cuda.jit(device=True)
def shared_store(cache, address, v):
    cache[address // 4] = v


# --- max, 2^t, fma and reciprocal -------------------------------------------------------------

@cuda.jit(device=True)
def max_nan(a, b):
    """max that returns NaN if either is NaN."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a > b else b


@cuda.jit(device=True)
def ex2(t):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.float32(np.exp2(np.float64(t)))


@cuda.jit(device=True)
def ex2_ftz(t):
    e = ex2(t)
    return np.float32(0) if e < SMALLEST_NORMAL else e     # NaN stays NaN


@cuda.jit(device=True)
def fma(a, b, c):
    """a·b + c, rounded once (the simulator's cuda.fma rounds the product first)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@cuda.jit(device=True)
def rcp_ftz(v):
    with np.errstate(divide="ignore"):
        return np.float32(1.0 / np.float64(v))

