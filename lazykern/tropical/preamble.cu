// lazykern tropical GEMM: tile machinery shared by every fragment.
//
// Each fragment is one `extern "C"` kernel that instantiates lk::gemm<...> or a
// backward kernel; NVRTC only generates code for the templates a fragment uses.
//
// Semantics (the contract of lazykern.tropical.reference):
//   maxplus C = max_k A+B, minplus C = min_k A+B, maxmul C = max_k A*B.
//   Floats: zero -inf (maxplus, maxmul) / +inf (minplus); a NaN product never wins.
//     maxmul   a==-inf|b==-inf -> -inf; 0 * +-inf -> 0; else a*b (FloatMulRing; a block
//              without an infinite operand runs the plain product, which equals it there)
//   Integers: lo/hi (dtype min/max) act as -inf/+inf. The semiring zero absorbs
//   first, the other infinity next, finite results saturate:
//     maxplus  a==lo|b==lo -> lo; a==hi|b==hi -> hi; else sat(a+b)
//     minplus  a==hi|b==hi -> hi; a==lo|b==lo -> lo; else sat(a+b)
//     maxmul   a==lo|b==lo -> lo; a==hi|b==hi -> (other > 0 ? hi : lo); else sat(a*b)
//   argmax: smallest k whose product strictly beats everything before it
//   (strict compare, ascending k); 0 when nothing beats the zero, -1 when K == 0.

// LK_ARG_TILED (default 1): float and fast integer argmax keep a per-BK-tile
// maximum with the plain max (2 instructions per product instead of 4; fast i32:
// 1 VIADDMNMX instead of 4), remembers which K tile won, and finds the winning k inside that tile once, at the end.
// LK_ARG_INPLACE (default 1): the tile's products go straight into the
// accumulator, and the accumulator at the tile's start is kept to see whether
// the tile beat it (in unrolled code that copy is a register rename): 2 extra
// instructions per accumulator and K tile instead of 4 (reset, compare, 2 selects).
#ifndef LK_ARG_TILED
#define LK_ARG_TILED 1
#endif
#ifndef LK_ARG_INPLACE
#define LK_ARG_INPLACE 1
#endif
// LK_ARG_PACK (default 1): i32 argmax first tries IntPackRing (the winning k rides in
// the accumulator's low bits: one VIADDMNMX per product, 3 instructions per
// accumulator and K tile, no fix-up pass), see IntPackRing.
// LK_PACK_SPAN (4): K tiles per span of the packed codes (max-plus / min-plus; max-times
// uses 1). With BK 16, a span of 4 codes 64 k: bookkeeping once per 64 k, operands up to
// 2^22 (sweep round 6: 11.67 T MAC/s vs 10.70 with a span of 1, 8.80 unpacked).
#ifndef LK_ARG_PACK
#define LK_ARG_PACK 1
#endif
#ifndef LK_PACK_SPAN
#define LK_PACK_SPAN 4
#endif
// Tile-sweep variants (warp layout, fragment pipelining, cp.async, partial unrolling) are
// compiled only under the LK_* switches of benchmarks/sweep_variants.cuh, which only the
// sweeps prepend; the library's kernels never see them.

