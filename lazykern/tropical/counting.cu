// lazykern counting tropical product: (max, count) numbers, structure of arrays.
// C = (+)_k A (x) B with (a, m) (x) (b, n) = (a + b, m * n) and the sum keeping the best
// value: a strict improvement resets the count, a tie adds to it, a NaN never counts.
// A (batch or 1, M, K), B (batch or 1, K, N), C (batch, M, N), all C-contiguous;
// a batch stride of 0 broadcasts the operand. One thread per output entry.
template <typename V, typename C, bool MAX>
__device__ __forceinline__ void lk_count_bmm(const V *__restrict__ av, const C *__restrict__ ac,
                                             const V *__restrict__ bv, const C *__restrict__ bc,
                                             V *__restrict__ cv, C *__restrict__ cc, long long total, int M,
                                             int N, int K, long long sa, long long sb) {
    const V inf = (V)__longlong_as_double(0x7ff0000000000000LL);
    const V zero = MAX ? -inf : inf;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        long long b = t / ((long long)M * N);
        int i = (int)((t / N) % M), j = (int)(t % N);
        const V *pa = av + b * sa + (long long)i * K;
        const C *qa = ac + b * sa + (long long)i * K;
        const V *pb = bv + b * sb + j;
        const C *qb = bc + b * sb + j;
        V acc = zero;
        C cnt = 0;
        for (int k = 0; k < K; ++k) {
            V p = pa[k] + pb[(long long)k * N];
            C q = qa[k] * qb[(long long)k * N];
            if (MAX ? p > acc : p < acc) {
                acc = p;
                cnt = q;
            } else if (p == acc) {
                cnt += q;
            }
        }
        cv[t] = acc;
        cc[t] = cnt;
    }
}
