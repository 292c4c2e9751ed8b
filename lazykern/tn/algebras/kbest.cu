// lazykern k-best product: the KB largest distinct values of sum_k A (x) B per output entry, with
// the number of ways each is reached (COUNTS). An entry is KB values sorted from the largest down
// (-inf where fewer occur) and their counts, each part an array of its own (av[q], ac[q], ...), all
// read through one set of element strides: A(b, i, k) = av[q][b sa + i ars + k acs],
// B(b, k, j) = bv[q][b sb + k brs + j bcs], C(b, i, j) = cv[q][b sc + i ldc + j]; a batch stride
// of 0 broadcasts an operand. One thread per output entry keeps its KB best in registers and merges
// the KB x KB pairwise sums of each k into them: a sum equal to a kept value adds its count, a larger
// one is inserted (the smallest kept drops out), a smaller one than all KB kept is dropped. The
// factors' values are sorted, so a row of sums stops at the first that cannot enter.
// Counts: RING 1 modulo 2^64, RING 2 residues modulo ``mod`` (< 2^31), from counting.cu's helpers.
// PAIRED (with RING 1): a second count per value, modulo ``mod``, read from ac[KB + q] / bc[KB + q] and
// written to cc[KB + q]: the int64 pass and the first prime pass of a CRT count in one product.
template <typename V, typename C, int KB, int RING, bool COUNTS, bool PAIRED = false>
__device__ __forceinline__ void lk_kbest_bmm(const V *const *av, const C *const *ac, const V *const *bv,
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
            C cx[KB], cy[KB], rx[KB], ry[KB];
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
#pragma unroll
            for (int u = 0; u < KB; ++u) {
                if (x[u] == -inf) break;  // sorted: the rest are -inf too
#pragma unroll
                for (int w = 0; w < KB; ++w) {
                    if (y[w] == -inf) break;
                    const V p = x[u] + y[w];
                    if (p < top[KB - 1]) break;  // the sums fall along w: none of the rest can enter
                    const C c = COUNTS ? lk_count_mul<RING>(cx[u], cy[w], mod, mu) : (C)0;
                    const C c2 = PAIRED ? lk_count_mul<2>(rx[u], ry[w], mod, mu2) : (C)0;
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
        const long long o = b * sc + i * ldc + j;
#pragma unroll
        for (int q = 0; q < KB; ++q) {
            cv[q][o] = top[q];
            if (COUNTS) cc[q][o] = top[q] == -inf ? (C)0 : cnt[q];
            if (PAIRED) cc[KB + q][o] = top[q] == -inf ? (C)0 : cnt2[q];
        }
    }
}
