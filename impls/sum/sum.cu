// The host side of sum.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "sum.cuh"

namespace {

// Passes of ceil(n / threads) blocks until one block is left, whose partial is the sum.
// scratch holds every pass's partials one after another (naive_scratch in cuda.py).
void sum_naive(const at::Tensor& x, const at::Tensor& out, const at::Tensor& scratch, int64_t threads) {
    hk::check_cuda(x, "sum naive: x");
    hk::check_cuda(out, "sum naive: out");
    hk::check_cuda(scratch, "sum naive: scratch");
    hk::check_launch(threads, 1);
    TORCH_CHECK((threads & (threads - 1)) == 0, "sum naive: threads must be a power of two, got ", threads);
    TORCH_CHECK(out.scalar_type() == at::kFloat && out.numel() == 1, "sum naive: out must be one float32");
    TORCH_CHECK(scratch.scalar_type() == at::kFloat, "sum naive: scratch must be float32");
    TORCH_CHECK(x.numel() > 0, "sum naive: x is empty");
    int64_t needed = 0;
    for (int64_t n = x.numel(); n > threads;) needed += (n = (n + threads - 1) / threads);   // the last pass writes out
    TORCH_CHECK(scratch.numel() >= needed, "sum naive: scratch holds ", scratch.numel(), " floats; it needs ", needed);
    const auto s = hk::stream();
    const size_t shared = threads * sizeof(float);
    float* partials = scratch.data_ptr<float>();
    int64_t n = x.numel();
    HK_DISPATCH(x.scalar_type(), "sum naive", [&] {
        const int64_t blocks = (n + threads - 1) / threads;
        float* dst = blocks == 1 ? out.data_ptr<float>() : partials;
        const auto* xp = static_cast<const scalar_t*>(x.data_ptr());
        hk::sum_naive_pass<scalar_t><<<blocks, threads, shared, s>>>(xp, n, dst);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        n = blocks;
    });
    const float* src = partials;
    while (n > 1) {
        const int64_t blocks = (n + threads - 1) / threads;
        float* dst = blocks == 1 ? out.data_ptr<float>() : const_cast<float*>(src) + n;
        hk::sum_naive_pass<float><<<blocks, threads, shared, s>>>(src, n, dst);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        src = dst;
        n = blocks;
    }
}

void sum_reduce(const at::Tensor& x, const at::Tensor& out, const at::Tensor& scratch, bool atomic, int64_t threads,
                int64_t blocks) {
    hk::launch_reduce_1d<hk::Add, hk::AtomicAdd>(x, out, scratch, atomic, threads, blocks, "sum");
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("sum_naive(Tensor x, Tensor out, Tensor scratch, int threads) -> ()", &sum_naive);
    m.def("sum(Tensor x, Tensor out, Tensor scratch, bool atomic, int threads, int blocks) -> ()", &sum_reduce);
}
