// Row kernels: a group of ``group`` threads per row (a power of two up to 512; a block holds
// blockDim.x / group rows, so short rows share a block, down to one thread a row), 16-byte
// packs. Thread ``lane`` of a group takes packs lane, lane + group, lane + 2·group, ... and
// folds them in that order; the group then reduces in a fixed tree (group_reduce). So a row's
// bits depend on its length and the group size only: not on the batch, the block size, or
// KEPT, the packs a thread keeps in registers (0: the row is read again from L2 for each pass,
// UNROLL packs in flight; else the row is read once and KEPT·group packs must cover it).

template <typename T, int KEPT>
struct Row {
    static constexpr int N = Pack<T>::N;
    const T* x;
    long long cols, packs;
    bool vec;
    int lane, group;
    Pack<T> kept[KEPT > 0 ? KEPT : 1];

    __device__ Row(const T* x_, long long cols_, bool vec_, int group_, bool active)
        : x(x_), cols(cols_), packs(active ? (cols_ + N - 1) / N : 0), vec(vec_),
          lane(static_cast<int>(threadIdx.x) % group_), group(group_) {
        if constexpr (KEPT > 0) {
#pragma unroll
            for (int j = 0; j < KEPT; ++j) {
                const long long p = lane + static_cast<long long>(j) * group;
                if (p < packs) kept[j] = load_pack(x, p, cols, vec);
            }
        }
    }

    // f(p, pack) for this thread's packs, in order.
    template <typename F>
    __device__ void for_each_pack(F f) const {
        if constexpr (KEPT > 0) {
#pragma unroll
            for (int j = 0; j < KEPT; ++j) {
                const long long p = lane + static_cast<long long>(j) * group;
                if (p < packs) f(p, kept[j]);
            }
        } else {
            for (long long p = lane; p < packs; p += UNROLL * static_cast<long long>(group)) {
                Pack<T> k[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const long long q = p + static_cast<long long>(u) * group;
                    if (q < packs) k[u] = load_pack(x, q, cols, vec);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    const long long q = p + static_cast<long long>(u) * group;
                    if (q < packs) f(q, k[u]);
                }
            }
        }
    }

    // f(value) for this thread's elements, in order.
    template <typename F>
    __device__ void for_each(F f) const {
        for_each_pack([&](long long p, const Pack<T>& k) {
            const int count = valid<T>(p, cols);
#pragma unroll
            for (int i = 0; i < N; ++i) {
                if (i < count) f(to_float(k.v[i]));
            }
        });
    }

    // y's pack p from f(p, x's pack p, y's pack to fill), for this thread's packs.
    template <typename F>
    __device__ void write(T* y, F f) const {
        for_each_pack([&](long long p, const Pack<T>& k) {
            Pack<T> out;
            f(p, k, out);
            store_pack(y, p, cols, vec, out);
        });
    }
};

// The row this thread's group serves (rows past the batch take part in the block's
// reductions without touching memory).
__device__ __forceinline__ long long row_of(int group) {
    return static_cast<long long>(blockIdx.x) * (blockDim.x / group) + threadIdx.x / group;
}

// 512 threads a block at most: the registers a thread may take (128) hold a row's packs and
// the loads in flight without spilling; a group of 512 reads rows up to 32768 packs in turn.
constexpr int MAX_THREADS = 512;
#define ROW_BOUNDS __launch_bounds__(MAX_THREADS, 1)

// RMSNorm: y = x · rsqrt(mean(x²) + eps) · g.
template <typename T, int KEPT>
__global__ void ROW_BOUNDS rmsnorm_rows(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y,
                                        long long rows, long long cols, int vec, int group, float eps) {
    const long long row = row_of(group);
    const bool active = row < rows;
    const Row<T, KEPT> r(x + (active ? row : 0) * cols, cols, vec, group, active);
    float squares = 0.0f;
    r.for_each([&](float v) { squares += v * v; });
    const float inv = rsqrtf(group_reduce(squares, group, Add()) / static_cast<float>(cols) + eps);
    if (active) {
        r.write(y + row * cols, [&](long long p, const Pack<T>& k, Pack<T>& out) {
            const Pack<T> w = load_pack(g, p, cols, vec);
#pragma unroll
            for (int i = 0; i < Pack<T>::N; ++i) out.v[i] = from_float<T>(to_float(k.v[i]) * inv * to_float(w.v[i]));
        });
    }
}

