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
// RING: 0 float counts, 1 int64 counts modulo 2^64, 2 32-bit residues modulo ``mod``, 3 unsigned 128-bit
// counts that saturate (``lk_u128``, below).
//
// Residues avoid the 64-bit division (a long software routine on the GPU): x, y < p < 2^31, so a
// sum is below 2^32 and needs at most one subtraction of p, and a product (below 2^62) is reduced
// by Barrett's method with mu = floor(2^64 / p) (``lk_barrett``, once per thread): the quotient
// estimate hi64(x y mu) is the true quotient or one less, so one more conditional subtraction
// leaves the exact residue.
__device__ __forceinline__ unsigned long long lk_barrett(unsigned long long mod) {
    return mod > 1 ? ~0ULL / mod : 0;  // floor((2^64 - 1) / p) == floor(2^64 / p) for p odd
}

// RING 3: an unsigned 128-bit count that saturates. Its largest value, 2^128 - 1 (SAT), stands for "2^128 - 1
// or more": a sum or product whose exact value reaches it gives SAT, SAT plus anything is SAT, SAT times a
// nonzero count is SAT, and anything times 0 is 0 (exact). So a count below SAT is exact, whatever
// saturated elsewhere: a saturated term reaching it would have made it SAT. One pass of 16-byte counts is
// exact wherever no count read back is SAT, with no bound known beforehand (lazykern/tn/counts/wide.py).
struct __align__(16) lk_u128 {
    unsigned long long lo, hi;
    lk_u128() = default;
    __host__ __device__ constexpr lk_u128(int v) : lo((unsigned long long)(long long)v), hi(0) {}
    __host__ __device__ constexpr lk_u128(unsigned long long l, unsigned long long h) : lo(l), hi(h) {}
    __host__ __device__ bool operator==(const lk_u128 &o) const { return lo == o.lo && hi == o.hi; }
};

__device__ __forceinline__ lk_u128 lk_u128_add(lk_u128 x, lk_u128 y) {
    const unsigned long long lo = x.lo + y.lo, carry = lo < x.lo;
    const unsigned long long h = x.hi + y.hi, hi = h + carry;
    return h < x.hi || hi < h ? lk_u128(~0ULL, ~0ULL) : lk_u128(lo, hi);
}

__device__ __forceinline__ lk_u128 lk_u128_mul(lk_u128 x, lk_u128 y) {
    if ((x.lo | x.hi) == 0 || (y.lo | y.hi) == 0) return lk_u128(0ULL, 0ULL);
    if (x.hi != 0 && y.hi != 0) return lk_u128(~0ULL, ~0ULL);
    // at most one high word is nonzero: x.hi y.lo + x.lo y.hi is one of them, which must fit 64 bits
    const unsigned long long big = x.hi != 0 ? x.hi : y.hi, by = x.hi != 0 ? y.lo : x.lo;
    const unsigned long long cross = big * by, lo = x.lo * y.lo, hi = __umul64hi(x.lo, y.lo) + cross;
    return __umul64hi(big, by) != 0 || hi < cross ? lk_u128(~0ULL, ~0ULL) : lk_u128(lo, hi);
}

