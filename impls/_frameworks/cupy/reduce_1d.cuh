// 1-D reductions into one fp32 value: sum and max (NaN anywhere gives NaN).
// Each thread folds UNROLL 16-byte packs per step of a grid-stride loop into a register, in
// a fixed order, then the block reduces its threads in a fixed tree (group_reduce).
//   two_pass: each block writes its partial; reduce_partials (one block) folds them in order:
//             the same bits every run.
//   atomic:   each block adds its partial into an accumulator with one atomic; the last block
//             to finish (a ticket counter) writes the result and zeroes the accumulator and the
//             counter for the next launch: one launch, and a sum's bits follow the blocks' order.
// A max is exact and order-free: its atomic takes an order-preserving unsigned key (NaN the
// largest), and gives the same bits every run either way.

template <bool MAX> struct Fold;
template <> struct Fold<false> { using Op = Add; __device__ static float identity() { return 0.0f; } };
template <> struct Fold<true> { using Op = Max; __device__ static float identity() { return neg_inf(); } };

// A float's key for atomicMax: unsigned order follows the float order, every NaN above +inf,
// and 0 (no value yet) below -inf.
__device__ __forceinline__ unsigned max_key(float f) {
    if (f != f) return 0xffffffffu;
    const unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_max_key(unsigned k) {
    if (k == 0xffffffffu) return __int_as_float(0x7fc00000);
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

template <typename T, bool MAX>
__device__ float fold_thread(const T* __restrict__ x, long long n, int vec) {
    constexpr int N = Pack<T>::N;
    typename Fold<MAX>::Op op;
    float acc = Fold<MAX>::identity();
    const long long packs = vec ? n / N : 0;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    long long p = tid;
    for (; p + (UNROLL - 1) * stride < packs; p += UNROLL * stride) {
        Pack<T> k[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) k[u] = load_pack(x, p + u * stride, n, true);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int i = 0; i < N; ++i) acc = op(acc, to_float(k[u].v[i]));
        }
    }
    for (; p < packs; p += stride) {
        const Pack<T> k = load_pack(x, p, n, true);
#pragma unroll
        for (int i = 0; i < N; ++i) acc = op(acc, to_float(k.v[i]));
    }
    long long i = packs * N + tid;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        T v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = x[i + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc = op(acc, to_float(v[u]));
    }
    for (; i < n; i += stride) acc = op(acc, to_float(x[i]));
    return acc;
}

// ``scratch``: two_pass, a float per block; atomic, [accumulator, ticket] (zero before the
// first launch, left zero by each).
template <typename T, bool MAX, bool ATOMIC>
__global__ void reduce_1d(const T* __restrict__ x, long long n, int vec, float* scratch, float* out) {
    typename Fold<MAX>::Op op;
    const float block = group_reduce(fold_thread<T, MAX>(x, n, vec), static_cast<int>(blockDim.x), op);
    if constexpr (!ATOMIC) {
        if (threadIdx.x == 0) scratch[blockIdx.x] = block;
        return;
    }
    __shared__ bool last;
    if (threadIdx.x == 0) {
        if (MAX) atomicMax(reinterpret_cast<unsigned*>(scratch), max_key(block));
        else atomicAdd(scratch, block);
        __threadfence();   // the partial lands before the ticket says so
        const unsigned ticket = atomicAdd(reinterpret_cast<unsigned*>(scratch + 1), 1u);
        last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (last && threadIdx.x == 0) {
        __threadfence();
        const unsigned bits = atomicExch(reinterpret_cast<unsigned*>(scratch), 0u);   // read, and zero
        *out = MAX ? from_max_key(bits) : __uint_as_float(bits);
        reinterpret_cast<unsigned*>(scratch)[1] = 0u;
    }
}

// The second pass of two_pass: one block folds the partials in a fixed order.
template <bool MAX>
__global__ void reduce_partials(const float* __restrict__ partials, int count, float* out) {
    typename Fold<MAX>::Op op;
    float acc = Fold<MAX>::identity();
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc = op(acc, partials[i]);
    acc = group_reduce(acc, static_cast<int>(blockDim.x), op);
    if (threadIdx.x == 0) *out = acc;
}
