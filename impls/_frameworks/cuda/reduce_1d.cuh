// One fp32 value from a 1-D tensor (sum, max), in the two ways the seed compares.
//   two_pass: each block reduces its grid-stride share (16-byte packs, UNROLL in flight,
//             an accumulator per pack in flight) to a partial; a second kernel, one block,
//             reduces the partials in one fixed tree. Same grid, same trees: the same bits
//             every run. The partials cost 8·blocks bytes: nothing against N·s.
//   atomic:   each block combines its partial into an accumulator with one atomic, then takes
//             a ticket; the block with the last ticket moves the total into the result and
//             resets the accumulator and the counter for the next launch. One launch; for a
//             sum the order of the additions, and so its bits, change from run to run.
#pragma once

#include "device.cuh"

namespace hk {

// Atomics on an fp32 slot that starts (and is left) as 0 bits.
struct AtomicAdd {
    __device__ static void combine(float* slot, float v) { atomicAdd(slot, v); }
    __device__ static float take(float* slot) { return atomicExch(slot, 0.0f); }
};

// Max through an unsigned key ordered as the floats are (negative values bit-flipped,
// positive ones with the sign bit set), so atomicMax on the key is a max on the value; any
// NaN is the largest key. 0 sits below -inf: the reset value.
struct AtomicMaxNan {
    __device__ static unsigned key(float v) {
        if (v != v) return 0xffffffffu;
        const unsigned bits = __float_as_uint(v);
        return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    }
    __device__ static void combine(float* slot, float v) { atomicMax(reinterpret_cast<unsigned*>(slot), key(v)); }
    __device__ static float take(float* slot) {
        const unsigned k = atomicExch(reinterpret_cast<unsigned*>(slot), 0u);
        if (k == 0xffffffffu) return __uint_as_float(0x7fc00000u);
        return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
    }
};

constexpr int REDUCE_UNROLL = 4;

// A 16-bit max folds its packs in the 16-bit type, two elements an instruction (max.NaN.f16x2,
// max.NaN.bf16x2: NaN in either gives NaN), and converts to fp32 once per thread: a max is
// exact in any type that holds its operands, so the value is the fp32 fold's. Converted and
// compared one by one (a conversion, two NaN tests, a compare and a select per element), an
// fp16 pack took ~40 instructions against ~10 for an fp32 pack of the same 16 bytes, and the
// 16-bit max read ~5% further from the roof than the fp32 one on the H200.
template <typename T> struct Pair;
template <> struct Pair<__half> {
    using type = __half2;
    static __device__ __forceinline__ type lowest() { return __half2half2(__ushort_as_half(0xfc00u)); }   // -inf
    static __device__ __forceinline__ float low(type v) { return __low2float(v); }
    static __device__ __forceinline__ float high(type v) { return __high2float(v); }
};
template <> struct Pair<__nv_bfloat16> {
    using type = __nv_bfloat162;
    static __device__ __forceinline__ type lowest() { return __bfloat162bfloat162(__ushort_as_bfloat16(0xff80u)); }
    static __device__ __forceinline__ float low(type v) { return __low2float(v); }
    static __device__ __forceinline__ float high(type v) { return __high2float(v); }
};

template <typename T, typename Op>
constexpr bool packed_max = sizeof(T) == 2 && cuda::std::is_same_v<Op, MaxNan>;

// The max of a pack's elements as a pair of 16-bit maxima (three max.NaN.x2 on its four words).
template <typename T> __device__ __forceinline__ typename Pair<T>::type pack_max(const Pack<T>& p) {
    using P2 = typename Pair<T>::type;
    P2 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = *reinterpret_cast<const P2*>(&p.w[i]);
    return __hmax2_nan(__hmax2_nan(w[0], w[1]), __hmax2_nan(w[2], w[3]));
}

// This thread's share of x: the head (before the first 16-byte boundary) and the tail one
// by one, the packs UNROLL at a time, each pack in flight into an accumulator of its own.
template <typename T, typename Op>
__device__ __forceinline__ float thread_share(const T* __restrict__ x, int64_t head, int64_t packs, int64_t n, Op op) {
    constexpr int N = Pack<T>::N;
    const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    float acc[REDUCE_UNROLL];
#pragma unroll
    for (int u = 0; u < REDUCE_UNROLL; ++u) acc[u] = Op::identity;
    if (tid < head) acc[0] = to_f32(x[tid]);
    const T* xb = x + head;
    if constexpr (packed_max<T, Op>) {
        using P2 = typename Pair<T>::type;
        P2 pairs[REDUCE_UNROLL];
#pragma unroll
        for (int u = 0; u < REDUCE_UNROLL; ++u) pairs[u] = Pair<T>::lowest();
        // whole rounds of UNROLL packs unpredicated, then the last packs one at a time (a max is
        // order-free): with each max predicated as its load, ptxas put the max right after its
        // load, so each load waited for the one before it
        int64_t i = tid;
        for (; i + (REDUCE_UNROLL - 1) * stride < packs; i += stride * REDUCE_UNROLL) {
            Pack<T> v[REDUCE_UNROLL];
#pragma unroll
            for (int u = 0; u < REDUCE_UNROLL; ++u) v[u] = load_pack(xb + (i + u * stride) * N);
#pragma unroll
            for (int u = 0; u < REDUCE_UNROLL; ++u) pairs[u] = __hmax2_nan(pairs[u], pack_max(v[u]));
        }
        for (; i < packs; i += stride) pairs[0] = __hmax2_nan(pairs[0], pack_max(load_pack(xb + i * N)));
#pragma unroll
        for (int u = 0; u < REDUCE_UNROLL; ++u)
            acc[u] = op(op(acc[u], Pair<T>::low(pairs[u])), Pair<T>::high(pairs[u]));
    } else {
        for (int64_t i = tid; i < packs; i += stride * REDUCE_UNROLL) {
            Pack<T> v[REDUCE_UNROLL];
#pragma unroll
            for (int u = 0; u < REDUCE_UNROLL; ++u)
                if (i + u * stride < packs) v[u] = load_pack(xb + (i + u * stride) * N);
#pragma unroll
            for (int u = 0; u < REDUCE_UNROLL; ++u)
                if (i + u * stride < packs) {
#pragma unroll
                    for (int e = 0; e < N; ++e) acc[u] = op(acc[u], v[u].f32(e));
                }
        }
    }
    for (int64_t i = head + packs * N + tid; i < n; i += stride) acc[0] = op(acc[0], to_f32(x[i]));
    float total = acc[0];
#pragma unroll
    for (int u = 1; u < REDUCE_UNROLL; ++u) total = op(total, acc[u]);
    return total;
}

template <typename T, typename Op>
__global__ void reduce_partials(const T* __restrict__ x, int64_t head, int64_t packs, int64_t n, float* partials) {
    const float v = block_reduce(thread_share(x, head, packs, n, Op{}), Op{});
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}

template <typename Op>
__global__ void reduce_finish(const float* __restrict__ partials, int64_t count, float* out) {
    float v = Op::identity;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) v = Op{}(v, partials[i]);
    v = block_reduce(v, Op{});
    if (threadIdx.x == 0) *out = v;
}

template <typename T, typename Op, typename Atomic>
__global__ void reduce_atomic(const T* __restrict__ x, int64_t head, int64_t packs, int64_t n, float* accumulator,
                              unsigned* tickets, float* out) {
    const float v = block_reduce(thread_share(x, head, packs, n, Op{}), Op{});
    if (threadIdx.x == 0) {
        Atomic::combine(accumulator, v);
        __threadfence();   // the combine is visible before the ticket that counts it
        if (atomicAdd(tickets, 1u) == gridDim.x - 1) {
            __threadfence();
            *out = Atomic::take(accumulator);
            *tickets = 0u;
        }
    }
}

constexpr int FINISH_THREADS = 1024;

}  // namespace hk
