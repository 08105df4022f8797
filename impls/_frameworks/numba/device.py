"""Device functions every Numba kernel shares: fp32 loads and stores of each storage type,
and the reductions of a group of threads (the threads that share one row, or one block).

Storage: fp32 as float32, fp16 as float16 (converted by the hardware's cvt), bf16 as int16
bits: bf16 -> fp32 is the bits shifted up by 16; fp32 -> bf16 rounds to nearest even, on the
GPU by the hardware's cvt.rn (two values a cvt where a word is stored: ``pair_bits``; a NaN
becomes the canonical NaN), under the simulator on the bits (a NaN stays a quiet NaN of its
sign). ``load(a, i)`` and ``store(a, i, v)`` pick the conversion from the array's type: at
compile time on the GPU (an overload per type), from the value's numpy type under the
simulator. The reinterpreting casts between a float and its bits, rsqrt, the rounding into
fp16/bf16, the NaN-propagating max (PTX max.NaN on the GPU), the 16-byte loads and stores, the
row cache's shared-memory accesses and the softmax's and silu's ex2 and reciprocal are the only
code that differs between the two (libdevice, LLVM or inline PTX on the GPU, numpy under the
simulator); the rest is the same code. Both round to nearest even and give NaN for NaN: only a
NaN's payload differs, and the approximate ex2 and reciprocal, whose bits are the hardware's.

Reductions run over a *group*: ``group`` consecutive threads of a block (a power of two from
1 to 1024; the block holds blockDim / group groups). Within a warp by xor shuffles, every lane
ending with the same bits (a merge that is not commutative in its bits takes the lower lane's
state first); past a warp through shared memory, each warp's result read back in warp order.
The tree depends on ``group`` only: the bits of a row never depend on how many rows a block
or a launch holds. Every thread of the block must call a reduction (they synchronise).
"""
import math

import numpy as np
from numba import cuda, float32, int16, int32, uint16, uint32, uint64
from numba.cuda.types import float16

from impls._frameworks.numba.runtime import SIMULATED

FULL_MASK = 0xFFFFFFFF
WARP = 32
MAX_WARPS = 32            # 1024 threads a block
NEG_INF = float32(-math.inf)

# --- a float's bits and back, and rsqrt: the one place the simulator differs ------------------

if SIMULATED:
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
    def half_bits(v):
        with np.errstate(over="ignore"):
            return np.uint32(np.float16(v).view(np.uint16))
else:
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def float_bits(x):
        return uint32(libdevice.float_as_int(float32(x)))

    @cuda.jit(device=True)
    def bits_float(b):
        return libdevice.int_as_float(int32(b))

    @cuda.jit(device=True)
    def rsqrt(v):
        return libdevice.rsqrtf(float32(v))   # NaN below 0, as the simulator's

    from numba.cuda import types as _types
    from numba.cuda.extending import intrinsic

    # fp16 <-> its bits: Numba has no reinterpreting cast for float16 (libdevice has none
    # either). numba-cuda keeps a float16 as an i16 in LLVM, so the cast is the value itself.
    @intrinsic
    def _half_from_bits(typingctx, b):
        def codegen(context, builder, sig, args):
            return args[0]
        return _types.float16(_types.uint16), codegen

    @cuda.jit(device=True)
    def half_from_bits(b):
        return float32(_half_from_bits(uint16(b)))


    from llvmlite import ir as _ir

    def _cvt_pair(kind):
        """cvt.rn.<kind>x2.f32 (sm_80 on): two fp32 rounded to nearest even into one 32-bit word of
        two 16-bit elements, ``lo`` in the low half; one instruction for the pair."""
        @intrinsic
        def cvt(typingctx, lo, hi):
            def codegen(context, builder, sig, args):
                fnty = _ir.FunctionType(_ir.IntType(32), [_ir.FloatType(), _ir.FloatType()])
                asm = _ir.InlineAsm(fnty, f"cvt.rn.{kind}x2.f32 $0, $1, $2;", "=r,f,f")
                return builder.call(asm, [args[1], args[0]])   # the first source goes to the high half
            return _types.uint32(_types.float32, _types.float32), codegen
        return cvt

    _bf16_pair, _f16_pair = _cvt_pair("bf16"), _cvt_pair("f16")

    @cuda.jit(device=True)
    def bf16_pair(lo, hi):
        return _bf16_pair(float32(lo), float32(hi))

    @cuda.jit(device=True)
    def half_pair(lo, hi):
        return _f16_pair(float32(lo), float32(hi))

    @cuda.jit(device=True)
    def half_bits(v):
        """fp32 rounded to fp16 as its bits, by the pair instruction the word stores use, so
        that a row's bits (a NaN's too) do not depend on whether its elements were stored one
        at a time or as words."""
        return half_pair(v, float32(0)) & uint32(0xFFFF)



