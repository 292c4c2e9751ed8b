// lazykern counting tropical product: (max, count) numbers, structure of arrays.
// C = (+)_k A (x) B with (a, m) (x) (b, n) = (a + b, m * n) and the sum keeping the best
// value: a strict improvement resets the count, a tie adds to it, a NaN never counts.
// Every operand is read or written through element strides, values and counts alike:
// A(b, i, k) = a[b sa + i ars + k acs], B(b, k, j) = b[b sb + k brs + j bcs],
// C(b, i, j) = c[b sc + i ldc + j]; a batch stride of 0 broadcasts an operand. So a permuted
// boundary is read where it lies and the result is written in its axis order (no copy per step,
// as the row kernels of the max-plus product). One thread per output entry.
//
// Integer counts are a ring's elements, never a count that saturates or overflows by accident:
// with mod == 0 they are counted modulo 2^64 (unsigned arithmetic: signed overflow is undefined
// in C++), with mod == p (< 2^32) they are residues in [0, p), every product formed exactly in 64
// bits and reduced. Either way the result is the exact count modulo that number; the host rebuilds
// the integer from several such passes (Chinese remainder theorem). Float counts add and multiply
// as floats.
// RING: 0 float counts, 1 int64 counts modulo 2^64, 2 32-bit residues modulo ``mod``.
//
// Residues avoid the 64-bit division (a long software routine on the GPU): x, y < p < 2^31, so a
// sum is below 2^32 and needs at most one subtraction of p, and a product (below 2^62) is reduced
// by Barrett's method with mu = floor(2^64 / p) (``lk_barrett``, once per thread): the quotient
// estimate hi64(x y mu) is the true quotient or one less, so one more conditional subtraction
// leaves the exact residue.
__device__ __forceinline__ unsigned long long lk_barrett(unsigned long long mod) {
    return mod > 1 ? ~0ULL / mod : 0;  // floor((2^64 - 1) / p) == floor(2^64 / p) for p odd
}

template <int RING, typename C>
__device__ __forceinline__ C lk_count_mul(C x, C y, unsigned long long mod, unsigned long long mu) {
    if constexpr (RING == 1) {
        return (C)((unsigned long long)x * (unsigned long long)y);
    } else if constexpr (RING == 2) {
        const unsigned long long xy = (unsigned long long)(unsigned)x * (unsigned)y;
        unsigned long long r = xy - __umul64hi(xy, mu) * mod;
        return (C)(r >= mod ? r - mod : r);
    } else {
        return x * y;
    }
}

template <int RING, typename C>
__device__ __forceinline__ C lk_count_add(C x, C y, unsigned long long mod) {
    if constexpr (RING == 1) {
        return (C)((unsigned long long)x + (unsigned long long)y);
    } else if constexpr (RING == 2) {
        const unsigned s = (unsigned)x + (unsigned)y;
        return (C)(s >= (unsigned)mod ? s - (unsigned)mod : s);
    } else {
        return x + y;
    }
}

template <typename V, typename C, bool MAX, int RING>
__device__ __forceinline__ void lk_count_bmm(const V *__restrict__ av, const C *__restrict__ ac,
                                             const V *__restrict__ bv, const C *__restrict__ bc,
                                             V *__restrict__ cv, C *__restrict__ cc, long long total, int M,
                                             int N, int K, long long sa, long long ars, long long acs,
                                             long long sb, long long brs, long long bcs, long long sc,
                                             long long ldc, unsigned long long mod) {
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const V zero = MAX ? -inf : inf;
    const unsigned long long mu = RING == 2 ? lk_barrett(mod) : 0;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        long long b = t / ((long long)M * N);
        int i = (int)((t / N) % M), j = (int)(t % N);
        long long a0 = b * sa + i * ars, b0 = b * sb + j * bcs;
        V acc = zero;
        C cnt = 0;
        for (int k = 0; k < K; ++k) {
            V p = av[a0 + k * acs] + bv[b0 + k * brs];
            C q = lk_count_mul<RING>(ac[a0 + k * acs], bc[b0 + k * brs], mod, mu);
            if (MAX ? p > acc : p < acc) {
                acc = p;
                cnt = q;
            } else if (p == acc) {
                cnt = lk_count_add<RING>(cnt, q, mod);
            }
        }
        long long o = b * sc + i * ldc + j;
        cv[o] = acc;
        cc[o] = cnt;
    }
}

