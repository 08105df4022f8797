// The host side of max.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "max.cuh"

namespace {

void max_reduce(const at::Tensor& x, const at::Tensor& out, const at::Tensor& scratch, bool atomic, int64_t threads,
                int64_t blocks) {
    hk::launch_reduce_1d<hk::MaxNan, hk::AtomicMaxNan>(x, out, scratch, atomic, threads, blocks, "max");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("max(Tensor x, Tensor out, Tensor scratch, bool atomic, int threads, int blocks) -> ()", &max_reduce);
}
