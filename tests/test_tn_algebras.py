"""lazykern.tn.algebras: the k-best, log-space and polynomial algebras step by step, against definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lazykern.tn._backend import Backend
from lazykern.tn.algebras import kbest, logsum, modular, polynomial

HOST = Backend("numpy", np)


def _kbest_parts(rng: np.random.Generator, shape: tuple[int, ...], k: int) -> tuple[np.ndarray, np.ndarray]:
    """(values (k,) + shape sorted, distinct, -inf padded; counts) of random k-best numbers."""
    values = np.full((k, *shape), -np.inf)
    counts = np.zeros((k, *shape), dtype=np.int64)
    for index in np.ndindex(*shape):
        pool = rng.choice(np.arange(-4, 5), size=rng.integers(0, k + 1), replace=False)
        pool = np.sort(pool)[::-1]
        values[(slice(0, len(pool)), *index)] = pool
        counts[(slice(0, len(pool)), *index)] = rng.integers(1, 5, len(pool))
    return values, counts


def _brute_product(av, ac, bv, bc, k):
    """The k best distinct sums over j of a[i, j] + b[j, n] with counts, by definition."""
    _, M, K = av.shape
    N = bv.shape[2]
    out_v = np.full((k, M, N), -np.inf)
    out_c = np.zeros((k, M, N), dtype=np.int64)
    for i in range(M):
        for n in range(N):
            tally: dict[float, int] = {}
            for j in range(K):
                for x in range(k):
                    for y in range(k):
                        a, b = av[x, i, j], bv[y, j, n]
                        if math.isfinite(a) and math.isfinite(b):
                            tally[a + b] = tally.get(a + b, 0) + int(ac[x, i, j]) * int(bc[y, j, n])
            best = sorted(tally, reverse=True)[:k]
            out_v[: len(best), i, n] = best
            out_c[: len(best), i, n] = [tally[v] for v in best]
    return out_v, out_c


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("modulus", [0, 7])
def test_kbest_product_with_counts_matches_its_definition(k, modulus, monkeypatch):
    monkeypatch.setattr(kbest, "CHUNK_ELEMENTS", 37)  # several chunks of rows and of the contracted axis
    rng = np.random.default_rng(k * 10 + modulus)
    av, ac = _kbest_parts(rng, (4, 5), k)
    bv, bc = _kbest_parts(rng, (5, 3), k)
    alg = kbest.algebra(k, counts=True, modulus=modulus)("maxplus", HOST)
    A = tuple(av[i][None] for i in range(k)) + tuple(ac[i][None] for i in range(k))
    B = tuple(bv[i][None] for i in range(k)) + tuple(bc[i][None] for i in range(k))
    out, index = alg.bmm(A, B, False)
    want_v, want_c = _brute_product(av, ac, bv, bc, k)
    assert index is None
    assert np.array_equal(np.stack([o[0] for o in out[:k]]), want_v)
    got_c = np.stack([o[0] for o in out[k:]])
    assert np.array_equal(got_c, want_c % modulus if modulus else want_c)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_paired_kbest_is_both_rings_at_once(k):
    rng = np.random.default_rng(50 + k)
    p = 7
    av, ac = _kbest_parts(rng, (4, 5), k)
    bv, bc = _kbest_parts(rng, (5, 3), k)
    alg = kbest.paired_algebra(k, p)("maxplus", HOST)
    assert alg.nparts == 3 * k and alg.paired
    A = (
        tuple(av[i][None] for i in range(k))
        + tuple(ac[i][None] for i in range(k))
        + tuple((ac[i] % p)[None] for i in range(k))
    )
    B = (
        tuple(bv[i][None] for i in range(k))
        + tuple(bc[i][None] for i in range(k))
        + tuple((bc[i] % p)[None] for i in range(k))
    )
    out, _ = alg.bmm(A, B, False)
    want_v, want_c = _brute_product(av, ac, bv, bc, k)
    assert np.array_equal(np.stack([o[0] for o in out[:k]]), want_v)
    assert np.array_equal(np.stack([o[0] for o in out[k : 2 * k]]), want_c)
    assert np.array_equal(np.stack([o[0] for o in out[2 * k :]]), want_c % p)
    merged = alg.add(out, out)
    assert np.array_equal(np.stack([o[0] for o in merged[k : 2 * k]]), 2 * want_c)
    assert np.array_equal(np.stack([o[0] for o in merged[2 * k :]]), (2 * want_c) % p)
    prepared = kbest.paired_algebra(k, p).prepare(HOST, (np.array([1.0, -np.inf]), np.array([9, 0])), 0)
    assert len(prepared) == 3 * k and prepared[2 * k].tolist() == [2, 0]  # 9 mod 7
    unit = alg.unit(prepared, (1, 2, 1))
    assert [u.ravel()[0] for u in unit[::k]] == [0.0, 1, 1]
    with pytest.raises(ValueError, match="prime below"):
        kbest.paired_algebra(2, 0)


def test_counting_max_takes_the_paired_pass_past_int64(monkeypatch):
    """CountingMax(2) of 70 variables (bound 2^70), once the float passes fall short (FLOAT_EXACT made 1
    here: every count reads as past it): the float64 pass's proven bound asks for the int64 ring alone;
    without it, one paired contraction (int64 and a prime), its counts the polynomial's top coefficients."""
    import networkx as nx

    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    made = []
    real = kbest.paired_algebra
    monkeypatch.setattr(
        kbest, "paired_algebra", lambda k, p, reduced=False: made.append((k, p, reduced)) or real(k, p, reduced)
    )
    g = nx.random_regular_graph(3, 70, seed=3)
    p = P.IndependentSet(g)
    first = solve(p, Q.CountingMax(2))  # a float pass answers: its counts are below 2^24
    assert made == []
    monkeypatch.setattr(kbest, "FLOAT_EXACT", {8: 1, 4: 1})
    # the float64 pass's rounding bounds every count (about 2^19 here): one int64 pass suffices
    assert solve(p, Q.CountingMax(2)) == first and made == []
    from lazykern.tn.algebras import floatsum

    monkeypatch.setattr(floatsum, "upper_bound", lambda *a: None)  # no proven bound: 2^70, the variables'
    got = solve(p, Q.CountingMax(2))
    assert got == first
    poly = solve(p, Q.GraphPolynomial())
    assert made == [(2, 2**31 - 1, True)]  # masks count 0 or 1: no `% p` per operand
    assert got == [(len(poly) - 1, poly[-1]), (len(poly) - 2, poly[-2])]
    monkeypatch.setattr(kbest, "PAIRED", False)  # the passes in turn: the same counts, no paired algebra
    assert solve(p, Q.CountingMax(2)) == got and made == [(2, 2**31 - 1, True)]