namespace lk {

typedef long long i64;
typedef unsigned long long u64;

enum { MAXPLUS = 0, MINPLUS = 1, MAXMUL = 2 };

// ---------------------------------------------------------------- numbers --
template <typename T> struct Num;
template <> struct Num<float> {
    static constexpr bool is_int = false;
    __device__ __forceinline__ static float ninf() { return __int_as_float(0xff800000); }
    __device__ __forceinline__ static float pinf() { return __int_as_float(0x7f800000); }
    __device__ __forceinline__ static float nan() { return __int_as_float(0x7fffffff); }
};
template <> struct Num<double> {
    static constexpr bool is_int = false;
    __device__ __forceinline__ static double ninf() { return __longlong_as_double(0xfff0000000000000ULL); }
    __device__ __forceinline__ static double pinf() { return __longlong_as_double(0x7ff0000000000000ULL); }
    __device__ __forceinline__ static double nan() { return __longlong_as_double(0x7fffffffffffffffULL); }
};
template <> struct Num<int> {
    static constexpr bool is_int = true;
    static constexpr int lo = -2147483647 - 1;
    static constexpr int hi = 2147483647;
    static constexpr int unit = 1 << 27;  // fast path: finite operands within +-unit
    static constexpr int mul_unit = 46340;  // max-times fast path: floor(sqrt(hi))
    typedef unsigned int U;
};
template <> struct Num<i64> {
    static constexpr bool is_int = true;
    static constexpr i64 lo = -9223372036854775807LL - 1;
    static constexpr i64 hi = 9223372036854775807LL;
    static constexpr i64 unit = 1LL << 59;
    static constexpr i64 mul_unit = 2147483647;  // an int: one 32 x 32 -> 64-bit multiply
    typedef u64 U;
};

// ------------------------------------------------- saturating arithmetic --
__device__ __forceinline__ int sat_add(int a, int b) {
    i64 s = (i64)a + (i64)b;
    return (int)(s < Num<int>::lo ? (i64)Num<int>::lo : (s > Num<int>::hi ? (i64)Num<int>::hi : s));
}
__device__ __forceinline__ i64 sat_add(i64 a, i64 b) {
    i64 s = (i64)((u64)a + (u64)b);
    return ((a ^ s) & (b ^ s)) < 0 ? (a < 0 ? Num<i64>::lo : Num<i64>::hi) : s;
}
__device__ __forceinline__ int sat_mul(int a, int b) {
    i64 p = (i64)a * (i64)b;
    return (int)(p < Num<int>::lo ? (i64)Num<int>::lo : (p > Num<int>::hi ? (i64)Num<int>::hi : p));
}
__device__ __forceinline__ i64 sat_mul(i64 a, i64 b) {
    i64 lo = (i64)((u64)a * (u64)b);
    i64 hi = __mul64hi(a, b);
    if (hi != (lo >> 63)) return ((a < 0) != (b < 0)) ? Num<i64>::lo : Num<i64>::hi;
    return lo;
}

// |v| <= w, branch-free: v + w in [0, 2w] with unsigned wrap-around.
template <typename T> __device__ __forceinline__ bool within(T v, T w) {
    typedef typename Num<T>::U U;
    return (U)v + (U)w <= 2 * (U)w;
}

// tmax(acc, p) / tmin(acc, p): the accumulator comes first. The generic form tests
// the product (`p > acc ? p : acc`): a NaN product compares false and loses, so a
// never-NaN accumulator stays never-NaN. That is fmax's NaN rule for doubles
// without fmax's slow NaN path (`acc > p ? acc : p` would let a NaN p replace acc).
template <typename T> __device__ __forceinline__ T tmax(T acc, T p) { return p > acc ? p : acc; }
template <typename T> __device__ __forceinline__ T tmin(T acc, T p) { return p < acc ? p : acc; }
template <> __device__ __forceinline__ float tmax<float>(float acc, float p) { return fmaxf(acc, p); }
template <> __device__ __forceinline__ float tmin<float>(float acc, float p) { return fminf(acc, p); }

// --------------------------------------------------------------- semirings --
// A ring policy says how operands are stored in shared memory (enc), what the
// padding is (pad: a product of pads never beats anything), the accumulator's
// start (zero), the product (mul), how it is combined (comb / better) and how
// the accumulator is turned back into a result (dec).

template <int S, typename T> struct FloatRing {
    static constexpr bool packed = false;
    static constexpr bool fast = false;
    // max-times: the plain IEEE product, the exact one's (FloatMulRing) but for an infinite operand
    // (-inf * -inf is +inf, 0 * inf is NaN), so it serves as the fast ring: its result is checked
    // (guarded_done), and a block it may be wrong for runs FloatMulRing.
    static constexpr bool guard = S == MAXMUL;
    static constexpr bool unroll_k = true;
    static constexpr bool tile_arg = LK_ARG_TILED != 0;
    __device__ __forceinline__ static T zero() { return S == MINPLUS ? Num<T>::pinf() : Num<T>::ninf(); }
    // max-times pads with NaN, which never wins (a pad's product must lose to every product).
    __device__ __forceinline__ static T pad() { return S == MAXMUL ? Num<T>::nan() : zero(); }
    __device__ __forceinline__ static T fill_a() { return pad(); }
    __device__ __forceinline__ static T fill_b() { return pad(); }
    __device__ __forceinline__ static T enc(T v) { return v; }
    __device__ __forceinline__ static bool safe(T) { return true; }
    __device__ __forceinline__ static T dec(T v) { return v; }
    __device__ __forceinline__ static T mul(T a, T b, int = 0) { return S == MAXMUL ? a * b : a + b; }
    __device__ __forceinline__ static T mul_arg(T a, T b) { return mul(a, b); }
    __device__ __forceinline__ static T settle(T v) { return v; }
    __device__ __forceinline__ static bool better(T p, T acc) { return S == MINPLUS ? p < acc : p > acc; }
    __device__ __forceinline__ static T comb(T acc, T p) {
        return S == MINPLUS ? tmin<T>(acc, p) : tmax<T>(acc, p);
    }
};

// What the exact rings (a block's fallback) share: operands as they are, no check, per-k argmax.
template <typename T> struct ExactFallback {
    static constexpr bool packed = false;
    static constexpr bool fast = false;
    static constexpr bool guard = false;
    static constexpr bool unroll_k = false;  // the fallback: keep its code (and compile time) small
    static constexpr bool tile_arg = false;
    __device__ __forceinline__ static T enc(T v) { return v; }
    __device__ __forceinline__ static bool safe(T) { return true; }
    __device__ __forceinline__ static T dec(T v) { return v; }
    __device__ __forceinline__ static T settle(T v) { return v; }
};

// Exact float max-times: the zero, -inf, absorbs (-inf * x = -inf for every x: the IEEE product
// gives +inf for x <= -0 or NaN for 0, and two empty or all-NaN reductions multiplied answered
// +inf), and 0 * +inf = 0, so that max distributes over the product on nonnegative operands with
// infinities (max(inf, 0) * 0 = 0 = max(inf * 0, 0 * 0): the IEEE NaN made the answer depend on the
// contraction order). A NaN operand still gives a NaN product, which never wins. A few compares
// and selects per product: a block runs it only when one of its operands is infinite.
template <typename T> struct FloatMulRing : ExactFallback<T> {
    __device__ __forceinline__ static T zero() { return Num<T>::ninf(); }
    __device__ __forceinline__ static T pad() { return Num<T>::nan(); }
    __device__ __forceinline__ static T fill_a() { return pad(); }
    __device__ __forceinline__ static T fill_b() { return pad(); }
    __device__ __forceinline__ static T mul(T a, T b, int = 0) {
        const T ninf = Num<T>::ninf();
        if (a == ninf || b == ninf) return ninf;
        const T p = a * b;
        return p != p && a == a && b == b ? T(0) : p;  // NaN from non-NaN operands: 0 * +-inf
    }
    __device__ __forceinline__ static T mul_arg(T a, T b) { return mul(a, b); }
    __device__ __forceinline__ static bool better(T p, T acc) { return p > acc; }
    __device__ __forceinline__ static T comb(T acc, T p) { return tmax<T>(acc, p); }
};

// Exact integer semiring: infinities checked per product, saturating arithmetic.
template <int S, typename T> struct IntExactRing : ExactFallback<T> {
    static constexpr T lo = Num<T>::lo, hi = Num<T>::hi;
    __device__ __forceinline__ static T zero() { return S == MINPLUS ? hi : lo; }
    __device__ __forceinline__ static T pad() { return zero(); }
    __device__ __forceinline__ static T fill_a() { return pad(); }
    __device__ __forceinline__ static T fill_b() { return pad(); }
    __device__ __forceinline__ static T mul(T a, T b, int = 0) {
        if (S == MAXPLUS) {
            if (a == lo || b == lo) return lo;
            if (a == hi || b == hi) return hi;
            return sat_add(a, b);
        } else if (S == MINPLUS) {
            if (a == hi || b == hi) return hi;
            if (a == lo || b == lo) return lo;
            return sat_add(a, b);
        } else {
            if (a == lo || b == lo) return lo;
            if (a == hi || b == hi) return (a == hi ? b : a) > 0 ? hi : lo;
            return sat_mul(a, b);
        }
    }
    __device__ __forceinline__ static T mul_arg(T a, T b) { return mul(a, b); }
    __device__ __forceinline__ static bool better(T p, T acc) { return S == MINPLUS ? p < acc : p > acc; }
    __device__ __forceinline__ static T comb(T acc, T p) { return S == MINPLUS ? tmin<T>(acc, p) : tmax<T>(acc, p); }
};

// Fast integer max-plus / min-plus: when every finite operand of a block lies in
// [-u, u] (u = 2^27 for i32, 2^59 for i64), operands are re-encoded on their way
// to shared memory so that a plain add never overflows (|sum| < 16u = 2^31) and
// still encodes the exact result:
//   maxplus: lo -> -7u, hi -> 4u      minplus: hi -> 7u, lo -> -4u
// Finite sums lie in [-2u, 2u]; any sum with the zero lies beyond -2u (maxplus)
// or 2u (minplus) even when the other operand is the other infinity (zero
// absorbs first); any other sum with an infinity lies beyond the other bound.
// dec() maps the accumulator back. With a plain add, max(acc, a + b) becomes one
// VIADDMNMX on sm_90. Argmax needs all products of one infinite class to compare
// equal (the smallest k keeps the win): the per-k form (mul_arg) clamps each sum
// to [-3u, 3u]; the tiled form (tile_arg) takes the plain max over a K tile and
// clamps only the accumulator at the tile's end (settle), before comparing it with
// the tile's start. The start, zero(), is -3u (maxplus): every sum with the zero
// lies at or below it (never beats it), every finite sum above it; every other
// sum with an infinity lies at or beyond 3u, where settle puts it, so a later
// tile's infinity never beats an earlier one.
template <int S, typename T> struct IntFastRing {
    static constexpr bool packed = false;
    static constexpr bool fast = true;
    static constexpr bool guard = false;
    static constexpr bool unroll_k = true;
    static constexpr bool tile_arg = LK_ARG_TILED != 0;
    static constexpr T lo = Num<T>::lo, hi = Num<T>::hi, u = Num<T>::unit;
    __device__ __forceinline__ static T zero() { return S == MINPLUS ? 3 * u : -3 * u; }
    __device__ __forceinline__ static T pad() { return S == MINPLUS ? 7 * u : -7 * u; }
    // Out-of-range tile elements hold the raw zero (safe), which enc() turns into pad().
    __device__ __forceinline__ static T fill_a() { return S == MINPLUS ? hi : lo; }
    __device__ __forceinline__ static T fill_b() { return fill_a(); }
    // On a safe operand, enc is a clamp (2 min/max instead of 2 compares and 2 selects):
    // lo and hi land on the bounds, finite values in [-u, u] stay. An unsafe operand
    // gets a wrong code, but its block falls back to the exact ring before using it.
    __device__ __forceinline__ static T enc(T v) {
        if (S == MINPLUS) return tmin<T>(tmax<T>(v, -4 * u), 7 * u);
        return tmin<T>(tmax<T>(v, -7 * u), 4 * u);
    }
    // |v| <= u or v is lo or hi, branch-free (unsigned wrap-around): v + u in [0, 2u],
    // or v - hi in {0 (hi), 1 (lo)}.
    __device__ __forceinline__ static bool safe(T v) {
        typedef typename Num<T>::U U;
        return within<T>(v, u) | ((U)v - (U)hi <= (U)1);
    }
    __device__ __forceinline__ static T dec(T v) { return v < -2 * u ? lo : (v > 2 * u ? hi : v); }
    __device__ __forceinline__ static T mul(T a, T b, int = 0) { return a + b; }
    __device__ __forceinline__ static T mul_arg(T a, T b) { return tmin<T>(tmax<T>(a + b, -3 * u), 3 * u); }
    __device__ __forceinline__ static T settle(T v) { return S == MINPLUS ? tmax<T>(v, -3 * u) : tmin<T>(v, 3 * u); }
    __device__ __forceinline__ static bool better(T p, T acc) { return S == MINPLUS ? p < acc : p > acc; }
    __device__ __forceinline__ static T comb(T acc, T p) { return S == MINPLUS ? tmin<T>(acc, p) : tmax<T>(acc, p); }
};

// Fast integer max-times, for blocks whose operands are all finite with |x| <= w
// (w = Num<T>::mul_unit: 46340 = floor(sqrt(2^31 - 1)) for i32, 2^31 - 1 for i64).
// Exactness: |a * b| <= w^2 < hi, so the plain product neither overflows nor meets
// lo or hi, and equals sat_mul(a, b); no operand is lo or hi (|lo|, |hi| > w), so
// no infinity rule applies; the result is the plain max of exact products, as in
// the exact ring. Infinities cannot be re-encoded for a plain multiply: a code L
// for lo must absorb (L * b never beats a finite product), but L * b changes sign
// with b, so a block with lo or hi anywhere (or |x| > w) takes the exact ring.
// Out-of-range k (k >= K, where A's column and B's row are both out of range) gets
// fill_a() * fill_b() = w * -w = -w^2, the smallest finite product: it never beats
// a finite product (every output with K > 0 has one), so the max is exact, and
// a tie comes at a later k than the product it ties, so the strict argmax compare
// (per k or per tile) never picks it; in the tiled form the winning tile holds a
// k < K whose product equals its best. K == 0 leaves zero() = lo, as the exact ring.
// Both fills are safe (|w| <= w). Products of padded rows or columns (never stored)
// are w * b, in range too. One IMAD (i64: one IMAD.WIDE) and one IMNMX per product.
template <typename T> struct IntMulFastRing {
    static constexpr bool packed = false;
    static constexpr bool fast = true;
    static constexpr bool guard = false;
    static constexpr bool unroll_k = true;
    static constexpr bool tile_arg = LK_ARG_TILED != 0;
    static constexpr T lo = Num<T>::lo, w = Num<T>::mul_unit;
    __device__ __forceinline__ static T zero() { return lo; }
    __device__ __forceinline__ static T pad() { return lo; }
    __device__ __forceinline__ static T fill_a() { return w; }
    __device__ __forceinline__ static T fill_b() { return -w; }
    __device__ __forceinline__ static T enc(T v) { return v; }
    __device__ __forceinline__ static bool safe(T v) { return within<T>(v, w); }
    __device__ __forceinline__ static T dec(T v) { return v; }
    __device__ __forceinline__ static T mul(T a, T b, int = 0) {
        return sizeof(T) == 8 ? (T)((i64)(int)a * (i64)(int)b) : a * b;
    }
    __device__ __forceinline__ static T mul_arg(T a, T b) { return mul(a, b); }
    __device__ __forceinline__ static T settle(T v) { return v; }
    __device__ __forceinline__ static bool better(T p, T acc) { return p > acc; }
    __device__ __forceinline__ static T comb(T acc, T p) { return tmax<T>(acc, p); }
};

template <int S, typename T, bool IS_MUL = S == MAXMUL> struct IntFast { typedef IntFastRing<S, T> type; };
template <int S, typename T> struct IntFast<S, T, true> { typedef IntMulFastRing<T> type; };

// Packed i32 argmax, for blocks whose operands are all finite and small: |x| <= w
// (max-plus / min-plus: w = 2^(29 - SH), 2^24 for BK = 16; max-times: w^2 * 2^SH <
// 2^31, 8191 for BK = 16). The accumulator holds a key, value * 2^SH + code, whose
// low bits say where the value came from: a product at k has code CM - (k mod KS),
// KS = BK * ST (a span of ST K tiles, ST = 1 for max-times), CM = 2^CB - 1 >= KS - 1,
// SH = CB + 1, so the plain integer max of keys is the largest value and, among equal
// values, the smallest k of the span. At each span's end the accumulator is settled:
// code |= F (F = 2^CB), so an equal value in a later span (code <= CM < F) never
// beats it, and a key whose F bit is clear at the span's end was beaten by the
// span's best (strictly: a larger value). The span's index is then kept, and at the
// end k = span * KS + CM - (key & CM).
// Operands are encoded on their way to shared memory: max-plus a -> a * 2^SH, b ->
// b * 2^SH + code (one VIADDMNMX per product, as the plain fast ring); min-plus the
// same of -a and -b (max of the negated sums = min of the sums, smallest k first);
// max-times keeps a and b -> b * 2^SH and adds the code to the product (IMAD). The
// bounds keep every key within int: 2w * 2^SH + 2F < 2^31 (plus), w^2 * 2^SH + 2F
// < 2^31 (times). Fills (k >= K and out-of-range rows) are -w, -w (plus; +w, +w for
// min-plus, negated) and w, -w (times): their products have the smallest values a
// block can have, so they tie at best with a real product at a smaller k, and lose.
// The zero is lo | F, below every product. K == 0 never comes here (see gemm).
// A block with a larger operand or an infinity falls back to IntFastRing / IntExactRing.
template <int S, int BK, int SPAN> struct IntPackRing {
    typedef int T;
    static constexpr int ST = SPAN;
    static constexpr bool IS_MUL = S == MAXMUL;
    static_assert(!IS_MUL || ST == 1, "max-times adds its code in the product: one K tile per span");
    static constexpr bool packed = true;
    static constexpr bool fast = true;  // operands are checked (safe) and encoded at the store
    static constexpr bool guard = false;
    static constexpr bool unroll_k = true;
    static constexpr bool tile_arg = false;
    static constexpr int KS = BK * ST;
    static constexpr int CB = KS <= 16 ? 4 : KS <= 32 ? 5 : KS <= 64 ? 6 : 7, SH = CB + 1, F = 1 << CB, CM = F - 1;
    static_assert(CB < 7 && (KS & (KS - 1)) == 0, "span of 16, 32 or 64 k");
    static constexpr int w = IS_MUL ? (SH == 5 ? 8191 : SH == 6 ? 5792 : 4095) : 1 << (29 - SH);
    static constexpr int sign = S == MINPLUS ? -1 : 1;
    __device__ __forceinline__ static T zero() { return Num<int>::lo | F; }
    __device__ __forceinline__ static T fill_a() { return IS_MUL ? w : -sign * w; }
    __device__ __forceinline__ static T fill_b() { return -sign * w; }
    // Unsigned arithmetic: an unsafe operand (its block falls back before using it) may wrap.
    __device__ __forceinline__ static T enc_a(T v) { return IS_MUL ? v : (T)((unsigned)v * (unsigned)(sign << SH)); }
    // k: the element's k from the start of the pass (slice)
    __device__ __forceinline__ static T enc_b(T v, int k) {
        if (IS_MUL) return (T)((unsigned)v << SH);
        return (T)((unsigned)v * (unsigned)(sign << SH) + (unsigned)(CM - (k & (KS - 1))));
    }
    __device__ __forceinline__ static bool safe(T v) { return within<T>(v, w); }
    __device__ __forceinline__ static T mul(T a, T b, int kk) { return IS_MUL ? a * b + (CM - kk) : a + b; }
    __device__ __forceinline__ static T comb(T acc, T p) { return tmax<T>(acc, p); }
    // End of a span: was the accumulator beaten? Settles it either way.
    __device__ __forceinline__ static bool settle_won(T& acc) {
        const bool won = (acc & F) == 0;
        acc |= F;
        return won;
    }
    __device__ __forceinline__ static int arg(T key, int span) { return span * KS + CM - (key & CM); }
    __device__ __forceinline__ static T dec(T key) { return sign * (key >> SH); }
};

template <int S, typename T, bool IS_INT = Num<T>::is_int> struct Rings {
    typedef FloatRing<S, T> exact;
    static constexpr bool has_fast = false;
    typedef FloatRing<S, T> fast;
};
template <typename T> struct Rings<MAXMUL, T, false> {
    typedef FloatMulRing<T> exact;
    static constexpr bool has_fast = true;
    typedef FloatRing<MAXMUL, T> fast;  // guarded: checked by guarded_done
};
template <int S, typename T> struct Rings<S, T, true> {
    typedef IntExactRing<S, T> exact;
    static constexpr bool has_fast = true;
    typedef typename IntFast<S, T>::type fast;
};
// The argmax ring tried first, where there is one (i32, a span of at most 64 k).
template <int S, typename T, int BK> struct PackRing {
    static constexpr int ST = S == MAXMUL ? 1 : LK_PACK_SPAN;
    static constexpr bool ok = LK_ARG_PACK != 0 && Num<T>::is_int && sizeof(T) == 4 && BK * ST <= 64;
    typedef IntPackRing<S, ok ? BK : 16, ok ? ST : 1> type;
};

// ------------------------------------------------------------------ vectors --
// Loads and stores of N consecutive T as 16-byte (or smaller) vectors.
template <int BYTES> struct Raw;
template <> struct Raw<4> { typedef unsigned int t; };
template <> struct Raw<8> { typedef uint2 t; };
template <> struct Raw<16> { typedef uint4 t; };

template <typename T, int N> struct VecIO {
    static constexpr int BYTES = (int)sizeof(T) * N;
    static constexpr int CH_BYTES = BYTES >= 16 ? 16 : BYTES;
    static constexpr int CH = CH_BYTES / (int)sizeof(T);  // elements per chunk
    typedef typename Raw<CH_BYTES>::t R;
    __device__ __forceinline__ static void load(T* dst, const T* __restrict__ src) {
#pragma unroll
        for (int c = 0; c < N; c += CH) {
            R r = *reinterpret_cast<const R*>(src + c);
#pragma unroll
            for (int e = 0; e < CH; ++e) dst[c + e] = reinterpret_cast<const T*>(&r)[e];
        }
    }
    __device__ __forceinline__ static void store(T* dst, const T* src) {
#pragma unroll
        for (int c = 0; c < N; c += CH) {
            R r;
#pragma unroll
            for (int e = 0; e < CH; ++e) reinterpret_cast<T*>(&r)[e] = src[c + e];
            *reinterpret_cast<R*>(dst + c) = r;
        }
    }
};

// -------------------------------------------------------------- tile loads --
// A ROWS x COLS tile of a row-major (COLS contiguous) global matrix, L
// consecutive elements per thread. TRANS stores it to shared memory as
// [col][row] (A row-major and B transposed need that: shared tiles are k-major).
template <typename T, int ROWS, int COLS, int NT, bool TRANS> struct TileLoader {
    static constexpr int L = ROWS * COLS >= NT ? ROWS * COLS / NT : 1;
    static constexpr int PER_ROW = COLS / L;
    static constexpr int USED = ROWS * COLS / L;  // threads that load
    static_assert(COLS % L == 0, "tile columns must split into whole runs");
    static_assert(USED <= NT, "tile too large for the block");
    static constexpr int CH = VecIO<T, L>::CH;  // vector alignment in elements
    T v[L];
    int r, c;

    __device__ __forceinline__ void init(int tid) {
        r = tid / PER_ROW;
        c = (tid % PER_ROW) * L;
    }

    template <class R>
    __device__ __forceinline__ void load(const T* __restrict__ base, i64 ld, int row0, int col0, int nrows,
                                         int ncols, bool vec_ok, int tid, T fill) {
        if (USED < NT && tid >= USED) return;
        const int gr = row0 + r, gc = col0 + c;
        if (gr < nrows) {
            const T* p = base + (i64)gr * ld + gc;
            if (L > 1 && vec_ok && gc + L <= ncols) {
                VecIO<T, L>::load(v, p);
            } else {
#pragma unroll
                for (int e = 0; e < L; ++e) v[e] = gc + e < ncols ? p[e] : fill;
            }
        } else {
#pragma unroll
            for (int e = 0; e < L; ++e) v[e] = fill;
        }
    }

    // Stores the loaded elements (out-of-range ones hold the ring's fill_a() / fill_b())
    // and, for a fast ring, says whether all of them are safe. The check sits here, after
    // the K tile's products, not in load(): there it waited for the global loads that
    // load() had just issued (a stall per K tile that the products now hide). It is
    // branch-free (& not &&), a few integer instructions per element.
    // IS_B: the tile is B's (a packed ring encodes B with the element's k: k0, the
    // tile's start, plus the column of a transposed store, else the row).
    template <class R, bool IS_B>
    __device__ __forceinline__ bool store(T* smem, int sld, int tid, int k0) const {
        bool ok = true;
        if (USED < NT && tid >= USED) return ok;
        if (R::fast) {
#pragma unroll
            for (int e = 0; e < L; ++e) ok &= R::safe(v[e]);
        }
        if (TRANS) {
#pragma unroll
            for (int e = 0; e < L; ++e) smem[(c + e) * sld + r] = enc_pad<R, IS_B>(v[e], k0 + c + e);
        } else {
#pragma unroll
            for (int e = 0; e < L; ++e) smem[r * sld + c + e] = enc_pad<R, IS_B>(v[e], k0 + r);
        }
        return ok;
    }

    template <class R, bool IS_B> __device__ __forceinline__ static T enc_pad(T x, int k) {
        if constexpr (R::packed) return IS_B ? R::enc_b(x, k) : R::enc_a(x);
        else return R::fast ? R::enc(x) : x;
    }

#if LK_CP_ASYNC
    // load() and store() in one, global -> shared by cp.async (float rings: no encoding,
    // no safety check). Elements outside the matrix are stored as the fill.
    __device__ __forceinline__ void load_async(T* smem, int sld, const T* __restrict__ base, i64 ld, int row0,
                                               int col0, int nrows, int ncols, bool vec_ok, int tid, T fill) const {
        if (USED < NT && tid >= USED) return;
        const int gr = row0 + r, gc = col0 + c;
        const T* p = base + (i64)gr * ld + gc;
        if (!TRANS && CH * (int)sizeof(T) == 16 && gr < nrows && vec_ok && gc + L <= ncols) {
#pragma unroll
            for (int e = 0; e < L; e += CH) cp_async16(smem + r * sld + c + e, p + e);
            return;
        }
#pragma unroll
        for (int e = 0; e < L; ++e) {
            T* dst = TRANS ? smem + (c + e) * sld + r : smem + r * sld + c + e;
            if (gr < nrows && gc + e < ncols) cp_async_elem(dst, p + e);
            else *dst = fill;
        }
    }
#endif
};

// --------------------------------------------------------------- the GEMM --
// G: blocks walk the output in groups of G block rows (column by column inside a
// group), so that blocks running together share A and B tiles in L2.
template <int BM_, int BN_, int BK_, int TM_, int TN_, int G_ = 1> struct Tile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_, G = G_;
    static constexpr int NT = (BM / TM) * (BN / TN);
    static constexpr int VM = TM < 4 ? TM : 4, VN = TN < 4 ? TN : 4;  // contiguous runs per thread
    static constexpr int SM = BM * VM / TM, SN = BN * VN / TN;        // stride between runs
};

