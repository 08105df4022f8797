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
// those values.
//
// Device code only (device.cuh says why): rmsnorm_silu_mul_add.cu launches these kernels, and so do CuPy's raw
// variants (impls/rmsnorm_silu_mul_add/cupy.py).
#pragma once

#include "rows.cuh"

namespace hk {

__device__ __forceinline__ float silu(float n) { return n < -80.0f ? -expf(n + logf(-n)) : n / (1.0f + expf(-n)); }

template <typename T, int P, bool W>
__global__ void __launch_bounds__(max_threads(P)) chain_rows(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ u,
                           const T* __restrict__ r, T* __restrict__ y, int64_t rows, int cols, float eps, int group) {
    constexpr int N = Pack<T>::N;
    __shared__ float slots[32];
    constexpr int K = operand_packs(P, 3);
    const Row<T, P, W> row(x, y, rows, cols, group);
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
        for (int e = 0; e < N; ++e) ys[e] = fmaf(silu(xs[e] * inv * w[e]), us[e], rs[e]);
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
        if constexpr (OP == SILU) v = silu(va);
        else if constexpr (OP == MUL) v = va * to_f32(b[i]);
        else v = va + to_f32(b[i]);
        out[i] = from_f32<T>(v);
    }
}

}  // namespace hk
