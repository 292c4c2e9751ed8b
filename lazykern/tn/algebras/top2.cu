// lazykern top-two product, the counting pass of the two best integer sizes (top2.py): an entry is
// its best value v and float counts (c0, c1) of v and of v - 1. The tiled kernel takes each output's
// best value T (the max-plus product of the values, computed first by the tropical GEMM); a term k adds
// its counts where its best sum s = x0 + y0 lands: s = T adds c0 = cx0 cy0 to the first count and
// c1 = cx0 cy1 + cx1 cy0 to the second, s = T - 1 adds c0 to the second, anything lower nothing. The
// one-thread-per-output kernel finds T itself as it goes.
// Operands are read through one set of element strides: A(b, i, k) = a[q][b sa + i ars + k acs],
// B(b, k, j) = b[q][b sb + k brs + j bcs]; T and the counts are (batch, M, N), C-contiguous. A
// value of -inf (a forbidden entry) makes every comparison false (T - (-inf) is +inf or NaN).

// One thread per output and K chunk, for the steps with few outputs (long sums, chunked) or few rows or
// columns (short sums: memory-bound): one pass, the best value found as the terms come, no T read. A term
// whose best sum s is above the kept value v shifts the counts (the kept c0 becomes the count one below
// s where s = v + 1), one at v adds both counts, one at v - 1 adds its c0 to the second. Each chunk writes
// its own (T, c0, c1); the chunks are merged after as slices are (Top2Algebra.add).
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

// The tiled product, for the large steps (the k-best tiled kernel's scheme, kbest.cu): a block of
// TX x TY threads computes BM = TY TM rows by BN = TX TN columns of one batch entry; each K tile of
// BK entries of A and B (value and two counts each) is staged in shared memory once and read by the
// whole block. A thread keeps the counts of its TM x TN outputs in registers.
// AROW / BROW: A's rows and B's rows are unit-stride along K and N (the common layout), their staging
// indices constants' shifts; else read through the general strides (2x slower staging: on steps of K = 8
// or 16 it made the whole kernel 1.3-1.7x slower, session 78).
template <typename V, typename C, int BM, int BN, int BK> struct LkTop2Tiles {
    V av[BK][BM];
    C ac[2][BK][BM];
    V bv[BK][BN];
    C bc[2][BK][BN];
};