def inlined(func):
    """A device function inlined into every caller at the NVVM level (alwaysinline): a kernel
    that calls it with a constant (its variant) gets only that variant's code, and registers
    for that code alone (softmax's three variants in one kernel needed 108-109 registers in
    bf16/fp32 on sm_90). The simulator runs Python and has no such option."""
    return cuda.jit(device=True)(func) if SIMULATED else cuda.jit(device=True, forceinline=True)(func)

@cuda.jit(device=True)
def bf16_to_f32(bits):
    """bf16 bits (int16) to fp32: the top half of the fp32 word; exact."""
    return bits_float(uint32(uint32(uint16(bits)) << uint32(16)))


if SIMULATED:
    @cuda.jit(device=True)
    def f32_to_bf16(x):
        """fp32 to bf16 bits (int16), rounded to nearest even; a NaN stays a NaN (quieted, sign kept)."""
        b = float_bits(x)
        if (b & uint32(0x7FFFFFFF)) > uint32(0x7F800000):
            return int16(uint16((b >> uint32(16)) | uint32(0x0040)))
        rounded = (b + uint32(0x7FFF) + ((b >> uint32(16)) & uint32(1))) >> uint32(16)
        return int16(uint16(rounded))

    @cuda.jit(device=True)
    def bf16_pair(lo, hi):
        """Two fp32 rounded to bf16, as one 32-bit word (``lo`` in the low half)."""
        return np.uint32(np.uint16(f32_to_bf16(lo))) | (np.uint32(np.uint16(f32_to_bf16(hi))) << np.uint32(16))

    @cuda.jit(device=True)
    def half_pair(lo, hi):
        return half_bits(lo) | (half_bits(hi) << np.uint32(16))
else:
    @cuda.jit(device=True)
    def f32_to_bf16(x):
        """fp32 to bf16 bits (int16) by the hardware's cvt.rn (a NaN becomes its canonical NaN):
        the same rounding as a pair's (bf16_pair), so a row's bits do not depend on whether its
        elements were stored one at a time or as words."""
        return int16(uint16(bf16_pair(x, float32(0)) & uint32(0xFFFF)))


# --- loads and stores through fp32 -------------------------------------------------------

def load(a, i):
    """a[i] as fp32. The simulator runs this Python; on the GPU the overload below replaces it."""
    v = a[i]
    if v.dtype == np.int16:
        return bf16_to_f32(v)
    return np.float32(v)


def store(a, i, v):
    """a[i] = v (fp32), rounded once into a's type. The simulator runs this Python."""
    if a.dtype == np.int16:
        a[i] = f32_to_bf16(v)
    else:
        a[i] = v


if not SIMULATED:
    from numba.cuda import types
    from numba.cuda.extending import overload

    @overload(load, target="cuda")
    def _load(a, i):
        if a.dtype == types.int16:
            return lambda a, i: bf16_to_f32(a[i])
        return lambda a, i: float32(a[i])

    @overload(store, target="cuda")
    def _store(a, i, v):
        if a.dtype == types.int16:
            def bf16(a, i, v):
                a[i] = f32_to_bf16(v)
            return bf16

        def other(a, i, v):
            a[i] = v   # Numba's cast: cvt.rn into fp16, none for fp32
        return other


# --- words: 8 bytes of elements, moved as one integer ---------------------------------------
#
# A kernel that moves one 2- or 4-byte element per load issues 4 (fp32: 2) times the loads a
# copy does, each with its own 64-bit index arithmetic: the instructions and registers, not
# the bytes, set its speed. The kernels move 8-byte *words* of a flat array instead (w,
# runtime.words: a uint64 view from the array's first aligned element on): ``word_values``
# unpacks one into its elements as fp32 (four of a 16-bit type, two of fp32) and ``word_bits``
# packs them back, each rounded once into the array's type. The 1-D kernels move *chunks* of
# four elements (one word of a 16-bit type, two of fp32: ``chunk_load``/``chunk_store``); the
# row kernels move 16-byte chunks (``load_chunk``/``store_chunk``, below: one
# 16-byte access on the GPU, through an LLVM vector load or store; Numba's own loads are at
# most 8 bytes, its vector types being values, not array elements). A chunk not whole or not
# aligned moves one element at a time: the values, and so the bits of every result, never
# depend on which way they moved. Word indices are unsigned: Numba wraps a negative signed
# index around (two instructions more a load); an unsigned one it takes as it is.