// softmax: KEPT > 0 (on_chip) or three_pass: the max, the sum of exp(x - max), the output;
// ONLINE: the (max, sum) pair in one pass, rescaled as the max grows.
template <typename T, int KEPT, bool ONLINE>
__global__ void ROW_BOUNDS softmax_rows(const T* __restrict__ x, T* __restrict__ y, long long rows, long long cols,
                                        int vec, int group) {
    const long long row = row_of(group);
    const bool active = row < rows;
    const Row<T, KEPT> r(x + (active ? row : 0) * cols, cols, vec, group, active);
    float m, s;
    if constexpr (ONLINE) {
        MaxSum state{neg_inf(), 0.0f};
        r.for_each([&](float v) {
            if (v > state.m) {
                state.s = state.s * expf(state.m - v) + 1.0f;
                state.m = v;
            } else if (v != neg_inf()) {   // exp(-inf - m) adds 0; with m = -inf it would add NaN
                state.s += expf(v - state.m);
            }
        });
        state = group_reduce(state, group, MergeMaxSum());
        m = state.m;
        s = state.s;
    } else {
        float largest = neg_inf();
        r.for_each([&](float v) { largest = Max()(largest, v); });
        m = group_reduce(largest, group, Max());
        float total = 0.0f;
        r.for_each([&](float v) { total += expf(v - m); });   // an all -inf row: exp(NaN), NaN as it must
        s = group_reduce(total, group, Add());
    }
    const float inv = 1.0f / s;
    if (active) {
        r.write(y + row * cols, [&](long long, const Pack<T>& k, Pack<T>& out) {
#pragma unroll
            for (int i = 0; i < Pack<T>::N; ++i) out.v[i] = from_float<T>(expf(to_float(k.v[i]) - m) * inv);
        });
    }
}

// LayerNorm: y = (x - mean) · rsqrt(var + eps) · g + b.
// WELFORD: each pack's (count, mean, M2) merged into the thread's running moments, the
// threads' moments merged in the group's tree (Chan et al.): one pass for the statistics.
// Else two_pass: the mean, then the sum of (x - mean)².
template <typename T, int KEPT, bool WELFORD>
__global__ void ROW_BOUNDS layernorm_rows(const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ b,
                                          T* __restrict__ y, long long rows, long long cols, int vec, int group,
                                          float eps) {
    const long long row = row_of(group);
    const bool active = row < rows;
    const Row<T, KEPT> r(x + (active ? row : 0) * cols, cols, vec, group, active);
    const float n = static_cast<float>(cols);
    float mean, var;
    if constexpr (WELFORD) {
        Moments state{0.0f, 0.0f, 0.0f};
        r.for_each_pack([&](long long p, const Pack<T>& k) {
            const int count = valid<T>(p, cols);
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < Pack<T>::N; ++i) sum += i < count ? to_float(k.v[i]) : 0.0f;
            const float pack_mean = sum / static_cast<float>(count);
            float m2 = 0.0f;
#pragma unroll
            for (int i = 0; i < Pack<T>::N; ++i) {
                const float d = to_float(k.v[i]) - pack_mean;
                m2 += i < count ? d * d : 0.0f;
            }
            state = MergeMoments()(state, Moments{static_cast<float>(count), pack_mean, m2});
        });
        state = group_reduce(state, group, MergeMoments());
        mean = state.mean;
        var = state.m2 / n;
    } else {
        float sum = 0.0f;
        r.for_each([&](float v) { sum += v; });
        mean = group_reduce(sum, group, Add()) / n;
        float squares = 0.0f;
        r.for_each([&](float v) { squares += (v - mean) * (v - mean); });
        var = group_reduce(squares, group, Add()) / n;
    }
    const float rstd = rsqrtf(var + eps);
    if (active) {
        r.write(y + row * cols, [&](long long p, const Pack<T>& k, Pack<T>& out) {
            const Pack<T> w = load_pack(g, p, cols, vec), shift = load_pack(b, p, cols, vec);
#pragma unroll
            for (int i = 0; i < Pack<T>::N; ++i) {
                out.v[i] = from_float<T>((to_float(k.v[i]) - mean) * rstd * to_float(w.v[i]) + to_float(shift.v[i]));
            }
        });
    }
}

// The fused chain: y = silu(x · rsqrt(mean(x²) + eps) · g) · u + r, rounded once.
template <typename T, int KEPT>
__global__ void ROW_BOUNDS rmsnorm_silu_mul_add_rows(const T* __restrict__ x, const T* __restrict__ g,
                                                     const T* __restrict__ u, const T* __restrict__ res,
                                                     T* __restrict__ y, long long rows, long long cols, int vec,
                                                     int group, float eps) {
    const long long row = row_of(group);
    const bool active = row < rows;
    const Row<T, KEPT> r(x + (active ? row : 0) * cols, cols, vec, group, active);
    float squares = 0.0f;
    r.for_each([&](float v) { squares += v * v; });
    const float inv = rsqrtf(group_reduce(squares, group, Add()) / static_cast<float>(cols) + eps);
    if (active) {
        const T* u_row = u + row * cols;
        const T* r_row = res + row * cols;
        r.write(y + row * cols, [&](long long p, const Pack<T>& k, Pack<T>& out) {
            const Pack<T> w = load_pack(g, p, cols, vec), up = load_pack(u_row, p, cols, vec),
                          rp = load_pack(r_row, p, cols, vec);
#pragma unroll
            for (int i = 0; i < Pack<T>::N; ++i) {
                const float normed = to_float(k.v[i]) * inv * to_float(w.v[i]);
                out.v[i] = from_float<T>(silu(normed) * to_float(up.v[i]) + to_float(rp.v[i]));
            }
        });
    }
}