template <int RING, typename C>
__device__ __forceinline__ C lk_count_mul(C x, C y, unsigned long long mod, unsigned long long mu) {
    if constexpr (RING == 3) {
        return lk_u128_mul(x, y);
    } else if constexpr (RING == 1) {
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
    if constexpr (RING == 3) {
        return lk_u128_add(x, y);
    } else if constexpr (RING == 1) {
        return (C)((unsigned long long)x + (unsigned long long)y);
    } else if constexpr (RING == 2) {
        const unsigned s = (unsigned)x + (unsigned)y;
        return (C)(s >= (unsigned)mod ? s - (unsigned)mod : s);
    } else {
        return x + y;
    }
}

// Values: float or double, or 16-bit integers (short) whose sums provably stay within +-32766 (a 128-bit
// count's pass of small integer values, lazykern/tn/counts/wide.py: 18 bytes an entry, not 20). A short
// value of +-32767 is +-infinity: it absorbs every sum (-inf first), as the floats' infinities do.
template <typename V>
__device__ __forceinline__ V lk_inf() {
    return (V)__longlong_as_double(0x7ff0000000000000LL);
}
template <>
__device__ __forceinline__ short lk_inf<short>() {
    return 32767;
}
template <typename V>
__device__ __forceinline__ V lk_vadd(V a, V b) {
    return a + b;
}
template <>
__device__ __forceinline__ short lk_vadd<short>(short a, short b) {
    return a == -32767 || b == -32767 ? (short)-32767 : a == 32767 || b == 32767 ? (short)32767 : (short)(a + b);
}

template <typename V, typename C, bool MAX, int RING>
__device__ __forceinline__ void lk_count_bmm(const V *__restrict__ av, const C *__restrict__ ac,
                                             const V *__restrict__ bv, const C *__restrict__ bc,
                                             V *__restrict__ cv, C *__restrict__ cc, long long total, int M,
                                             int N, int K, long long sa, long long ars, long long acs,
                                             long long sb, long long brs, long long bcs, long long sc,
                                             long long ldc, unsigned long long mod) {
    const V inf = lk_inf<V>();
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
            V p = lk_vadd(av[a0 + k * acs], bv[b0 + k * brs]);
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
    const V inf = lk_inf<V>();
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
                const V p = lk_vadd(a[k], bv[e]);
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
// cache). A "row" is an assignment of X's other bits (``rows`` of them): for each assignment b of the
// batch bits it reads its K = 2^KB entries of X (values and R count arrays) and writes its N = 2^NB
// results. The output may be X itself (KB == NB, the new spins at the summed-out spins' bits, each
// row writing only where it read): then no second boundary is ever held, and the boundary keeps its
// place in memory step after step (a queue order would move every entry), and no step copies the
// boundary to lay it out, whatever its axis order.
// ``holes_*``: bit masks of the summed and batch bits (X) and of the batch and new bits (C); ``*pos``:
// bit positions, 8 bits each, the first label in the lowest byte. Counting rules as lk_count_bmm.
// R == 0: values only (the tropical step of a sweep), no count array read or written.
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

// The low bits of x placed at the set bits of mask, lowest first (x86's pdep).
__device__ __forceinline__ unsigned long long lk_deposit(unsigned long long x, unsigned long long mask) {
    unsigned long long r = 0;
    for (; mask && x; mask &= mask - 1, x >>= 1)
        if (x & 1) r |= mask & (~mask + 1);
    return r;
}

// The bits of x at the set bits of mask, packed lowest first (x86's pext).
__device__ __forceinline__ unsigned long long lk_extract(unsigned long long x, unsigned long long mask) {
    unsigned long long r = 0;
    for (int i = 0; mask; mask &= mask - 1, ++i)
        if (x & mask & (~mask + 1)) r |= 1ULL << i;
    return r;
}

// Packed bit positions (8 bits each) renumbered as their ranks among the set bits of mask.
__device__ __forceinline__ unsigned long long lk_ranks(unsigned long long positions, int count,
                                                       unsigned long long mask) {
    unsigned long long r = 0;
    for (int t = 0; t < count; ++t) {
        const int p = (int)((positions >> (8 * t)) & 0xff);
        r |= (unsigned long long)__popcll(mask & ((1ULL << p) - 1)) << (8 * t);
    }
    return r;
}

// One row's counting product: acc/cnt over the K entries at ``at(k)`` of (val, cnts), times Y's block y0.
// ONES: every count of Y is 1 (a sweep's new spins, each assignment counted once): a product of counts is
// X's count itself, so no modular multiplication is made (on the H100 one residue's products cost about as
// much as the rest of a 32 x 32 counting pass's bit-addressed steps).
template <typename V, typename C, bool MAX, int RING, int KB, int NB, int R, bool ONES, typename At, typename Val,
          typename Cnt>
__device__ __forceinline__ void lk_bits_row(V (&acc)[1 << NB], C (&cnt)[R > 0 ? R : 1][1 << NB], At at, Val val,
                                            Cnt cnts, const V *__restrict__ yv, const C *const (&yc)[4], long long y0,
                                            const unsigned long long (&mod)[4], const unsigned long long (&mu)[4]) {
    constexpr int K = 1 << KB, N = 1 << NB;
    const V inf = lk_inf<V>();
#pragma unroll
    for (int j = 0; j < N; ++j) {
        acc[j] = MAX ? -inf : inf;
#pragma unroll
        for (int q = 0; q < R; ++q) cnt[q][j] = 0;
    }
    // One entry of X at a time (every result reads it before any is written): the loop over K
    // stays a loop, so a kernel of 16 x 16 and four residues compiles in seconds, not minutes.
#pragma unroll 1
    for (int k = 0; k < K; ++k) {
        const auto ak = at(k);
        const V a = val(ak);
        C ca[R > 0 ? R : 1];
#pragma unroll
        for (int q = 0; q < R; ++q) ca[q] = cnts(q, ak);
#pragma unroll
        for (int j = 0; j < N; ++j) {
            const long long e = y0 + k * N + j;
            const V p = lk_vadd(a, yv[e]);
            if (MAX ? p > acc[j] : p < acc[j]) {
                acc[j] = p;
#pragma unroll
                for (int q = 0; q < R; ++q)
                    cnt[q][j] = ONES ? ca[q] : lk_count_mul<RING>(ca[q], yc[q][e], mod[q], mu[q]);
            } else if (p == acc[j]) {
#pragma unroll
                for (int q = 0; q < R; ++q)
                    cnt[q][j] = lk_count_add<RING>(
                        cnt[q][j], ONES ? ca[q] : lk_count_mul<RING>(ca[q], yc[q][e], mod[q], mu[q]), mod[q]);
            }
        }
    }
}

// Whether every count of Y (B K N entries of each of R arrays) is 1, asked of the whole block (every thread
// must call it); a Y of more than 4096 entries is not read (taken as not all ones: the general products).
template <typename C, int R>
__device__ __forceinline__ bool lk_counts_all_one(const C *const (&yc)[4], long long entries) {
    bool ones = entries <= 4096;
    for (long long i = threadIdx.x; ones && i < entries; i += blockDim.x)
#pragma unroll
        for (int q = 0; q < R; ++q) ones = ones && yc[q][i] == (C)1;
    return __syncthreads_and(ones) != 0;
}

// Shared memory of a tile: the largest power of two of entries (values and R counts, one padding
// word every 32) within LK_BITS_SMEM bytes, under the 48 KiB a block may declare statically.
#define LK_BITS_SMEM (46 * 1024)
template <typename V, typename C, int R>
struct lk_bits_tile {
    static constexpr int ENTRY = (int)sizeof(V) + R * (int)sizeof(C);
    __host__ __device__ static constexpr int fit(int n) {
        return n <= 64 || (long long)ENTRY * (n + n / 32) <= LK_BITS_SMEM ? n : fit(n / 2);
    }
    static constexpr int ENTRIES = fit(8192);
    static constexpr int PADDED = ENTRIES + ENTRIES / 32;
    static_assert(R == 0 || PADDED * sizeof(V) % alignof(C) == 0, "the tile's counts start aligned");
};

__device__ __forceinline__ int lk_padded(int i) { return i + (i >> 5); }  // a bank conflict-free stride

// Rows a tile of ``per_row`` entries each: a power of two within the tile's entries and ``rows``, 0 when
// one row does not fit (the direct path).
__device__ __forceinline__ long long lk_tile_rows(long long entries, long long per_row, long long rows) {
    long long t = entries / per_row;
    if (t == 0) return 0;
    t = 1LL << (63 - __clzll(t));
    return t < rows ? t : rows;
}

// A tile of T rows (a power of two, aligned) touches the entries base | deposit(i, S), i < T K B, with S
// the holes and the lowest log2(T) other bits: a block reads them in address order into shared
// memory (runs of consecutive entries wherever the holes lie: coalesced, many loads in flight per
// thread), computes every (row, batch) from there, and writes the tile back in address order. With
// KB == NB and the new spins at the summed-out ones' bits (``mirror``), results go over the entries
// just read in shared memory, and the tile is written back where it was read (in place when C is X:
// each block writes only the addresses it read); otherwise they go to a second region of C's tile.
// DIRECT: every row read where it lies, no tile (an arena's step, tn/_arena.py: its steps grow and shrink
// the boundary over entries that other blocks' tiles would read).
template <typename V, typename C, bool MAX, int RING, int KB, int NB, int R, bool DIRECT = false>
__device__ __forceinline__ void lk_count_bits(const V *xv, const C *const (&xc)[4], const V *__restrict__ yv,
                                              const C *const (&yc)[4], V *cv, C *const (&cc)[4], long long rows,
                                              int nb, unsigned long long holes_in, unsigned long long holes_out,
                                              unsigned long long conpos, unsigned long long batch_in,
                                              unsigned long long batch_out, unsigned long long rightpos,
                                              const unsigned long long (&mod)[4]) {
    constexpr int K = 1 << KB, N = 1 << NB, RC = R > 0 ? R : 1;
    using Tile = lk_bits_tile<V, C, R>;
    constexpr int SMEM = Tile::PADDED * Tile::ENTRY > 0 && !DIRECT ? Tile::PADDED * Tile::ENTRY : 1;
    __shared__ __align__(16) unsigned char lk_smem[SMEM];
    __shared__ long long lk_hi[2][32];
    __shared__ int lk_off[2][16];
    unsigned long long mu[4] = {0, 0, 0, 0};
#pragma unroll
    for (int q = 0; q < R; ++q) mu[q] = RING == 2 ? lk_barrett(mod[q]) : 0;
    const bool mirror = KB == NB && holes_in == holes_out && batch_in == batch_out && conpos == rightpos;
    const bool pow2 = (blockDim.x & (blockDim.x - 1)) == 0;  // the load addresses split tid from the rest
    // R == 0 (an energy's values, tn/_arena.py): each thread reads its rows where they lie. The arena's
    // steps grow and shrink the boundary over the entries other blocks' tiles read, and hold free bits
    // that are no row's: a tile's write-back there gave wrong values on the H100 (2026-11-28).
    const long long T =
        pow2 && R > 0 && !DIRECT ? lk_tile_rows(Tile::ENTRIES, (long long)(mirror ? K : K + N) << nb, rows) : 0;
    const int B = 1 << nb;
    const bool ones = lk_counts_all_one<C, R>(yc, (long long)B * K * N);
    if (T == 0) {  // one row's entries exceed the tile: each thread reads its rows where they lie
        long long joff[N];
#pragma unroll
        for (int j = 0; j < N; ++j) joff[j] = lk_bits_at(j, NB, rightpos);
        for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows;
             r += (long long)gridDim.x * blockDim.x) {
            const long long in0 = (long long)lk_spread_bits((unsigned long long)r, holes_in);
            const long long out0 = (long long)lk_spread_bits((unsigned long long)r, holes_out);
            for (int b = 0; b < B; ++b) {
                const long long a0 = in0 | lk_bits_at(b, nb, batch_in), c0 = out0 | lk_bits_at(b, nb, batch_out);
                V acc[N];
                C cnt[RC][N];
                const auto at = [&](int k) { return a0 + lk_bits_at(k, KB, conpos); };
                const auto val = [&](long long a) { return xv[a]; };
                const auto cnts = [&](int q, long long a) { return xc[q][a]; };
                if (ones)
                    lk_bits_row<V, C, MAX, RING, KB, NB, R, true>(acc, cnt, at, val, cnts, yv, yc, (long long)b * K * N,
                                                                  mod, mu);
                else
                    lk_bits_row<V, C, MAX, RING, KB, NB, R, false>(acc, cnt, at, val, cnts, yv, yc,
                                                                   (long long)b * K * N, mod, mu);
#pragma unroll
                for (int j = 0; j < N; ++j) {
                    cv[c0 + joff[j]] = acc[j];
#pragma unroll
                    for (int q = 0; q < R; ++q) cc[q][c0 + joff[j]] = cnt[q][j];
                }
            }
        }
        return;
    }
    V *const sv = reinterpret_cast<V *>(lk_smem);
    C *sc[RC];
#pragma unroll
    for (int q = 0; q < RC; ++q) sc[q] = reinterpret_cast<C *>(lk_smem + Tile::PADDED * sizeof(V)) + q * Tile::PADDED;
    const int tbits = 63 - __clzll(T), tid = threadIdx.x, nthreads = blockDim.x;
    const unsigned long long S_in = holes_in | lk_spread_bits(T - 1, holes_in);
    const unsigned long long S_out = holes_out | lk_spread_bits(T - 1, holes_out);
    const int E_in = (int)(T << (KB + nb)), E_out = mirror ? E_in : (int)(T << (NB + nb));
    const int out_at = mirror ? 0 : E_in;  // where C's tile starts in shared memory
    // tile-local addressing: the bits of S renumbered 0, 1, ... (their ranks)
    const unsigned long long lholes_in = lk_extract(holes_in, S_in), lholes_out = lk_extract(holes_out, S_out);
    const unsigned long long lbatch_in = lk_ranks(batch_in, nb, S_in), lbatch_out = lk_ranks(batch_out, nb, S_out);
    if (tid < 32) {  // the address bits of i = tid + m * nthreads above tid's: m's (nthreads a power of two)
        lk_hi[0][tid] = (long long)lk_deposit((unsigned long long)tid * nthreads, S_in);
        lk_hi[1][tid] = (long long)lk_deposit((unsigned long long)tid * nthreads, S_out);
    }
    if (tid < K) lk_off[0][tid] = (int)lk_bits_at(tid, KB, lk_ranks(conpos, KB, S_in));
    if (tid < N) lk_off[1][tid] = (int)lk_bits_at(tid, NB, lk_ranks(rightpos, NB, S_out));
    const long long lo_in = (long long)lk_deposit(tid, S_in), lo_out = (long long)lk_deposit(tid, S_out);
    __syncthreads();
    const long long ntiles = rows >> tbits;
    for (long long tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const long long in0 = (long long)lk_spread_bits((unsigned long long)(tile << tbits), holes_in) | lo_in;
#pragma unroll 4
        for (int i = tid, m = 0; i < E_in; i += nthreads, ++m) {
            const long long hi = m < 32 ? lk_hi[0][m] : (long long)lk_deposit((unsigned long long)i - tid, S_in);
            const long long a = in0 | hi;
            const int s = lk_padded(i);
            sv[s] = xv[a];
#pragma unroll
            for (int q = 0; q < R; ++q) sc[q][s] = xc[q][a];
        }
        __syncthreads();
#pragma unroll 1
        for (int task = tid; task < (int)(T << nb); task += nthreads) {
            const int t = task & (int)(T - 1), b = task >> tbits;
            const int li = (int)(lk_spread_bits(t, lholes_in) | lk_bits_at(b, nb, lbatch_in));
            V acc[N];
            C cnt[RC][N];
            const auto at = [&](int k) { return lk_padded(li + lk_off[0][k]); };
            const auto val = [&](int s) { return sv[s]; };
            const auto cnts = [&](int q, int s) { return sc[q][s]; };
            const long long y0 = (long long)b * K * N;
            if (ones)
                lk_bits_row<V, C, MAX, RING, KB, NB, R, true>(acc, cnt, at, val, cnts, yv, yc, y0, mod, mu);
            else
                lk_bits_row<V, C, MAX, RING, KB, NB, R, false>(acc, cnt, at, val, cnts, yv, yc, y0, mod, mu);
            const int lo = out_at + (int)(lk_spread_bits(t, lholes_out) | lk_bits_at(b, nb, lbatch_out));
#pragma unroll
            for (int j = 0; j < N; ++j) {
                const int s = lk_padded(lo + lk_off[1][j]);
                sv[s] = acc[j];
#pragma unroll
                for (int q = 0; q < R; ++q) sc[q][s] = cnt[q][j];
            }
        }
        __syncthreads();
        const long long out0 = (long long)lk_spread_bits((unsigned long long)(tile << tbits), holes_out) | lo_out;
#pragma unroll 4
        for (int i = tid, m = 0; i < E_out; i += nthreads, ++m) {
            const long long hi = m < 32 ? lk_hi[1][m] : (long long)lk_deposit((unsigned long long)i - tid, S_out);
            const long long a = out0 | hi;
            const int s = lk_padded(out_at + i);
            cv[a] = sv[s];
#pragma unroll
            for (int q = 0; q < R; ++q) cc[q][a] = sc[q][s];
        }
        __syncthreads();
    }
}
