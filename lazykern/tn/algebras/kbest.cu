// lazykern k-best product: the KB largest distinct values of sum_k A (x) B per output entry, with
// the number of ways each is reached (COUNTS). An entry is KB values sorted from the largest down
// (-inf where fewer occur) and their counts, each part an array of its own (av[q], ac[q], ...), all
// read through one set of element strides: A(b, i, k) = av[q][b sa + i ars + k acs],
// B(b, k, j) = bv[q][b sb + k brs + j bcs], C(b, i, j) = cv[q][b sc + i ldc + j]; a batch stride
// of 0 broadcasts an operand. One thread per output entry keeps its KB best in registers and merges
// the KB x KB pairwise sums of each k into them: a sum equal to a kept value adds its count, a larger
// one is inserted (the smallest kept drops out), a smaller one than all KB kept is dropped. The
// factors' values are sorted, so a row of sums stops at the first that cannot enter. For KB = 2 the
// pair product's two best are merged at once (lk_kbest2_step). The tiled kernel (lk_kbest_tiled, at the
// end) computes the same products from shared-memory tiles.
// Counts: RING 1 modulo 2^64, RING 2 residues modulo ``mod`` (< 2^31), from counting.cu's helpers.
// PAIRED (with RING 1): a second count per value, modulo ``mod``, read from ac[KB + q] / bc[KB + q] and
// written to cc[KB + q]: the int64 pass and the first prime pass of a CRT count in one product.

// Residues modulo 2^31 - 1, the first prime of every CRT count (so the paired pass's), need no Barrett
// step: 2^31 = 1 modulo it, so x y = hi 2^31 + lo = hi + lo (mod p), below 2p for x, y < p, and one
// conditional subtraction leaves the residue. Other primes and rings take counting.cu's products.
template <int RING, bool MERSENNE, typename C>
__device__ __forceinline__ C lk_kbest_mul(C x, C y, unsigned long long mod, unsigned long long mu) {
    if constexpr (RING == 2 && MERSENNE) {
        const unsigned long long xy = (unsigned long long)(unsigned)x * (unsigned)y;
        const unsigned r = (unsigned)(xy & 0x7fffffffULL) + (unsigned)(xy >> 31);
        return (C)(r >= 0x7fffffffu ? r - 0x7fffffffu : r);
    } else {
        return lk_count_mul<RING>(x, y, mod, mu);
    }
}

// One candidate (p, c [, c2]) merged into an entry's KB best (top sorted from the largest down, distinct),
// without branches: p equal to a kept value adds its counts there; else every kept value below p moves
// one place down (the smallest drops out) and p takes the place of the first of them; a p below all KB
// kept changes nothing. -inf slots may collect counts of -inf candidates: the writer zeroes those.
template <typename V, typename C, int KB, int RING, bool COUNTS, bool PAIRED>
__device__ __forceinline__ void lk_kbest_insert(V (&top)[KB], C (&cnt)[KB], C (&cnt2)[KB], V p, C c, C c2,
                                                unsigned long long mod) {
    bool gt[KB], eq[KB];
    bool any = false;
#pragma unroll
    for (int s = 0; s < KB; ++s) {
        gt[s] = top[s] > p;
        eq[s] = top[s] == p;
        any |= eq[s];
    }
#pragma unroll
    for (int s = KB - 1; s >= 0; --s) {  // downwards: top[s - 1] is still the old one when s reads it
        const bool keep = gt[s] || any, here = s == 0 || gt[s > 0 ? s - 1 : 0];
        if (COUNTS) {
            const C added = lk_count_add<RING>(cnt[s], c, mod);
            cnt[s] = eq[s] ? added : keep ? cnt[s] : here ? c : cnt[s > 0 ? s - 1 : 0];
        }
        if (PAIRED) {
            const C added = lk_count_add<2>(cnt2[s], c2, mod);
            cnt2[s] = eq[s] ? added : keep ? cnt2[s] : here ? c2 : cnt2[s > 0 ? s - 1 : 0];
        }
        top[s] = keep ? top[s] : here ? p : top[s > 0 ? s - 1 : 0];
    }
}