template <typename V, typename C, int TX, int TY, int TM, int TN, int BK, bool AROW, bool BROW, class Tiles>
__device__ __forceinline__ void lk_top2_tiled_body(Tiles &smem, const V *av, const C *ac0, const C *ac1,
                                                   const V *bv, const C *bc0, const C *bc1, const V *T, C *C0,
                                                   C *C1, long long batch, int M, int N, int K, long long sa,
                                                   long long ars, long long acs, long long sb, long long brs,
                                                   long long bcs) {
    constexpr int BM = TY * TM, BN = TX * TN, NT = TX * TY;
    auto &sav = smem.av;
    auto &sac = smem.ac;
    auto &sbv = smem.bv;
    auto &sbc = smem.bc;
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const long long mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN, tiles = batch * mt * nt;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {  // uniform per block: the barriers hold
        const long long b = tile / (mt * nt), rest = tile - b * mt * nt;
        const int m0 = (int)(rest / nt) * BM, n0 = (int)(rest % nt) * BN;
        const long long a0 = b * sa, b0 = b * sb, o0 = b * (long long)M * N;
        V top[TM][TN];
        C c0[TM][TN], c1[TM][TN];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c) {
                const int i = m0 + ty + r * TY, j = n0 + tx + c * TX;
                top[r][c] = i < M && j < N ? T[o0 + (long long)i * N + j] : -inf;
                c0[r][c] = 0;
                c1[r][c] = 0;
            }
        for (int k0 = 0; k0 < K; k0 += BK) {
            for (int e = tid; e < BM * BK; e += NT) {  // the unit-stride axis fastest (coalesced reads)
                const int ii = AROW ? e / BK : e % BM, kk = AROW ? e % BK : e / BM;
                const int gi = m0 + ii, gk = k0 + kk;
                const bool in = gi < M && gk < K;
                const long long at = AROW ? a0 + gi * ars + gk : a0 + gi * ars + gk * acs;
                sav[kk][ii] = in ? av[at] : -inf;
                sac[0][kk][ii] = in ? ac0[at] : (C)0;
                sac[1][kk][ii] = in ? ac1[at] : (C)0;
            }
            for (int e = tid; e < BN * BK; e += NT) {
                const int jj = BROW ? e % BN : e / BK, kk = BROW ? e / BN : e % BK;
                const int gj = n0 + jj, gk = k0 + kk;
                const bool in = gj < N && gk < K;
                const long long at = BROW ? b0 + gk * brs + gj : b0 + gk * brs + gj * bcs;
                sbv[kk][jj] = in ? bv[at] : -inf;
                sbc[0][kk][jj] = in ? bc0[at] : (C)0;
                sbc[1][kk][jj] = in ? bc1[at] : (C)0;
            }
            __syncthreads();
            const int kend = K - k0 < BK ? K - k0 : BK;
#pragma unroll 4
            for (int kk = 0; kk < kend; ++kk) {
                V x[TM], y[TN];
                C x0[TM], x1[TM], y0[TN], y1[TN];
#pragma unroll
                for (int r = 0; r < TM; ++r) {
                    x[r] = sav[kk][ty + r * TY];
                    x0[r] = sac[0][kk][ty + r * TY];
                    x1[r] = sac[1][kk][ty + r * TY];
                }
#pragma unroll
                for (int c = 0; c < TN; ++c) {
                    y[c] = sbv[kk][tx + c * TX];
                    y0[c] = sbc[0][kk][tx + c * TX];
                    y1[c] = sbc[1][kk][tx + c * TX];
                }
#pragma unroll
                for (int r = 0; r < TM; ++r)
#pragma unroll
                    for (int c = 0; c < TN; ++c) {
                        const C p0 = x0[r] * y0[c];
                        const C p1 = x0[r] * y1[c] + x1[r] * y0[c];
                        const V d = (top[r][c] - x[r]) - y[c];  // 0 or more: T is the largest sum
                        // selects, not a branch: a branch skipping the terms below T - 1 was slower on
                        // 2^34 multiply-add steps of K = 64 and 8192 alike (23.3 / 21.6 ms against 18.2 / 19.2)
                        c0[r][c] += d == (V)0 ? p0 : (C)0;
                        c1[r][c] += d == (V)0 ? p1 : d == (V)1 ? p0 : (C)0;
                    }
            }
            __syncthreads();  // the next K tile overwrites what this one read
        }
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c) {
                const int i = m0 + ty + r * TY, j = n0 + tx + c * TX;
                if (i >= M || j >= N) continue;
                const long long o = o0 + (long long)i * N + j;
                C0[o] = c0[r][c];
                C1[o] = c1[r][c];
            }
    }
}

// The tiled product's entry: the tiles in shared memory once, then the body for the operands' layout (a
// uniform branch, once per launch).
template <typename V, typename C, int TX, int TY, int TM, int TN, int BK>
__device__ __forceinline__ void lk_top2_tiled(const V *av, const C *ac0, const C *ac1, const V *bv, const C *bc0,
                                              const C *bc1, const V *T, C *C0, C *C1, long long batch, int M, int N,
                                              int K, long long sa, long long ars, long long acs, long long sb,
                                              long long brs, long long bcs) {
    __shared__ LkTop2Tiles<V, C, TY * TM, TX * TN, BK> tiles;
    if (acs == 1 && bcs == 1)
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, BK, true, true>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1, batch,
                                                                 M, N, K, sa, ars, acs, sb, brs, bcs);
    else if (acs == 1)
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, BK, true, false>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1,
                                                                  batch, M, N, K, sa, ars, acs, sb, brs, bcs);
    else if (bcs == 1)
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, BK, false, true>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1,
                                                                  batch, M, N, K, sa, ars, acs, sb, brs, bcs);
    else
        lk_top2_tiled_body<V, C, TX, TY, TM, TN, BK, false, false>(tiles, av, ac0, ac1, bv, bc0, bc1, T, C0, C1,
                                                                   batch, M, N, K, sa, ars, acs, sb, brs, bcs);
}