// The thread's column (tx) and row (ty) in the block's (BM / TM) x (BN / TN) thread grid.
template <class Cfg> __device__ __forceinline__ void thread_xy(int tid, int& tx, int& ty) {
    constexpr int NX = Cfg::BN / Cfg::TN, NY = Cfg::BM / Cfg::TM;
#if LK_WARP_XY
    constexpr int WX = NX < 8 ? NX : 8, WY = 32 / WX;
    if (NX % WX == 0 && NY % WY == 0 && Cfg::NT % 32 == 0) {
        const int w = tid / 32, l = tid % 32;
        tx = (w % (NX / WX)) * WX + l % WX;
        ty = (w / (NX / WX)) * WY + l / WX;
        return;
    }
#endif
    tx = tid % NX;
    ty = tid / NX;
}

struct Dims {
    int M, N, K;
    i64 lda, ldb, ldc;
};

template <typename T, class Cfg> struct Smem {
    static constexpr int PAD = sizeof(T) == 4 ? 4 : 2;  // keeps rows 16-byte aligned, spreads banks
    static constexpr int SA = Cfg::BM + PAD, SB = Cfg::BN + PAD;
#if LK_CP_ASYNC
    static constexpr int STAGES = LK_STAGES;
#else
    static constexpr int STAGES = 2;
#endif
    T a[STAGES][Cfg::BK * SA];
    T b[STAGES][Cfg::BK * SB];
};