def test_kbest_sum_merges_two_slices():
    alg = kbest.algebra(2, counts=True)("maxplus", HOST)
    X = (np.array([5.0, 3.0]), np.array([1.0, -np.inf]), np.array([2, 7]), np.array([4, 0]))
    Y = (np.array([5.0, 4.0]), np.array([0.0, 3.0]), np.array([3, 1]), np.array([9, 2]))
    v0, v1, c0, c1 = alg.add(X, Y)
    assert v0.tolist() == [5.0, 4.0] and v1.tolist() == [1.0, 3.0]
    assert c0.tolist() == [5, 1] and c1.tolist() == [4, 9]  # 3.0 tied: 7 + 2


def test_kbest_without_counts_and_its_unit():
    alg = kbest.algebra(3)("maxplus", HOST)
    ones = alg.unit((np.zeros(1), np.zeros(1), np.zeros(1)), (1, 4, 1))
    assert [u.ravel()[0] for u in ones] == [0.0, -np.inf, -np.inf]
    a = (np.array([[[1.0, 2.0]]]), np.array([[[0.0, -np.inf]]]), np.full((1, 1, 2), -np.inf))
    b = (np.array([[[0.0], [0.0]]]), np.array([[[-1.0], [-5.0]]]), np.full((1, 2, 1), -np.inf))
    out, _ = alg.bmm(a, b, False)
    assert [o.item() for o in out] == [2.0, 1.0, 0.0]  # sums 1, 0, -1, 2, -3: three best distinct


def test_kbest_refuses_argmax_and_bad_parameters():
    with pytest.raises(ValueError, match="argmax"):
        kbest.algebra(2)("maxplus", HOST).bmm((np.zeros((1, 1, 1)),) * 2, (np.zeros((1, 1, 1)),) * 2, True)
    with pytest.raises(ValueError, match="k >= 1"):
        kbest.algebra(0)