// k = 2: the product of (x0 > x1, counts cx) and (y0 > y1, cy) has x0 + y0 first and max(x0 + y1, x1 + y0)
// second (both, when they tie, their counts added); x1 + y1 is below both and never among an entry's 2
// best. So one candidate pair (s0 > s1) is merged into the entry (t0 > t1) at once, without branches:
// the first place keeps t0 (adding c0 on a tie) or takes s0; the second is the better of the one left
// of each (t0 or t1; s1 or s0), counts added on a tie. The caller skips it when s0 < t1: nothing enters.
template <typename V, typename C, int RING, bool COUNTS, bool PAIRED>
__device__ __forceinline__ void lk_kbest2_merge(V (&top)[2], C (&cnt)[2], C (&cnt2)[2], V s0, V s1, C c0, C c1,
                                                C r0, C r1, unsigned long long mod) {
    const bool above = s0 > top[0], tie = s0 == top[0], below = !above && !tie;
    const V u = above ? top[0] : top[1];  // the entry's best not yet placed
    const V q = below ? s0 : s1;          // the pair's best not yet placed
    const bool take = q > u, join = q == u;
    if (COUNTS) {
        const C nu = above ? cnt[0] : cnt[1], cq = below ? c0 : c1;
        const C first = lk_count_add<RING>(cnt[0], c0, mod);
        cnt[0] = above ? c0 : tie ? first : cnt[0];
        cnt[1] = take ? cq : join ? lk_count_add<RING>(nu, cq, mod) : nu;
    }
    if (PAIRED) {
        const C nu = above ? cnt2[0] : cnt2[1], cq = below ? r0 : r1;
        const C first = lk_count_add<2>(cnt2[0], r0, mod);
        cnt2[0] = above ? r0 : tie ? first : cnt2[0];
        cnt2[1] = take ? cq : join ? lk_count_add<2>(nu, cq, mod) : nu;
    }
    top[1] = take ? q : u;
    top[0] = above ? s0 : top[0];
}

// The k = 2 step of one output: the factors' pair product merged into its entry (skipped when even the
// best sum x0 + y0 is below both kept values). Its counts are those of the sums that make each place.
template <typename V, typename C, int RING, bool COUNTS, bool PAIRED, bool MERSENNE>
__device__ __forceinline__ void lk_kbest2_step(V (&top)[2], C (&cnt)[2], C (&cnt2)[2], const V (&x)[2],
                                               const V (&y)[2], const C (&cx)[2], const C (&cy)[2],
                                               const C (&rx)[2], const C (&ry)[2], unsigned long long mod,
                                               unsigned long long mu, unsigned long long mu2) {
    const V s0 = x[0] + y[0];
    if (s0 < top[1]) return;
    const V pa = x[0] + y[1], pb = x[1] + y[0];
    const bool first = pa >= pb, both = pa == pb;  // which makes the second place (both on a tie)
    C c0 = 0, c1 = 0, r0 = 0, r1 = 0;
    if (COUNTS) {
        c0 = lk_kbest_mul<RING, MERSENNE>(cx[0], cy[0], mod, mu);
        c1 = lk_kbest_mul<RING, MERSENNE>(first ? cx[0] : cx[1], first ? cy[1] : cy[0], mod, mu);
        if (both) c1 = lk_count_add<RING>(c1, lk_kbest_mul<RING, MERSENNE>(cx[1], cy[0], mod, mu), mod);
    }
    if (PAIRED) {
        r0 = lk_kbest_mul<2, MERSENNE>(rx[0], ry[0], mod, mu2);
        r1 = lk_kbest_mul<2, MERSENNE>(first ? rx[0] : rx[1], first ? ry[1] : ry[0], mod, mu2);
        if (both) r1 = lk_count_add<2>(r1, lk_kbest_mul<2, MERSENNE>(rx[1], ry[0], mod, mu2), mod);
    }
    lk_kbest2_merge<V, C, RING, COUNTS, PAIRED>(top, cnt, cnt2, s0, first ? pa : pb, c0, c1, r0, r1, mod);
}