CHUNK = 4
LOW16 = uint32(0xFFFF)


def from_bits(a, b):
    """An element of a's type from its bits (the low bits of an integer) as fp32. The
    simulator runs this Python; on the GPU the overload below replaces it."""
    if a.dtype == np.int16:
        return bits_float(np.uint32(b) << np.uint32(16))
    if a.dtype == np.float16:
        return half_from_bits(b)
    return bits_float(b)


def to_bits(a, v):
    """fp32 v rounded once into a's type, as its bits (uint32). The simulator runs this Python."""
    if a.dtype == np.int16:
        return np.uint32(np.uint16(f32_to_bf16(v)))
    if a.dtype == np.float16:
        return half_bits(v)
    return float_bits(v)


def narrow(a):
    """Whether a's elements are 16-bit (a word holds four) rather than fp32 (two)."""
    return a.dtype.itemsize == 2


def pair_bits(a, lo, hi):
    """Two fp32 rounded into a's 16-bit type, as one 32-bit word (``lo`` in the low half): one
    cvt for the pair on the GPU. The simulator runs this Python."""
    if a.dtype == np.int16:
        return bf16_pair(lo, hi)
    return half_pair(lo, hi)


if not SIMULATED:
    @overload(from_bits, target="cuda")
    def _from_bits(a, b):
        if a.dtype == types.int16:
            return lambda a, b: bits_float(uint32(b) << uint32(16))
        if a.dtype == types.float16:
            return lambda a, b: half_from_bits(b)
        return lambda a, b: bits_float(uint32(b))

    @overload(to_bits, target="cuda")
    def _to_bits(a, v):
        if a.dtype == types.int16:
            return lambda a, v: uint32(uint16(f32_to_bf16(v)))
        if a.dtype == types.float16:
            return lambda a, v: half_bits(v)
        return lambda a, v: float_bits(v)

    @overload(narrow, target="cuda", inline="always")    # a constant where it is used: loops over a
    def _narrow(a):                                      # chunk's elements have a constant trip count
        wide = a.dtype.bitwidth == 16
        return lambda a: wide

    @overload(pair_bits, target="cuda")
    def _pair_bits(a, lo, hi):
        if a.dtype == types.int16:
            return lambda a, lo, hi: bf16_pair(lo, hi)
        return lambda a, lo, hi: half_pair(lo, hi)


def word_values(a, b):
    """The elements of word b (a uint64 of a's elements, the first in the low bits) as fp32:
    four of a 16-bit type, two of fp32. By 32-bit halves: each element one instruction. The
    simulator runs this Python; on the GPU the overload below (one per type: the tuples'
    lengths differ) replaces it."""
    lo, hi = np.uint32(b & np.uint64(0xFFFFFFFF)), np.uint32(np.uint64(b) >> np.uint64(32))
    if narrow(a):
        return (from_bits(a, lo & LOW16), from_bits(a, lo >> np.uint32(16)),
                from_bits(a, hi & LOW16), from_bits(a, hi >> np.uint32(16)))
    return from_bits(a, lo), from_bits(a, hi)


if not SIMULATED:
    @overload(word_values, target="cuda")
    def _word_values(a, b):
        if a.dtype.bitwidth == 16:
            def four(a, b):
                lo, hi = uint32(b), uint32(uint64(b) >> uint64(32))
                return (from_bits(a, lo & LOW16), from_bits(a, lo >> uint32(16)),
                        from_bits(a, hi & LOW16), from_bits(a, hi >> uint32(16)))
            return four

        def two(a, b):
            return from_bits(a, uint32(b)), from_bits(a, uint32(uint64(b) >> uint64(32)))
        return two


def exact_bits(a, v):
    """The bits of v in a's type (uint32) where a's type holds v exactly (the kernels' fills: 0
    and -inf): by integer operations on v's fp32 bits, which fold to a constant for a constant
    v (to_bits' cvt is inline PTX, which LLVM does not fold: a fill held in a register, copied
    into each word a predicated load may replace). The simulator runs this Python."""
    return to_bits(a, v)


if not SIMULATED:
    @overload(exact_bits, target="cuda")
    def _exact_bits(a, v):
        if a.dtype == types.int16:
            return lambda a, v: uint32(float_bits(v) >> uint32(16))     # exact: the low half is 0

        if a.dtype == types.float16:
            def half(a, v):
                b = float_bits(v)
                sign = uint32((b >> uint32(16)) & uint32(0x8000))
                magnitude = b & uint32(0x7FFFFFFF)
                if magnitude == uint32(0):
                    return sign
                if magnitude == uint32(0x7F800000):
                    return uint32(sign | uint32(0x7C00))
                return half_bits(v)
            return half
        return lambda a, v: float_bits(v)


