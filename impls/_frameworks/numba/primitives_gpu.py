"""The primitives on the GPU: the code that differs between the GPU and Numba's simulator
(primitives_sim.py has the same names, primitives.py picks one), here by libdevice, LLVM and
inline PTX (ptx.py). Both round to nearest even and give NaN for NaN: only a NaN's payload
differs (the hardware's cvt and max.NaN give the canonical NaN), and the approximate ex2 and
reciprocal, whose bits are the hardware's.
"""
import functools

from llvmlite import ir
from numba import cuda, float32, int16, int32, uint16, uint32, uint64
from numba.cuda import libdevice, types
from numba.cuda.extending import intrinsic, overload

from impls._frameworks.numba import ptx

__all__ = ["by_type", "inlined", "float_bits", "bits_float", "rsqrt", "half_from_bits", "half_as_bits", "half_bits",
           "bf16_pair", "half_pair", "f32_to_bf16", "load_chunk", "store_chunk", "shared_address", "shared_load",
           "shared_store", "max_nan", "ex2", "ex2_ftz", "fma", "rcp_ftz"]


def by_type(choose=None, *, inline="never"):
    """A device function whose code depends on its first argument's element type (fp32, fp16,
    or bf16's int16 bits): ``choose(*args)`` returns that code. On the GPU an overload, chosen
    at compile time from the arguments' Numba types (``inline="always"``: inlined where it is
    used, a constant there when the code returns one)."""
    def make(choose):
        def stub(*args):
            raise NotImplementedError(f"{choose.__name__} runs in a kernel only")
        overload(stub, target="cuda", inline=inline)(choose)
        return functools.update_wrapper(stub, choose)
    return make(choose) if choose is not None else make


def inlined(func):
    """A device function inlined into every caller at the NVVM level (alwaysinline): a kernel
    that calls it with a constant (its variant) gets only that variant's code, and registers
    for that code alone (softmax's three variants in one kernel needed 108-109 registers in
    bf16/fp32 on sm_90)."""
    return cuda.jit(device=True, forceinline=True)(func)


# --- a float's bits and back; fp16 and bf16 ---------------------------------------------------

@cuda.jit(device=True)
def float_bits(x):
    return uint32(libdevice.float_as_int(float32(x)))


@cuda.jit(device=True)
def bits_float(b):
    return libdevice.int_as_float(int32(b))


@cuda.jit(device=True)
def rsqrt(v):
    return libdevice.rsqrtf(float32(v))   # NaN below 0, as the simulator's


# fp16 <-> its bits: Numba has no reinterpreting cast for float16 (libdevice has none either).
# numba-cuda keeps a float16 as an i16 in LLVM, so the cast is the value itself.
@intrinsic
def _half_from_bits(typingctx, b):
    def codegen(context, builder, sig, args):
        return args[0]
    return types.float16(types.uint16), codegen


@intrinsic
def half_as_bits(typingctx, h):
    """The bits of an fp16 value (uint16)."""
    def codegen(context, builder, sig, args):
        return args[0]
    return types.uint16(types.float16), codegen


@cuda.jit(device=True)
def half_from_bits(b):
    return float32(_half_from_bits(uint16(b)))


# fp32 -> fp16 and bf16 by the pair instructions (cvt.rn.<type>x2.f32), also where one value
# is rounded: a row's bits (a NaN's too) do not depend on whether its elements were stored
# one at a time or as words.
@cuda.jit(device=True)
def bf16_pair(lo, hi):
    """Two fp32 rounded to bf16, as one 32-bit word (``lo`` in the low half)."""
    return ptx.cvt_bf16x2(float32(hi), float32(lo))


@cuda.jit(device=True)
def half_pair(lo, hi):
    return ptx.cvt_f16x2(float32(hi), float32(lo))


@cuda.jit(device=True)
def half_bits(v):
    """fp32 rounded to fp16, as its bits."""
    return half_pair(v, float32(0)) & uint32(0xFFFF)


