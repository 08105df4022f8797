// The host side of rmsnorm_silu_mul_add.cuh's kernels: the checks, the dispatch on dtype and config, and the
// launches on the current PyTorch stream, registered under torch.ops.harness_cuda.
#include <torch/library.h>

#include "host.cuh"
#include "rmsnorm_silu_mul_add.cuh"

namespace {

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
                 const at::Tensor& out, int64_t group, int64_t threads, int64_t packs, int64_t trip) {
    check(x, g, u, r, out);
    const int64_t rows = x.size(0), cols = x.size(1);
    HK_DISPATCH(x.scalar_type(), "rmsnorm_silu_mul_add", [&] {
        hk::check_rows(rows, cols, group, threads, packs, trip, hk::Pack<scalar_t>::N, "rmsnorm_silu_mul_add");
        const bool whole = hk::whole_rows(cols, hk::Pack<scalar_t>::N,
                                          {x.data_ptr(), g.data_ptr(), u.data_ptr(), r.data_ptr(), out.data_ptr()});
        HK_DISPATCH_ROW(packs, trip, "rmsnorm_silu_mul_add", [&] {
            HK_DISPATCH_WHOLE(whole, [&] {
                hk::chain_rows<scalar_t, P, TRIP, W><<<hk::row_blocks(rows, group, threads), threads, 0, hk::stream()>>>(
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
    TORCH_CHECK(step >= hk::SILU && step <= hk::ADD, "chain step must be 0 (silu), 1 (mul) or 2 (add), got ", step);
    HK_DISPATCH(a.scalar_type(), "chain step", [&] {
        const auto* ap = static_cast<const scalar_t*>(a.data_ptr());
        const auto* bp = static_cast<const scalar_t*>(b.data_ptr());
        auto* op = static_cast<scalar_t*>(out.data_ptr());
        const auto s = hk::stream();
        if (step == hk::SILU) hk::chain_step<scalar_t, hk::SILU><<<blocks, threads, 0, s>>>(ap, bp, op, a.numel());
        else if (step == hk::MUL) hk::chain_step<scalar_t, hk::MUL><<<blocks, threads, 0, s>>>(ap, bp, op, a.numel());
        else hk::chain_step<scalar_t, hk::ADD><<<blocks, threads, 0, s>>>(ap, bp, op, a.numel());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(harness_cuda, m) {
    m.def("rmsnorm_silu_mul_add(Tensor x, Tensor weight, Tensor u, Tensor r, float eps, Tensor out, int group, "
          "int threads, int packs, int trip) -> ()",
          &chain_fused);
    m.def("rmsnorm_silu_mul_add_step(Tensor a, Tensor b, Tensor out, int step, int threads, int blocks) -> ()",
          &chain_pointwise);
}
