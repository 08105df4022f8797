// Row kernels (softmax, the norms, the chain): a row of `cols` elements is reduced by a group
// of G threads (a power of two from 4 to 1024); a block holds blockDim.x / G rows, so several
// short rows share a warp or a block, and one long row spreads over many warps.
//
// Who does what is fixed by (cols, dtype, G) alone: the row is cut into logical packs of
// N = 16 / sizeof(T) elements; pack j belongs to thread j % G of the group, which takes its
// packs in the order j = lane, lane + G, ... and each pack's elements in order; the group's
// partials meet in one butterfly (and, past a warp, one pass over the warps' partials in
// order). How many rows a block holds, whether a thread keeps its packs in registers
// (P > 0) or reads them twice (P = 0, the second time from L2), how many packs a looped row
// reads a trip (TRIP), and whether a row starts on a 16-byte boundary (a pack is one 16-byte
// load, or N scalar loads) change no arithmetic: a row's bits are the same in any batch.
#pragma once

#include "device.cuh"

namespace hk {

// The row this thread works on and its place in the row's group.
struct RowGroup {
    int G;
    int lane;
    int64_t row;
    __device__ explicit RowGroup(int g)
        : G(g), lane(threadIdx.x & (g - 1)),
          row(static_cast<int64_t>(blockIdx.x) * (blockDim.x / g) + threadIdx.x / g) {}
};

__device__ __forceinline__ int row_packs(int cols, int n) { return static_cast<int>((static_cast<int64_t>(cols) + n - 1) / n); }

__device__ __forceinline__ bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// W ("whole"): the host found every row of every operand starting on a 16-byte boundary and
// holding whole packs (cols a multiple of N, every base pointer aligned), so a pack is always
// one 16-byte access and the kernel carries no per-element path. The general kernel (W false)
// tests each pack; both do the same arithmetic in the same order, so a row's bits do not
// depend on which one ran. The per-element path costs registers even where it never runs
// (on sm_90, rmsnorm's bf16 kernel that reads the row again: 62 registers a thread against
// 40; softmax's: 54 against 40), and registers bound the rows in flight per SM, which is what
// a row kernel's bandwidth rests on.

// How a looped row (P = 0) reads its packs, as Triton's looped rows do: the passes before the
// last keep the row in L2 (evict_last) for the pass that reads it again, and the last pass lets
// it go first (evict_first). Row-long operands (weights, bias), which every row reads, are kept;
// a row's own other operands (the chain's u and r), read once, go first. A row kept in registers
// (P > 0) reads x once, plainly. The hints move no arithmetic.
enum class Hint { plain, keep, last };

// One 16-byte load with an L2 eviction priority (createpolicy + ld ... .L2::cache_hint).
// volatile: two loads of the same pack (layernorm's passes) stay two loads, so the row is read
// again from L2 rather than held in registers across a reduction; ptxas still schedules them.
#define HK_LOAD_EVICT(PRIORITY, v, p)                                                                     \
    asm volatile("{\n\t.reg .b64 policy;\n\t"                                                               \
                 "createpolicy.fractional.L2::" PRIORITY ".b64 policy, 1.0;\n\t"                             \
                 "ld.global.L1::" PRIORITY ".L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], policy;\n\t}"     \
                 : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3])                                    \
                 : "l"(p))
template <Hint H, typename T> __device__ __forceinline__ Pack<T> load_pack_hinted(const T* p) {
    if constexpr (H == Hint::plain) {
        return load_pack(p);
    } else {
        Pack<T> v;   // the asm's text must be a literal: the priority is spliced in by the macro
        if constexpr (H == Hint::keep) HK_LOAD_EVICT("evict_last", v, p);
        else HK_LOAD_EVICT("evict_first", v, p);
        return v;
    }
}
#undef HK_LOAD_EVICT