@cuda.jit(device=True)
def word_bits(a, v0, v1, v2, v3):
    """The word of a's type holding the first per_word(a) of the values (fp32: v0 and v1; v2
    and v3 unused), each rounded once (a pair of 16-bit ones by one cvt: pair_bits)."""
    if narrow(a):
        return uint64(pair_bits(a, v0, v1)) | (uint64(pair_bits(a, v2, v3)) << uint64(32))
    return uint64(to_bits(a, v0)) | (uint64(to_bits(a, v1)) << uint64(32))


# A row kernel's 16-byte chunk moves as four 32-bit words (a 16-bit pair, or one fp32, each),
# addressed by the row's first word (64-bit, once a row) and a 32-bit byte offset from it (a
# chunk's, within the row: rows of fewer than 2^32 bytes). A 64-bit word index a chunk took
# a 64-bit add and a 64-bit shift-add an operand and chunk (4 instructions); the offset form
# lets LLVM hoist the row's address out of the loops, leaving one 32-bit product and one
# 64-bit add (2). 32-bit words, not 64-bit ones, unpack into 16-bit halves without the
# shifts across a 64-bit pair.

if SIMULATED:
    @cuda.jit(device=True)
    def load_chunk(w, word, offset):
        """The 16 bytes at byte ``offset`` (a multiple of 16) from word ``word`` of w (a uint64
        view, 16-byte aligned there) as four uint32, the first in the low bits of the first word:
        one 16-byte load on the GPU."""
        i = np.uint64(word) + np.uint64(offset // 8)
        b0, b1 = np.uint64(w[i]), np.uint64(w[i + np.uint64(1)])
        low = np.uint64(0xFFFFFFFF)
        return (np.uint32(b0 & low), np.uint32(b0 >> np.uint64(32)), np.uint32(b1 & low),
                np.uint32(b1 >> np.uint64(32)))

    @cuda.jit(device=True)
    def store_chunk(w, word, offset, q0, q1, q2, q3):
        """The 16 bytes at byte ``offset`` from word ``word`` of w = the four uint32 (load_chunk's
        order): one 16-byte store on the GPU."""
        i = np.uint64(word) + np.uint64(offset // 8)
        w[i] = np.uint64(q0) | (np.uint64(q1) << np.uint64(32))
        w[i + np.uint64(1)] = np.uint64(q2) | (np.uint64(q3) << np.uint64(32))
else:
    _QUAD = _ir.VectorType(_ir.IntType(32), 4)

    def _quad_pointer(context, builder, array_type, array, word, offset):
        data = context.make_array(array_type)(context, builder, array).data
        row = builder.bitcast(builder.gep(data, [word], inbounds=True), _ir.IntType(8).as_pointer())
        at = builder.gep(row, [builder.zext(offset, _ir.IntType(64))], inbounds=True)
        return builder.bitcast(at, _QUAD.as_pointer())

    @intrinsic
    def _load_chunk(typingctx, w, word, offset):
        def codegen(context, builder, sig, args):
            quad = builder.load(_quad_pointer(context, builder, sig.args[0], *args), align=16)
            quad.set_metadata("invariant.load", builder.module.add_metadata([]))
            words = [builder.extract_element(quad, _ir.Constant(_ir.IntType(32), e)) for e in range(4)]
            return context.make_tuple(builder, sig.return_type, words)
        return _types.UniTuple(_types.uint32, 4)(w, _types.uint64, _types.uint32), codegen

    @intrinsic
    def _store_chunk(typingctx, w, word, offset, q0, q1, q2, q3):
        def codegen(context, builder, sig, args):
            quad = _ir.Constant(_QUAD, _ir.Undefined)
            for e, q in enumerate(args[3:]):
                quad = builder.insert_element(quad, q, _ir.Constant(_ir.IntType(32), e))
            builder.store(quad, _quad_pointer(context, builder, sig.args[0], *args[:3]), align=16)
            return context.get_dummy_value()
        return _types.void(w, _types.uint64, _types.uint32, *(_types.uint32,) * 4), codegen

    @cuda.jit(device=True)
    def load_chunk(w, word, offset):
        """The 16 bytes at byte ``offset`` (a multiple of 16) from word ``word`` of w (16-byte
        aligned there) as four uint32 in one 16-byte load, marked invariant (!invariant.load:
        the row kernels read only their inputs through it, which no launch writes), so that it
        takes the read-only path, LDG.E.128.CONSTANT, as nvcc's loads through the CUDA kernels'
        const __restrict__ pointers do."""
        return _load_chunk(w, uint64(word), uint32(offset))

    @cuda.jit(device=True)
    def store_chunk(w, word, offset, q0, q1, q2, q3):
        """The 16 bytes at byte ``offset`` from word ``word`` of w = the four uint32, in one
        16-byte store."""
        _store_chunk(w, uint64(word), uint32(offset), uint32(q0), uint32(q1), uint32(q2), uint32(q3))


def element_bits(a, i):
    """The bits of a[i] (uint32, in the low bits): what a chunk's word holds, so that an element
    moved alone is held as the same bits. The simulator runs this Python; on the GPU the
    overload below (one per type)."""
    v = a[i]
    if v.dtype == np.int16:
        return np.uint32(np.uint16(v))
    if v.dtype == np.float16:
        return np.uint32(np.float16(v).view(np.uint16))
    return np.float32(v).view(np.uint32)


if not SIMULATED:
    @intrinsic
    def _half_bits_of(typingctx, h):
        def codegen(context, builder, sig, args):   # a float16 is an i16 in LLVM (_half_from_bits)
            return args[0]
        return _types.uint16(_types.float16), codegen

    @overload(element_bits, target="cuda")
    def _element_bits(a, i):
        if a.dtype == types.int16:
            return lambda a, i: uint32(uint16(a[i]))
        if a.dtype == types.float16:
            return lambda a, i: uint32(_half_bits_of(a[i]))
        return lambda a, i: float_bits(a[i])


# --- shared memory by 32-bit addresses --------------------------------------------------
# Numba addresses a shared array through 64-bit pointers to the shared window, which ptxas on
# sm_90 rebuilds for every access (an S2R of the CTA's cluster id, a MOV and a LEA beside the
# index arithmetic: 32 S2R in rmsnorm's bf16 output loop). A row cache is read and written by
# its own thread only, so it is addressed here by the 32-bit shared offset of its first slot,
# taken once (``shared_address``), and loaded and stored by ld/st.shared through inline PTX.
# The accesses are marked as having side effects: LLVM keeps their order (a store before the
# load of the same slot). The simulator indexes the array.

if SIMULATED:
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
else:
    @intrinsic
    def _shared_address(typingctx, cache):
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            fnty = _ir.FunctionType(_ir.IntType(32), [_ir.IntType(64)])
            asm = _ir.InlineAsm(fnty, "{ .reg .u64 t; cvta.to.shared.u64 t, $1; cvt.u32.u64 $0, t; }", "=r,l")
            return builder.call(asm, [builder.ptrtoint(data, _ir.IntType(64))])
        return _types.uint32(cache), codegen

    @intrinsic
    def _shared_load(typingctx, address):
        def codegen(context, builder, sig, args):
            fnty = _ir.FunctionType(_ir.FloatType(), [_ir.IntType(32)])
            return builder.call(_ir.InlineAsm(fnty, "ld.shared.f32 $0, [$1];", "=f,r", side_effect=True), args)
        return _types.float32(_types.uint32), codegen

    @intrinsic
    def _shared_store(typingctx, address, v):
        def codegen(context, builder, sig, args):
            fnty = _ir.FunctionType(_ir.VoidType(), [_ir.IntType(32), _ir.FloatType()])
            builder.call(_ir.InlineAsm(fnty, "st.shared.f32 [$0], $1;", "r,f", side_effect=True), args)
            return context.get_dummy_value()
        return _types.void(_types.uint32, _types.float32), codegen

    @cuda.jit(device=True)
    def shared_address(cache):
        """The shared offset of cache[0] (bytes)."""
        return _shared_address(cache)

    @cuda.jit(device=True)
    def shared_load(cache, address):
        """The fp32 at shared offset ``address`` (bytes) of cache."""
        return _shared_load(uint32(address))

    @cuda.jit(device=True)
    def shared_store(cache, address, v):
        _shared_store(uint32(address), float32(v))


def chunk_values(a, w, i):
    """The four elements of the words from w[i] on (one word of a 16-bit type, two of fp32) as
    fp32. The simulator runs this Python; on the GPU the overload below (one per type)."""
    if narrow(a):
        return word_values(a, w[i])
    return word_values(a, w[i]) + word_values(a, w[i + 1])


if not SIMULATED:
    @overload(chunk_values, target="cuda")
    def _chunk_values(a, w, i):
        if a.dtype.bitwidth == 16:
            return lambda a, w, i: word_values(a, w[i])
        return lambda a, w, i: word_values(a, w[i]) + word_values(a, w[i + uint64(1)])


@cuda.jit(device=True)
def chunk_load(a, w, e, wi, wide, valid, fill):
    """Elements e .. e+3 of a as four fp32, those from ``valid`` on as ``fill``: as words
    w[wi] (and w[wi + 1] for fp32) when ``wide`` and the chunk is whole."""
    if wide and valid >= CHUNK:
        return chunk_values(a, w, uint64(wi))
    v0 = load(a, e) if valid > 0 else fill
    v1 = load(a, e + 1) if valid > 1 else fill
    v2 = load(a, e + 2) if valid > 2 else fill
    v3 = load(a, e + 3) if valid > 3 else fill
    return v0, v1, v2, v3


@cuda.jit(device=True)
def chunk_store(a, w, e, wi, wide, valid, v0, v1, v2, v3):
    """a[e .. e+3] = the four fp32 values (the first ``valid`` of them), each rounded once into
    a's type: as words when ``wide`` and the chunk is whole."""
    if wide and valid >= CHUNK:
        i = uint64(wi)
        w[i] = word_bits(a, v0, v1, v2, v3)
        if not narrow(a):
            w[i + uint64(1)] = word_bits(a, v2, v3, v2, v3)
        return
    if valid > 0:
        store(a, e, v0)
    if valid > 1:
        store(a, e + 1, v1)
    if valid > 2:
        store(a, e + 2, v2)
    if valid > 3:
        store(a, e + 3, v3)


@inlined
def per_word(a):
    """Elements a word holds: 4 of a 16-bit type, 2 of fp32."""
    return 4 if narrow(a) else 2


@cuda.jit(device=True)
def flat_span(n, phase):
    """(first, chunks) of a flat kernel over n elements: whole chunks from element ``first`` (an
    aligned one) on; the *ends*, the elements before ``first`` and from first + 4·chunks on
    (at most 3 each; all n when there are no words), move one at a time."""
    if phase < 0:
        return n, 0
    return phase, (n - phase) // CHUNK


@cuda.jit(device=True)
def end_element(j, first, chunks):
    """The flat index of the j-th end element (j < n - 4·chunks)."""
    return j if j < first else j + CHUNK * chunks


# --- combines --------------------------------------------------------------------------

if SIMULATED:
    @cuda.jit(device=True)
    def max_nan(a, b):
        """max that returns NaN if either is NaN."""
        if a != a:
            return a
        if b != b:
            return b
        return a if a > b else b
else:
    @intrinsic
    def _max_nan(typingctx, a, b):
        """PTX max.NaN.f32 (sm_80 on): NaN if either is NaN, in one instruction (the comparisons and
        branches of the simulator's version took about six a value in softmax's max pass)."""
        def codegen(context, builder, sig, args):
            fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType(), _ir.FloatType()])
            return builder.call(_ir.InlineAsm(fnty, "max.NaN.f32 $0, $1, $2;", "=f,f,f"), args)
        return _types.float32(_types.float32, _types.float32), codegen

    @cuda.jit(device=True)
    def max_nan(a, b):
        """max that returns NaN if either is NaN (the hardware's canonical NaN)."""
        return _max_nan(float32(a), float32(b))