def _logsum_brute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    s = a[:, :, :, None] + b[:, None, :, :]
    top = s.max(axis=2)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(top), safe + np.log(np.exp(s - safe[:, :, None, :]).sum(axis=2)), -np.inf)


def test_logsum_product_is_exact_where_scaling_underflows():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 3, 4)) * 3
    b = rng.normal(size=(2, 4, 5)) * 3
    a[0, 0, :] = -np.inf  # a zero-weight row
    alg = logsum.LogSumAlgebra("maxplus", HOST)
    (out,), _ = alg.bmm((a,), (b,), False)
    assert np.allclose(out, _logsum_brute(a, b), rtol=1e-13, equal_nan=False)
    # maxima of A's rows and B's columns on different k, 2000 apart: the scaled product underflows
    a = np.array([[[0.0, -2000.0]]])
    b = np.array([[[-2000.0], [0.0]]])
    (out,), _ = alg.bmm((a,), (b,), False)
    assert out.item() == pytest.approx(-2000.0 + math.log(2.0), rel=1e-15)
    X, Y = (np.array([0.0, -np.inf]),), (np.array([0.0, -np.inf]),)
    assert alg.add(X, Y)[0][0] == pytest.approx(math.log(2.0)) and alg.add(X, Y)[0][1] == -np.inf


@pytest.mark.parametrize("p", [7919, 2147483647])
def test_interpolation_modulo_a_prime(p):
    rng = np.random.default_rng(p % 1000)
    coefficients = [int(c) for c in rng.integers(0, 1000, 9)]
    values = [sum(c * x**i for i, c in enumerate(coefficients)) % p for x in range(1, 10)]
    assert polynomial.interpolate(values, p).tolist() == [c % p for c in coefficients]


def test_powers_are_zero_where_forbidden():
    exponents = np.array([[0, 1], [1, 2]])
    mask = np.array([[True, True], [True, False]])
    got = polynomial.powers_modulo(exponents, mask, np.array([1, 2, 3]), (5,))[0]
    assert got.dtype == np.float64
    assert got[:, 1, 1].tolist() == [0, 0, 0]
    assert got[:, 0, 1].tolist() == [1, 2, 3] and got[2, 0, 0] == 1


def test_reconstruction_stops_at_the_bound():
    want = [3, 2**40 + 1, 5]

    def run(moduli):
        return np.array([[sum(c * x**i for i, c in enumerate(want)) % p for x in (1, 2, 3)] for p in moduli])

    assert polynomial.reconstruct(run, 3, 0, 2**45, 1) == want
    assert polynomial.reconstruct(run, 3, 0, 2**45, 4) == want


def test_modular_product_is_exact_in_float64(monkeypatch):
    monkeypatch.setattr(modular, "K_CHUNK", 3)  # several chunks, each reduced before the next is added
    rng = np.random.default_rng(5)
    primes = (2097143, 1048573)  # below 2^21
    alg = modular.algebra(*primes)("maxplus", HOST)
    a = rng.integers(0, primes[1], (2, 3, 8))
    b = rng.integers(0, primes[1], (1, 8, 4))
    out, _ = alg.bmm((a.astype(float), a.astype(float)), (b.astype(float), b.astype(float)), False)
    exact = np.matmul(a.astype(object), b.astype(object))
    for got, p in zip(out, primes):
        assert got.dtype == np.float64 and np.array_equal(got.astype(np.int64), (exact % p).astype(np.int64))
    summed = alg.add((np.array([p - 1.0 for p in primes[:1]]), np.array([3.0])), (np.array([5.0]), np.array([4.0])))
    assert [x.tolist() for x in summed] == [[4.0], [7.0]]
    with pytest.raises(ValueError, match="below 2"):
        modular.algebra(2**31 - 1)


