// lazykern top-two product, the counting pass of the two best integer sizes (top2.py): an entry is
// its best value v and float counts (c0, c1) of v and of v - 1. The tiled kernel takes each output's
// best value T (the max-plus product of the values, computed first by the tropical GEMM); a term k adds
// its counts where its best sum s = x0 + y0 lands: s = T adds c0 = cx0 cy0 to the first count and
// c1 = cx0 cy1 + cx1 cy0 to the second, s = T - 1 adds c0 to the second, anything lower nothing. The
// one-thread-per-output kernel finds T itself as it goes.
// Operands are read through one set of element strides: A(b, i, k) = a[q][b sa + i ars + k acs],
// B(b, k, j) = b[q][b sb + k brs + j bcs]; T and the counts are (batch, M, N), C-contiguous. A
// value of -inf (a forbidden entry) matches nothing: in the tiled kernel its sum is -inf, which no best value
// equals (a forbidden output's is taken as NaN); in the other T - (-inf) is +inf or NaN.

// One thread per output and K chunk, for the steps with few outputs (long sums, chunked) or few rows or
// columns (short sums: memory-bound): one pass, the best value found as the terms come, no T read. A term
// whose best sum s is above the kept value v shifts the counts (the kept c0 becomes the count one below
// s where s = v + 1), one at v adds both counts, one at v - 1 adds its c0 to the second. Each chunk writes
// its own (T, c0, c1); the chunks are merged after as slices are (lk_top2_merge).
template <typename V, typename C>
__device__ __forceinline__ void lk_top2_rows(const V *av, const C *ac0, const C *ac1, const V *bv, const C *bc0,
                                             const C *bc1, V *T, C *C0, C *C1, long long outputs, int M, int N,
                                             int K, long long sa, long long ars, long long acs, long long sb,
                                             long long brs, long long bcs, int chunks, int chunk) {
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const long long total = outputs * chunks;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long o = t % outputs;
        const int part = (int)(t / outputs);
        const long long b = o / ((long long)M * N);
        const int i = (int)((o / N) % M), j = (int)(o % N);
        const long long a0 = b * sa + i * ars, b0 = b * sb + j * bcs;
        V top = -inf;
        C c0 = 0, c1 = 0;
        const int k1 = K < (part + 1) * chunk ? K : (part + 1) * chunk;
        for (int k = part * chunk; k < k1; ++k) {
            const long long ak = a0 + k * acs, bk = b0 + k * brs;
            const V s = av[ak] + bv[bk];
            const V e = s - top;  // +inf while nothing is kept; NaN for a forbidden sum (no comparison holds)
            if (e >= (V)-1) {
                const C p0 = ac0[ak] * bc0[bk];
                if (e > (V)0) {
                    c1 = ac0[ak] * bc1[bk] + ac1[ak] * bc0[bk] + (e == (V)1 ? c0 : (C)0);
                    c0 = p0;
                    top = s;
                } else if (e == (V)0) {
                    c0 += p0;
                    c1 += ac0[ak] * bc1[bk] + ac1[ak] * bc0[bk];
                } else {
                    c1 += p0;
                }
            }
        }
        T[t] = top;
        C0[t] = c0;
        C1[t] = c1;
    }
}

// Results merged per output, as slices are (Top2Algebra.add): the chunks of a chunked sum (xs of them, the
// outputs' entries ``outputs`` apart), or two slices' results (one chunk each of x and y). The largest value
// (a NaN anywhere gives NaN, as the array maximum does); the counts of the chunks at it added, and into the
// second count those one below it too. On the GPU this replaces array reductions that CuPy compiles the
// first time a machine runs them: 6.7 s of a first CountingMax(2) of a 150-vertex graph (session 81).
template <typename V, typename C>
__device__ __forceinline__ void lk_top2_merge(const V *xv, const C *x0, const C *x1, int xs, const V *yv, const C *y0,
                                              const C *y1, int ys, V *T, C *C0, C *C1, long long outputs) {
    for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < outputs;
         o += (long long)gridDim.x * blockDim.x) {
        V top = xv[o];
        for (int i = 1; i < xs + ys; ++i) {
            const V v = i < xs ? xv[i * outputs + o] : yv[(i - xs) * outputs + o];
            top = (v != v || v > top) ? v : top;  // NaN stays once taken: v > NaN never holds
        }
        C c0 = 0, c1 = 0;
        for (int i = 0; i < xs + ys; ++i) {
            const bool x = i < xs;
            const long long at = (x ? i : i - xs) * outputs + o;
            const V v = x ? xv[at] : yv[at];
            const C first = x ? x0[at] : y0[at];
            if (v == top) {
                c0 += first;
                c1 += x ? x1[at] : y1[at];
            }
            if (v == top - (V)1) c1 += first;  // not "else": -inf is itself one below -inf
        }
        T[o] = top;
        C0[o] = c0;
        C1[o] = c1;
    }
}