template <typename V, typename C, int KB, int RING, bool COUNTS, bool PAIRED, bool MERSENNE>
__device__ __forceinline__ void lk_kbest_bmm_body(const V *const *av, const C *const *ac, const V *const *bv,
                                                  const C *const *bc, V *const *cv, C *const *cc, long long total,
                                                  int M, int N, int K, long long sa, long long ars, long long acs,
                                                  long long sb, long long brs, long long bcs, long long sc,
                                                  long long ldc, unsigned long long mod) {
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const unsigned long long mu = RING == 2 ? lk_barrett(mod) : 0;
    const unsigned long long mu2 = PAIRED ? lk_barrett(mod) : 0;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long b = t / ((long long)M * N);
        const int i = (int)((t / N) % M), j = (int)(t % N);
        const long long a0 = b * sa + i * ars, b0 = b * sb + j * bcs;
        V top[KB];
        C cnt[KB], cnt2[KB];
#pragma unroll
        for (int q = 0; q < KB; ++q) {
            top[q] = -inf;
            cnt[q] = 0;
            cnt2[q] = 0;
        }
        for (int k = 0; k < K; ++k) {
            V x[KB], y[KB];
            C cx[KB] = {}, cy[KB] = {}, rx[KB] = {}, ry[KB] = {};
#pragma unroll
            for (int q = 0; q < KB; ++q) {
                x[q] = av[q][a0 + k * acs];
                y[q] = bv[q][b0 + k * brs];
                if (COUNTS) {
                    cx[q] = ac[q][a0 + k * acs];
                    cy[q] = bc[q][b0 + k * brs];
                }
                if (PAIRED) {
                    rx[q] = ac[KB + q][a0 + k * acs];
                    ry[q] = bc[KB + q][b0 + k * brs];
                }
            }
            if constexpr (KB == 2) {
                lk_kbest2_step<V, C, RING, COUNTS, PAIRED, MERSENNE>(top, cnt, cnt2, x, y, cx, cy, rx, ry, mod, mu,
                                                                    mu2);
            } else {
#pragma unroll
                for (int u = 0; u < KB; ++u) {
                    if (x[u] == -inf) break;  // sorted: the rest are -inf too
#pragma unroll
                    for (int w = 0; w < KB; ++w) {
                        if (y[w] == -inf) break;
                        const V p = x[u] + y[w];
                        if (p < top[KB - 1]) break;  // the sums fall along w: none of the rest can enter
                        const C c = COUNTS ? lk_kbest_mul<RING, MERSENNE>(cx[u], cy[w], mod, mu) : (C)0;
                        const C c2 = PAIRED ? lk_kbest_mul<2, MERSENNE>(rx[u], ry[w], mod, mu2) : (C)0;
                        // find p's place, then add to an equal value or shift the smaller ones down
                        bool placed = false;
#pragma unroll
                        for (int s = 0; s < KB; ++s) {
                            if (placed) break;
                            if (top[s] == p) {
                                if (COUNTS) cnt[s] = lk_count_add<RING>(cnt[s], c, mod);
                                if (PAIRED) cnt2[s] = lk_count_add<2>(cnt2[s], c2, mod);
                                placed = true;
                            } else if (top[s] < p) {
#pragma unroll
                                for (int r = KB - 1; r > s; --r) {
                                    top[r] = top[r - 1];
                                    cnt[r] = cnt[r - 1];
                                    cnt2[r] = cnt2[r - 1];
                                }
                                top[s] = p;
                                cnt[s] = c;
                                cnt2[s] = c2;
                                placed = true;
                            }
                        }
                    }
                }
            }
        }
        const long long o = b * sc + i * ldc + j;
#pragma unroll
        for (int q = 0; q < KB; ++q) {
            cv[q][o] = top[q];
            if (COUNTS) cc[q][o] = top[q] == -inf ? (C)0 : cnt[q];
            if (PAIRED) cc[KB + q][o] = top[q] == -inf ? (C)0 : cnt2[q];
        }
    }
}

// One thread per output: the body for the operands' modulus (2^31 - 1 by its own reduction).
template <typename V, typename C, int KB, int RING, bool COUNTS, bool PAIRED = false>
__device__ __forceinline__ void lk_kbest_bmm(const V *const *av, const C *const *ac, const V *const *bv,
                                             const C *const *bc, V *const *cv, C *const *cc, long long total,
                                             int M, int N, int K, long long sa, long long ars, long long acs,
                                             long long sb, long long brs, long long bcs, long long sc,
                                             long long ldc, unsigned long long mod) {
    if constexpr (RING == 2 || PAIRED) {
        if (mod == 0x7fffffffULL) {
            lk_kbest_bmm_body<V, C, KB, RING, COUNTS, PAIRED, true>(av, ac, bv, bc, cv, cc, total, M, N, K, sa, ars,
                                                                    acs, sb, brs, bcs, sc, ldc, mod);
            return;
        }
    }
    lk_kbest_bmm_body<V, C, KB, RING, COUNTS, PAIRED, false>(av, ac, bv, bc, cv, cc, total, M, N, K, sa, ars, acs,
                                                             sb, brs, bcs, sc, ldc, mod);
}

