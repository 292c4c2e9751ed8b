// lazykern scaled-sum product (scaledsum.py): the partition function's step C = A (x) B on (s, l) pairs,
// around one float64 matrix product (cuBLAS) of scaled weights. Two kernels do what array operations did:
// CuPy compiled 37 of them the first time a machine ran a PartitionFunction (27-37 s, session 81), each
// pass of them another trip through memory.
//
// lk_ss_side: per row r of an operand (batch, R, K) read through element strides (a row of A, or a
// column of B with its strides swapped): its best s, a = max_k s (0 where every s is -inf), the exponents
// x_k = l_k + c (s_k - a) (-inf where s_k is not finite), their best xa (0 where all are -inf), and the
// scaled weights E_k = exp(x_k - xa), written through the strides of E. A thread a row, or a block a long
// row. A NaN anywhere is taken as the array maximum takes it.
// lk_ss_finish: per output, with s_C the max-plus product of the s and total the product of the E:
//   logw = xa_i + yb_j + log(total) + c (a_i + b_j - s_C), -inf where s_C is not finite;
// where total < TINY (the sum may have underflowed) log 1 is taken and the flag is raised, and the caller
// redoes those entries by a streaming log-sum-exp. The family compiles with --fmad=false: every operation
// rounds once, as the array operations it replaces did.
__device__ __forceinline__ double lk_ss_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

__device__ __forceinline__ double lk_ss_max(double m, double v) { return (v > m || v != v) ? v : m; }

__device__ __forceinline__ bool lk_ss_finite(double v) { return v - v == 0.0; }  // false for +-inf and NaN

// The largest of a team's m: TEAM 1 (a thread a row) is its own; else the whole block's, through ``red``.
template <int TEAM> __device__ __forceinline__ double lk_ss_team_max(double m, double *red) {
    if constexpr (TEAM == 1) {
        return m;
    } else {
        red[threadIdx.x] = m;
        __syncthreads();
        for (int d = TEAM / 2; d > 0; d >>= 1) {
            if ((int)threadIdx.x < d) red[threadIdx.x] = lk_ss_max(red[threadIdx.x], red[threadIdx.x + d]);
            __syncthreads();
        }
        const double out = red[0];
        __syncthreads();
        return out;
    }
}

// TEAM 1: a thread a row (short rows); TEAM = blockDim.x: a block a row (long ones), every row's loop
// uniform across the block (its barriers hold).
template <int TEAM>
__device__ __forceinline__ void lk_ss_side(const double *s, const double *l, double *E, double *top, double *xtop,
                                           long long rows, int R, int K, long long sb, long long sr, long long sk,
                                           long long eb, long long er, long long ek, double c) {
    __shared__ double red[TEAM == 1 ? 1 : TEAM];
    const double inf = lk_ss_inf();
    const int lane = TEAM == 1 ? 0 : (int)threadIdx.x;
    const long long first = TEAM == 1 ? blockIdx.x * (long long)blockDim.x + threadIdx.x : (long long)blockIdx.x;
    const long long teams = TEAM == 1 ? (long long)gridDim.x * blockDim.x : (long long)gridDim.x;
    for (long long w = first; w < rows; w += teams) {
        const long long b = w / R, r = w % R, at = b * sb + r * sr, out = b * eb + r * er;
        double a = -inf;
        for (int k = lane; k < K; k += TEAM) a = lk_ss_max(a, s[at + k * sk]);
        a = lk_ss_team_max<TEAM>(a, red);
        a = a == -inf ? 0.0 : a;
        double xa = -inf;
        for (int k = lane; k < K; k += TEAM) {
            const double v = s[at + k * sk];
            xa = lk_ss_max(xa, lk_ss_finite(v) ? l[at + k * sk] + c * (v - a) : -inf);
        }
        xa = lk_ss_team_max<TEAM>(xa, red);
        xa = xa == -inf ? 0.0 : xa;
        for (int k = lane; k < K; k += TEAM) {
            const double v = s[at + k * sk];
            const double x = lk_ss_finite(v) ? l[at + k * sk] + c * (v - a) : -inf;
            E[out + k * ek] = exp(x - xa);
        }
        if (lane == 0) {
            top[w] = a;
            xtop[w] = xa;
        }
    }
}

// s and total: (batch, M, N), C-contiguous; a, xa: (batch_a, M) and b, yb: (batch_b, N), a batch of one
// broadcast (stride 0).
__device__ __forceinline__ void lk_ss_finish(const double *s, const double *total, const double *a, const double *xa,
                                             const double *bt, const double *yb, double *logw, int *small,
                                             long long outputs, int M, int N, long long ab, long long bb, double c,
                                             double tiny) {
    const double inf = lk_ss_inf();
    for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < outputs;
         o += (long long)gridDim.x * blockDim.x) {
        const long long batch = o / ((long long)M * N);
        const int i = (int)((o / N) % M), j = (int)(o % N);
        const double v = s[o], t = total[o];
        const bool found = lk_ss_finite(v);
        const bool under = found && t < tiny;
        if (under) *small = 1;
        const long long ia = batch * ab + i, jb = batch * bb + j;
        const double shift = found ? c * ((a[ia] + bt[jb]) - v) : 0.0;
        const double w = ((xa[ia] + yb[jb]) + log(under ? 1.0 : t)) + shift;
        logw[o] = found ? w : -inf;
    }
}
