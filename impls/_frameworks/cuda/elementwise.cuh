// Elementwise kernels (copy, scale): y[i] = f(x[i]), in three versions.
//   naive:  one element per thread, one scalar load each (the seed's first kernel).
//   vector: the seed's scale4: 16-byte packs, UNROLL independent packs in flight per
//           thread, a grid-stride loop; the elements before x's first 16-byte boundary and
//           the ragged tail one by one.
//   scalar: the same loop on single elements, for an x and y whose offsets from a 16-byte
//           boundary differ (no pack of one is aligned when the other's is).
#pragma once

#include "device.cuh"

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

}  // namespace hk