// Logical pack j of a row: one 16-byte load where the row start is aligned and the pack is
// whole, else its elements one by one (the missing ones of the last pack left as they are).
template <typename T, bool W, Hint H = Hint::plain>
__device__ __forceinline__ Pack<T> load_row_pack(const T* row, int j, int cols, bool aligned) {
    constexpr int N = Pack<T>::N;
    if constexpr (W) {
        return load_pack_hinted<H>(row + j * N);
    } else {
        if (aligned && (j + 1) * N <= cols) return load_pack_hinted<H>(row + j * N);
        Pack<T> p{};
#pragma unroll
        for (int e = 0; e < N; ++e)
            if (j * N + e < cols) p.set(e, row[j * N + e]);
        return p;
    }
}

template <typename T, bool W>
__device__ __forceinline__ void store_row_pack(T* row, int j, int cols, bool aligned, const Pack<T>& p) {
    constexpr int N = Pack<T>::N;
    if constexpr (W) {
        store_pack(row + j * N, p);
    } else {
        if (aligned && (j + 1) * N <= cols) {
            store_pack(row + j * N, p);
            return;
        }
#pragma unroll
        for (int e = 0; e < N; ++e)
            if (j * N + e < cols) row[j * N + e] = p.get(e);
    }
}

// How many elements of pack j exist.
template <typename T, bool W> __device__ __forceinline__ int pack_size(int j, int cols) {
    constexpr int N = Pack<T>::N;
    if constexpr (W) return N;
    const int left = cols - j * N;
    return left < N ? left : N;
}

// Shuffles of a value or of a small struct of floats (a softmax or Welford state).
__device__ __forceinline__ float shfl_xor(float v, int offset) { return __shfl_xor_sync(0xffffffffu, v, offset); }

// The group's combine of v: a butterfly within the warp (lanes xor offsets below G stay in
// the group), then, for G > 32, the group's warps' results in order, through shared memory
// (``slots``: one per warp of the block). Every thread of the block must call it (it may
// synchronise the block); every thread of a group gets the group's result.
template <typename V, typename Op>
__device__ __forceinline__ V group_reduce(V v, int G, Op op, V* slots) {
    const int width = G < 32 ? G : 32;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        if (offset >= width) continue;
        // both lanes of a pair combine (lower, upper): the same bits in each, also for a
        // combine that is not bitwise symmetric (Welford's merge)
        const V other = shfl_xor(v, offset);
        v = (threadIdx.x & offset) ? op(other, v) : op(v, other);
    }
    if (G > 32) {
        const int warp = threadIdx.x >> 5;
        if ((threadIdx.x & 31) == 0) slots[warp] = v;
        __syncthreads();
        const int first = (threadIdx.x / G) * (G / 32);
        v = slots[first];
        for (int w = 1; w < G / 32; ++w) v = op(v, slots[first + w]);
        __syncthreads();
    }
    return v;
}

// The longest row, in elements (host.cuh's check_rows; rows.py's MAX_COLS the same): the end
// of a row's last pack, (j + 1) * N in load_row_pack's and store_row_pack's test, is then
// within a 32-bit int (N up to 16, a 1-byte type's), so no pack index or bound wraps.
constexpr int64_t MAX_ROW_ELEMENTS = (int64_t{1} << 31) - 16;

// The packs a looped row (P = 0) reads a trip: TRIP loads in flight per thread, then their
// use. Fewer a trip hold fewer registers (ptxas, sm_90, whole rows, trips of 4, 2, 1: rmsnorm
// fp32 44, 32, 27; layernorm bf16 two_pass 57, 39, 31; the chain bf16 53, 40, 32), so more rows
// are in flight on an SM; more a trip keep more bytes in flight per thread. The packs are
// visited in the same order whatever the trip (j = lane, lane + G, ...), so a row's bits do not
// depend on it. A kept row (P > 0) has no trip (TRIP = 0). host.cuh builds the trips here, and
// rows.py's TRIPS offers them.
__host__ __device__ constexpr bool valid_trip(int P, int TRIP) {
    return P > 0 ? TRIP == 0 : TRIP == 1 || TRIP == 2 || TRIP == 4;
}