// The row kernel of a sweep's step (K, N <= KMAX, as lk::rows of the max-plus product): one thread
// per row (b, i) of A reads the row's K values and its R count arrays once, through A's strides,
// and keeps all N results with their R counts in registers; B, contiguous (batch, K, N) and small,
// is read from the cache. R > 1 (RING 2): one count array per prime, each its own residue, so one
// pass over the boundary's values gives R residues of every count. The rules are those of
// lk_count_bmm: a strict improvement resets the counts, a tie adds, a NaN never counts.
template <typename V, typename C, bool MAX, int RING, int KMAX, int R>
__device__ __forceinline__ void lk_count_rows(const V *__restrict__ av, const C *const (&ac)[4],
                                              const V *__restrict__ bv, const C *const (&bc)[4],
                                              V *__restrict__ cv, C *const (&cc)[4], long long rows, int M,
                                              int N, int K, long long sa, long long ars, long long acs,
                                              long long sb, long long sc, long long ldc,
                                              const unsigned long long (&mod)[4]) {
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const V zero = MAX ? -inf : inf;
    unsigned long long mu[R];
#pragma unroll
    for (int q = 0; q < R; ++q) mu[q] = RING == 2 ? lk_barrett(mod[q]) : 0;
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows;
         r += (long long)gridDim.x * blockDim.x) {
        const long long b = r / M, i = r - b * M;
        const long long a0 = b * sa + i * ars, b0 = b * sb;
        V a[KMAX], acc[KMAX];
        C ca[R][KMAX], cnt[R][KMAX];
#pragma unroll
        for (int k = 0; k < KMAX; ++k) {
            if (k < K) {
                a[k] = av[a0 + k * acs];
#pragma unroll
                for (int q = 0; q < R; ++q) ca[q][k] = ac[q][a0 + k * acs];
            }
        }
#pragma unroll
        for (int j = 0; j < KMAX; ++j) {
            acc[j] = zero;
#pragma unroll
            for (int q = 0; q < R; ++q) cnt[q][j] = 0;
        }
#pragma unroll
        for (int k = 0; k < KMAX; ++k) {
            if (k >= K) break;
#pragma unroll
            for (int j = 0; j < KMAX; ++j) {
                if (j >= N) break;
                const long long e = b0 + (long long)k * N + j;
                const V p = a[k] + bv[e];
                if (MAX ? p > acc[j] : p < acc[j]) {
                    acc[j] = p;
#pragma unroll
                    for (int q = 0; q < R; ++q) cnt[q][j] = lk_count_mul<RING>(ca[q][k], bc[q][e], mod[q], mu[q]);
                } else if (p == acc[j]) {
#pragma unroll
                    for (int q = 0; q < R; ++q)
                        cnt[q][j] = lk_count_add<RING>(cnt[q][j], lk_count_mul<RING>(ca[q][k], bc[q][e], mod[q], mu[q]),
                                                       mod[q]);
                }
            }
        }
        const long long o = b * sc + i * ldc;
#pragma unroll
        for (int j = 0; j < KMAX; ++j) {
            if (j >= N) break;
            cv[o + j] = acc[j];
#pragma unroll
            for (int q = 0; q < R; ++q) cc[q][o + j] = cnt[q][j];
        }
    }
}

// A step over binary labels (every axis of size 2), read and written by bit strings: an array's
// entry is addressed by its labels' bits (C order, axis a of n is bit n - 1 - a). X (x) Y sums out
// KB spins of X and brings NB new ones from Y (contiguous (batch, con, right), small, read from the
// cache). One thread per assignment of X's other bits ("left", rows of them): for each assignment b
// of the batch bits it reads its K = 2^KB entries of X (values and R count arrays) and writes its
// N = 2^NB results. The output may be X itself (KB == NB, the new spins at the summed-out spins'
// bits, each thread writing only where it read): then no second boundary is ever held, and the
// boundary keeps its place in memory step after step (a queue order would move every entry), and no
// step copies the boundary to lay it out, whatever its axis order.
// ``holes_*``: bit masks of the summed and batch bits (X) and of the batch and new bits (C); ``*pos``:
// bit positions, 8 bits each, the first label in the lowest byte. Counting rules as lk_count_bmm.
__device__ __forceinline__ unsigned long long lk_spread_bits(unsigned long long r, unsigned long long holes) {
    for (unsigned long long m = holes; m; m &= m - 1) {  // a zero inserted at each hole, lowest first
        const int p = __ffsll((long long)m) - 1;
        r = ((r >> p) << (p + 1)) | (r & ((1ULL << p) - 1));
    }
    return r;
}