// A guarded ring's look at one K tile in shared memory (Guard::tiles), once it has landed: the largest |x| of
// this thread's share of it (16-byte runs of a row's BM or BN stored elements, never the padding)
// and of ``largest``; infinite iff an infinity is there (fmax drops NaN). Each element is looked
// at by one thread: (BM + BN) * BK / NT of them per thread and tile, one max each, against
// TM * TN * BK products (16 and 1,024 for the 128 x 128 x 16 f32 tile).
template <typename T, class Cfg>
__device__ __forceinline__ T tile_largest(const T* As, const T* Bs, int tid, T largest) {
    constexpr int V = 16 / (int)sizeof(T), BK = Cfg::BK, NT = Cfg::NT;
    constexpr int RA = Cfg::BM / V, RB = Cfg::BN / V;  // runs per row
    constexpr int SA = Smem<T, Cfg>::SA, SB = Smem<T, Cfg>::SB;
    static_assert(Cfg::BM % V == 0 && Cfg::BN % V == 0, "rows of whole 16-byte runs");
#pragma unroll
    for (int q = 0; q < (BK * (RA + RB) + NT - 1) / NT; ++q) {
        const int e = q * NT + tid;
        if (e >= BK * (RA + RB)) break;
        const int f = e - BK * RA;  // B's run, when e is past A's
        const T* src = f < 0 ? As + (e / RA) * SA + (e % RA) * V : Bs + (f / RB) * SB + (f % RB) * V;
        T v[V];
        VecIO<T, V>::load(v, src);
#pragma unroll
        for (int x = 0; x < V; ++x) largest = fmax(largest, fabs(v[x]));  // a tree of maxima measured the same
    }
    return largest;
}