def test_kbest_kernels_are_lazy_and_compile_for_sm90(cache):
    from lazykern.tn.algebras import _kbest_kernels

    fam = _kbest_kernels.make_family(cache)
    # 2 value types x (k = 1..4 x 5 count kinds + paired k = 1, 2), each untiled and in 2 tiles ("s", "n")
    assert len(fam.names()) == 132 and fam.compiled() == []
    names = ["kbest2_f32_i64", "kbest3_f64_m", "kbest4_f32_v", "kbest2_f32_p", "kbest2_f32_f8_ts", "kbest2_f64_f4_ts"]
    names += ["kbest1_f32_f4", "kbest1_f32_f4_tn", "kbest1_f64_p_ts", "kbest1_f32_m"]
    assert [k.name for k in fam.warm(names, arch="sm_90")] == names
    assert sorted(fam.compiled()) == sorted(names)
    assert _kbest_kernels.kernel_name(2, np.dtype("float64"), True, 7) == "kbest2_f64_m"
    assert _kbest_kernels.kernel_name(2, np.dtype("float32"), True, 7, paired=True) == "kbest2_f32_p"
    assert _kbest_kernels.kernel_name(3, np.dtype("float64"), True, 0, floats=8) == "kbest3_f64_f8"


def test_kbest_operands_share_their_padding():
    """Every operand of one shape and dtype gets the same -inf / 0 padding array (filled once), with the
    right entries; other shapes, dtypes and values get their own."""
    alg = kbest.algebra(3, True)
    v = np.zeros((2, 2), np.float32)
    c = np.ones((2, 2), np.int64)
    first, second = alg.prepare(HOST, (v, c), 0), alg.prepare(HOST, (v + 1, c), 1)
    assert first[1] is first[2] is second[1] and np.all(first[1] == -np.inf) and first[1].dtype == np.float32
    assert first[4] is second[5] and np.all(first[4] == 0) and first[4].dtype == np.int64
    other = alg.prepare(HOST, (np.zeros((2,), np.float32), np.ones((2,), np.int64)), 2)
    assert other[1] is not first[1] and other[1].shape == (2,)


class _Counts(np.ndarray):
    """An int64 array that records each ``%`` taken of it (a launch on a device)."""

    taken: list[int] = []

    def __mod__(self, other):
        _Counts.taken.append(int(other))
        return np.asarray(self) % other


@pytest.mark.parametrize("paired", [False, True])
def test_reduced_counts_take_no_modulo_in_prepare(paired, monkeypatch):
    """``reduced``: the operands' counts are 0/1 masks, their own residues, so ``prepare`` launches no
    ``% p``; without it each operand's counts are reduced (9 mod 7 = 2). Either way the parts hold the
    same numbers, and the paired residues' padding is the counts' own zeros."""
    monkeypatch.setattr(_Counts, "taken", [])
    p, k = 7, 2
    v = np.array([1.0, -np.inf])
    make = (lambda r: kbest.paired_algebra(k, p, r)) if paired else (lambda r: kbest.algebra(k, True, p, r))
    mask = np.array([1, 0], np.int64).view(_Counts)
    fast = make(True).prepare(HOST, (v, mask), 0)
    assert _Counts.taken == [] and fast[-k] is mask
    slow = make(False).prepare(HOST, (v, mask), 0)
    assert _Counts.taken == [p] and [np.asarray(x).tolist() for x in fast] == [np.asarray(x).tolist() for x in slow]
    nine = make(False).prepare(HOST, (v, np.array([9, 0], np.int64)), 1)
    assert nine[-k].tolist() == [2, 0]
    if paired:
        assert nine[-1] is nine[k + 1]  # zero padding shared by the counts and the residues
    assert make(True) is not make(False) and make(True).reduced and not make(False).reduced


