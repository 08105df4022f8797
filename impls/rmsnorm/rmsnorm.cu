// RMSNorm: y = x · rsqrt(mean(x²) + eps) · g, statistics in fp32; 2·R·H·s + H·s bytes.
//   block_per_row: the seed's kernel: one block of 256 threads per row, scalar loads, the
//                  two-level block reduction, then x read again (from L2) to scale.
//   tuned:         a group of G threads per row (several rows per block for short rows),
//                  16-byte packs, the row kept in registers where it fits (x read once), else
//                  read again from L2; G, the packs kept and the block's rows chosen by the tuner.
#include <torch/library.h>

#include "rows.cuh"

namespace {

constexpr int SEED_THREADS = 256;

template <typename T>
__global__ void rmsnorm_block_per_row(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y, int cols,
                                      float eps) {
    const T* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
    T* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const float v = hk::to_f32(xr[i]);
        acc = fmaf(v, v, acc);   // accumulate in fp32, always
    }
    acc = hk::block_reduce(acc, hk::Add{});
    const float inv = rsqrtf(acc / cols + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        yr[i] = hk::from_f32<T>(hk::to_f32(xr[i]) * inv * hk::to_f32(g[i]));
}

template <typename T, int P, bool W>
__global__ void __launch_bounds__(hk::max_threads(P)) rmsnorm_rows(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y, int64_t rows,
                             int cols, float eps, int group) {
    constexpr int N = hk::Pack<T>::N;
    __shared__ float slots[32];
    const hk::Row<T, P, W> row(x, y, rows, cols, group);
    const hk::RowOperand<T, hk::operand_packs(P, 1), W> weight(g, false, row);
    float squares = 0.0f;
    row.for_each_element([&](float v) { squares = fmaf(v, v, squares); });
    squares = row.reduce(squares, hk::Add{}, slots);
    const float inv = rsqrtf(squares / cols + eps);
    row.write([&](int k, int j, const float* xs, float* ys) {
        float w[N];
        weight.at(k, j, w);
#pragma unroll
        for (int e = 0; e < N; ++e) ys[e] = xs[e] * inv * w[e];
    });
}

void check(const at::Tensor& x, const at::Tensor& g, const at::Tensor& out) {
    hk::check_cuda(x, "rmsnorm: x");
    hk::check_cuda(g, "rmsnorm: weight");
    hk::check_cuda(out, "rmsnorm: out");
    hk::check_same(x, out, "rmsnorm: x and out");
    TORCH_CHECK(x.dim() == 2, "rmsnorm: x must be [rows, cols], got ", x.dim(), " dimensions");
    TORCH_CHECK(g.scalar_type() == x.scalar_type() && g.numel() == x.size(1),
                "rmsnorm: weight must be ", x.size(1), " elements of x's dtype");
}

void rmsnorm_seed(const at::Tensor& x, const at::Tensor& g, double eps, const at::Tensor& out) {
    check(x, g, out);
    TORCH_CHECK(x.size(0) <= 2147483647, "rmsnorm: more rows than a grid holds");
    HK_DISPATCH(x.scalar_type(), "rmsnorm", [&] {
        rmsnorm_block_per_row<scalar_t><<<static_cast<unsigned>(x.size(0)), SEED_THREADS, 0, hk::stream()>>>(
            static_cast<const scalar_t*>(x.data_ptr()), static_cast<const scalar_t*>(g.data_ptr()),
            static_cast<scalar_t*>(out.data_ptr()), static_cast<int>(x.size(1)), static_cast<float>(eps));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

void rmsnorm(const at::Tensor& x, const at::Tensor& g, double eps, const at::Tensor& out, int64_t group,
             int64_t threads, int64_t packs) {
    check(x, g, out);
    const int64_t rows = x.size(0), cols = x.size(1);
    HK_DISPATCH(x.scalar_type(), "rmsnorm", [&] {
        hk::check_rows(rows, cols, group, threads, packs, hk::Pack<scalar_t>::N, "rmsnorm");
        const bool whole = hk::whole_rows(cols, hk::Pack<scalar_t>::N, {x.data_ptr(), g.data_ptr(), out.data_ptr()});
        HK_DISPATCH_PACKS(packs, "rmsnorm", [&] {
            HK_DISPATCH_WHOLE(whole, [&] {
                rmsnorm_rows<scalar_t, P, W><<<hk::row_blocks(rows, group, threads), threads, 0, hk::stream()>>>(
                    static_cast<const scalar_t*>(x.data_ptr()), static_cast<const scalar_t*>(g.data_ptr()),
                    static_cast<scalar_t*>(out.data_ptr()), rows, static_cast<int>(cols), static_cast<float>(eps),
                    static_cast<int>(group));
            });
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("rmsnorm_seed(Tensor x, Tensor weight, float eps, Tensor out) -> ()", &rmsnorm_seed);
    m.def("rmsnorm(Tensor x, Tensor weight, float eps, Tensor out, int group, int threads, int packs) -> ()", &rmsnorm);
}