// How a guarded ring's (float max-times') pass is checked, by measurement on an H200 (session 74): f32
// argmax kernels look at each K tile as it lands (tile_largest: 1.11x the unchecked time, where checking
// the result cost 1.34x: their registers are capped at 128), the others check their result and look at
// the operands only when it is in doubt (guarded_done: 1.01-1.03x; a look at every tile, 1.07-1.11x).
template <class R, typename T, bool ARG> struct Guard {
    static constexpr bool tiles = R::guard && ARG && sizeof(T) == 4;
    static constexpr bool result = R::guard && !tiles;
};

// One pass over K with ring R. Returns false (uniformly across the block) as
// soon as a fast ring meets an operand outside its safe range, or when a guarded
// ring that looks at its tiles (Guard::tiles) saw an infinity. With a ring whose
// tile_arg is set, idx holds the winning K tile (-1: none), see fix_argmax.
template <class R, typename T, class Cfg, bool ARG, bool TA, bool TB>
__device__ __forceinline__ bool mainloop(const T* __restrict__ A, const T* __restrict__ B, const Dims& d, int m0,
                                         int n0, bool vecA, bool vecB, T (&acc)[Cfg::TM][Cfg::TN],
                                         int (&idx)[Cfg::TM][Cfg::TN], Smem<T, Cfg>& sm) {
    constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN, NT = Cfg::NT;
    constexpr int SA = Smem<T, Cfg>::SA, SB = Smem<T, Cfg>::SB;
    const int tid = threadIdx.x;
    int tx, ty;
    thread_xy<Cfg>(tid, tx, ty);

    // A is M x K: row-major tile BM x BK (stored transposed), or a transposed view: BK x BM rows of k.
    TileLoader<T, TA ? BK : BM, TA ? BM : BK, NT, !TA> la;
    // B is K x N: row-major tile BK x BN, or a transposed view: BN x BK rows of n (stored transposed).
    TileLoader<T, TB ? BN : BK, TB ? BK : BN, NT, TB> lb;
    la.init(tid);
    lb.init(tid);

    constexpr bool TILED = ARG && R::tile_arg;
    constexpr bool PACK = ARG && R::packed;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = R::zero();
            idx[i][j] = TILED || PACK || d.K <= 0 ? -1 : 0;
        }

    auto load = [&](int k0) {
        if (TA) la.template load<R>(A, d.lda, k0, m0, d.K, d.M, vecA, tid, R::fill_a());
        else la.template load<R>(A, d.lda, m0, k0, d.M, d.K, vecA, tid, R::fill_a());
        if (TB) lb.template load<R>(B, d.ldb, n0, k0, d.N, d.K, vecB, tid, R::fill_b());
        else lb.template load<R>(B, d.ldb, k0, n0, d.K, d.N, vecB, tid, R::fill_b());
    };

#if LK_CP_ASYNC
    constexpr bool ASYNC = !R::fast;
    constexpr int STAGES = Smem<T, Cfg>::STAGES;
    auto issue = [&](int t) {  // ASYNC: tile t into stage t % STAGES, one commit group (maybe empty)
        if (t < (d.K + BK - 1) / BK) {
            const int s = t % STAGES, k0 = t * BK;
            if (TA) la.load_async(sm.a[s], SA, A, d.lda, k0, m0, d.K, d.M, vecA, tid, R::fill_a());
            else la.load_async(sm.a[s], SA, A, d.lda, m0, k0, d.M, d.K, vecA, tid, R::fill_a());
            if (TB) lb.load_async(sm.b[s], SB, B, d.ldb, n0, k0, d.N, d.K, vecB, tid, R::fill_b());
            else lb.load_async(sm.b[s], SB, B, d.ldb, k0, n0, d.K, d.N, vecB, tid, R::fill_b());
        }
        cp_async_commit();
    };
#else
    constexpr bool ASYNC = false;
#endif

    const int ntiles = (d.K + BK - 1) / BK;
    if (ntiles == 0) return true;
    bool ok = true;
    constexpr bool LOOK = Guard<R, T, ARG>::tiles;
    T largest = 0;  // LOOK: the largest |operand| seen, infinite or not
#if LK_CP_ASYNC
    if (ASYNC) {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) issue(s);
    } else
#endif
    {
        load(0);
        ok = la.template store<R, false>(sm.a[0], SA, tid, 0);
        ok &= lb.template store<R, true>(sm.b[0], SB, tid, 0);
        if (R::fast) {
            if (!__syncthreads_and(ok)) return false;
        } else {
            __syncthreads();
        }
    }

    for (int t = 0; t < ntiles; ++t) {
        int buf = t & 1;
        const bool more = t + 1 < ntiles;
#if LK_CP_ASYNC
        if (ASYNC) {
            // Tile t has landed (this thread's copies, then everyone's), and every thread is
            // done with tile t - 1, whose stage the next issue refills.
            cp_async_wait<STAGES - 2>();
            __syncthreads();
            issue(t + STAGES - 1);
            buf = t % STAGES;
        } else
#endif
        if (more) {
            load((t + 1) * BK);
        }
        const T* As = sm.a[buf];
        const T* Bs = sm.b[buf];
        constexpr bool INPLACE = TILED && LK_ARG_INPLACE != 0;
        T tm[TM][TN];  // TILED: this tile's best product (INPLACE: the accumulator before the tile)
        if (TILED) {
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) tm[i][j] = INPLACE ? acc[i][j] : R::zero();
        }
        auto frag = [&](int kk, T* a, T* b) {
#pragma unroll
            for (int i = 0; i < TM; i += Cfg::VM)
                VecIO<T, Cfg::VM>::load(a + i, As + kk * SA + (i / Cfg::VM) * Cfg::SM + ty * Cfg::VM);
#pragma unroll
            for (int j = 0; j < TN; j += Cfg::VN)
                VecIO<T, Cfg::VN>::load(b + j, Bs + kk * SB + (j / Cfg::VN) * Cfg::SN + tx * Cfg::VN);
        };
#if LK_FRAG_PIPE
        constexpr bool PIPE = R::unroll_k;
#else
        constexpr bool PIPE = false;
#endif
        T fa[PIPE ? 2 : 1][TM], fb[PIPE ? 2 : 1][TN];
        if (PIPE) frag(0, fa[0], fb[0]);
#if LK_KUNROLL
#pragma unroll(R::unroll_k ? (LK_KUNROLL < BK ? LK_KUNROLL : BK) : 1)
#else
#pragma unroll(R::unroll_k ? BK : 1)
#endif
        for (int kk = 0; kk < BK; ++kk) {
            if (PIPE && kk + 1 < BK) frag(kk + 1, fa[(kk + 1) & 1], fb[(kk + 1) & 1]);
            if (!PIPE) frag(kk, fa[0], fb[0]);
            const T* a = fa[PIPE ? kk & 1 : 0];
            const T* b = fb[PIPE ? kk & 1 : 0];
            if constexpr (TILED && !INPLACE) {
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) tm[i][j] = R::comb(tm[i][j], R::mul(a[i], b[j]));
            } else if constexpr (ARG && !TILED && !PACK) {
                const int k = t * BK + kk;
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        const T p = R::mul_arg(a[i], b[j]);
                        const bool w = R::better(p, acc[i][j]);
                        idx[i][j] = w ? k : idx[i][j];
                        acc[i][j] = w ? p : acc[i][j];
                    }
            } else {
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = R::comb(acc[i][j], R::mul(a[i], b[j], kk));
            }
        }
        if constexpr (PACK) {
            if (R::ST == 1 || (t + 1) % R::ST == 0 || t + 1 == ntiles) {
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) idx[i][j] = R::settle_won(acc[i][j]) ? t / R::ST : idx[i][j];
            }
        } else if constexpr (INPLACE) {
            // comb never lets a NaN in and keeps the accumulator when nothing is
            // better, so "changed" is "some product of this tile beat it" (strictly).
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] = R::settle(acc[i][j]);
                    idx[i][j] = R::better(acc[i][j], tm[i][j]) ? t : idx[i][j];
                }
        } else if constexpr (TILED) {
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    const T v = R::settle(tm[i][j]);
                    const bool w = R::better(v, acc[i][j]);
                    idx[i][j] = w ? t : idx[i][j];
                    acc[i][j] = w ? v : acc[i][j];
                }
        }
        // At the tile's end, not its start: the look's loads then overlap the last products
        // instead of delaying the first fragments (the tile stays put until the next barrier).
        if constexpr (LOOK) largest = tile_largest<T, Cfg>(As, Bs, tid, largest);
        if (ASYNC) continue;
        if (more) {
            ok = la.template store<R, false>(sm.a[buf ^ 1], SA, tid, (t + 1) * BK);
            ok &= lb.template store<R, true>(sm.b[buf ^ 1], SB, tid, (t + 1) * BK);
        }
        if (R::fast) {
            if (!__syncthreads_and(ok)) return false;
        } else {
            __syncthreads();
        }
    }
    // The next batch entry's (or the exact pass's) first issue refills stages read here.
    if constexpr (LOOK) return !__syncthreads_or(largest == Num<T>::pinf());
    if (ASYNC) __syncthreads();
    return true;
}

