"""Device functions every Numba kernel shares: fp32 loads and stores of each storage type, as
elements, 8-byte words and chunks. One code for the GPU and the simulator, built on
primitives.py (the code that differs between the two); the reductions over a group of threads
are in groups.py, the softmax's exp and the chain's silu in functions.py.

Storage: fp32 as float32, fp16 as float16 (converted by the hardware's cvt), bf16 as int16
bits: bf16 -> fp32 is the bits shifted up by 16; fp32 -> bf16 rounds to nearest even
(primitives' f32_to_bf16; two values a cvt where a word is stored: ``pair_bits``). ``load(a,
i)`` and ``store(a, i, v)`` pick the conversion from the array's type, as every ``by_type``
function does: at compile time on the GPU (an overload per type), at the first call for each
type under the simulator.
"""
from numba import cuda, float32, uint16, uint32, uint64

from impls._frameworks.numba.primitives import (bf16_pair, bits_float, by_type, f32_to_bf16, float_bits, half_as_bits,
                                                half_bits, half_from_bits, half_pair, inlined)

BF16, FP16 = "int16", "float16"     # an array's element type, as str(a.dtype) names it: bf16 is stored as its bits


def stored(a) -> str:
    """The element type of array a (its Numba type on the GPU, its numpy type under the simulator)."""
    return str(a.dtype)


@cuda.jit(device=True)
def bf16_to_f32(bits):
    """bf16 bits (int16) to fp32: the top half of the fp32 word; exact."""
    return bits_float(uint32(uint32(uint16(bits)) << uint32(16)))


# --- elements, through fp32 ----------------------------------------------------------------

@by_type
def load(a, i):
    """a[i] as fp32."""
    if stored(a) == BF16:
        return lambda a, i: bf16_to_f32(a[i])
    return lambda a, i: float32(a[i])


@by_type
def store(a, i, v):
    """a[i] = v (fp32), rounded once into a's type."""
    if stored(a) == BF16:
        def bf16(a, i, v):
            a[i] = f32_to_bf16(v)
        return bf16

    def other(a, i, v):
        a[i] = v   # Numba's cast: cvt.rn into fp16, none for fp32
    return other


@by_type
def from_bits(a, b):
    """An element of a's type from its bits (the low bits of an integer) as fp32."""
    if stored(a) == BF16:
        return lambda a, b: bits_float(uint32(b) << uint32(16))
    if stored(a) == FP16:
        return lambda a, b: half_from_bits(b)
    return lambda a, b: bits_float(uint32(b))


@by_type
def to_bits(a, v):
    """fp32 v rounded once into a's type, as its bits (uint32)."""
    if stored(a) == BF16:
        return lambda a, v: uint32(uint16(f32_to_bf16(v)))
    if stored(a) == FP16:
        return lambda a, v: half_bits(v)
    return lambda a, v: float_bits(v)


@by_type(inline="always")    # a constant where it is used: loops over a chunk's elements have a constant trip count
def narrow(a):
    """Whether a's elements are 16-bit (a word holds four) rather than fp32 (two)."""
    wide = stored(a) in (BF16, FP16)
    return lambda a: wide


@by_type
def pair_bits(a, lo, hi):
    """Two fp32 rounded into a's 16-bit type, as one 32-bit word (``lo`` in the low half): one
    cvt for the pair on the GPU."""
    if stored(a) == BF16:
        return lambda a, lo, hi: bf16_pair(lo, hi)
    return lambda a, lo, hi: half_pair(lo, hi)


@by_type
def exact_bits(a, v):
    """The bits of v in a's type (uint32) where a's type holds v exactly (the kernels' fills: 0
    and -inf): by integer operations on v's fp32 bits, which fold to a constant for a constant
    v (to_bits' cvt is inline PTX, which LLVM does not fold: a fill held in a register, copied
    into each word a predicated load may replace)."""
    if stored(a) == BF16:
        return lambda a, v: uint32(float_bits(v) >> uint32(16))     # exact: the low half is 0

    if stored(a) == FP16:
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


@by_type
def element_bits(a, i):
    """The bits of a[i] (uint32, in the low bits): what a chunk's word holds, so that an element
    moved alone is held as the same bits."""
    if stored(a) == BF16:
        return lambda a, i: uint32(uint16(a[i]))
    if stored(a) == FP16:
        return lambda a, i: uint32(half_as_bits(a[i]))
    return lambda a, i: float_bits(a[i])


# --- words: 8 bytes of elements, moved as one integer ---------------------------------------
#
# A kernel that moves one 2- or 4-byte element per load issues 4 (fp32: 2) times the loads a
# copy does, each with its own 64-bit index arithmetic: the instructions and registers, not
# the bytes, set its speed. The kernels move 8-byte *words* of a flat array instead (w,
# runtime.words: a uint64 view from the array's first aligned element on): ``word_values``
# unpacks one into its elements as fp32 (four of a 16-bit type, two of fp32) and ``word_bits``
# packs them back, each rounded once into the array's type. The 1-D kernels move *chunks* of
# four elements (one word of a 16-bit type, two of fp32: ``chunk_load``/``chunk_store``); the
# row kernels move 16-byte chunks (primitives' ``load_chunk``/``store_chunk``: one 16-byte
# access on the GPU, through an LLVM vector load or store; Numba's own loads are at most 8
# bytes, its vector types being values, not array elements; rowchunks.py). A chunk not whole
# or not aligned moves one element at a time: the values, and so the bits of every result,
# never depend on which way they moved. Word indices are unsigned: Numba wraps a negative
# signed index around (two instructions more a load); an unsigned one it takes as it is.

CHUNK = 4
LOW16 = uint32(0xFFFF)


@by_type
def word_values(a, b):
    """The elements of word b (a uint64 of a's elements, the first in the low bits) as fp32:
    four of a 16-bit type, two of fp32. By 32-bit halves: each element one instruction."""
    if stored(a) in (BF16, FP16):
        def four(a, b):
            lo, hi = uint32(b), uint32(uint64(b) >> uint64(32))
            return (from_bits(a, lo & LOW16), from_bits(a, lo >> uint32(16)),
                    from_bits(a, hi & LOW16), from_bits(a, hi >> uint32(16)))
        return four

    def two(a, b):
        return from_bits(a, uint32(b)), from_bits(a, uint32(uint64(b) >> uint64(32)))
    return two


@cuda.jit(device=True)
def word_bits(a, v0, v1, v2, v3):
    """The word of a's type holding the first per_word(a) of the values (fp32: v0 and v1; v2
    and v3 unused), each rounded once (a pair of 16-bit ones by one cvt: pair_bits)."""
    if narrow(a):
        return uint64(pair_bits(a, v0, v1)) | (uint64(pair_bits(a, v2, v3)) << uint64(32))
    return uint64(to_bits(a, v0)) | (uint64(to_bits(a, v1)) << uint64(32))


@by_type
def chunk_values(a, w, i):
    """The four elements of the words from w[i] on (one word of a 16-bit type, two of fp32) as fp32."""
    if stored(a) in (BF16, FP16):
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
