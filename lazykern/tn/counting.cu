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
template <int RING, typename C>
__device__ __forceinline__ C lk_count_mul(C x, C y, unsigned long long mod) {
    if constexpr (RING == 1) {
        return (C)((unsigned long long)x * (unsigned long long)y);
    } else if constexpr (RING == 2) {
        return (C)(((unsigned long long)(unsigned)x * (unsigned)y) % mod);
    } else {
        return x * y;
    }
}

template <int RING, typename C>
__device__ __forceinline__ C lk_count_add(C x, C y, unsigned long long mod) {
    if constexpr (RING == 1) {
        return (C)((unsigned long long)x + (unsigned long long)y);
    } else if constexpr (RING == 2) {
        return (C)(((unsigned long long)(unsigned)x + (unsigned)y) % mod);
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
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        long long b = t / ((long long)M * N);
        int i = (int)((t / N) % M), j = (int)(t % N);
        long long a0 = b * sa + i * ars, b0 = b * sb + j * bcs;
        V acc = zero;
        C cnt = 0;
        for (int k = 0; k < K; ++k) {
            V p = av[a0 + k * acs] + bv[b0 + k * brs];
            C q = lk_count_mul<RING>(ac[a0 + k * acs], bc[b0 + k * brs], mod);
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