// This thread's row: where it lies (``offset`` from the start of any [rows, cols] operand),
// whether its start is 16-byte aligned, and, for P > 0, the thread's packs of x kept in
// registers (all loaded at once, every load in flight before the first is used). A thread
// past the last row is inactive: it visits and writes nothing, but still takes part in the
// group's reductions (they may synchronise the block). Pack indices within a row are 32-bit
// (the host allows rows of up to MAX_ROW_ELEMENTS); only the row's offset is 64-bit.
template <typename T, int P, int TRIP, bool W> struct Row {
    static_assert(valid_trip(P, TRIP), "a looped row (P = 0) reads 1, 2 or 4 packs a trip; a kept one has no trip");
    static constexpr int N = Pack<T>::N;
    RowGroup g;
    bool active;
    int cols, packs;
    int64_t offset;
    const T* x;
    T* y;
    bool x_aligned, y_aligned;
    Pack<T> kept[P > 0 ? P : 1];

    __device__ __forceinline__ Row(const T* x_, T* y_, int64_t rows, int cols_, int group)
        : g(group), active(g.row < rows), cols(cols_), packs(row_packs(cols_, N)), offset((active ? g.row : 0) * cols_),
          x(x_ + offset), y(y_ + offset), x_aligned(W || aligned16(x)), y_aligned(W || aligned16(y)) {
        if constexpr (P > 0) {
#pragma unroll
            for (int k = 0; k < P; ++k) {
                const int j = g.lane + k * g.G;
                if (active && j < packs) kept[k] = load_row_pack<T, W>(x, j, cols, x_aligned);
            }
        }
    }

    // f(k, j, xs, n) over this thread's packs, in their order: pack j as fp32 (xs[N], of which
    // the first n exist), k its register slot (P > 0) or 0. From registers (P > 0) or read
    // again from memory (P = 0, TRIP packs in flight at a time; H: this pass's Hint, keep
    // unless it is the row's last).
    template <Hint H = Hint::keep, typename F> __device__ __forceinline__ void for_each_pack(F f) const {
        if (!active) return;
        auto visit = [&](int k, int j, const Pack<T>& p) {
            float xs[N];
#pragma unroll
            for (int e = 0; e < N; ++e) xs[e] = p.f32(e);
            f(k, j, xs, pack_size<T, W>(j, cols));
        };
        if constexpr (P > 0) {
#pragma unroll
            for (int k = 0; k < P; ++k) {
                const int j = g.lane + k * g.G;
                if (j < packs) visit(k, j, kept[k]);
            }
        } else {
            for (int j0 = g.lane; j0 < packs; j0 += TRIP * g.G) {
                Pack<T> q[TRIP];
#pragma unroll
                for (int a = 0; a < TRIP; ++a)
                    if (j0 + a * g.G < packs) q[a] = load_row_pack<T, W, H>(x, j0 + a * g.G, cols, x_aligned);
#pragma unroll
                for (int a = 0; a < TRIP; ++a)
                    if (j0 + a * g.G < packs) visit(0, j0 + a * g.G, q[a]);
            }
        }
    }

    // f(value as fp32) over this thread's elements, in order.
    template <typename F> __device__ __forceinline__ void for_each_element(F f) const {
        for_each_pack([&](int, int, const float* xs, int n) {
#pragma unroll
            for (int e = 0; e < N; ++e)
                if (e < n) f(xs[e]);
        });
    }

    // y's packs: out(k, j, xs, ys) fills ys[N] (fp32) from xs[N] for pack j, over the packs of
    // for_each_pack (the missing elements of a last pack are computed, not stored). A row read
    // again (P = 0) computes each trip's packs before it stores any of them: the loads out()
    // makes (a weight, a bias) then go out together, not each behind the store before it, which
    // the compiler does not move them past (on sm_90 each was an L2 round trip of its own). A
    // kept row stores each pack as it goes: held until the last, its outputs took up to 50%
    // more registers (rmsnorm bf16, 4 packs: 84 against 61), and registers bound its rows in
    // flight.
    template <typename F> __device__ __forceinline__ void write(F out) const {
        if constexpr (P > 0) {
            for_each_pack([&](int k, int j, const float* xs, int) {
                float ys[N];
                out(k, j, xs, ys);
                Pack<T> p;
                p.set_f32(ys);
                store_row_pack<T, W>(y, j, cols, y_aligned, p);
            });
        } else {
            if (!active) return;
            for (int j0 = g.lane; j0 < packs; j0 += TRIP * g.G) {
                Pack<T> q[TRIP] = {};
#pragma unroll
                for (int a = 0; a < TRIP; ++a)
                    if (j0 + a * g.G < packs) q[a] = load_row_pack<T, W, Hint::last>(x, j0 + a * g.G, cols, x_aligned);
#pragma unroll
                for (int a = 0; a < TRIP; ++a) {
                    // a pack past the row is computed on the last pack's operands and not stored:
                    // no branch around out()'s loads, so ptxas issues them all before the first use
                    // (the price: in a row's last round, those threads read that pack's weight and
                    // other operands again, from L2)
                    const int j = j0 + a * g.G < packs ? j0 + a * g.G : packs - 1;
                    float xs[N], ys[N];
#pragma unroll
                    for (int e = 0; e < N; ++e) xs[e] = q[a].f32(e);
                    out(0, j, xs, ys);
                    q[a].set_f32(ys);
                }
#pragma unroll
                for (int a = 0; a < TRIP; ++a)
                    if (j0 + a * g.G < packs) store_row_pack<T, W>(y, j0 + a * g.G, cols, y_aligned, q[a]);
            }
        }
    }

    // The group's combine of v (group_reduce).
    template <typename V, typename Op> __device__ __forceinline__ V reduce(V v, Op op, V* slots) const {
        return group_reduce(v, g.G, op, slots);
    }
};

