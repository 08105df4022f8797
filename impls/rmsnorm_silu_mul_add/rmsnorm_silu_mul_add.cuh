// The chain y = silu(rmsnorm(x; g)) · u + r, statistics in fp32.
//   fused:   one kernel (rows.cuh): x's sum of squares from registers (or x again from L2),
//            then n = x·rsqrt(mean(x²) + eps)·g, y = silu(n)·u + r in fp32, rounded once:
//            4·R·H·s + H·s bytes.
//   unfused: this framework's separate kernels, each intermediate rounded to the dtype and
//            written out (~10·R·H·s bytes): the tuned RMSNorm (rmsnorm.cu), then silu, mul and
//            add as elementwise kernels here.
// silu(n) = n / (1 + exp(-n)) with the accurate expf; below n = -80, where exp(-n) nears fp32's
// overflow (-88.7) while n·e^n is still representable down to about -104 (subnormal), as
// -exp(n + log(-n)): one exp rounded once into the subnormal result, where n·expf(n) rounds
// e^n into a subnormal first (measured on the H200: 80 subnormal ulps off at n near -96,
// outside the large_gain set's tolerance). An approximate exp or a flush to zero would lose
// those values. That is the fp32 outputs' silu; 16-bit outputs take silu_16 (below).
//
// Device code only (device.cuh says why): rmsnorm_silu_mul_add.cu launches these kernels, and so do CuPy's raw
// variants (impls/rmsnorm_silu_mul_add/cupy.py).
#pragma once

#include "rows.cuh"

namespace hk {

__device__ __forceinline__ float silu(float n) { return n < -80.0f ? -expf(n + logf(-n)) : n / (1.0f + expf(-n)); }

// silu for 16-bit outputs, whose rounding (4e-3 bf16, 5e-4 fp16) leaves room for a 3e-6
// relative error: e^-|n| from ex2 (device.cuh's exp_shifted64: e^-|n|·2^64, normal for |n| <
// 131) and an approximate reciprocal, in place of the accurate expf, its range test and the IEEE
// division: on sm_90 the bf16 kernel keeping 4 packs is 1080 instructions against 2896 (34 an
// element against 90), and with expf it ran at 91% of the roof on the H200. For n < 0,
// n·e^n/(1 + e^n) is formed on the scaled e^n and scaled back last, so a result in the
// subnormal range is rounded once.
__device__ __forceinline__ float silu_16(float n) {
    const float scaled = exp_shifted64(-fabsf(n));        // e^-|n| · 2^64
    const float inv = rcp_ftz(1.0f + scaled * 0x1p-64f);  // sigmoid(|n|)
    const bool positive = n >= 0.0f;
    // selects, not branches: n·sigmoid(n) for n >= 0, (n·e^n·2^64·sigmoid(|n|))·2^-64 below
    return (positive ? n : n * scaled) * inv * (positive ? 1.0f : 0x1p-64f);
}

template <typename T> __device__ __forceinline__ float silu_of(float n) {
    if constexpr (sizeof(T) == 4) return silu(n);
    else return silu_16(n);
}

template <typename T, int P, int TRIP, bool W>
__global__ void __launch_bounds__(max_threads(P)) chain_rows(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ u,
                           const T* __restrict__ r, T* __restrict__ y, int64_t rows, int cols, float eps, int group) {
    constexpr int N = Pack<T>::N;
    __shared__ float slots[32];
    constexpr int K = operand_packs(P, 3);
    const Row<T, P, TRIP, W> row(x, y, rows, cols, group);
    const RowOperand<T, K, W> weight(g, false, row), up(u, true, row), residual(r, true, row);
    float squares = 0.0f;
    row.for_each_element([&](float v) { squares = fmaf(v, v, squares); });
    squares = row.reduce(squares, Add{}, slots);
    const float inv = rsqrtf(squares / cols + eps);
    row.write([&](int k, int j, const float* xs, float* ys) {
        float w[N], us[N], rs[N];
        weight.at(k, j, w);
        up.at(k, j, us);
        residual.at(k, j, rs);
#pragma unroll
        for (int e = 0; e < N; ++e) ys[e] = fmaf(silu_of<T>(xs[e] * inv * w[e]), us[e], rs[e]);
    });
}

// One elementwise step of the unfused chain (OP: silu(a), a·b or a + b), grid-stride, one
// element at a time.
enum Step { SILU = 0, MUL = 1, ADD = 2 };

template <typename T, int OP>
__global__ void chain_step(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, int64_t n) {
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
        const float va = to_f32(a[i]);
        float v;
        if constexpr (OP == SILU) v = silu_of<T>(va);
        else if constexpr (OP == MUL) v = va * to_f32(b[i]);
        else v = va + to_f32(b[i]);
        out[i] = from_f32<T>(v);
    }
}

}  // namespace hk