// The shared-memory tiles of lk_kbest_tiled: KB values and their NC count arrays per entry, A's BK x BM
// and B's BK x BN entries of one K tile.
template <typename V, typename C, int KB, int NCS, int BM, int BN, int BK, bool COUNTS> struct LkKbestTiles {
    V av[KB][BK][BM];
    V bv[KB][BK][BN];
    C ac[NCS][KB][BK][COUNTS ? BM : 1];
    C bc[NCS][KB][BK][COUNTS ? BN : 1];
};

// The tiled k-best product, for the large steps: a block of TX x TY threads computes a tile of
// BM = TY TM rows by BN = TX TN columns of one batch entry; each K tile of BK of A's and B's entries
// (KB values and their counts each) is staged in shared memory once and read by every thread of the
// block (the tropical GEMM's scheme: a value of A serves BN outputs, not one). A thread keeps the KB
// best values and counts of its TM x TN outputs in registers; its rows are ty + r TY and its columns
// tx + c TX (neighbouring threads read neighbouring columns of the B tile: no bank conflicts).
// Entries outside the matrix are staged as -inf with count 0 (they add nothing). Same operands,
// strides, counts and results as lk_kbest_bmm; the rings' arithmetic is shared with it.
template <typename V, typename C, int KB, int RING, bool COUNTS, bool PAIRED, int TX, int TY, int TM, int TN,
          int BK, bool MERSENNE, class Tiles>
