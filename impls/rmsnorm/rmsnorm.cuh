// RMSNorm: y = x · rsqrt(mean(x²) + eps) · g, statistics in fp32; 2·R·H·s + H·s bytes.
//   block_per_row: the seed's kernel: one block of 256 threads per row, scalar loads, the
//                  two-level block reduction, then x read again (from L2) to scale.
//   tuned:         a group of G threads per row (several rows per block for short rows),
//                  16-byte packs, the row kept in registers where it fits (x read once), else
//                  read again from L2; G, the packs kept and the block's rows chosen by the tuner.
//
// Device code only (device.cuh says why): rmsnorm.cu launches these kernels, and so do CuPy's raw
// variants (impls/rmsnorm/cupy.py).
#pragma once

#include "rows.cuh"

namespace hk {

template <typename T>
__global__ void rmsnorm_block_per_row(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y, int cols,
                                      float eps) {
    const T* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
    T* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = to_f32(xr[i]);
        acc = fmaf(v, v, acc);   // accumulate in fp32, always
    }
    acc = block_reduce(acc, Add{});
    const float inv = rsqrtf(acc / cols + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        yr[i] = from_f32<T>(to_f32(xr[i]) * inv * to_f32(g[i]));
}

template <typename T, int P, int TRIP, bool W>
__global__ void __launch_bounds__(max_threads(P)) rmsnorm_rows(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y, int64_t rows,
                             int cols, float eps, int group) {
    constexpr int N = Pack<T>::N;
    __shared__ float slots[32];
    const Row<T, P, TRIP, W> row(x, y, rows, cols, group);
    const RowOperand<T, operand_packs(P, 1), W> weight(g, false, row);
    float squares = 0.0f;
    row.for_each_element([&](float v) { squares = fmaf(v, v, squares); });
    squares = row.reduce(squares, Add{}, slots);
    const float inv = rsqrtf(squares / cols + eps);
    row.write([&](int k, int j, const float* xs, float* ys) {
        float w[N];
        weight.at(k, j, w);
#pragma unroll
        for (int e = 0; e < N; ++e) ys[e] = xs[e] * inv * w[e];
    });
}

}  // namespace hk