@pytest.mark.parametrize("paired", [False, True])
@pytest.mark.parametrize("group", [2, 64])
@pytest.mark.parametrize(("M", "K", "N", "chunk"), [(1, 96, 1, 8), (2, 60, 3, 7), (1, 64, 2, 16)])
def test_a_long_sum_into_few_outputs_is_cut_and_merged_exactly(paired, group, M, K, N, chunk, monkeypatch):
    """A step with few threads and a long sum (a network's last steps) is computed in chunks of the sum
    (12, 6 or 4 chunks) and merged by products with a unit column, in groups of 2 (levels, a chunk
    count with no small divisor merged at once) or all at once: the same k best values and counts,
    int64 and modulo a prime, as the one product (the host's here; the GPU takes this path for its
    kernels)."""
    monkeypatch.setattr(kbest, "SPLIT_MIN_K", 16)
    monkeypatch.setattr(kbest, "SPLIT_CHUNK", chunk)
    monkeypatch.setattr(kbest, "MERGE_GROUP", group)
    merges = []
    real = kbest.KBestAlgebra._unit_column
    monkeypatch.setattr(
        kbest.KBestAlgebra, "_unit_column", lambda self, like, n: merges.append(n) or real(self, like, n)
    )
    k, p = 2, 7
    rng = np.random.default_rng(M * 100 + K + N)
    av, ac = _kbest_parts(rng, (M, K), k)
    bv, bc = _kbest_parts(rng, (K, N), k)
    if paired:
        alg = kbest.paired_algebra(k, p)("maxplus", HOST)
        A = tuple(x[None] for x in (*av, *ac, *(ac % p)))
        B = tuple(x[None] for x in (*bv, *bc, *(bc % p)))
    else:
        alg = kbest.algebra(k, counts=True, modulus=p)("maxplus", HOST)
        A = tuple(x[None] for x in (*av, *(ac % p)))
        B = tuple(x[None] for x in (*bv, *(bc % p)))
    whole, _ = alg.bmm(A, B, False)
    cut = alg._split_sum(A, B)
    assert cut is not None and len(cut) == len(whole)
    for got, want in zip(cut, whole):
        assert got.shape == want.shape == (1, M, N)
        assert np.array_equal(got, want)
    want_v, want_c = _brute_product(av, ac, bv, bc, k)
    assert np.array_equal(np.stack([o[0] for o in cut[:k]]), want_v)
    assert np.array_equal(np.stack([o[0] for o in cut[-k:]]), want_c % p)
    chunks = K // next(d for d in range(chunk, K + 1) if K % d == 0)
    assert np.prod(merges) == chunks and (group == 64 or len(merges) > 1)
    many = tuple(np.zeros((1, 600, 16)) for _ in A)  # its tiled kernel runs 92416 threads: the one product
    assert alg._split_sum(many, tuple(np.zeros((1, 16, 600)) for _ in B)) is None
    short = tuple(np.zeros((1, 1, 15)) for _ in A)  # a sum below SPLIT_MIN_K: the one product
    assert alg._split_sum(short, tuple(np.zeros((1, 15, 1)) for _ in B)) is None


@pytest.mark.gpu
@pytest.mark.parametrize("paired", [False, True, "floats"])
@pytest.mark.parametrize(("M", "K", "N"), [(1, 1 << 17, 2), (64, 3 << 11, 48), (1, 1 << 12, 1)])
def test_a_long_sum_on_the_gpu_is_cut_and_equals_the_host(paired, M, K, N):
    """Long sums into few outputs (2^17 terms into 2, one thread summed them all; a tiled step of 4
    blocks; 2^12 terms into one) through the GPU kernels' split path, against the host's one product:
    int64, paired and float32 counts."""
    cupy = pytest.importorskip("cupy")
    k, p = 2, 2147483647
    rng = np.random.default_rng(3)
    assert kbest._threads(1, M, N, K) < kbest.SPLIT_THREADS and K >= kbest.SPLIT_MIN_K

    def distinct(shape):  # k best values per entry: distinct, best first (ties between entries abound)
        top = rng.integers(-3, 4, shape).astype(np.float32)
        return np.stack([top, top - rng.integers(1, 3, shape)])

    av, bv = distinct((M, K)), distinct((K, N))
    ac, bc = rng.integers(1, 1 << 20, (k, M, K)), rng.integers(1, 1 << 20, (k, K, N))
    if paired == "floats":  # counts of 0 / 1 keep every float32 sum exact (below 2^24)
        make = kbest.algebra(k, counts=True, floats=4)
        ac, bc = (ac % 2).astype(np.float32), (bc % 2).astype(np.float32)
        A = tuple(x[None] for x in (*av, *ac))
        B = tuple(x[None] for x in (*bv, *bc))
    elif paired:
        make = kbest.paired_algebra(k, p)
        A = tuple(x[None] for x in (*av, *ac, *(ac % p)))
        B = tuple(x[None] for x in (*bv, *bc, *(bc % p)))
    else:
        make = kbest.algebra(k, counts=True, modulus=p)
        A = tuple(x[None] for x in (*av, *(ac % p)))
        B = tuple(x[None] for x in (*bv, *(bc % p)))
    want, _ = make("maxplus", HOST).bmm(A, B, False)
    gpu = make("maxplus", Backend("cupy", cupy))
    got, _ = gpu.bmm(tuple(cupy.asarray(x) for x in A), tuple(cupy.asarray(x) for x in B), False)
    for g, w in zip(got, want):
        assert np.array_equal(cupy.asnumpy(g), w)