// The tiled product, for the large steps: a block of TX x TY threads computes BM = TY TM rows by BN = TX TN
// columns of one batch entry, a thread TM adjacent rows by TN adjacent columns (each K entry's values and counts
// read from shared memory as one vector per part). K tiles of BK entries of A and B (value and two counts each;
// BK / 2 where an entry is wider than 12 bytes, within 48 KB) go to shared memory by asynchronous copies, two
// stages: the next tile's copies are in flight while the block reads this one. The staging rows are padded by
// four entries (no bank conflicts). A term adds by predicated FMAs only where its sum is T or T - 1. Against
// session 79's kernel (scalar reads, one stage, 2 x 2 outputs a thread), on steps of the shapes CountingMax(2)
// n = 200 takes (2^31-2^35 multiply-adds): 1.2x-1.8x (H200, session 80, benchmarks/results/s80-h200).
template <typename T> __device__ __forceinline__ void lk_top2_copy(T *dst, const T *src) {
#if __CUDA_ARCH__ >= 800
    const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    if constexpr (sizeof(T) == 4) asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(at), "l"(src));
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(at), "l"(src));
#else
    *dst = *src;  // no asynchronous copies before sm_80: the stage is loaded as it is issued
#endif
}

__device__ __forceinline__ void lk_top2_commit() {  // the copies issued so far: one group
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int PENDING> __device__ __forceinline__ void lk_top2_wait() {  // all but the last PENDING groups landed
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
#endif
}

template <typename T, int N> struct alignas(sizeof(T) * N) LkTop2Vec {
    T v[N];
};

template <typename V, typename C, int BM, int BN, int BK> struct LkTop2Tiles {
    static constexpr int PAD = 4;  // rows BM + 4 entries apart: a row's K entries staged by neighbouring threads
                                   // fall in different banks, and every thread's vector stays aligned
    alignas(32) V av[BK][BM + PAD];
    alignas(32) C ac[2][BK][BM + PAD];
    alignas(32) V bv[BK][BN + PAD];
    alignas(32) C bc[2][BK][BN + PAD];
};

template <typename V, typename C, int TX, int TY, int TM, int TN, int BK, bool AROW, bool BROW, class Tiles>
__device__ __forceinline__ void lk_top2_tiled_body(Tiles *bufs, const V *av, const C *ac0, const C *ac1,
                                                   const V *bv, const C *bc0, const C *bc1, const V *T, C *C0,
                                                   C *C1, long long batch, int M, int N, int K, long long sa,
                                                   long long ars, long long acs, long long sb, long long brs,
                                                   long long bcs) {
    constexpr int BM = TY * TM, BN = TX * TN, NT = TX * TY;
    static_assert(4 % TM == 0 && 4 % TN == 0, "a thread's rows and columns are read as aligned vectors");
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const V nan = (V)__longlong_as_double(0x7ff8000000000000LL);
    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const long long mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN, tiles = batch * mt * nt;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {  // uniform per block: the barriers hold
        const long long b = tile / (mt * nt), rest = tile - b * mt * nt;
        const int m0 = (int)(rest / nt) * BM, n0 = (int)(rest % nt) * BN;
        const long long a0 = b * sa, b0 = b * sb, o0 = b * (long long)M * N;
        V top[TM][TN], below[TM][TN];
        C c0[TM][TN], c1[TM][TN];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c) {
                const int i = m0 + ty * TM + r, j = n0 + tx * TN + c;
                const V t = i < M && j < N ? T[o0 + (long long)i * N + j] : -inf;
                top[r][c] = t > -inf ? t : nan;  // no sum matches NaN: nothing reaches a forbidden output
                below[r][c] = top[r][c] - (V)1;
                c0[r][c] = 0;
                c1[r][c] = 0;
            }
        // one K tile into a stage: the unit-stride axis fastest (coalesced reads); outside the matrix a forbidden
        // value and zero counts, stored directly. A's loop and B's stay written out: one helper for both moved
        // ptxas's allocation of the float32 kernel (4 -> 16 bytes spilled), and that kernel is the measured one.
        auto stage = [&](Tiles &smem, const int k0) {
#pragma unroll 1
            for (int e = tid; e < BM * BK; e += NT) {
                const int ii = AROW ? e / BK : e % BM, kk = AROW ? e % BK : e / BM;
                const int gi = m0 + ii, gk = k0 + kk;
                const long long at = AROW ? a0 + gi * ars + gk : a0 + gi * ars + gk * acs;
                if (gi < M && gk < K) {
                    lk_top2_copy(&smem.av[kk][ii], av + at);
                    lk_top2_copy(&smem.ac[0][kk][ii], ac0 + at);
                    lk_top2_copy(&smem.ac[1][kk][ii], ac1 + at);
                } else {
                    smem.av[kk][ii] = -inf;
                    smem.ac[0][kk][ii] = smem.ac[1][kk][ii] = (C)0;
                }
            }
#pragma unroll 1
            for (int e = tid; e < BN * BK; e += NT) {
                const int jj = BROW ? e % BN : e / BK, kk = BROW ? e / BN : e % BK;
                const int gj = n0 + jj, gk = k0 + kk;
                const long long at = BROW ? b0 + gk * brs + gj : b0 + gk * brs + gj * bcs;
                if (gj < N && gk < K) {
                    lk_top2_copy(&smem.bv[kk][jj], bv + at);
                    lk_top2_copy(&smem.bc[0][kk][jj], bc0 + at);
                    lk_top2_copy(&smem.bc[1][kk][jj], bc1 + at);
                } else {
                    smem.bv[kk][jj] = -inf;
                    smem.bc[0][kk][jj] = smem.bc[1][kk][jj] = (C)0;
                }
            }
            lk_top2_commit();
        };
        stage(bufs[0], 0);
        for (int k0 = 0, q = 0; k0 < K; k0 += BK, q ^= 1) {
            if (k0 + BK < K) {
                stage(bufs[q ^ 1], k0 + BK);  // the stage read two tiles ago: free since the barrier below
                lk_top2_wait<1>();            // this tile's copies done, the next one's may be in flight
            } else {
                lk_top2_wait<0>();
            }
            __syncthreads();
            const Tiles &smem = bufs[q];
            const int kend = K - k0 < BK ? K - k0 : BK;
#pragma unroll 2
            for (int kk = 0; kk < kend; ++kk) {
                using VM = LkTop2Vec<V, TM>;
                using CM = LkTop2Vec<C, TM>;
                using VN = LkTop2Vec<V, TN>;
                using CN = LkTop2Vec<C, TN>;
                const VM x = *reinterpret_cast<const VM *>(&smem.av[kk][ty * TM]);
                const CM x0 = *reinterpret_cast<const CM *>(&smem.ac[0][kk][ty * TM]);
                const CM x1 = *reinterpret_cast<const CM *>(&smem.ac[1][kk][ty * TM]);
                const VN y = *reinterpret_cast<const VN *>(&smem.bv[kk][tx * TN]);
                const CN y0 = *reinterpret_cast<const CN *>(&smem.bc[0][kk][tx * TN]);
                const CN y1 = *reinterpret_cast<const CN *>(&smem.bc[1][kk][tx * TN]);
#pragma unroll
                for (int r = 0; r < TM; ++r)
#pragma unroll
                    for (int c = 0; c < TN; ++c) {
                        const V s = x.v[r] + y.v[c];  // exact: the values are integers below the floats' line
                        if (s == top[r][c]) {         // predicated FMAs, no branch (fully unrolled)
                            c0[r][c] = fma(x0.v[r], y0.v[c], c0[r][c]);
                            c1[r][c] = fma(x1.v[r], y0.v[c], c1[r][c]);
                            c1[r][c] = fma(x0.v[r], y1.v[c], c1[r][c]);
                        }
                        if (s == below[r][c]) c1[r][c] = fma(x0.v[r], y0.v[c], c1[r][c]);
                    }
            }
            __syncthreads();  // every thread is done with this stage before it is refilled
        }
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c) {
                const int i = m0 + ty * TM + r, j = n0 + tx * TN + c;
                if (i >= M || j >= N) continue;
                const long long o = o0 + (long long)i * N + j;
                C0[o] = c0[r][c];
                C1[o] = c1[r][c];
            }
    }
}

