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
