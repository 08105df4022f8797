// sum: one fp32 sum of a 1-D tensor; reads N·s bytes.
//   naive:    Harris's first reduction: one element per thread into shared memory, an
//             interleaved tree (thread t adds t+s when t is a multiple of 2s: divergent
//             warps, bank conflicts), a partial per block, and the same kernel again over
//             the partials until one value is left. The seed's "5% of peak" reduction.
//   two_pass, atomic: hk::launch_reduce_1d (reduce_1d.cuh): packs, shuffles, two levels.
//
// Device code only (device.cuh says why): sum.cu launches these kernels, and so do CuPy's raw
// variants (impls/sum/cupy.py).
#pragma once

#include "reduce_1d.cuh"

namespace hk {

template <typename T>
__global__ void sum_naive_pass(const T* __restrict__ x, int64_t n, float* partials) {
    extern __shared__ float s[];
    const unsigned t = threadIdx.x;
    const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + t;
    s[t] = i < n ? to_f32(x[i]) : 0.0f;
    __syncthreads();
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        if (t % (2 * stride) == 0) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) partials[blockIdx.x] = s[0];
}

}  // namespace hk