@cuda.jit(device=True)
def f32_to_bf16(x):
    """fp32 to bf16 bits (int16), rounded to nearest even (a NaN becomes the canonical NaN)."""
    return int16(uint16(bf16_pair(x, float32(0)) & uint32(0xFFFF)))


# --- a row kernel's 16-byte chunk: one LLVM vector load or store --------------------------

_QUAD = ir.VectorType(ir.IntType(32), 4)


def _quad_pointer(context, builder, array_type, array, word, offset):
    data = context.make_array(array_type)(context, builder, array).data
    row = builder.bitcast(builder.gep(data, [word], inbounds=True), ir.IntType(8).as_pointer())
    at = builder.gep(row, [builder.zext(offset, ir.IntType(64))], inbounds=True)
    return builder.bitcast(at, _QUAD.as_pointer())


@intrinsic
def _load_chunk(typingctx, w, word, offset):
    def codegen(context, builder, sig, args):
        quad = builder.load(_quad_pointer(context, builder, sig.args[0], *args), align=16)
        quad.set_metadata("invariant.load", builder.module.add_metadata([]))
        words = [builder.extract_element(quad, ir.Constant(ir.IntType(32), e)) for e in range(4)]
        return context.make_tuple(builder, sig.return_type, words)
    return types.UniTuple(types.uint32, 4)(w, types.uint64, types.uint32), codegen


@intrinsic
def _store_chunk(typingctx, w, word, offset, q0, q1, q2, q3):
    def codegen(context, builder, sig, args):
        quad = ir.Constant(_QUAD, ir.Undefined)
        for e, q in enumerate(args[3:]):
            quad = builder.insert_element(quad, q, ir.Constant(ir.IntType(32), e))
        builder.store(quad, _quad_pointer(context, builder, sig.args[0], *args[:3]), align=16)
        return context.get_dummy_value()
    return types.void(w, types.uint64, types.uint32, *(types.uint32,) * 4), codegen


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


# --- the row cache in shared memory, by 32-bit addresses ---------------------------------
# Numba addresses a shared array through 64-bit pointers to the shared window, which ptxas on
# sm_90 rebuilds for every access (an S2R of the CTA's cluster id, a MOV and a LEA beside the
# index arithmetic: 32 S2R in rmsnorm's bf16 output loop). A row cache is read and written by
# its own thread only, so it is addressed by the 32-bit shared offset of its first slot, taken
# once (``shared_address``), and loaded and stored by ld/st.shared (ptx.py, kept in order).

@cuda.jit(device=True)
def shared_address(cache):
    """The shared offset of cache[0] (bytes)."""
    return ptx.shared_offset(cache)


@cuda.jit(device=True)
def shared_load(cache, address):
    """The fp32 at shared offset ``address`` (bytes) of cache."""
    return ptx.ld_shared_f32(uint32(address))


@cuda.jit(device=True)
def shared_store(cache, address, v):
    ptx.st_shared_f32(uint32(address), float32(v))


# --- max, 2^t, fma and reciprocal -------------------------------------------------------------

@cuda.jit(device=True)
def max_nan(a, b):
    """max that returns NaN if either is NaN (the hardware's canonical NaN), in one instruction
    (the comparisons and branches of the simulator's took about six a value in softmax's max
    pass)."""
    return ptx.max_nan_f32(float32(a), float32(b))


ex2, ex2_ftz = ptx.ex2_f32, ptx.ex2_ftz_f32


@cuda.jit(device=True)
def fma(a, b, c):
    """a·b + c, rounded once."""
    return cuda.fma(a, b, c)


@cuda.jit(device=True)
def rcp_ftz(v):
    """1/v by rcp.approx.ftz: for v in [1, 2] (a sigmoid's denominator), where flushing changes nothing."""
    return ptx.rcp_ftz_f32(float32(v))
