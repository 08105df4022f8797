// Elementwise kernels (copy, scale): y[i] = f(x[i]), in three versions.
//   naive:  one element per thread, one scalar load each (the seed's first kernel).
//   vector: the seed's scale4: 16-byte packs, UNROLL independent packs in flight per
//           thread, a grid-stride loop; the elements before x's first 16-byte boundary and
//           the ragged tail one by one.
//   scalar: the same loop on single elements, for an x and y whose offsets from a 16-byte
//           boundary differ (no pack of one is aligned when the other's is).
#pragma once

#include "common.cuh"

namespace hk {

template <typename T, typename F>
__global__ void elementwise_naive(const T* __restrict__ x, T* __restrict__ y, int64_t n, F f) {
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) y[i] = f(x[i]);
}

template <typename T, int UNROLL, typename F>
__global__ void elementwise_vector(const T* __restrict__ x, T* __restrict__ y, int64_t head, int64_t packs,
                                   int64_t n, F f) {
    constexpr int N = Pack<T>::N;
    const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    if (tid < head) y[tid] = f(x[tid]);
    const T* xb = x + head;
    T* yb = y + head;
    for (int64_t i = tid; i < packs; i += stride * UNROLL) {
        Pack<T> v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)   // every load issued before any is used
            if (i + u * stride < packs) v[u] = load_pack(xb + (i + u * stride) * N);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            if (i + u * stride < packs) {
#pragma unroll
                for (int e = 0; e < N; ++e) v[u].set(e, f(v[u].get(e)));
                store_pack(yb + (i + u * stride) * N, v[u]);
            }
        }
    }
    for (int64_t i = head + packs * N + tid; i < n; i += stride) y[i] = f(x[i]);
}

template <typename T, int UNROLL, typename F>
__global__ void elementwise_scalar(const T* __restrict__ x, T* __restrict__ y, int64_t n, F f) {
    const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = tid; i < n; i += stride * UNROLL) {
        T v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            if (i + u * stride < n) v[u] = x[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            if (i + u * stride < n) y[i + u * stride] = f(v[u]);
    }
}

constexpr int ELEMENTWISE_UNROLL = 4;   // the seed's four independent 16-byte loads per thread

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

}  // namespace hk