// Vector access needs the base, the leading dimension and the batch stride aligned to a chunk.
template <typename T, int L>
__device__ __forceinline__ bool vec_ok(const void* p, i64 ld, i64 batch_stride) {
    constexpr int CH = VecIO<T, L>::CH;
    if (CH <= 1) return false;
    return ((unsigned long long)p % (CH * sizeof(T))) == 0 && ld % CH == 0 && batch_stride % CH == 0;
}

// Output element (i, j) of a thread's TM x TN accumulators: row, column offsets in the block tile.
template <class Cfg> __device__ __forceinline__ int out_row(int i, int ty) {
    return (i / Cfg::VM) * Cfg::SM + ty * Cfg::VM + i % Cfg::VM;
}
template <class Cfg> __device__ __forceinline__ int out_col(int j, int tx) {
    return (j / Cfg::VN) * Cfg::SN + tx * Cfg::VN + j % Cfg::VN;
}

// A's element (row m, k) and B's (k, column n), either stored as given or as a transposed view.
template <typename T, bool TA> __device__ __forceinline__ T a_at(const T* __restrict__ A, i64 lda, i64 m, i64 k) {
    return TA ? A[k * lda + m] : A[m * lda + k];
}
template <typename T, bool TB> __device__ __forceinline__ T b_at(const T* __restrict__ B, i64 ldb, i64 k, i64 n) {
    return TB ? B[n * ldb + k] : B[k * ldb + n];
}

// Tiled argmax: the block stored, as its argmax, the first K tile whose best
// product beat every earlier tile (-1: none did). The winning k is the first one
// in that tile whose exact product equals the result (it exists: the tile's best
// is one of its products, and the result is that best; a fast integer ring's
// clamped infinity decodes to the exact infinity); earlier ks of the tile give
// smaller products or NaN. Each thread rereads its own stored outputs (a rolled
// loop: unrolled over the accumulators, this costs ~40 registers in the kernel).
template <class R, typename T, class Cfg, bool TA, bool TB>
__device__ __forceinline__ void fix_argmax(const T* __restrict__ A, const T* __restrict__ B, const T* C, int* I,
                                           const Dims& d, int m0, int n0) {
    const int tid = threadIdx.x;
    int tx, ty;
    thread_xy<Cfg>(tid, tx, ty);
#pragma unroll 1
    for (int e = 0; e < Cfg::TM * Cfg::TN; ++e) {
        const int gm = m0 + out_row<Cfg>(e / Cfg::TN, ty), gn = n0 + out_col<Cfg>(e % Cfg::TN, tx);
        if (gm >= d.M || gn >= d.N) continue;
        int* ip = I + (i64)gm * d.ldc + gn;
        const int t = *ip;
        if (t < 0) {
            *ip = d.K > 0 ? 0 : -1;
            continue;
        }
        const T c = C[(i64)gm * d.ldc + gn];
        const int k0 = t * Cfg::BK, k1 = min(d.K, k0 + Cfg::BK);
        int w = k0;
#pragma unroll 1
        for (int k = k0; k < k1; ++k) {
            const T a = a_at<T, TA>(A, d.lda, gm, k), b = b_at<T, TB>(B, d.ldb, k, gn);
            if (R::mul(a, b) == c) {
                w = k;
                break;
            }
        }
        *ip = w;
    }
}

// Float max-times' fast pass (the IEEE product) is checked by its result, so that blocks without an
// infinite operand pay nothing (a look at every tile cost 5-9%, session 74). It differs from the exact
// product only where an operand is infinite: -inf times a negative, -0 or -inf is +inf (exact: -inf, the
// zero absorbs), which makes the block's result +inf; 0 * +inf is NaN, which never wins (exact: 0), so
// the result is wrong only where it is below 0 (the exact one is at least 0), and an argmax where it is
// 0 or below (an earlier 0 * inf ties). -inf * 0 (NaN, never wins) and -inf * x (-inf) agree with it.
// So a block whose every output lies in (0, inf) (without argmax [0, inf)) is exact; another one looks
// at its operands (its A rows and B columns over K) and runs the exact product only if one is infinite.
// (f32 argmax kernels look at their tiles instead: Guard.)
template <typename T, class Cfg, bool ARG, bool TA, bool TB>
__device__ __forceinline__ bool guarded_done(const T (&acc)[Cfg::TM][Cfg::TN], const T* __restrict__ A,
                                              const T* __restrict__ B, const Dims& d, int m0, int n0) {
    int tx, ty;
    thread_xy<Cfg>(threadIdx.x, tx, ty);
    const T inf = Num<T>::pinf();
    bool doubt = false;
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::TN; ++j) {
            const T c = acc[i][j];
            const bool sure = (ARG ? c > T(0) : c >= T(0)) && c < inf;
            doubt |= !sure && m0 + out_row<Cfg>(i, ty) < d.M && n0 + out_col<Cfg>(j, tx) < d.N;
        }
    if (!__syncthreads_or(doubt)) return true;
    const int rows = min(Cfg::BM, d.M - m0), cols = min(Cfg::BN, d.N - n0);
    const i64 na = (i64)rows * d.K, nb = (i64)d.K * cols;
    bool found = false;
    for (i64 e = threadIdx.x; e < na + nb && !found; e += blockDim.x) {  // the contiguous index innermost
        T x;
        if (e < na) {
            x = TA ? a_at<T, TA>(A, d.lda, m0 + e % rows, e / rows) : a_at<T, TA>(A, d.lda, m0 + e / d.K, e % d.K);
        } else {
            const i64 f = e - na;
            x = TB ? b_at<T, TB>(B, d.ldb, f % d.K, n0 + f / d.K) : b_at<T, TB>(B, d.ldb, f / cols, n0 + f % cols);
        }
        found = fabs(x) == inf;
    }
    return !__syncthreads_or(found);
}