def test_float_sum_bound_covers_the_exact_value():
    """The float64 sum-product's bound is at least the exact integer, however the float rounded (here a
    sum past 2^53, where float64 drops units), and is refused for an overflow or too many roundings."""
    from fractions import Fraction

    from lazykern.tn.algebras import floatsum

    exact = 3**40 + 12345  # past 2^53: the nearest float64 may lie below it
    computed = float(exact)
    assert int(computed) < exact  # float64 rounded it down: the bound must add the margin back
    bound = floatsum.upper_bound(computed, 10**6, 10**3, 4)
    assert exact <= bound <= exact * (1 + Fraction(1, 2**20))
    assert floatsum.upper_bound(float("inf"), 1, 1, 1) is None
    assert floatsum.upper_bound(float("nan"), 1, 1, 1) is None
    assert floatsum.upper_bound(1.0, 2**50, 1, 1) is None
    alg = floatsum.FloatSumAlgebra("maxplus", HOST)
    a, b = np.arange(6.0).reshape(1, 2, 3), np.arange(12.0).reshape(1, 3, 4)
    (out,), _ = alg.bmm((a,), (b,), False)
    assert np.array_equal(out, a @ b) and alg.add((out,), (out,))[0].tolist() == (2 * out).tolist()


def test_modular_primes_of_one_allocation_run_as_one_product(monkeypatch):
    """Parts equally spaced in one allocation (tables put in one transfer) are multiplied as one product
    over a leading prime axis, chunked, and reduced by a column of primes: the same exact residues as
    prime by prime. A part repeated (a reduction's unit) broadcasts; parts apart run prime by prime."""
    monkeypatch.setattr(modular, "K_CHUNK", 3)
    rng = np.random.default_rng(7)
    primes = (2097143, 2097133, 1048573)
    alg = modular.algebra(*primes)("maxplus", HOST)
    exact_a = rng.integers(0, 2**40, (2, 3, 8)).astype(object)
    exact_b = rng.integers(0, 2**40, (2, 8, 4)).astype(object)
    block_a = np.stack([(exact_a % p).astype(np.float64) for p in primes])
    block_b = np.stack([(exact_b % p).astype(np.float64) for p in primes])
    A, B = tuple(block_a), tuple(block_b)
    assert modular.stacked(HOST, A) is not None and modular.stacked(HOST, B).shape == (3, 2, 8, 4)
    products = []
    monkeypatch.setattr(alg, "_product", lambda a, b, p, real=alg._product: products.append(a.ndim) or real(a, b, p))
    out, _ = alg.bmm(A, B, False)
    assert products == [4]  # one product for the three primes
    exact = np.matmul(exact_a, exact_b)
    for got, p in zip(out, primes):
        assert np.array_equal(got.astype(np.int64), (exact % p).astype(np.int64))
    unit = alg.unit(A, (1, 8, 1))
    assert modular.stacked(HOST, unit).shape == (1, 1, 8, 1)
    reduced, _ = alg.bmm(A, unit, False)
    for got, p in zip(reduced, primes):
        assert np.array_equal(got[..., 0].astype(np.int64), (exact_a.sum(axis=2) % p).astype(np.int64))
    device_route = modular.algebra(*primes)("maxplus", Backend("cupy", np))  # the GPU route on NumPy arrays
    assert all(np.array_equal(x, y) for x, y in zip(device_route.bmm(A, B, False)[0], out))
    apart = (A[0], np.asfortranarray(A[1]), A[2])  # laid out differently: prime by prime
    assert modular.stacked(HOST, apart) is None
    products.clear()
    out2, _ = alg.bmm(apart, B, False)
    assert products == [3, 3, 3] and all(np.array_equal(x, y) for x, y in zip(out, out2))