__device__ __forceinline__ long long lk_bits_at(int value, int count, unsigned long long positions) {
    long long o = 0;
    for (int t = 0; t < count; ++t)
        if ((value >> (count - 1 - t)) & 1) o |= 1LL << ((positions >> (8 * t)) & 0xff);
    return o;
}

template <typename V, typename C, bool MAX, int RING, int KB, int NB, int R>
__device__ __forceinline__ void lk_count_bits(const V *xv, const C *const (&xc)[4], const V *__restrict__ yv,
                                              const C *const (&yc)[4], V *cv, C *const (&cc)[4], long long rows,
                                              int nb, unsigned long long holes_in, unsigned long long holes_out,
                                              unsigned long long conpos, unsigned long long batch_in,
                                              unsigned long long batch_out, unsigned long long rightpos,
                                              const unsigned long long (&mod)[4]) {
    constexpr int K = 1 << KB, N = 1 << NB;
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const V zero = MAX ? -inf : inf;
    constexpr int RA = R > 0 ? R : 1;  // R == 0: values only (no count array is read or written)
    unsigned long long mu[RA];
#pragma unroll
    for (int q = 0; q < R; ++q) mu[q] = RING == 2 ? lk_barrett(mod[q]) : 0;
    long long joff[N];
#pragma unroll
    for (int j = 0; j < N; ++j) joff[j] = lk_bits_at(j, NB, rightpos);
    const int B = 1 << nb;
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows;
         r += (long long)gridDim.x * blockDim.x) {
        const long long in0 = (long long)lk_spread_bits((unsigned long long)r, holes_in);
        const long long out0 = (long long)lk_spread_bits((unsigned long long)r, holes_out);
        for (int b = 0; b < B; ++b) {
            const long long a0 = in0 | lk_bits_at(b, nb, batch_in), c0 = out0 | lk_bits_at(b, nb, batch_out);
            V acc[N];
            C cnt[RA][N];
#pragma unroll
            for (int j = 0; j < N; ++j) {
                acc[j] = zero;
#pragma unroll
                for (int q = 0; q < R; ++q) cnt[q][j] = 0;
            }
            const long long y0 = (long long)b * K * N;
            // One entry of X at a time (every result reads it before any is written): the loop over K
            // stays a loop, so a kernel of 16 x 16 and four residues compiles in seconds, not minutes.
#pragma unroll 1
            for (int k = 0; k < K; ++k) {
                const long long ak = a0 + lk_bits_at(k, KB, conpos);
                const V a = xv[ak];
                C ca[RA];
#pragma unroll
                for (int q = 0; q < R; ++q) ca[q] = xc[q][ak];
#pragma unroll
                for (int j = 0; j < N; ++j) {
                    const long long e = y0 + k * N + j;
                    const V p = a + yv[e];
                    if (MAX ? p > acc[j] : p < acc[j]) {
                        acc[j] = p;
#pragma unroll
                        for (int q = 0; q < R; ++q) cnt[q][j] = lk_count_mul<RING>(ca[q], yc[q][e], mod[q], mu[q]);
                    } else if (p == acc[j]) {
#pragma unroll
                        for (int q = 0; q < R; ++q)
                            cnt[q][j] = lk_count_add<RING>(cnt[q][j], lk_count_mul<RING>(ca[q], yc[q][e], mod[q], mu[q]),
                                                           mod[q]);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < N; ++j) {
                cv[c0 + joff[j]] = acc[j];
#pragma unroll
                for (int q = 0; q < R; ++q) cc[q][c0 + joff[j]] = cnt[q][j];
            }
        }
    }
}