# --- exp for the softmax's elements --------------------------------------------------------
# exp(d) for d = x - max <= 0 as 2^(d·log2 e), as the CUDA kernels take it (device.cuh):
# ``exp_keep`` for fp32 outputs, ex2.approx.f32 of the product rounded once (subnormal results
# kept: the large_magnitude inputs have them); ``exp_shifted64`` for 16-bit outputs, e^d·2^64
# by one FFMA and ex2.approx.ftz.f32 (no subnormal handling: every result that can reach a
# 16-bit output stays normal there, and results below 2^-190 are 0 in bf16 and fp16 alike).
# The row's sum carries the same 2^64, so e·(1/sum) is the softmax. libdevice's expf took four
# FFMAs and a range check an element. The simulator computes 2^t in float64 from the same
# fp32 t: within the hardware's ex2.approx (2 ulp), not its bits.
LOG2E = float32(1.4426950408889634)
SHIFT64 = float32(64)
SMALLEST_NORMAL = float32(1.1754943508222875e-38)

if SIMULATED:
    @cuda.jit(device=True)
    def exp_keep(d):
        with np.errstate(invalid="ignore", over="ignore"):
            return np.float32(np.exp2(np.float64(np.float32(np.float32(d) * LOG2E))))

    @cuda.jit(device=True)
    def exp_shifted64(d):
        with np.errstate(invalid="ignore", over="ignore"):
            t = np.float32(np.float64(d) * np.float64(LOG2E) + 64.0)     # one rounding, as the FFMA
            e = np.float32(np.exp2(np.float64(t)))
        return np.float32(0) if e < SMALLEST_NORMAL else e              # .ftz (NaN stays NaN)