def test_modular_outer_products_by_broadcast_equal_the_gemm(monkeypatch):
    """A product over K = 1 (an outer product) is a broadcast multiply and one reduction, never a GEMM:
    the same exact residues as the GEMM route, prime by prime and stacked, batches broadcast."""
    rng = np.random.default_rng(11)
    primes = (2097143, 2097133, 1048573)
    alg = modular.algebra(*primes)("maxplus", HOST)
    exact_a = rng.integers(0, 2**40, (3, 5, 1)).astype(object)
    exact_b = rng.integers(0, 2**40, (1, 1, 7)).astype(object)  # a batch of one against three
    A = tuple(np.stack([(exact_a % p).astype(np.float64) for p in primes]))
    B = tuple(np.stack([(exact_b % p).astype(np.float64) for p in primes]))
    exact = np.matmul(exact_a, exact_b)
    calls = []
    monkeypatch.setattr(np, "matmul", lambda *a, real=np.matmul, **k: calls.append(1) or real(*a, **k))
    for parts in ((A, B), ((A[0], np.asfortranarray(A[1]), A[2]), B)):  # stacked, then prime by prime
        out, _ = alg.bmm(*parts, False)
        for got, p in zip(out, primes):
            assert got.shape == (3, 5, 7) and np.array_equal(got.astype(np.int64), (exact % p).astype(np.int64))
    assert calls == []
    monkeypatch.setattr(modular, "OUTER_BY_BROADCAST", False)
    gemm, _ = alg.bmm(A, B, False)
    assert calls and all(np.array_equal(x, y) for x, y in zip(gemm, out))


def test_all_powers_of_a_network_equal_each_tables_own():
    """One pass over every table's distinct exponents (int64 and Python-int tables mixed, shapes apart)
    gives each table what it alone gives."""
    rng = np.random.default_rng(12)
    big = np.array([[2**70, 3], [0, 2**64 + 1]], dtype=object)  # past int64: Python ints
    exponents = [rng.integers(0, 6, (2, 2)), big, rng.integers(0, 9, (2,))]
    masks = [rng.random(e.shape) < 0.7 for e in exponents]
    points, primes = np.arange(1, 12, dtype=np.int64), (2097143, 1048573, 5)
    together = polynomial.all_powers_modulo(exponents, masks, points, primes)
    assert [t.shape for t in together] == [(3, 11, 2, 2), (3, 11, 2, 2), (3, 11, 2)]
    for t, e, m in zip(together, exponents, masks):
        assert np.array_equal(t, polynomial.powers_modulo(e, m, points, primes))
        for got, p in zip(t, primes):
            for i, x in enumerate(points.tolist()):
                assert got[i].ravel().tolist() == [pow(x, int(v), p) * bool(k) for v, k in zip(e.ravel(), m.ravel())]
    assert polynomial.all_powers_modulo([], [], points, primes) == []


def test_size_and_count_algebra_carries_both_parts():
    """Max-plus on the first part, the real product on the second, in one product; the slice sum takes
    the max and the sum; the unit is (0, 1)."""
    from lazykern.tn.algebras import floatsum

    alg = floatsum.SizeAndCountAlgebra("maxplus", HOST)
    v = np.array([[[0.0, 1.0], [2.0, -np.inf]]], dtype=np.float32)
    c = np.array([[[1.0, 1.0], [1.0, 0.0]]])
    (top, count), _ = alg.bmm((v, c), (v, c), False)
    assert top.tolist() == [[[3.0, 1.0], [2.0, 3.0]]] and count.tolist() == [[[2.0, 1.0], [1.0, 1.0]]]
    one = alg.unit((v, c), (1, 2, 1))
    assert one[0].tolist() == [[[0.0], [0.0]]] and one[1].tolist() == [[[1.0], [1.0]]]
    assert [x.tolist() for x in alg.add((top, count), (top + 1, count))] == [(top + 1).tolist(), (2 * count).tolist()]


def test_powers_for_several_primes_are_each_primes_own():
    rng = np.random.default_rng(8)
    exponents = rng.integers(0, 5, (2, 3, 2))
    mask = rng.random((2, 3, 2)) < 0.7
    points = np.arange(1, 40, dtype=np.int64)
    primes = (2097143, 2097133, 7)
    together = polynomial.powers_modulo(exponents, mask, points, primes)
    assert together.shape == (3, 39, 2, 3, 2) and together.dtype == np.float64
    for got, p in zip(together, primes):
        for i, x in enumerate(points.tolist()):
            want = [pow(x, int(e), p) * bool(m) for e, m in zip(exponents.ravel(), mask.ravel())]
            assert got[i].ravel().tolist() == want


