// The host side of softmax.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "softmax.cuh"

namespace {

void softmax(const at::Tensor& x, const at::Tensor& out, int64_t variant, int64_t group, int64_t threads,
             int64_t packs, int64_t trip) {
    hk::check_cuda(x, "softmax: x");
    hk::check_cuda(out, "softmax: out");
    hk::check_same(x, out, "softmax: x and out");
    TORCH_CHECK(x.dim() == 2, "softmax: x must be [rows, cols], got ", x.dim(), " dimensions");
    TORCH_CHECK(variant >= hk::THREE_PASS && variant <= hk::ON_CHIP,
                "softmax: variant must be 0 (three_pass), 1 (online) "
                "or 2 (on_chip), got ", variant);
    TORCH_CHECK((variant == hk::ON_CHIP) == (packs > 0), "softmax: on_chip keeps the row in registers (packs > 0); "
                "three_pass and online read it again (packs = 0)");
    const int64_t rows = x.size(0), cols = x.size(1);
    HK_DISPATCH(x.scalar_type(), "softmax", [&] {
        hk::check_rows(rows, cols, group, threads, packs, trip, hk::Pack<scalar_t>::N, "softmax");
        const auto* xp = static_cast<const scalar_t*>(x.data_ptr());
        auto* yp = static_cast<scalar_t*>(out.data_ptr());
        const unsigned blocks = hk::row_blocks(rows, group, threads);
        const int c = static_cast<int>(cols), g = static_cast<int>(group);
        const auto s = hk::stream();
        HK_DISPATCH_WHOLE(hk::whole_rows(cols, hk::Pack<scalar_t>::N, {xp, yp}), [&] {
            if (variant == hk::THREE_PASS) {
                HK_DISPATCH_TRIP(trip, "softmax", [&] {
                    hk::softmax_rows<scalar_t, P, TRIP, hk::THREE_PASS, W><<<blocks, threads, 0, s>>>(xp, yp, rows, c, g);
                });
            } else if (variant == hk::ONLINE) {
                HK_DISPATCH_TRIP(trip, "softmax", [&] {
                    hk::softmax_rows<scalar_t, P, TRIP, hk::ONLINE, W><<<blocks, threads, 0, s>>>(xp, yp, rows, c, g);
                });
            } else {
                HK_DISPATCH_KEPT(packs, "softmax", [&] {
                    hk::softmax_rows<scalar_t, P, TRIP, hk::ON_CHIP, W><<<blocks, threads, 0, s>>>(xp, yp, rows, c, g);
                });
            }
        });
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("softmax(Tensor x, Tensor out, int variant, int group, int threads, int packs, int trip) -> ()", &softmax);
}
