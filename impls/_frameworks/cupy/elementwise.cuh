// Elementwise raw kernels: copy, scale and the unfused chain's steps, y = f(a[, b]).
// Each thread takes UNROLL 16-byte packs per step of a grid-stride loop, all loads issued
// before the first store (bytes in flight: what streaming at the roof takes); the packs left
// over after the whole steps, and every element when the arrays are not 16-byte aligned
// (``vec`` false: a view at an odd offset), go element by element.

enum Elementwise { COPY = 0, SCALE = 1, SILU = 2, MUL = 3, ADD = 4 };

template <int OP, typename T>
__device__ __forceinline__ T apply(T a, T b, float scale) {
    if constexpr (OP == COPY) return a;   // the bits pass through: NaN payloads, -0 and subnormals intact
    const float x = to_float(a);
    if (OP == SCALE) return from_float<T>(scale * x);
    if (OP == SILU) return from_float<T>(silu(x));
    if (OP == MUL) return from_float<T>(x * to_float(b));
    return from_float<T>(x + to_float(b));
}

template <typename T, int OP>
__global__ void elementwise(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, long long n,
                            float scale, int vec) {
    constexpr int N = Pack<T>::N;
    const long long packs = vec ? n / N : 0;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    long long p = tid;
    for (; p + (UNROLL - 1) * stride < packs; p += UNROLL * stride) {
        Pack<T> pa[UNROLL], pb[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            pa[u] = load_pack(a, p + u * stride, n, true);
            pb[u] = (OP == MUL || OP == ADD) ? load_pack(b, p + u * stride, n, true) : pa[u];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int i = 0; i < N; ++i) pa[u].v[i] = apply<OP>(pa[u].v[i], pb[u].v[i], scale);
            store_pack(y, p + u * stride, n, true, pa[u]);
        }
    }
    for (; p < packs; p += stride) {
        Pack<T> pa = load_pack(a, p, n, true);
        const Pack<T> pb = (OP == MUL || OP == ADD) ? load_pack(b, p, n, true) : pa;
#pragma unroll
        for (int i = 0; i < N; ++i) pa.v[i] = apply<OP>(pa.v[i], pb.v[i], scale);
        store_pack(y, p, n, true, pa);
    }
    // The tail (or everything, unaligned): element by element, UNROLL loads in flight.
    long long i = packs * N + tid;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        T va[UNROLL], vb[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            va[u] = a[i + u * stride];
            vb[u] = (OP == MUL || OP == ADD) ? b[i + u * stride] : va[u];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) y[i + u * stride] = apply<OP>(va[u], vb[u], scale);
    }
    for (; i < n; i += stride) y[i] = apply<OP>(a[i], (OP == MUL || OP == ADD) ? b[i] : a[i], scale);
}
