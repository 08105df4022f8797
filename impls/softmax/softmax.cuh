// Row softmax: y = exp(x - max) / sum(exp(x - max)); 2·R·C·s bytes. exp(d) is exp2f(d·log2 e)
// on d = x - max (never x·log2 e - max·log2 e, whose two roundings at |x| ~ 3e4 lose the
// result's digits: the large_magnitude inputs): d rounds once, the product once, within the
// op's 4 ulp x |x - max| budget. Variants (rows.cuh: a group of G threads per row):
//   three_pass: the max, then the sum of exp, then the output: x read three times (the
//               second and third from L2 where the rows in flight fit there).
//   online:     the running (max, sum) pair, the sum rescaled as the max grows, combined in
//               the shuffle tree: x read twice.
//   on_chip:    the row kept in registers: x read once.
//
// Device code only (device.cuh says why): softmax.cu launches these kernels, and so do CuPy's raw
// variants (impls/softmax/cupy.py).
#pragma once

#include "rows.cuh"

namespace hk {

constexpr float LOG2E = 1.4426950408889634f;

__device__ __forceinline__ float exp_of(float d) { return exp2f(d * LOG2E); }

// The online pair: m the max so far, s the sum of exp(x - m). Empty: (-inf, 0).
struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum shfl_xor(MaxSum v, int offset) {
    return {__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
}

struct Combine {
    __device__ __forceinline__ MaxSum operator()(MaxSum a, MaxSum b) const {
        const float m = MaxNan{}(a.m, b.m);
        if (m == -INF) return {m, 0.0f};   // both empty (or all -inf): nothing to rescale
        // each sum rescaled to the new max: exp(old - new) <= 1 never overflows
        const float sa = a.m == -INF ? 0.0f : a.s * exp_of(a.m - m);
        const float sb = b.m == -INF ? 0.0f : b.s * exp_of(b.m - m);
        return {m, sa + sb};
    }
};

enum SoftmaxVariant { THREE_PASS = 0, ONLINE = 1, ON_CHIP = 2 };

constexpr float NEG_INF = -INF;

template <typename T, int P, int V, bool W>
__global__ void __launch_bounds__(max_threads(P)) softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int cols, int group) {
    constexpr int N = Pack<T>::N;
    __shared__ float slots[32];
    __shared__ MaxSum pair_slots[32];
    const Row<T, P, W> row(x, y, rows, cols, group);
    float m, s;
    if constexpr (V == ONLINE) {
        // per pack: its max first, the sum rescaled once if the max grew, then one exp per element
        MaxSum pair{NEG_INF, 0.0f};
        row.for_each_pack([&](int, int, const float* xs, int n) {
            float pack_max = NEG_INF;
#pragma unroll
            for (int e = 0; e < N; ++e)
                if (e < n) pack_max = MaxNan{}(pack_max, xs[e]);
            const float grown = MaxNan{}(pair.m, pack_max);
            if (grown == NEG_INF) return;   // nothing but -inf so far
            float sum = pair.m == NEG_INF ? 0.0f : pair.s * exp_of(pair.m - grown);
#pragma unroll
            for (int e = 0; e < N; ++e)
                if (e < n) sum += exp_of(xs[e] - grown);
            pair = {grown, sum};
        });
        pair = row.reduce(pair, Combine{}, pair_slots);
        m = pair.m;
        s = pair.s;
    } else {
        m = NEG_INF;
        row.for_each_element([&](float v) { m = MaxNan{}(m, v); });
        m = row.reduce(m, MaxNan{}, slots);
        s = 0.0f;
        if constexpr (V == ON_CHIP && P > 0 && sizeof(T) == 4) {
            // fp32: each exp once, kept in registers beside the row, then scaled. For 16-bit
            // types the exps are computed again in the write instead: kept as fp32 they would
            // take twice the registers of the row itself, and registers bound the rows in flight
            // (the same bits either way)
            float ex[P][N];
            row.for_each_pack([&](int k, int, const float* xs, int n) {
#pragma unroll
                for (int e = 0; e < N; ++e) {
                    ex[k][e] = exp_of(xs[e] - m);
                    if (e < n) s += ex[k][e];
                }
            });
            s = row.reduce(s, Add{}, slots);
            const float inv = 1.0f / s;
            row.write([&](int k, int, const float*, float* ys) {
#pragma unroll
                for (int e = 0; e < N; ++e) ys[e] = ex[k][e] * inv;
            });
            return;
        }
        row.for_each_element([&](float v) { s += exp_of(v - m); });
        s = row.reduce(s, Add{}, slots);
    }
    const float inv = 1.0f / s;   // an all -inf row: m = -inf, x - m = NaN: NaN, as the op says
    row.write([&](int, int, const float* xs, float* ys) {
#pragma unroll
        for (int e = 0; e < N; ++e) ys[e] = exp_of(xs[e] - m) * inv;
    });
}

}  // namespace hk
