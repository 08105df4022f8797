// scale: y = a·x, the product in fp32, rounded once. 2·N·s bytes, like copy.
//   naive:  one element per thread, scalar loads (the seed's starting point).
//   vector: the seed's scale4: 16-byte packs, four in flight per thread, grid-stride.
//
// Device code only (device.cuh says why): scale.cu launches these kernels, and so do CuPy's raw
// variants (impls/scale/cupy.py).
#pragma once

#include "elementwise.cuh"

namespace hk {

struct Times {
    float a;
    template <typename T> __device__ __forceinline__ T operator()(T v) const {
        return from_f32<T>(a * to_f32(v));
    }
};

}  // namespace hk