@pytest.mark.gpu
def test_modular_primes_as_one_product_on_the_gpu_equal_the_host():
    """CuPy parts of one allocation (a prime axis view over device memory), and a reduction's unit,
    against the host's prime-by-prime residues."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(17)
    primes = (2097143, 2097133, 2097131, 2097097)
    exact_a = rng.integers(0, 2**40, (3, 5, 3000)).astype(object)  # K past one chunk
    exact_b = rng.integers(0, 2**40, (3, 3000, 7)).astype(object)
    block_a = cupy.asarray(np.stack([(exact_a % p).astype(np.float64) for p in primes]))
    block_b = cupy.asarray(np.stack([(exact_b % p).astype(np.float64) for p in primes]))
    be = Backend("cupy", cupy)
    alg = modular.algebra(*primes)("maxplus", be)
    A, B = tuple(block_a), tuple(block_b)
    assert modular.stacked(be, A).shape == (4, 3, 5, 3000)
    out, _ = alg.bmm(A, B, False)
    exact = np.matmul(exact_a, exact_b)
    for got, p in zip(out, primes):
        assert np.array_equal(cupy.asnumpy(got).astype(np.int64), (exact % p).astype(np.int64))
    reduced, _ = alg.bmm(A, alg.unit(A, (1, 3000, 1)), False)
    for got, p in zip(reduced, primes):
        assert np.array_equal(cupy.asnumpy(got)[..., 0].astype(np.int64), (exact_a.sum(axis=2) % p).astype(np.int64))


def test_modular_chunks_of_a_small_result_run_as_one_product(monkeypatch):
    """A long sum into a small result (a network's last steps: 2^26 entries into one) multiplies its
    K_CHUNK chunks as one product over an axis of them, not one product each; every residue stays exact:
    each chunk's sums below 2^52, then up to GROUPED_ENTRIES / result chunks' residues summed."""
    rng = np.random.default_rng(23)
    primes = (2097143, 2097133, 1048573)
    alg = modular.algebra(*primes)("maxplus", HOST)
    K = 5 * modular.K_CHUNK + 77  # five whole chunks and a tail
    exact_a = rng.integers(0, 2**40, (2, 1, K)).astype(object)
    exact_b = rng.integers(0, 2**40, (2, K, 3)).astype(object)
    exact = np.matmul(exact_a, exact_b)
    A = tuple(np.stack([(exact_a % p).astype(np.float64) for p in primes]))
    B = tuple(np.stack([(exact_b % p).astype(np.float64) for p in primes]))
    calls: list[tuple[int, ...]] = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda a, b, **kw: calls.append(a.shape) or real(a, b, **kw))
    out, _ = alg.bmm(A, B, False)
    for got, p in zip(out, primes):
        assert np.array_equal(got.astype(np.int64), (exact % p).astype(np.int64))
    assert calls == [(3, 2, 5, 1, modular.K_CHUNK), (3, 2, 1, 77)]  # the five chunks as one, then the tail
    assert modular.grouped((3, 2, 1, K), (3, 2, K, 3), K) == 6
    monkeypatch.setattr(modular, "GROUPED_ENTRIES", 2 * 3 * 2)  # one prime: room for two chunks' results
    calls.clear()
    (single,), _ = modular.algebra(primes[0])("maxplus", HOST).bmm((A[0],), (B[0],), False)
    assert np.array_equal(single.astype(np.int64), (exact % primes[0]).astype(np.int64))
    assert calls == [(2, 2, 1, modular.K_CHUNK)] * 2 + [(2, 1, modular.K_CHUNK), (2, 1, 77)]


def test_modular_product_is_exact_at_the_largest_residues(monkeypatch):
    """Every residue p - 1 and whole chunks: each chunk's sums reach (p - 1)^2 K_CHUNK, just below 2^52,
    and are added to the residues so far unreduced (below 2^53: exact), chunk by chunk or grouped."""
    p = max(q for q in (2097143, 2097133))
    K = 3 * modular.K_CHUNK
    a = np.full((1, 2, K), p - 1.0)
    b = np.full((1, K, 2), p - 1.0)
    want = (p - 1) ** 2 * K % p
    alg = modular.algebra(p)("maxplus", HOST)
    for room in (1, modular.GROUPED_ENTRIES):  # one chunk at a time, then grouped
        monkeypatch.setattr(modular, "GROUPED_ENTRIES", room)
        (out,), _ = alg.bmm((a,), (b,), False)
        assert out.astype(np.int64).ravel().tolist() == [want] * 4