else:
    def _ex2(ftz):
        @intrinsic
        def ex2(typingctx, t):
            def codegen(context, builder, sig, args):
                fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()])
                asm = _ir.InlineAsm(fnty, f"ex2.approx{'.ftz' if ftz else ''}.f32 $0, $1;", "=f,f")
                return builder.call(asm, args)
            return _types.float32(_types.float32), codegen
        return ex2

    _ex2_keep, _ex2_ftz = _ex2(False), _ex2(True)

    @cuda.jit(device=True)
    def exp_keep(d):
        """e^d for fp32 outputs, subnormal results kept."""
        return _ex2_keep(float32(float32(d) * LOG2E))

    @cuda.jit(device=True)
    def exp_shifted64(d):
        """e^d·2^64 for 16-bit outputs (d <= 0): normal down to d = -131, 0 below."""
        return _ex2_ftz(cuda.fma(float32(d), LOG2E, SHIFT64))


if SIMULATED:
    @cuda.jit(device=True)
    def rcp_ftz(v):
        """1/v (the hardware's rcp.approx.ftz on the GPU; here rounded from float64)."""
        with np.errstate(divide="ignore"):
            return np.float32(1.0 / np.float64(v))
else:
    @intrinsic
    def _rcp_ftz(typingctx, v):
        def codegen(context, builder, sig, args):
            fnty = _ir.FunctionType(_ir.FloatType(), [_ir.FloatType()])
            return builder.call(_ir.InlineAsm(fnty, "rcp.approx.ftz.f32 $0, $1;", "=f,f"), args)
        return _types.float32(_types.float32), codegen

    @cuda.jit(device=True)
    def rcp_ftz(v):
        """1/v by rcp.approx.ftz: for v in [1, 2] (a sigmoid's denominator), where flushing changes nothing."""
        return _rcp_ftz(float32(v))


