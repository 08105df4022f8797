// The host side of the CUDA extension's kernels: the current PyTorch stream, the checks of
// the tensors and launch configs a binding is given (TORCH_CHECK: a clear error in Python), the
// dtype and config dispatch, and the launchers of the shared 1-D kernels. The kernels it
// launches are in the torch-free headers it includes (device.cuh says why they are apart).
#pragma once

#include <cstdint>
#include <initializer_list>

#include <cuda_runtime.h>

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include "device.cuh"
#include "elementwise.cuh"
#include "reduce_1d.cuh"
#include "rows.cuh"

// Dispatch on the tensor's dtype to a body that uses `scalar_t` (float, __nv_bfloat16, __half).
#define HK_DISPATCH(dtype, name, ...)                                                            \
    [&] {                                                                                        \
        switch (dtype) {                                                                         \
            case at::ScalarType::Float: { using scalar_t = float; return __VA_ARGS__(); }        \
            case at::ScalarType::BFloat16: { using scalar_t = __nv_bfloat16; return __VA_ARGS__(); } \
            case at::ScalarType::Half: { using scalar_t = __half; return __VA_ARGS__(); }        \
            default: TORCH_CHECK(false, name, ": dtype ", dtype, " is not supported (float32, bfloat16, float16)"); \
        }                                                                                        \
    }()

// Dispatch on whole_rows' answer to a body that uses the constant `W`.
#define HK_DISPATCH_WHOLE(whole, ...)                                                              \
    [&] {                                                                                          \
        if (whole) { constexpr bool W = true; return __VA_ARGS__(); }                              \
        constexpr bool W = false; return __VA_ARGS__();                                            \
    }()

// Dispatch on the packs a thread keeps (1, 2, 4, 8) to a body that uses the constants `P` and
// `TRIP` (0: a kept row has no trip).
#define HK_DISPATCH_KEPT(packs, name, ...)                                                         \
    [&] {                                                                                          \
        switch (packs) {                                                                           \
            case 1: { constexpr int P = 1, TRIP = 0; return __VA_ARGS__(); }                       \
            case 2: { constexpr int P = 2, TRIP = 0; return __VA_ARGS__(); }                       \
            case 4: { constexpr int P = 4, TRIP = 0; return __VA_ARGS__(); }                       \
            case 8: { constexpr int P = 8, TRIP = 0; return __VA_ARGS__(); }                       \
            default: TORCH_CHECK(false, name, ": packs kept per thread must be 1, 2, 4 or 8, got ", packs); \
        }                                                                                          \
    }()

// Dispatch on the packs a looped row reads a trip (1, 2, 4) to a body that uses the constants
// `P` (0) and `TRIP`.
#define HK_DISPATCH_TRIP(trip, name, ...)                                                          \
    [&] {                                                                                          \
        switch (trip) {                                                                            \
            case 1: { constexpr int P = 0, TRIP = 1; return __VA_ARGS__(); }                       \
            case 2: { constexpr int P = 0, TRIP = 2; return __VA_ARGS__(); }                       \
            case 4: { constexpr int P = 0, TRIP = 4; return __VA_ARGS__(); }                       \
            default: TORCH_CHECK(false, name, ": a looped row reads 1, 2 or 4 packs a trip, got ", trip); \
        }                                                                                          \
    }()

// Dispatch on a row config: kept (packs > 0, trip 0) or looped (packs 0, trip 1, 2 or 4), to a
// body that uses `P` and `TRIP` (check_rows has checked the pair).
#define HK_DISPATCH_ROW(packs, trip, name, ...)                                                    \
    [&] {                                                                                          \
        if ((packs) == 0) return HK_DISPATCH_TRIP(trip, name, __VA_ARGS__);                        \
        return HK_DISPATCH_KEPT(packs, name, __VA_ARGS__);                                         \
    }()

namespace hk {

// --- tensors and streams ----------------------------------------------------------------------
inline cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

inline void check_cuda(const at::Tensor& t, const char* name) {
    TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor, got one on ", t.device());
    TORCH_CHECK(t.is_contiguous(), name, " must be contiguous (a view with strides is not supported)");
}

inline void check_same(const at::Tensor& a, const at::Tensor& b, const char* what) {
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), what, ": dtypes differ (", a.scalar_type(), " and ",
                b.scalar_type(), ")");
    TORCH_CHECK(a.numel() == b.numel(), what, ": sizes differ (", a.numel(), " and ", b.numel(), ")");
    TORCH_CHECK(a.device() == b.device(), what, ": devices differ");
}

inline void check_launch(int64_t threads, int64_t blocks) {
    TORCH_CHECK(threads >= 32 && threads <= 1024 && threads % 32 == 0,
                "threads per block must be a multiple of 32 from 32 to 1024, got ", threads);
    TORCH_CHECK(blocks >= 1 && blocks <= 2147483647, "blocks must be from 1 to 2^31-1, got ", blocks);
}

// Elements before the first 16-byte boundary of p: a view at an odd element offset starts
// with them, read one by one, then the packs.
template <typename T> inline int64_t head_elements(const T* p, int64_t n) {
    const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) % 16);
    const int64_t head = misalign == 0 ? 0 : (16 - misalign) / static_cast<int64_t>(sizeof(T));
    return head < n ? head : n;
}