// SPLIT (split-K): grid.y walks batch x splits slices; slice s of batch entry b
// covers k in [s * kslice, min(K, (s + 1) * kslice)) and writes its partial
// result (and slice-local argmax) to C + (b * splits + s) * sC, a workspace
// that lk::reduce_slices folds. kslice is a multiple of BK (vector alignment).
template <int S, typename T, bool ARG, bool TA, bool TB, class Cfg, bool SPLIT = false>
__device__ __forceinline__ void gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                     int* __restrict__ I, Dims d, int batch, i64 sA, i64 sB, i64 sC,
                                     int splits = 1, int kslice = 0) {
    typedef Rings<S, T> Rs;
    constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN, NT = Cfg::NT;
    __shared__ __align__(16) Smem<T, Cfg> sm;

    const int nbn = (d.N + BN - 1) / BN, nbm = (d.M + BM - 1) / BM;
    const int width = Cfg::G * nbn, first = (int)blockIdx.x / width * Cfg::G;
    const int grp = min(nbm - first, Cfg::G), in_group = (int)blockIdx.x % width;
    const int bm = first + in_group % grp, bn = in_group / grp;
    const int m0 = bm * BM, n0 = bn * BN;
    const int tid = threadIdx.x;
    int tx, ty;
    thread_xy<Cfg>(tid, tx, ty);

    constexpr int LA = TileLoader<T, TA ? BK : BM, TA ? BM : BK, NT, !TA>::L;
    constexpr int LB = TileLoader<T, TB ? BN : BK, TB ? BK : BN, NT, TB>::L;
    const bool vecA = vec_ok<T, LA>(A, d.lda, sA);
    const bool vecB = vec_ok<T, LB>(B, d.ldb, sB);
    const bool vecC = vec_ok<T, Cfg::VN>(C, d.ldc, sC);
    const bool vecI = vec_ok<int, Cfg::VN>(I, d.ldc, sC);

    const int nz = SPLIT ? batch * splits : batch;
    for (int z = blockIdx.y; z < nz; z += gridDim.y) {
        const int b = SPLIT ? z / splits : z;
        const T* Ab = A + (i64)b * sA;
        const T* Bb = B + (i64)b * sB;
        Dims dz = d;
        if (SPLIT) {
            const int k0 = (z - b * splits) * kslice;
            dz.K = min(kslice, d.K - k0);
            Ab += TA ? (i64)k0 * d.lda : (i64)k0;
            Bb += TB ? (i64)k0 : (i64)k0 * d.ldb;
        }
        T acc[TM][TN];
        int idx[TM][TN];
        bool pack_done = false;
        if constexpr (ARG && PackRing<S, T, BK>::ok) {
            typedef typename PackRing<S, T, BK>::type P;
            if (dz.K > 0) pack_done = mainloop<P, T, Cfg, ARG, TA, TB>(Ab, Bb, dz, m0, n0, vecA, vecB, acc, idx, sm);
            if (pack_done) {
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        idx[i][j] = P::arg(acc[i][j], idx[i][j]);
                        acc[i][j] = P::dec(acc[i][j]);
                    }
            }
        }
        bool fast_done = false;
        if (Rs::has_fast && !pack_done) {
            fast_done = mainloop<typename Rs::fast, T, Cfg, ARG, TA, TB>(Ab, Bb, dz, m0, n0, vecA, vecB, acc, idx, sm);
            if constexpr (Guard<typename Rs::fast, T, ARG>::result) {
                if (fast_done) fast_done = guarded_done<T, Cfg, ARG, TA, TB>(acc, Ab, Bb, dz, m0, n0);
            }
            if (fast_done) {
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = Rs::fast::dec(acc[i][j]);
            }
        }
        // A packed or fast pass that gave up did so at a barrier every thread had passed after
        // its last shared-memory read, so the next pass may refill the tiles at once.
        if (!pack_done && !fast_done)
            mainloop<typename Rs::exact, T, Cfg, ARG, TA, TB>(Ab, Bb, dz, m0, n0, vecA, vecB, acc, idx, sm);

        T* Cb = C + (i64)z * sC;
        int* Ib = ARG ? I + (i64)z * sC : I;
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int gm = m0 + out_row<Cfg>(i, ty);
            if (gm >= d.M) continue;
#pragma unroll
            for (int j = 0; j < TN; j += Cfg::VN) {
                const int gn = n0 + out_col<Cfg>(j, tx);
                T* crow = Cb + (i64)gm * d.ldc + gn;
                int* irow = Ib + (i64)gm * d.ldc + gn;
                if (Cfg::VN > 1 && gn + Cfg::VN <= d.N && vecC) {
                    VecIO<T, Cfg::VN>::store(crow, &acc[i][j]);
                } else {
#pragma unroll
                    for (int e = 0; e < Cfg::VN; ++e)
                        if (gn + e < d.N) crow[e] = acc[i][j + e];
                }
                if (ARG) {
                    if (Cfg::VN > 1 && gn + Cfg::VN <= d.N && vecI) {
                        VecIO<int, Cfg::VN>::store(irow, &idx[i][j]);
                    } else {
#pragma unroll
                        for (int e = 0; e < Cfg::VN; ++e)
                            if (gn + e < d.N) irow[e] = idx[i][j + e];
                    }
                }
            }
        }
        // The ring that finished decides the argmax form (an integer block that fell back to the
        // exact ring ran per k); the winning k is found with exact products, which on the fast
        // path's operands equal its decoded sums.
        const bool tiled = !pack_done && (fast_done ? Rs::fast::tile_arg : Rs::exact::tile_arg);
        if (ARG && tiled) fix_argmax<typename Rs::exact, T, Cfg, TA, TB>(Ab, Bb, Cb, Ib, dz, m0, n0);
    }
}

// Split-K reduction: C[b, i, j] = the semiring sum over the splits slices of
// W[b * splits + s, i, j]. With argmax, the first slice (slices are in k order)
// whose value strictly beats every earlier one wins, and its slice-local index
// is shifted by s * kslice: the smallest k overall, as in one pass. A slice
// whose best equals the zero never wins, so nothing beating the zero gives 0.
template <int S, typename T, bool ARG>
__device__ __forceinline__ void reduce_slices(const T* __restrict__ W, const int* __restrict__ IW, T* __restrict__ C,
                                              int* __restrict__ I, i64 mn, int batch, int splits, int kslice) {
    typedef typename Rings<S, T>::exact R;
    const i64 total = (i64)batch * mn;
    for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x) {
        const i64 b = t / mn;
        const i64 base = b * splits * mn + (t - b * mn);
        T best = R::zero();
        int bi = 0;
        for (int s = 0; s < splits; ++s) {
            const T v = W[base + s * mn];
            if (ARG) {
                if (R::better(v, best)) {
                    best = v;
                    bi = s * kslice + IW[base + s * mn];
                }
            } else {
                best = R::comb(best, v);
            }
        }
        C[t] = best;
        if (ARG) I[t] = bi;
    }
}

// -------------------------------------------------------------- tiny K, N --
// Products with K, N <= KMAX (like (2^21 x 4) x (4 x 4), or a batch of millions of
// 4x4 products) are memory-bound: a GEMM tile would be almost all padding. One
// thread computes one output row (a batch entry's row i) from its A row and B,
// both read straight from global memory (B is shared by neighbouring threads, so
// L1 serves it). Element strides are runtime values, so one kernel reads every
// layout, batched or not; a contiguous A row and B rows load as 16-byte vectors.
template <typename T, int KMAX>
__device__ __forceinline__ void load_run(T (&v)[KMAX], const T* __restrict__ p, i64 step, int n, bool vec) {
    constexpr int CH = VecIO<T, KMAX>::CH;
#pragma unroll
    for (int c = 0; c < KMAX; c += CH) {
        if (CH > 1 && vec && c + CH <= n) {
            VecIO<T, CH>::load(v + c, p + c);
        } else {
#pragma unroll
            for (int e = 0; e < CH; ++e)
                if (c + e < n) v[c + e] = p[(i64)(c + e) * step];
        }
    }
}

template <typename T, int KMAX>
__device__ __forceinline__ void store_run(T* __restrict__ p, const T (&v)[KMAX], int n, bool vec) {
    constexpr int CH = VecIO<T, KMAX>::CH;
#pragma unroll
    for (int c = 0; c < KMAX; c += CH) {
        if (CH > 1 && vec && c + CH <= n) {
            VecIO<T, CH>::store(p + c, v + c);
        } else {
#pragma unroll
            for (int e = 0; e < CH; ++e)
                if (c + e < n) p[c + e] = v[c + e];
        }
    }
}

template <typename T>
__device__ __forceinline__ bool aligned16(const void* p, i64 a, i64 b) {
    constexpr int CH = 16 / (int)sizeof(T);
    return ((unsigned long long)p % 16) == 0 && a % CH == 0 && b % CH == 0;
}

// A(i, k) = A[b*sA + i*ars + k*acs], B(k, j) = B[b*sB + k*brs + j*bcs], C(i, j) = C[b*sC + i*ldc + j].
template <int S, typename T, bool ARG, int KMAX>
__device__ __forceinline__ void rows(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                                     int* __restrict__ I, int M, int N, int K, i64 ars, i64 acs, i64 brs, i64 bcs,
                                     i64 ldc, int batch, i64 sA, i64 sB, i64 sC) {
    typedef typename Rings<S, T>::exact R;
    const bool vecA = acs == 1 && aligned16<T>(A, ars, sA);
    const bool vecB = bcs == 1 && aligned16<T>(B, brs, sB);
    const bool vecC = aligned16<T>(C, ldc, sC);
    const bool vecI = aligned16<int>(I, ldc, sC);
    const i64 total = (i64)batch * M;
    for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < total; r += (i64)gridDim.x * blockDim.x) {
        const i64 b = r / M, i = r - b * M;
        T a[KMAX];
        load_run<T, KMAX>(a, A + b * sA + i * ars, acs, K, vecA);
        const T* Bb = B + b * sB;
        T acc[KMAX];
        int idx[KMAX];
#pragma unroll
        for (int j = 0; j < KMAX; ++j) {
            acc[j] = R::zero();
            idx[j] = K > 0 ? 0 : -1;
        }
#pragma unroll
        for (int k = 0; k < KMAX; ++k) {
            if (k >= K) break;
            T bk[KMAX];
            load_run<T, KMAX>(bk, Bb + (i64)k * brs, bcs, N, vecB);
#pragma unroll
            for (int j = 0; j < KMAX; ++j) {
                if (j >= N) break;
                if (ARG) {
                    const T p = R::mul_arg(a[k], bk[j]);
                    const bool w = R::better(p, acc[j]);
                    idx[j] = w ? k : idx[j];
                    acc[j] = w ? p : acc[j];
                } else {
                    acc[j] = R::comb(acc[j], R::mul(a[k], bk[j]));
                }
            }
        }
        const i64 off = b * sC + i * ldc;
        store_run<T, KMAX>(C + off, acc, N, vecC);
        if (ARG) store_run<int, KMAX>(I + off, idx, N, vecI);
    }
}

