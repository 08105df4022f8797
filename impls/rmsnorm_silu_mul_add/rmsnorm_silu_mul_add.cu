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
#include <torch/library.h>

#include "rows.cuh"

namespace {

__device__ __forceinline__ float silu(float n) { return n < -80.0f ? -expf(n + logf(-n)) : n / (1.0f + expf(-n)); }

template <typename T, int P, bool W>
__global__ void __launch_bounds__(hk::max_threads(P)) chain_rows(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ u,
                           const T* __restrict__ r, T* __restrict__ y, int64_t rows, int cols, float eps, int group) {
    constexpr int N = hk::Pack<T>::N;
    __shared__ float slots[32];
    constexpr int K = hk::operand_packs(P, 3);
    const hk::Row<T, P, W> row(x, y, rows, cols, group);
    const hk::RowOperand<T, K, W> weight(g, false, row), up(u, true, row), residual(r, true, row);
    float squares = 0.0f;
    row.for_each_element([&](float v) { squares = fmaf(v, v, squares); });
    squares = row.reduce(squares, hk::Add{}, slots);
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
        const float va = hk::to_f32(a[i]);
        float v;
        if constexpr (OP == SILU) v = silu(va);
        else if constexpr (OP == MUL) v = va * hk::to_f32(b[i]);
        else v = va + hk::to_f32(b[i]);
        out[i] = hk::from_f32<T>(v);
    }
}

void check(const at::Tensor& x, const at::Tensor& g, const at::Tensor& u, const at::Tensor& r, const at::Tensor& out) {
    for (auto [t, name] : {std::pair{&x, "x"}, {&u, "u"}, {&r, "r"}, {&out, "out"}}) {
        hk::check_cuda(*t, name);
        hk::check_same(x, *t, name);
    }
    hk::check_cuda(g, "weight");
    TORCH_CHECK(x.dim() == 2, "rmsnorm_silu_mul_add: x must be [rows, cols], got ", x.dim(), " dimensions");
    TORCH_CHECK(g.scalar_type() == x.scalar_type() && g.numel() == x.size(1),
                "rmsnorm_silu_mul_add: weight must be ", x.size(1), " elements of x's dtype");
}

void chain_fused(const at::Tensor& x, const at::Tensor& g, const at::Tensor& u, const at::Tensor& r, double eps,
                 const at::Tensor& out, int64_t group, int64_t threads, int64_t packs) {
    check(x, g, u, r, out);
    const int64_t rows = x.size(0), cols = x.size(1);
    HK_DISPATCH(x.scalar_type(), "rmsnorm_silu_mul_add", [&] {
        hk::check_rows(rows, cols, group, threads, packs, hk::Pack<scalar_t>::N, "rmsnorm_silu_mul_add");
        const bool whole = hk::whole_rows(cols, hk::Pack<scalar_t>::N,
                                          {x.data_ptr(), g.data_ptr(), u.data_ptr(), r.data_ptr(), out.data_ptr()});
        HK_DISPATCH_PACKS(packs, "rmsnorm_silu_mul_add", [&] {
            HK_DISPATCH_WHOLE(whole, [&] {
                chain_rows<scalar_t, P, W><<<hk::row_blocks(rows, group, threads), threads, 0, hk::stream()>>>(
                    static_cast<const scalar_t*>(x.data_ptr()), static_cast<const scalar_t*>(g.data_ptr()),
                    static_cast<const scalar_t*>(u.data_ptr()), static_cast<const scalar_t*>(r.data_ptr()),
                    static_cast<scalar_t*>(out.data_ptr()), rows, static_cast<int>(cols), static_cast<float>(eps),
                    static_cast<int>(group));
            });
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
    });
}

// out = silu(a) (step 0), a·b (1) or a + b (2), on ``blocks`` blocks of ``threads``.
void chain_pointwise(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, int64_t step, int64_t threads,
                     int64_t blocks) {
    hk::check_cuda(a, "chain step: a");
    hk::check_cuda(b, "chain step: b");
    hk::check_cuda(out, "chain step: out");
    hk::check_same(a, b, "chain step: a and b");
    hk::check_same(a, out, "chain step: a and out");
    hk::check_launch(threads, blocks);
    TORCH_CHECK(step >= SILU && step <= ADD, "chain step must be 0 (silu), 1 (mul) or 2 (add), got ", step);
    HK_DISPATCH(a.scalar_type(), "chain step", [&] {
        const auto* ap = static_cast<const scalar_t*>(a.data_ptr());
        const auto* bp = static_cast<const scalar_t*>(b.data_ptr());
        auto* op = static_cast<scalar_t*>(out.data_ptr());
        if (step == SILU) chain_step<scalar_t, SILU><<<blocks, threads, 0, hk::stream()>>>(ap, bp, op, a.numel());
        else if (step == MUL) chain_step<scalar_t, MUL><<<blocks, threads, 0, hk::stream()>>>(ap, bp, op, a.numel());
        else chain_step<scalar_t, ADD><<<blocks, threads, 0, hk::stream()>>>(ap, bp, op, a.numel());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("rmsnorm_silu_mul_add(Tensor x, Tensor weight, Tensor u, Tensor r, float eps, Tensor out, int group, "
          "int threads, int packs) -> ()",
          &chain_fused);
    m.def("rmsnorm_silu_mul_add_step(Tensor a, Tensor b, Tensor out, int step, int threads, int blocks) -> ()",
          &chain_pointwise);
}
