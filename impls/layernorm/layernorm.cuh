// LayerNorm: y = (x - mean) · rsqrt(var + eps) · g + b, statistics in fp32, biased variance;
// 2·R·H·s + 2·H·s bytes. A group of G threads per row (rows.cuh); the row in registers where
// it fits (P > 0), else read again from L2. Variants differ in how the variance is formed:
//   welford:  per thread, each 16-byte pack's (count, mean, M2) merged into a running state
//             (Chan, Golub, LeVeque: one division per pack), the threads' states merged the
//             same way in the shuffle tree; then x again to normalise.
//   two_pass: the mean, then the sum of (x - mean)², then the output: x read three times
//             unless on chip.
//   unsafe:   sum(x) and sum(x²) in one pass, var = E[x²] - E[x]²: cancels when |mean| >> std.
//             A negative control: the large_mean inputs must make it fail.
//
// Device code only (device.cuh says why): layernorm.cu launches these kernels, and so do CuPy's raw
// variants (impls/layernorm/cupy.py).
#pragma once

#include "rows.cuh"

namespace hk {

struct Stats {
    float n, mean, m2;
};

__device__ __forceinline__ Stats shfl_xor(Stats v, int offset) {
    return {__shfl_xor_sync(0xffffffffu, v.n, offset), __shfl_xor_sync(0xffffffffu, v.mean, offset),
            __shfl_xor_sync(0xffffffffu, v.m2, offset)};
}

struct Merge {
    __device__ __forceinline__ Stats operator()(Stats a, Stats b) const {
        if (a.n == 0.0f) return b;   // also keeps inf · 0 out of the first merge of a large mean
        if (b.n == 0.0f) return a;
        const float n = a.n + b.n;
        const float delta = b.mean - a.mean, share = b.n / n;
        return {n, a.mean + delta * share, a.m2 + b.m2 + delta * delta * a.n * share};
    }
};

struct SumPair {
    float s, q;
};

__device__ __forceinline__ SumPair shfl_xor(SumPair v, int offset) {
    return {__shfl_xor_sync(0xffffffffu, v.s, offset), __shfl_xor_sync(0xffffffffu, v.q, offset)};
}

struct AddPair {
    __device__ __forceinline__ SumPair operator()(SumPair a, SumPair b) const { return {a.s + b.s, a.q + b.q}; }
};

enum LayernormVariant { WELFORD = 0, TWO_PASS = 1, UNSAFE = 2 };

template <typename T, int P, int TRIP, int V, bool W>
__global__ void __launch_bounds__(max_threads(P)) layernorm_rows(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ b,
                               T* __restrict__ y, int64_t rows, int cols, float eps, int group) {
    constexpr int N = Pack<T>::N;
    __shared__ float slots[32];
    __shared__ Stats stat_slots[32];
    __shared__ SumPair pair_slots[32];
    const Row<T, P, TRIP, W> row(x, y, rows, cols, group);
    const RowOperand<T, operand_packs(P, 2), W> weight(g, false, row), bias(b, false, row);
    float mean, var;
    if constexpr (V == WELFORD) {
        Stats state{0.0f, 0.0f, 0.0f};
        row.for_each_pack([&](int, int, const float* xs, int n) {
            float sum = 0.0f;
#pragma unroll
            for (int e = 0; e < N; ++e)
                if (e < n) sum += xs[e];
            const float pack_mean = sum / n;
            float m2 = 0.0f;
#pragma unroll
            for (int e = 0; e < N; ++e)
                if (e < n) m2 = fmaf(xs[e] - pack_mean, xs[e] - pack_mean, m2);
            state = Merge{}(state, Stats{static_cast<float>(n), pack_mean, m2});
        });
        state = row.reduce(state, Merge{}, stat_slots);
        mean = state.mean;
        var = state.m2 / cols;
    } else if constexpr (V == TWO_PASS) {
        float sum = 0.0f;
        row.for_each_element([&](float v) { sum += v; });
        mean = row.reduce(sum, Add{}, slots) / cols;
        float m2 = 0.0f;
        row.for_each_element([&](float v) { m2 = fmaf(v - mean, v - mean, m2); });
        var = row.reduce(m2, Add{}, slots) / cols;
    } else {
        SumPair pair{0.0f, 0.0f};
        row.for_each_element([&](float v) {
            pair.s += v;
            pair.q = fmaf(v, v, pair.q);
        });
        pair = row.reduce(pair, AddPair{}, pair_slots);
        mean = pair.s / cols;
        var = pair.q / cols - mean * mean;   // the unsafe formula, on purpose
    }
    const float rstd = rsqrtf(var + eps);
    row.write([&](int k, int j, const float* xs, float* ys) {
        float w[N], c[N];
        weight.at(k, j, w);
        bias.at(k, j, c);
#pragma unroll
        for (int e = 0; e < N; ++e) ys[e] = fmaf((xs[e] - mean) * rstd, w[e], c[e]);
    });
}

}  // namespace hk
