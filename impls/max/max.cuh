// max: the largest element of a 1-D tensor as fp32, NaN anywhere giving NaN; reads N·s bytes.
// two_pass and atomic: hk::launch_reduce_1d (reduce_1d.cuh) with the NaN-keeping maximum;
// the atomic one through an order-preserving unsigned key. Max is exact and order-free:
// both give the same bits every run.
//
// Device code only (device.cuh says why): max.cu launches these kernels, and so do CuPy's raw
// variants (impls/max/cupy.py).
#pragma once

#include "reduce_1d.cuh"
