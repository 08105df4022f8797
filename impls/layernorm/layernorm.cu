// LayerNorm: y = (x - mean) · rsqrt(var + eps) · g + b, statistics in fp32, biased variance;
// 2·R·H·s + 2·H·s bytes. A group of G threads per row (rows.cuh); the row in registers where
// it fits (P > 0), else read again from L2. Variants differ in how the variance is formed:
//   welford:  per thread, each 16-byte pack's (count, mean, M2) merged into a running state
//             (Chan, Golub, LeVeque: one division per pack), the threads' states merged the
//             same way in the shuffle tree; then x again to normalise.
//   two_pass: the mean, then the sum of (x - mean)², then the output: x read three times
//             unless on chip.
//   naive:    sum(x) and sum(x²) in one pass, var = E[x²] - E[x]²: cancels when |mean| >> std.
//             A negative control: the large_mean inputs must make it fail.
#include <torch/library.h>

#include "rows.cuh"

namespace {

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

enum Variant { WELFORD = 0, TWO_PASS = 1, NAIVE = 2 };

template <typename T, int P, int V, bool W>
__global__ void __launch_bounds__(hk::max_threads(P)) layernorm_rows(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ b,
                               T* __restrict__ y, int64_t rows, int cols, float eps, int group) {
    constexpr int N = hk::Pack<T>::N;
    __shared__ float slots[32];
    __shared__ Stats stat_slots[32];
    __shared__ SumPair pair_slots[32];
    const hk::Row<T, P, W> row(x, y, rows, cols, group);
    const hk::RowOperand<T, hk::operand_packs(P, 2), W> weight(g, false, row), bias(b, false, row);
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
        mean = row.reduce(sum, hk::Add{}, slots) / cols;
        float m2 = 0.0f;
        row.for_each_element([&](float v) { m2 = fmaf(v - mean, v - mean, m2); });
        var = row.reduce(m2, hk::Add{}, slots) / cols;
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

void layernorm(const at::Tensor& x, const at::Tensor& g, const at::Tensor& b, double eps, const at::Tensor& out,
               int64_t variant, int64_t group, int64_t threads, int64_t packs) {
    hk::check_cuda(x, "layernorm: x");
    hk::check_cuda(g, "layernorm: weight");
    hk::check_cuda(b, "layernorm: bias");
    hk::check_cuda(out, "layernorm: out");
    hk::check_same(x, out, "layernorm: x and out");
    TORCH_CHECK(x.dim() == 2, "layernorm: x must be [rows, cols], got ", x.dim(), " dimensions");
    TORCH_CHECK(g.scalar_type() == x.scalar_type() && g.numel() == x.size(1) && b.scalar_type() == x.scalar_type() &&
                    b.numel() == x.size(1),
                "layernorm: weight and bias must be ", x.size(1), " elements of x's dtype");
    TORCH_CHECK(variant >= WELFORD && variant <= NAIVE, "layernorm: variant must be 0 (welford), 1 (two_pass) or "
                "2 (naive), got ", variant);
    const int64_t rows = x.size(0), cols = x.size(1);
    HK_DISPATCH(x.scalar_type(), "layernorm", [&] {
        hk::check_rows(rows, cols, group, threads, packs, hk::Pack<scalar_t>::N, "layernorm");
        HK_DISPATCH_PACKS(packs, "layernorm", [&] {
            const auto blocks = hk::row_blocks(rows, group, threads);
            const auto* xp = static_cast<const scalar_t*>(x.data_ptr());
            const auto* gp = static_cast<const scalar_t*>(g.data_ptr());
            const auto* bp = static_cast<const scalar_t*>(b.data_ptr());
            auto* yp = static_cast<scalar_t*>(out.data_ptr());
            const int c = static_cast<int>(cols), gr = static_cast<int>(group);
            const float e = static_cast<float>(eps);
            auto run = [&](auto kernel) { kernel<<<blocks, threads, 0, hk::stream()>>>(xp, gp, bp, yp, rows, c, e, gr); };
            HK_DISPATCH_WHOLE(hk::whole_rows(cols, hk::Pack<scalar_t>::N, {xp, gp, bp, yp}), [&] {
                if (variant == WELFORD) run(layernorm_rows<scalar_t, P, WELFORD, W>);
                else if (variant == TWO_PASS) run(layernorm_rows<scalar_t, P, TWO_PASS, W>);
                else run(layernorm_rows<scalar_t, P, NAIVE, W>);
            });
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("layernorm(Tensor x, Tensor weight, Tensor bias, float eps, Tensor out, int variant, int group, int threads, "
          "int packs) -> ()",
          &layernorm);
}
