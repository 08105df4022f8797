// copy: y = x, 2·N·s bytes. The elementwise kernel with the identity: 16-byte packs, four in
// flight per thread, a grid-stride loop (hk::elementwise_vector). The bits pass through
// untouched (NaN payloads, -0.0, subnormals): nothing is converted.
//
// Device code only (device.cuh says why): copy.cu launches these kernels, and so do CuPy's raw
// variants (impls/copy/cupy.py).
#pragma once

#include "elementwise.cuh"

namespace hk {

struct Identity {
    template <typename T> __device__ __forceinline__ T operator()(T v) const { return v; }
};

}  // namespace hk
