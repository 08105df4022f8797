// The host side of scale.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "scale.cuh"

namespace {

void scale(const at::Tensor& x, double a, const at::Tensor& out, bool naive, int64_t threads, int64_t blocks) {
    hk::check_cuda(x, "scale: x");
    hk::check_cuda(out, "scale: out");
    hk::check_same(x, out, "scale: x and out");
    hk::check_launch(threads, blocks);
    HK_DISPATCH(x.scalar_type(), "scale", [&] {
        hk::launch_elementwise(static_cast<const scalar_t*>(x.data_ptr()), static_cast<scalar_t*>(out.data_ptr()),
                               x.numel(), naive, threads, blocks, hk::Times{static_cast<float>(a)});
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("scale(Tensor x, float a, Tensor out, bool naive, int threads, int blocks) -> ()", &scale);
}