__device__ __forceinline__ void lk_kbest_tiled_body(Tiles &smem, const V *const *av, const C *const *ac,
                                                    const V *const *bv, const C *const *bc, V *const *cv,
                                                    C *const *cc, long long batch, int M, int N, int K, long long sa,
                                                    long long ars, long long acs, long long sb, long long brs,
                                                    long long bcs, long long sc, long long ldc,
                                                    unsigned long long mod) {
    constexpr int BM = TY * TM, BN = TX * TN, NT = TX * TY;
    constexpr int NC = PAIRED ? 2 : COUNTS ? 1 : 0;  // count arrays per value
    constexpr int NCS = NC > 0 ? NC : 1;
    auto &sav = smem.av;
    auto &sbv = smem.bv;
    auto &sac = smem.ac;
    auto &sbc = smem.bc;
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const unsigned long long mu = RING == 2 ? lk_barrett(mod) : 0;
    const unsigned long long mu2 = PAIRED ? lk_barrett(mod) : 0;
    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const long long mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN, tiles = batch * mt * nt;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {  // uniform per block: the barriers hold
        const long long b = tile / (mt * nt), rest = tile - b * mt * nt;
        const int m0 = (int)(rest / nt) * BM, n0 = (int)(rest % nt) * BN;
        const long long a0 = b * sa, b0 = b * sb;
        V top[TM][TN][KB];
        C cnt[TM][TN][KB], cnt2[TM][TN][KB];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
            for (int c = 0; c < TN; ++c)
#pragma unroll
                for (int q = 0; q < KB; ++q) {
                    top[r][c][q] = -inf;
                    cnt[r][c][q] = 0;
                    cnt2[r][c][q] = 0;
                }
        for (int k0 = 0; k0 < K; k0 += BK) {
            // stage the K tile, the unit-stride axis fastest (coalesced global reads)
            for (int e = tid; e < BM * BK; e += NT) {
                const int ii = acs == 1 ? e / BK : e % BM, kk = acs == 1 ? e % BK : e / BM;
                const int gi = m0 + ii, gk = k0 + kk;
                const bool in = gi < M && gk < K;
                const long long at = a0 + gi * ars + gk * acs;
#pragma unroll
                for (int q = 0; q < KB; ++q) {
                    sav[q][kk][ii] = in ? av[q][at] : -inf;
#pragma unroll
                    for (int h = 0; h < NC; ++h) sac[h][q][kk][ii] = in ? ac[h * KB + q][at] : (C)0;
                }
            }
            for (int e = tid; e < BN * BK; e += NT) {
                const int jj = bcs == 1 ? e % BN : e / BK, kk = bcs == 1 ? e / BN : e % BK;
                const int gj = n0 + jj, gk = k0 + kk;
                const bool in = gj < N && gk < K;
                const long long at = b0 + gk * brs + gj * bcs;
#pragma unroll
                for (int q = 0; q < KB; ++q) {
                    sbv[q][kk][jj] = in ? bv[q][at] : -inf;
#pragma unroll
                    for (int h = 0; h < NC; ++h) sbc[h][q][kk][jj] = in ? bc[h * KB + q][at] : (C)0;
                }
            }
            __syncthreads();
            const int kend = K - k0 < BK ? K - k0 : BK;
            for (int kk = 0; kk < kend; ++kk) {
                V x[TM][KB], y[TN][KB];
                C cx[TM][KB], cy[TN][KB], rx[TM][KB], ry[TN][KB];
#pragma unroll
                for (int r = 0; r < TM; ++r)
#pragma unroll
                    for (int q = 0; q < KB; ++q) {
                        x[r][q] = sav[q][kk][ty + r * TY];
                        cx[r][q] = COUNTS ? sac[0][q][kk][ty + r * TY] : (C)0;
                        rx[r][q] = PAIRED ? sac[NCS - 1][q][kk][ty + r * TY] : (C)0;
                    }
#pragma unroll
                for (int c = 0; c < TN; ++c)
#pragma unroll
                    for (int q = 0; q < KB; ++q) {
                        y[c][q] = sbv[q][kk][tx + c * TX];
                        cy[c][q] = COUNTS ? sbc[0][q][kk][tx + c * TX] : (C)0;
                        ry[c][q] = PAIRED ? sbc[NCS - 1][q][kk][tx + c * TX] : (C)0;
                    }
#pragma unroll
                for (int r = 0; r < TM; ++r)
#pragma unroll
                    for (int c = 0; c < TN; ++c) {
                        if constexpr (KB == 2) {
                            lk_kbest2_step<V, C, RING, COUNTS, PAIRED, MERSENNE>(top[r][c], cnt[r][c], cnt2[r][c],
                                                                                x[r], y[c], cx[r], cy[c], rx[r],
                                                                                ry[c], mod, mu, mu2);
                        } else {
#pragma unroll
                        for (int u = 0; u < KB; ++u)
#pragma unroll
                            for (int w = 0; w < KB; ++w) {
                                const V p = x[r][u] + y[c][w];
                                if (p >= top[r][c][KB - 1]) {  // else below all KB kept: nothing changes
                                    const C m = COUNTS ? lk_kbest_mul<RING, MERSENNE>(cx[r][u], cy[c][w], mod, mu)
                                                       : (C)0;
                                    const C m2 = PAIRED ? lk_kbest_mul<2, MERSENNE>(rx[r][u], ry[c][w], mod, mu2)
                                                        : (C)0;
                                    lk_kbest_insert<V, C, KB, RING, COUNTS, PAIRED>(top[r][c], cnt[r][c], cnt2[r][c],
                                                                                    p, m, m2, mod);
                                }
                            }
                        }
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
                const long long o = b * sc + (long long)i * ldc + j;
#pragma unroll
                for (int q = 0; q < KB; ++q) {
                    const bool none = top[r][c][q] == -inf;
                    cv[q][o] = top[r][c][q];
                    if (COUNTS) cc[q][o] = none ? (C)0 : cnt[r][c][q];
                    if (PAIRED) cc[KB + q][o] = none ? (C)0 : cnt2[r][c][q];
                }
            }
    }
}

// The tiled product's entry: the tiles in shared memory once, then the body for the operands' modulus
// (residues modulo 2^31 - 1 by its own reduction; a uniform branch, decided once per launch).
template <typename V, typename C, int KB, int RING, bool COUNTS, bool PAIRED, int TX, int TY, int TM, int TN,
          int BK>
__device__ __forceinline__ void lk_kbest_tiled(const V *const *av, const C *const *ac, const V *const *bv,
                                               const C *const *bc, V *const *cv, C *const *cc, long long batch,
                                               int M, int N, int K, long long sa, long long ars, long long acs,
                                               long long sb, long long brs, long long bcs, long long sc,
                                               long long ldc, unsigned long long mod) {
    constexpr int NC = PAIRED ? 2 : COUNTS ? 1 : 0;
    __shared__ LkKbestTiles<V, C, KB, (NC > 0 ? NC : 1), TY * TM, TX * TN, BK, COUNTS> tiles;
    if constexpr (RING == 2 || PAIRED) {
        if (mod == 0x7fffffffULL) {
            lk_kbest_tiled_body<V, C, KB, RING, COUNTS, PAIRED, TX, TY, TM, TN, BK, true>(
                tiles, av, ac, bv, bc, cv, cc, batch, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, mod);
            return;
        }
    }
    lk_kbest_tiled_body<V, C, KB, RING, COUNTS, PAIRED, TX, TY, TM, TN, BK, false>(
        tiles, av, ac, bv, bc, cv, cc, batch, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, mod);
}