// Another operand the row's output reads at the same places as x: a row-long one (weights,
// bias: ``per_row`` false) or a [rows, cols] one (the chain's u and r: at the row's offset).
// With K > 0 (K = P) its packs are loaded with x's, before the row's reduction, so that the
// write after it waits on no load; with K = 0 each pack is loaded where it is used. at(k, j)
// gives pack j (slot k) as fp32.
template <typename T, int K, bool W> struct RowOperand {
    static constexpr int N = Pack<T>::N;
    const T* p;
    int cols;
    bool aligned, per_row;
    Pack<T> kept[K > 0 ? K : 1];

    template <int P, int TRIP>
    __device__ __forceinline__ RowOperand(const T* base, bool per_row_, const Row<T, P, TRIP, W>& row)
        : p(base + (per_row_ ? row.offset : 0)), cols(row.cols), aligned(W || aligned16(p)), per_row(per_row_) {
        static_assert(K == 0 || K == P, "an operand is kept in registers as x is, or not at all");
        if constexpr (K > 0) {
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int j = row.g.lane + k * row.g.G;
                if (row.active && j < row.packs) kept[k] = load_row_pack<T, W>(p, j, cols, aligned);
            }
        }
    }

    __device__ __forceinline__ void at(int k, int j, float (&out)[N]) const {
        Pack<T> q;
        if constexpr (K > 0) q = kept[k];
        else if (per_row) q = load_row_pack<T, W, Hint::last>(p, j, cols, aligned);   // read once
        else q = load_row_pack<T, W, Hint::keep>(p, j, cols, aligned);   // read by every row
#pragma unroll
        for (int e = 0; e < N; ++e) out[e] = q.f32(e);
    }
};

// Packs kept of each of `operands` other operands beside x's P: P while all of them together
// stay within 8 packs (32 registers of data, the most x alone may keep), else 0 (loaded where
// used).
__host__ __device__ constexpr int operand_packs(int P, int operands) { return P * (1 + operands) <= 8 ? P : 0; }

// The most threads a block of a row kernel keeping P packs may have, given to the compiler as
// __launch_bounds__ so that every config the host allows can launch (an SM holds 64K
// registers: 1024 threads get 64 each, 512 get 128). Unbounded on sm_90, the looped kernels
// took 66-96 registers and the kernels keeping 4 or 8 packs up to 153: 1024-thread blocks of
// them failed to launch. rows.py's MAX_THREADS is the same table.
__host__ __device__ constexpr int max_threads(int packs) { return packs == 1 || packs == 2 ? 1024 : 512; }

}  // namespace hk
