// The host side of rmsnorm.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "rmsnorm.cuh"

namespace {

constexpr int SEED_THREADS = 256;

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
        hk::rmsnorm_block_per_row<scalar_t><<<static_cast<unsigned>(x.size(0)), SEED_THREADS, 0, hk::stream()>>>(
            static_cast<const scalar_t*>(x.data_ptr()), static_cast<const scalar_t*>(g.data_ptr()),
            static_cast<scalar_t*>(out.data_ptr()), static_cast<int>(x.size(1)), static_cast<float>(eps));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

void rmsnorm(const at::Tensor& x, const at::Tensor& g, double eps, const at::Tensor& out, int64_t group,
             int64_t threads, int64_t packs, int64_t trip) {
    check(x, g, out);
    const int64_t rows = x.size(0), cols = x.size(1);
    HK_DISPATCH(x.scalar_type(), "rmsnorm", [&] {
        hk::check_rows(rows, cols, group, threads, packs, trip, hk::Pack<scalar_t>::N, "rmsnorm");
        const bool whole = hk::whole_rows(cols, hk::Pack<scalar_t>::N, {x.data_ptr(), g.data_ptr(), out.data_ptr()});
        HK_DISPATCH_ROW(packs, trip, "rmsnorm", [&] {
            HK_DISPATCH_WHOLE(whole, [&] {
                hk::rmsnorm_rows<scalar_t, P, TRIP, W><<<hk::row_blocks(rows, group, threads), threads, 0, hk::stream()>>>(
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
    m.def("rmsnorm(Tensor x, Tensor weight, float eps, Tensor out, int group, int threads, int packs, int trip) -> ()", &rmsnorm);
}
