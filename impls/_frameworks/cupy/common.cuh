// Device helpers of the CuPy raw kernels (elementwise.cuh, reduce_1d.cuh, rows.cuh): storage
// types, fp32 conversions, 16-byte packs, warp and group reductions.
//
// The kernels receive the harness's tensors as DLPack views; bf16 comes as a 16-bit integer
// view (CuPy has no bf16 arithmetic), so both 16-bit types are plain bit patterns here and are
// converted by hand: the bf16 conversions are exact bit operations (round to nearest even),
// the fp16 ones PTX cvt instructions. No header beyond what NVRTC has built in is needed.
// Every value is computed in fp32 and rounded once into the output's type.

constexpr int UNROLL = 4;   // packs (or elements) a thread loads before it uses the first

struct bf16_t { unsigned short bits; };
struct f16_t { unsigned short bits; };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16_t v) { return __uint_as_float(static_cast<unsigned>(v.bits) << 16); }
__device__ __forceinline__ float to_float(f16_t v) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
    return f;
}

template <typename T> __device__ __forceinline__ T from_float(float f);
template <> __device__ __forceinline__ float from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ bf16_t from_float<bf16_t>(float f) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{static_cast<unsigned short>((u >> 16) | 0x40u)};  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);   // round to nearest, ties to even; overflows into inf as it must
    return bf16_t{static_cast<unsigned short>(u >> 16)};
}
template <> __device__ __forceinline__ f16_t from_float<f16_t>(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return f16_t{h};
}

// 16 bytes of T: one vector load or store when the address is 16-byte aligned.
template <typename T> union Pack {
    static constexpr int N = 16 / sizeof(T);
    uint4 raw;
    T v[N];
};

// Pack p of a row (or array) of n elements: a vector load when ``vec`` (the whole array's
// packs aligned and complete), else element by element, the elements past n left unset (a
// caller reads only min(N, n - p·N) of them). ld.global.nc: the inputs are read-only.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* base, long long p, long long n, bool vec) {
    Pack<T> k;
    const long long first = p * Pack<T>::N;
    if (vec) {
        k.raw = __ldg(reinterpret_cast<const uint4*>(base + first));
    } else {
#pragma unroll
        for (int i = 0; i < Pack<T>::N; ++i) {
            if (first + i < n) k.v[i] = base[first + i];
        }
    }
    return k;
}

template <typename T>
__device__ __forceinline__ void store_pack(T* base, long long p, long long n, bool vec, const Pack<T>& k) {
    const long long first = p * Pack<T>::N;
    if (vec) {
        *reinterpret_cast<uint4*>(base + first) = k.raw;
    } else {
#pragma unroll
        for (int i = 0; i < Pack<T>::N; ++i) {
            if (first + i < n) base[first + i] = k.v[i];
        }
    }
}

// Elements of pack p that lie inside n.
template <typename T>
__device__ __forceinline__ int valid(long long p, long long n) {
    const long long left = n - p * Pack<T>::N;
    return left < Pack<T>::N ? static_cast<int>(left) : Pack<T>::N;
}

// silu(n) = n / (1 + exp(-n)); below n = -80, where exp(-n) nears fp32's overflow (at -88.7
// the quotient becomes n / inf = -0) while n·e^n is still representable, as -exp(n + log(-n)),
// one exp rounded once.
__device__ __forceinline__ float silu(float n) { return n < -80.0f ? -expf(n + logf(-n)) : n / (1.0f + expf(-n)); }

// --- what reductions combine --------------------------------------------------------------

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

struct MaxSum { float m, s; };        // online softmax: running max and sum of exp(x - m)
struct Moments { float n, mean, m2; };  // Welford: count, mean, sum of squared deviations

__device__ __forceinline__ float shfl_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ MaxSum shfl_xor(MaxSum v, int o) { return MaxSum{shfl_xor(v.m, o), shfl_xor(v.s, o)}; }
__device__ __forceinline__ Moments shfl_xor(Moments v, int o) {
    return Moments{shfl_xor(v.n, o), shfl_xor(v.mean, o), shfl_xor(v.m2, o)};
}

struct Add { __device__ float operator()(float a, float b) const { return a + b; } };
// NaN wins: fmaxf would drop it, and a max must propagate it.
struct Max {
    __device__ float operator()(float a, float b) const { return a != a ? a : (b != b ? b : (a >= b ? a : b)); }
};
struct MergeMaxSum {
    __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
        const float m = fmaxf(a.m, b.m);
        if (m == neg_inf()) return MaxSum{m, 0.0f};   // both empty (all -inf so far): no 0·exp(NaN)
        return MaxSum{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
    }
};
// Chan et al.'s pairwise merge of two sets' moments.
struct MergeMoments {
    __device__ Moments operator()(Moments a, Moments b) const {
        if (a.n == 0.0f) return b;   // an empty side: also keeps inf · 0 (a mean past ~1.8e19) out
        if (b.n == 0.0f) return a;
        const float n = a.n + b.n;
        const float d = b.mean - a.mean, wb = b.n / n;
        return Moments{n, a.mean + d * wb, a.m2 + b.m2 + d * d * a.n * wb};
    }
};

// The reduction of ``v`` over a group of ``group`` threads (a power of two, aligned in the
// block; every thread of the block calls it, as it synchronises the block when group > 32).
// Shuffles within the warp, then the group's warps in order through shared memory: a fixed
// tree, so the bits depend on the group size only. Every thread of the group gets the result.
template <typename S, typename Op>
__device__ __forceinline__ S group_reduce(S v, int group, Op op) {
    // both lanes of a pair combine (lower, upper): the same bits in each, also for a merge that
    // is not bitwise symmetric (Chan's)
    for (int o = (group < 32 ? group : 32) / 2; o > 0; o /= 2) {
        const S other = shfl_xor(v, o);
        v = (threadIdx.x & o) ? op(other, v) : op(v, other);
    }
    if (group > 32) {
        __shared__ S partial[32];
        const int warp = threadIdx.x / 32, warps = group / 32, first = (threadIdx.x / group) * warps;
        __syncthreads();   // the last call's readers are done with partial
        if (threadIdx.x % 32 == 0) partial[warp] = v;
        __syncthreads();
        v = partial[first];
        for (int w = 1; w < warps; ++w) v = op(v, partial[first + w]);
    }
    return v;
}