// The tiled product's entry: two stages of tiles in shared memory, then the body for the operands' layout (a
// uniform branch, once per launch). BK is the K tile of 12-byte entries (float values, float counts).
template <typename V, typename C, int TX, int TY, int TM, int TN, int BK>
__device__ __forceinline__ void lk_top2_tiled(const V *av, const C *ac0, const C *ac1, const V *bv, const C *bc0,
                                              const C *bc1, const V *T, C *C0, C *C1, long long batch, int M, int N,
                                              int K, long long sa, long long ars, long long acs, long long sb,
                                              long long brs, long long bcs) {
    constexpr int KT = sizeof(V) + 2 * sizeof(C) <= 12 ? BK : BK / 2;
    using Tiles = LkTop2Tiles<V, C, TY * TM, TX * TN, KT>;
    __shared__ Tiles tiles[2];
    if (acs == 1 && bcs == 1)
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, KT, true, true>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1, batch,
                                                                 M, N, K, sa, ars, acs, sb, brs, bcs);
    else if (acs == 1)
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, KT, true, false>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1,
                                                                  batch, M, N, K, sa, ars, acs, sb, brs, bcs);
    else if (bcs == 1)
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, KT, false, true>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1,
                                                                  batch, M, N, K, sa, ars, acs, sb, brs, bcs);
    else
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, KT, false, false>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1,
                                                                   batch, M, N, K, sa, ars, acs, sb, brs, bcs);
}
