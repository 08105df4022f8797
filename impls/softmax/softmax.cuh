// Row softmax: y = exp(x - max) / sum(exp(x - max)); 2·R·C·s bytes. exp(d) is exp2f(d·log2 e)
// on d = x - max (never x·log2 e - max·log2 e, whose two roundings at |x| ~ 3e4 lose the
// result's digits: the large_magnitude inputs): d rounds once, the product once, within the
// op's 4 ulp x |x - max| budget; 16-bit outputs take a cheaper exp (ElementExp below).
// Variants (rows.cuh: a group of G threads per row):
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

// exp2 and the output's multiply for fp32 outputs. A build that flushes subnormals (NVRTC
// defines __CUDA_FTZ to 1 under -ftz=true, which CuPy always adds: cupy/cupy#9576) would make the
// large_magnitude set's subnormal results 0; there they are the PTX instructions that keep
// subnormals whatever the flag (ex2.approx.f32 is exp2f's own instruction, mul.rn.f32 is *). In
// nvcc's default build, plain exp2f and * (the same instructions; the asm multiply costs the
// three_pass fp32 kernel 15 registers there, 40 -> 55 on sm_90).
#if defined(__CUDA_FTZ) && __CUDA_FTZ
__device__ __forceinline__ float ex2_keep(float t) {
    float r;
    asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(t));
    return r;
}

__device__ __forceinline__ float mul_keep(float a, float b) {
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
#else
__device__ __forceinline__ float ex2_keep(float t) { return exp2f(t); }
__device__ __forceinline__ float mul_keep(float a, float b) { return a * b; }
#endif

__device__ __forceinline__ float exp_of(float d) { return ex2_keep(d * LOG2E); }

// The exp of each element, d = x - max <= 0, up to a factor common to the row that the
// division by the row's sum cancels. fp32 outputs: exp_of. 16-bit outputs: e^d·2^64
// (device.cuh's exp_shifted64: one FFMA and ex2, where exp2f adds three instructions for
// subnormal results; on the H200 the bf16 kernel with exp_of ran at 83% of the roof, bound by
// its instructions, and at 92% in an NVRTC build that flushed subnormals; on sm_90 the bf16
// on_chip kernel keeping 8 packs is 1504 instructions with it against 2200). The row's sum
// carries the same 2^64 (at most cols·2^64), so y = e·(1/sum) is the softmax, rounded once
// where it is subnormal; every result below 2^-190 is 0 in bf16 and fp16 alike.
template <typename T> struct ElementExp {
    __device__ __forceinline__ float operator()(float d) const {
        if constexpr (sizeof(T) == 4) return exp_of(d);
        else return exp_shifted64(d);
    }
};

// max with NaN kept (the op's rule: a NaN in the row makes it NaN) in one instruction on sm_80
// and later (max.NaN); device.cuh's MaxNan elsewhere. Which zero a max of -0 and +0 gives does not
// matter here: it is only subtracted.
__device__ __forceinline__ float row_max(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return MaxNan{}(a, b);
#endif
}

struct RowMax {
    __device__ __forceinline__ float operator()(float a, float b) const { return row_max(a, b); }
};

// The online pair: m the max so far, s the sum of exp(x - m) (times ElementExp's common factor).
// Empty: (-inf, 0).
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

template <typename T, int P, int TRIP, int V, bool W>
__global__ void __launch_bounds__(max_threads(P)) softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int cols, int group) {
    constexpr int N = Pack<T>::N;
    const ElementExp<T> exp_e;
    __shared__ float slots[32];
    __shared__ MaxSum pair_slots[32];
    const Row<T, P, TRIP, W> row(x, y, rows, cols, group);
    float m, s;
    if constexpr (V == ONLINE) {
        // per pack: its max first, the sum rescaled once if the max grew, then one exp per element
        MaxSum pair{NEG_INF, 0.0f};
        row.for_each_pack([&](int, int, const float* xs, int n) {
            float pack_max = NEG_INF;
#pragma unroll
            for (int e = 0; e < N; ++e)
                if (e < n) pack_max = row_max(pack_max, xs[e]);
            const float grown = row_max(pair.m, pack_max);
            if (grown == NEG_INF) return;   // nothing but -inf so far
            float sum = pair.m == NEG_INF ? 0.0f : pair.s * exp_of(pair.m - grown);
#pragma unroll
            for (int e = 0; e < N; ++e)
                if (e < n) sum += exp_e(xs[e] - grown);
            pair = {grown, sum};
        });
        pair = row.reduce(pair, Combine{}, pair_slots);
        m = pair.m;
        s = pair.s;
    } else {
        m = NEG_INF;
        row.for_each_element([&](float v) { m = row_max(m, v); });
        m = row.reduce(m, RowMax{}, slots);
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
                for (int e = 0; e < N; ++e) ys[e] = mul_keep(ex[k][e], inv);
            });
            return;
        }
        row.for_each_element([&](float v) { s += exp_e(v - m); });
        s = row.reduce(s, Add{}, slots);
    }
    const float inv = 1.0f / s;   // an all -inf row: m = -inf, x - m = NaN: NaN, as the op says
    row.write([&](int, int, const float* xs, float* ys) {
#pragma unroll
        for (int e = 0; e < N; ++e) ys[e] = mul_keep(exp_e(xs[e] - m), inv);
    });
}

}  // namespace hk
