// max: the largest element of a 1-D tensor as fp32, NaN anywhere giving NaN; reads N·s bytes.
// two_pass and atomic: hk::launch_reduce_1d (reduce_1d.cuh) with the NaN-keeping maximum;
// the atomic one through an order-preserving unsigned key. Max is exact and order-free:
// both give the same bits every run.
#include <torch/library.h>

#include "reduce_1d.cuh"

namespace {

void max_reduce(const at::Tensor& x, const at::Tensor& out, const at::Tensor& scratch, bool atomic, int64_t threads,
                int64_t blocks) {
    hk::launch_reduce_1d<hk::MaxNan, hk::AtomicMaxNan>(x, out, scratch, atomic, threads, blocks, "max");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("max(Tensor x, Tensor out, Tensor scratch, bool atomic, int threads, int blocks) -> ()", &max_reduce);
}
