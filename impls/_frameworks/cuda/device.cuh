// Device helpers shared by every op's CUDA kernels: fp32 conversions, 16-byte packs, warp and
// block reductions. Every op computes in fp32 and rounds once into the output's dtype; x is
// read as float, __nv_bfloat16 or __half.
//
// This header, the kernel headers beside it (elementwise.cuh, reduce_1d.cuh, rows.cuh) and each
// op's impls/<op>/<op>.cuh are device code only and name nothing of PyTorch: the CUDA extension
// compiles them with nvcc, and CuPy's raw variants compile the same text with NVRTC, which
// accepts no host function and has no C++ standard library. So: every function here is
// __device__ (or __host__ __device__ constexpr), and the only headers are the toolkit's fp16/bf16
// ones and libcu++'s cuda/std (nvcc's include path has both, and so has CuPy's). The host side
// (torch's checks, the dispatch, the launches) is host.cuh.
#pragma once

#include <cuda/std/cstdint>
#include <cuda/std/limits>
#include <cuda/std/type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace hk {

using cuda::std::int64_t;
using cuda::std::uint32_t;
using cuda::std::uintptr_t;

// +inf as a constant expression (NVRTC has no __builtin_huge_valf).
constexpr float INF = cuda::std::numeric_limits<float>::infinity();

// --- fp32 in, dtype out ------------------------------------------------------------------
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

// --- 16-byte packs: one LDG.128 / STG.128 per thread ---------------------------------------
// Held as four 32-bit words, two 16-bit elements to a word: an array of __nv_bfloat16 or
// __half would take a register per element (for rmsnorm's 2-pack bf16 kernel on sm_90, 61
// registers against 45 for the same kernel on words), and registers bound the rows in flight.
// bf16 -> fp32 is exact: the element's bits in the high half of the word.
template <typename T> struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    uint32_t w[4];

    __device__ __forceinline__ T get(int e) const {
        if constexpr (sizeof(T) == 4) {
            return __uint_as_float(w[e]);
        } else {
            const auto bits = static_cast<unsigned short>(w[e / 2] >> (16 * (e % 2)));
            if constexpr (cuda::std::is_same_v<T, __half>) return __ushort_as_half(bits);
            else return __ushort_as_bfloat16(bits);
        }
    }
    __device__ __forceinline__ void set(int e, T v) {
        if constexpr (sizeof(T) == 4) {
            w[e] = __float_as_uint(v);
        } else {
            unsigned short bits;
            if constexpr (cuda::std::is_same_v<T, __half>) bits = __half_as_ushort(v);
            else bits = __bfloat16_as_ushort(v);
            const int shift = 16 * (e % 2);
            w[e / 2] = (w[e / 2] & ~(0xffffu << shift)) | (static_cast<uint32_t>(bits) << shift);
        }
    }
    // Element e as fp32.
    __device__ __forceinline__ float f32(int e) const {
        if constexpr (cuda::std::is_same_v<T, __nv_bfloat16>)
            return __uint_as_float(e % 2 ? (w[e / 2] & 0xffff0000u) : (w[e / 2] << 16));
        else return to_f32(get(e));
    }
    // The pack of fp32 values v[N], each rounded once to T (two at a time for 16-bit types).
    __device__ __forceinline__ void set_f32(const float (&v)[N]) {
        if constexpr (sizeof(T) == 4) {
#pragma unroll
            for (int e = 0; e < N; ++e) w[e] = __float_as_uint(v[e]);
        } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if constexpr (cuda::std::is_same_v<T, __half>) {
                    const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
                    w[i] = *reinterpret_cast<const uint32_t*>(&h);
                } else {
                    const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
                    w[i] = *reinterpret_cast<const uint32_t*>(&h);
                }
            }
        }
    }
};

template <typename T> __device__ __forceinline__ Pack<T> load_pack(const T* p) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    return Pack<T>{{v.x, v.y, v.z, v.w}};
}
template <typename T> __device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
    *reinterpret_cast<uint4*>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
}

// --- exp for 16-bit outputs ---------------------------------------------------------------------
// exp2f gives subnormal results through a compare and two predicated multiplies around the
// hardware's ex2; the ops that need an exp per element for 16-bit outputs (softmax, the chain's
// silu) take ex2 without them on an argument shifted by +64, which keeps every result that can
// reach a 16-bit output normal, and take the 2^-64 back in a multiply that rounds once (nvcc
// does not flush subnormals unless told to). The shift's FFMA rounds the exponent to 2^-18: a
// relative error of 3e-6, against the 16-bit types' rounding of 4e-3 (bf16) and 5e-4 (fp16).
constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ float ex2_ftz(float t) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
    return r;
}

// 1/x for x in [1, 2] (a sigmoid's denominator), where flushing changes nothing.
__device__ __forceinline__ float rcp_ftz(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// e^d · 2^64 for d <= 0: normal down to d = -131 (d·log2 e = -190), 0 below.
__device__ __forceinline__ float exp_shifted64(float d) { return ex2_ftz(fmaf(d, LOG2E, 64.0f)); }

// --- combines ---------------------------------------------------------------------------------
struct Add {
    static constexpr float identity = 0.0f;
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// The maximum that keeps NaN: fmaxf (IEEE maxNum) would drop it.
struct MaxNan {
    static constexpr float identity = -INF;
    __device__ __forceinline__ float operator()(float a, float b) const {
        return (a != a) ? a : ((b != b || b > a) ? b : a);
    }
};

// --- reductions -------------------------------------------------------------------------------
// Butterfly over the lanes of a full warp (__shfl_xor_sync): the result in every lane, in 5 steps.
template <typename Op> __device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Two levels: each warp's butterfly, the warps' partials staged in shared memory, warp 0
// reduces them; the result is broadcast to every thread through shared memory. blockDim.x
// must be a multiple of 32 (every launch here is). Safe to call several times in a row.
template <typename Op> __device__ __forceinline__ float block_reduce(float v, Op op) {
    __shared__ float partial[32];
    __shared__ float result;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_reduce(v, op);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_reduce(lane < warps ? partial[lane] : Op::identity, op);
        if (lane == 0) result = v;
    }
    __syncthreads();
    v = result;
    __syncthreads();   // partial and result may be written again by the next call
    return v;
}

}  // namespace hk
