// The host side of copy.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "copy.cuh"

namespace {

void copy(const at::Tensor& x, const at::Tensor& out, int64_t threads, int64_t blocks) {
    hk::check_cuda(x, "copy: x");
    hk::check_cuda(out, "copy: out");
    hk::check_same(x, out, "copy: x and out");
    hk::check_launch(threads, blocks);
    HK_DISPATCH(x.scalar_type(), "copy", [&] {
        hk::launch_elementwise(static_cast<const scalar_t*>(x.data_ptr()), static_cast<scalar_t*>(out.data_ptr()),
                               x.numel(), false, threads, blocks, hk::Identity{});
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("copy(Tensor x, Tensor out, int threads, int blocks) -> ()", &copy);
}