TWO_M64 = float32(2.0 ** -64)


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


def row_silu(a, n):
    """silu(n) for an output of a's type: silu16 for 16-bit types, the accurate silu for fp32
    (its subnormal results kept). The simulator runs this Python."""
    if narrow(a):
        return silu16(n)
    return silu(n)


def row_exp(a, d):
    """exp(d) for an output of a's type, up to the factor common to the row (2^64 for 16-bit
    types) that the division by the row's sum cancels. The simulator runs this Python."""
    if narrow(a):
        return exp_shifted64(d)
    return exp_keep(d)


if not SIMULATED:
    @overload(row_silu, target="cuda")
    def _row_silu(a, n):
        if a.dtype.bitwidth == 16:
            return lambda a, n: silu16(n)
        return lambda a, n: silu(n)

    @overload(row_exp, target="cuda")
    def _row_exp(a, d):
        if a.dtype.bitwidth == 16:
            return lambda a, d: exp_shifted64(d)
        return lambda a, d: exp_keep(d)


@cuda.jit(device=True)
def welford_merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Chan et al.'s merge of two (count, mean, M2) states. An empty side returns the other:
    also keeps inf · 0 (a mean past ~1.8e19 squared) out of a thread's first merge."""
    if n_a == float32(0):
        return n_b, mean_b, m2_b
    if n_b == float32(0):
        return n_a, mean_a, m2_a
    n = n_a + n_b
    delta = mean_b - mean_a
    share = n_b / n
    return n, mean_a + delta * share, m2_a + m2_b + delta * delta * n_a * share


@cuda.jit(device=True)
def online_merge(m_a, d_a, m_b, d_b):
    """Two (max, sum of exp(x - max)) states as one; an all -inf state (d = 0) adds nothing."""
    m = max_nan(m_a, m_b)
    if m == NEG_INF:
        return m, float32(0)
    return m, d_a * math.exp(m_a - m) + d_b * math.exp(m_b - m)


@cuda.jit(device=True)
def online_add(m, d, x):
    """One element into a running (max, sum of exp(x - max)); -inf adds nothing."""
    if x == NEG_INF:
        return m, d
    if x > m or x != x:
        return x, d * math.exp(m - x) + float32(1)
    return m, d + math.exp(x - m)


# --- reductions over a group of threads ------------------------------------------------------

@cuda.jit(device=True)
def _xor(v, offset):
    return cuda.shfl_xor_sync(FULL_MASK, v, int32(offset))


@cuda.jit(device=True)
def _lower_lane(offset):
    """Whether this lane is the lower of the pair an xor step of ``offset`` joins."""
    return (cuda.threadIdx.x & offset) == 0


