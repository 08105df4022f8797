// The host side of layernorm.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "layernorm.cuh"

namespace {

void layernorm(const at::Tensor& x, const at::Tensor& g, const at::Tensor& b, double eps, const at::Tensor& out,
               int64_t variant, int64_t group, int64_t threads, int64_t packs, int64_t trip) {
    hk::check_cuda(x, "layernorm: x");
    hk::check_cuda(g, "layernorm: weight");
    hk::check_cuda(b, "layernorm: bias");
    hk::check_cuda(out, "layernorm: out");
    hk::check_same(x, out, "layernorm: x and out");
    TORCH_CHECK(x.dim() == 2, "layernorm: x must be [rows, cols], got ", x.dim(), " dimensions");
    TORCH_CHECK(g.scalar_type() == x.scalar_type() && g.numel() == x.size(1) && b.scalar_type() == x.scalar_type() &&
                    b.numel() == x.size(1),
                "layernorm: weight and bias must be ", x.size(1), " elements of x's dtype");
    TORCH_CHECK(variant >= hk::WELFORD && variant <= hk::UNSAFE,
                "layernorm: variant must be 0 (welford), 1 (two_pass) or "
                "2 (unsafe), got ", variant);
    const int64_t rows = x.size(0), cols = x.size(1);
    HK_DISPATCH(x.scalar_type(), "layernorm", [&] {
        hk::check_rows(rows, cols, group, threads, packs, trip, hk::Pack<scalar_t>::N, "layernorm");
        HK_DISPATCH_ROW(packs, trip, "layernorm", [&] {
            const auto blocks = hk::row_blocks(rows, group, threads);
            const auto* xp = static_cast<const scalar_t*>(x.data_ptr());
            const auto* gp = static_cast<const scalar_t*>(g.data_ptr());
            const auto* bp = static_cast<const scalar_t*>(b.data_ptr());
            auto* yp = static_cast<scalar_t*>(out.data_ptr());
            const int c = static_cast<int>(cols), gr = static_cast<int>(group);
            const float e = static_cast<float>(eps);
            auto run = [&](auto kernel) {
                kernel<<<blocks, threads, 0, hk::stream()>>>(xp, gp, bp, yp, rows, c, e, gr);
            };
            HK_DISPATCH_WHOLE(hk::whole_rows(cols, hk::Pack<scalar_t>::N, {xp, gp, bp, yp}), [&] {
                if (variant == hk::WELFORD) run(hk::layernorm_rows<scalar_t, P, TRIP, hk::WELFORD, W>);
                else if (variant == hk::TWO_PASS) run(hk::layernorm_rows<scalar_t, P, TRIP, hk::TWO_PASS, W>);
                else run(hk::layernorm_rows<scalar_t, P, TRIP, hk::UNSAFE, W>);
            });
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("layernorm(Tensor x, Tensor weight, Tensor bias, float eps, Tensor out, int variant, int group, int threads, "
          "int packs, int trip) -> ()",
          &layernorm);
}