// --- row kernels -----------------------------------------------------------------------------
// The threads of a block and the rows each block holds, checked on the host.
inline void check_rows(int64_t rows, int64_t cols, int64_t group, int64_t threads, int64_t packs_kept, int64_t trip,
                       int64_t n, const char* name) {
    TORCH_CHECK(group >= 4 && group <= 1024 && (group & (group - 1)) == 0, name,
                ": threads per row must be a power of two from 4 to 1024, got ", group);
    TORCH_CHECK(threads >= group && threads <= 1024 && threads % group == 0 && threads % 32 == 0, name,
                ": threads per block must be a multiple of 32 and of the row's ", group, " threads, at most 1024; got ",
                threads);
    TORCH_CHECK(threads <= max_threads(static_cast<int>(packs_kept)), name, ": a row kernel keeping ", packs_kept,
                " packs a thread runs blocks of at most ", max_threads(static_cast<int>(packs_kept)), " threads, got ",
                threads);
    TORCH_CHECK(packs_kept > 0 || valid_trip(0, static_cast<int>(trip)), name,
                ": a looped row (packs 0) reads 1, 2 or 4 packs a thread a trip, got trip ", trip);
    TORCH_CHECK(packs_kept == 0 || valid_trip(static_cast<int>(packs_kept), static_cast<int>(trip)), name,
                ": a row kept in registers (packs ", packs_kept, ") has no trip (0), got trip ", trip);
    TORCH_CHECK(cols >= 1 && cols <= MAX_ROW_ELEMENTS, name, ": rows of ", cols,
                " elements are not supported (1 to 2^31 - 16: a row's packs end within a 32-bit index)");
    const int64_t packs = (cols + n - 1) / n;
    TORCH_CHECK(packs_kept == 0 || packs_kept * group >= packs, name, ": ", packs_kept, " packs of ", n,
                " elements per thread on ", group, " threads hold ", packs_kept * group * n, " of a row's ", cols,
                " elements");
    TORCH_CHECK(rows >= 1, name, ": no rows");
}

inline unsigned row_blocks(int64_t rows, int64_t group, int64_t threads) {
    const int64_t per_block = threads / group;
    return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

// Whether every row of every operand starts on a 16-byte boundary and holds whole packs of
// n elements (the kernels' W): cols a multiple of n and every base pointer aligned.
inline bool whole_rows(int64_t cols, int64_t n, std::initializer_list<const void*> bases) {
    if (cols % n != 0) return false;
    for (const void* b : bases)
        if (reinterpret_cast<uintptr_t>(b) % 16 != 0) return false;
    return true;
}

// --- the 1-D kernels' launchers ----------------------------------------------------------------
// One launch of f over x into y on the current stream, error-checked. naive: ceil(n /
// threads) blocks, ``blocks`` ignored; otherwise the grid-stride kernels on ``blocks``.
template <typename T, typename F>
void launch_elementwise(const T* x, T* y, int64_t n, bool naive, int64_t threads, int64_t blocks, F f) {
    if (n == 0) return;
    const auto s = stream();
    if (naive) {
        elementwise_naive<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, s>>>(x, y, n, f);
    } else if (reinterpret_cast<uintptr_t>(x) % 16 == reinterpret_cast<uintptr_t>(y) % 16) {
        const int64_t head = head_elements(x, n);
        const int64_t packs = (n - head) / Pack<T>::N;
        elementwise_vector<T, ELEMENTWISE_UNROLL><<<blocks, threads, 0, s>>>(x, y, head, packs, n, f);
    } else {
        elementwise_scalar<T, ELEMENTWISE_UNROLL><<<blocks, threads, 0, s>>>(x, y, n, f);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// One launch (atomic) or two (two_pass) on the current stream, each error-checked.
// scratch: fp32, at least ``blocks`` elements for two_pass; two zeroed words (the
// accumulator, then the ticket counter) for atomic, which every launch leaves zeroed.
template <typename Op, typename Atomic>
void launch_reduce_1d(const at::Tensor& x, const at::Tensor& out, const at::Tensor& scratch, bool atomic,
                      int64_t threads, int64_t blocks, const char* name) {
    check_cuda(x, name);
    check_cuda(out, name);
    check_cuda(scratch, name);
    check_launch(threads, blocks);
    TORCH_CHECK(out.scalar_type() == at::kFloat && out.numel() == 1, name, ": out must be one float32");
    TORCH_CHECK(scratch.scalar_type() == at::kFloat, name, ": scratch must be float32");
    TORCH_CHECK(scratch.numel() >= (atomic ? 2 : blocks), name, ": scratch holds ", scratch.numel(),
                " floats; it needs ", atomic ? 2 : blocks);
    TORCH_CHECK(x.numel() > 0, name, ": x is empty");
    const auto s = stream();
    float* work = scratch.data_ptr<float>();
    HK_DISPATCH(x.scalar_type(), name, [&] {
        const auto* p = static_cast<const scalar_t*>(x.data_ptr());
        const int64_t n = x.numel(), head = head_elements(p, n), packs = (n - head) / Pack<scalar_t>::N;
        if (atomic) {
            reduce_atomic<scalar_t, Op, Atomic><<<blocks, threads, 0, s>>>(
                p, head, packs, n, work, reinterpret_cast<unsigned*>(work + 1), out.data_ptr<float>());
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        } else {
            reduce_partials<scalar_t, Op><<<blocks, threads, 0, s>>>(p, head, packs, n, work);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
            reduce_finish<Op><<<1, FINISH_THREADS, 0, s>>>(work, blocks, out.data_ptr<float>());
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
    });
}

}  // namespace hk