# Past a warp, each warp's result goes through shared memory, indexed in 32 bits (unsigned):
# Numba's 64-bit signed indices (wrapped around when negative) and a division by the group for
# its first warp took 40-43 live registers in the block reduction of rmsnorm's kept bf16 kernel.

@cuda.jit(device=True)
def _warp_of():
    return uint32(uint32(cuda.threadIdx.x) >> uint32(5))


@cuda.jit(device=True)
def _group_start_warp(group):
    """The group's first warp (group a power of two of at least a warp): tid // group · group // WARP."""
    return uint32(uint32(uint32(cuda.threadIdx.x) & uint32(~uint32(uint32(group) - uint32(1)))) >> uint32(5))


@cuda.jit(device=True)
def _group_warps(group):
    return uint32(uint32(group) >> uint32(5))


@cuda.jit(device=True)
def _is_warp_leader():
    return (uint32(cuda.threadIdx.x) & uint32(WARP - 1)) == uint32(0)


@cuda.jit(device=True)
def group_sum(v, group):
    offset = min(group, WARP) // 2
    while offset > 0:
        v += _xor(v, offset)
        offset //= 2
    if group <= WARP:
        return v
    partial = cuda.shared.array(MAX_WARPS, float32)
    if _is_warp_leader():
        partial[_warp_of()] = v
    cuda.syncthreads()
    first = _group_start_warp(group)
    total = partial[first]
    w = uint32(1)
    while w < _group_warps(group):
        total += partial[uint32(first + w)]
        w = uint32(w + uint32(1))
    cuda.syncthreads()
    return total


@cuda.jit(device=True)
def group_max(v, group):
    offset = min(group, WARP) // 2
    while offset > 0:
        v = max_nan(v, _xor(v, offset))
        offset //= 2
    if group <= WARP:
        return v
    partial = cuda.shared.array(MAX_WARPS, float32)
    if _is_warp_leader():
        partial[_warp_of()] = v
    cuda.syncthreads()
    first = _group_start_warp(group)
    total = partial[first]
    w = uint32(1)
    while w < _group_warps(group):
        total = max_nan(total, partial[uint32(first + w)])
        w = uint32(w + uint32(1))
    cuda.syncthreads()
    return total


@cuda.jit(device=True)
def group_welford(n, mean, m2, group):
    offset = min(group, WARP) // 2
    while offset > 0:
        n_o, mean_o, m2_o = _xor(n, offset), _xor(mean, offset), _xor(m2, offset)
        if _lower_lane(offset):
            n, mean, m2 = welford_merge(n, mean, m2, n_o, mean_o, m2_o)
        else:
            n, mean, m2 = welford_merge(n_o, mean_o, m2_o, n, mean, m2)
        offset //= 2
    if group <= WARP:
        return n, mean, m2
    counts = cuda.shared.array(MAX_WARPS, float32)
    means = cuda.shared.array(MAX_WARPS, float32)
    m2s = cuda.shared.array(MAX_WARPS, float32)
    if _is_warp_leader():
        counts[_warp_of()] = n
        means[_warp_of()] = mean
        m2s[_warp_of()] = m2
    cuda.syncthreads()
    first = _group_start_warp(group)
    n, mean, m2 = counts[first], means[first], m2s[first]
    w = uint32(1)
    while w < _group_warps(group):
        i = uint32(first + w)
        n, mean, m2 = welford_merge(n, mean, m2, counts[i], means[i], m2s[i])
        w = uint32(w + uint32(1))
    cuda.syncthreads()
    return n, mean, m2


@cuda.jit(device=True)
def group_online(m, d, group):
    offset = min(group, WARP) // 2
    while offset > 0:
        m_o, d_o = _xor(m, offset), _xor(d, offset)
        if _lower_lane(offset):
            m, d = online_merge(m, d, m_o, d_o)
        else:
            m, d = online_merge(m_o, d_o, m, d)
        offset //= 2
    if group <= WARP:
        return m, d
    maxima = cuda.shared.array(MAX_WARPS, float32)
    sums = cuda.shared.array(MAX_WARPS, float32)
    if _is_warp_leader():
        maxima[_warp_of()] = m
        sums[_warp_of()] = d
    cuda.syncthreads()
    first = _group_start_warp(group)
    m, d = maxima[first], sums[first]
    w = uint32(1)
    while w < _group_warps(group):
        i = uint32(first + w)
        m, d = online_merge(m, d, maxima[i], sums[i])
        w = uint32(w + uint32(1))
    cuda.syncthreads()
    return m, d


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