// ----------------------------------------------------------------- backward --
// grad_A[b, i, k] += grad_C[b, i, j] where argmax[b, i, j] == k (likewise grad_B).
// argmax outside [0, K) (K == 0) adds nothing. A batch stride of 0 for the output
// sums a broadcast operand's gradient. Float sums are not bit-reproducible from run
// to run (atomics, as with torch's scatter_add).
//
// backward: one thread per (b, i, j) adds its gradient to the one element its argmax
// names with a global atomic (the outputs must be zeroed first). Used for short rows
// (grad_A with N < 32, grad_B with M < 32), where a block per row would idle.
template <typename T, bool FOR_A>
__device__ __forceinline__ void backward(const T* __restrict__ gC, const int* __restrict__ I, T* __restrict__ g,
                                         int batch, int M, int N, int K, i64 sG, i64 blk, i64 nblk) {
    const i64 total = (i64)batch * M * N;
    for (i64 t = blk * blockDim.x + threadIdx.x; t < total; t += nblk * blockDim.x) {
        const int k = I[t];
        if (k < 0 || k >= K) continue;
        const i64 mn = (i64)M * N;
        const i64 b = t / mn, r = t - b * mn;
        const i64 i = r / N, j = r - i * N;
        T* dst = FOR_A ? g + b * sG + i * K + k : g + b * sG + (i64)k * N + j;
        atomicAdd(dst, gC[t]);
    }
}

// The shared-memory backward: gradients are summed in shared memory (KC values of k
// at a time) and written out once, coalesced, so the global traffic is one read of
// grad_C and argmax per K chunk and one write of each gradient.
//   grad_A: a block per (b, i, K chunk, column group) reads its part of the row.
//   grad_B: a block per (b, strip of W columns, K chunk, row group) reads the strip's
//     rows (W consecutive j: one 32-byte sector for f32) and sums into [KC][W].
// `groups` splits the summed dimension (N for grad_A, M for grad_B) when rows or
// strips alone give too few blocks. `add`: the output is shared (a broadcast
// operand, or groups > 1), so the block adds with (coalesced) atomics to zeroed
// memory instead of storing. `acc` is the block's shared buffer (BwdChunk::SMEM values), `blk`
// and `nblk` its index among, and the number of, the blocks doing this gradient.
template <typename T> struct BwdChunk {
    static constexpr int SMEM = 32768 / (int)sizeof(T);  // 32 KB of T
    static constexpr int W = 8, KCA = SMEM, KCB = SMEM / W;
};

template <typename T>
__device__ __forceinline__ void put(T* dst, T v, bool add) {
    if (add) atomicAdd(dst, v);
    else *dst = v;
}

template <typename T>
__device__ __forceinline__ void backward_rows(const T* __restrict__ gC, const int* __restrict__ I,
                                              T* __restrict__ g, int batch, int M, int N, int K, i64 sG,
                                              int groups, T* acc, i64 blk, i64 nblk) {
    constexpr int KC = BwdChunk<T>::KCA;
    const bool add = (sG == 0 && batch > 1) || groups > 1;
    const int nchunks = (K + KC - 1) / KC;
    const int cols = (N + groups - 1) / groups;
    const i64 work = (i64)batch * M * nchunks * groups;
    for (i64 w = blk; w < work; w += nblk) {
        const int grp = (int)(w % groups);
        const i64 rest = w / groups;
        const i64 row = rest / nchunks;  // b * M + i
        const int k0 = (int)(rest - row * nchunks) * KC, kc = min(KC, K - k0);
        for (int c = threadIdx.x; c < kc; c += blockDim.x) acc[c] = T(0);
        __syncthreads();
        const int* Ir = I + row * N;
        const T* gr = gC + row * N;
        const int j1 = min(N, (grp + 1) * cols);
#pragma unroll 4
        for (int j = grp * cols + (int)threadIdx.x; j < j1; j += blockDim.x) {  // unrolled: 4 loads in flight
            const unsigned k = (unsigned)(Ir[j] - k0);
            if (k < (unsigned)kc) atomicAdd(&acc[k], gr[j]);
        }
        __syncthreads();
        const i64 b = row / M, i = row - b * M;
        T* out = g + b * sG + i * K + k0;
        for (int c = threadIdx.x; c < kc; c += blockDim.x) put(out + c, acc[c], add);
        __syncthreads();
    }
}

template <typename T>
__device__ __forceinline__ void backward_cols(const T* __restrict__ gC, const int* __restrict__ I,
                                              T* __restrict__ g, int batch, int M, int N, int K, i64 sG,
                                              int groups, T* acc, i64 blk, i64 nblk) {
    constexpr int KC = BwdChunk<T>::KCB, W = BwdChunk<T>::W;
    const bool add = (sG == 0 && batch > 1) || groups > 1;
    const int nstrips = (N + W - 1) / W, nchunks = (K + KC - 1) / KC;
    const int rows = (M + groups - 1) / groups;
    const i64 work = (i64)batch * nstrips * nchunks * groups;
    const int c = threadIdx.x % W, step = blockDim.x / W;
    for (i64 w = blk; w < work; w += nblk) {
        i64 rest = w;
        const int grp = (int)(rest % groups);
        rest /= groups;
        const int k0 = (int)(rest % nchunks) * KC, kc = min(KC, K - k0);
        rest /= nchunks;
        const int j = (int)(rest % nstrips) * W + c;
        const i64 b = rest / nstrips;
        for (int e = threadIdx.x; e < kc * W; e += blockDim.x) acc[e] = T(0);
        __syncthreads();
        const int i1 = min(M, (grp + 1) * rows);
        if (j < N) {
#pragma unroll 4
            for (int i = grp * rows + (int)threadIdx.x / W; i < i1; i += step) {
                const i64 t = (b * M + i) * N + j;
                const unsigned k = (unsigned)(I[t] - k0);
                if (k < (unsigned)kc) atomicAdd(&acc[k * W + c], gC[t]);
            }
        }
        __syncthreads();
        T* out = g + b * sG + (i64)k0 * N + (j - c);
        for (int e = threadIdx.x; e < kc * W; e += blockDim.x) {
            const int kk = e / W, cc = e % W;
            if (j - c + cc < N) put(out + (i64)kk * N + cc, acc[e], add);
        }
        __syncthreads();
    }
}

// groups == 0: the per-element atomic kernel; else the shared-memory one, the summed
// dimension split into `groups`.
template <typename T, bool FOR_A>
__device__ __forceinline__ void backward_any(const T* __restrict__ gC, const int* __restrict__ I, T* __restrict__ g,
                                             int batch, int M, int N, int K, i64 sG, int groups, T* acc, i64 blk,
                                             i64 nblk) {
    if (groups == 0) backward<T, FOR_A>(gC, I, g, batch, M, N, K, sG, blk, nblk);
    else if constexpr (FOR_A) backward_rows<T>(gC, I, g, batch, M, N, K, sG, groups, acc, blk, nblk);
    else backward_cols<T>(gC, I, g, batch, M, N, K, sG, groups, acc, blk, nblk);
}

// Both gradients in one launch (a launch costs the host more than a small backward costs the
// GPU): blocks [0, blocks_a) make grad_A, the others grad_B. The choice is uniform per block, so
// the __syncthreads inside are safe; one shared buffer serves either branch.
template <typename T>
__device__ __forceinline__ void backward_pair(const T* __restrict__ gC, const int* __restrict__ I,
                                              T* __restrict__ gA, T* __restrict__ gB, int batch, int M, int N,
                                              int K, i64 sA, i64 sB, int groups_a, int groups_b, int blocks_a) {
    __shared__ T acc[BwdChunk<T>::SMEM];
    const i64 blk = blockIdx.x;
    if (blk < blocks_a) backward_any<T, true>(gC, I, gA, batch, M, N, K, sA, groups_a, acc, blk, blocks_a);
    else backward_any<T, false>(gC, I, gB, batch, M, N, K, sB, groups_b, acc, blk - blocks_a, gridDim.x - blocks_a);
}

}  // namespace lk
