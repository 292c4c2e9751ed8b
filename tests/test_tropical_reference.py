"""The NumPy reference against an independent scalar brute force, and algebraic properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazykern.tropical import reference

SEMIRINGS = reference.SEMIRINGS
DTYPES = ["float32", "float64", "int32", "int64"]


def brute_product(semiring: str, a, b, dtype: np.dtype):
    """One scalar product, straight from the documented rules (Python ints / floats)."""
    if dtype.kind == "f":
        a, b = dtype.type(a), dtype.type(b)
        if semiring != "maxmul":
            with np.errstate(invalid="ignore", over="ignore"):
                return a + b
        if -np.inf in (a, b):  # max-times: the zero absorbs
            return dtype.type(-np.inf)
        if math.isnan(a) or math.isnan(b):
            return dtype.type(np.nan)
        if 0 in (a, b):  # 0 * inf = 0
            return dtype.type(0)
        with np.errstate(over="ignore"):
            return a * b
    lo, hi = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
    a, b = int(a), int(b)
    if semiring == "maxplus":
        if lo in (a, b):
            return lo
        if hi in (a, b):
            return hi
        return min(max(a + b, lo), hi)
    if semiring == "minplus":
        if hi in (a, b):
            return hi
        if lo in (a, b):
            return lo
        return min(max(a + b, lo), hi)
    if lo in (a, b):
        return lo
    if hi in (a, b):
        other = b if a == hi else a
        return hi if other > 0 else lo
    return min(max(a * b, lo), hi)


def brute_matmul(A, B, semiring):
    dtype = A.dtype
    M, K = A.shape
    N = B.shape[1]
    C = np.empty((M, N), dtype)
    Ix = np.empty((M, N), np.int32)
    for i in range(M):
        for j in range(N):
            prods = [brute_product(semiring, A[i, k], B[k, j], dtype) for k in range(K)]
            valid = [p for p in prods if not (dtype.kind == "f" and math.isnan(p))]
            z = reference.zero(semiring, dtype)
            best = (min if semiring == "minplus" else max)(valid, default=z)
            best = (min if semiring == "minplus" else max)(best, z)
            C[i, j] = best
            if K == 0:
                Ix[i, j] = -1
            elif best == z:
                Ix[i, j] = 0
            else:
                Ix[i, j] = next(k for k, p in enumerate(prods) if p == best)
    return C, Ix


def adversarial(rng, shape, dtype: np.dtype):
    if dtype.kind == "f":
        X = rng.integers(-3, 4, size=shape).astype(dtype)
        specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], dtype)
    else:
        info = np.iinfo(dtype)
        X = rng.integers(-3, 4, size=shape).astype(dtype)
        specials = np.array([info.min, info.max, info.max - 1, info.min + 1, info.max // 2, info.min // 2], dtype)
    mask = rng.random(shape) < 0.3
    X[mask] = rng.choice(specials, size=int(mask.sum()))
    return X


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 7, 6), (1, 1, 1), (3, 0, 2), (4, 9, 1)])
def test_reference_matches_brute_force(semiring, dtype, shape):
    rng = np.random.default_rng(hash((semiring, dtype, shape)) % 2**32)
    M, K, N = shape
    A = adversarial(rng, (M, K), np.dtype(dtype))
    B = adversarial(rng, (K, N), np.dtype(dtype))
    C, Ix = reference.matmul(A, B, semiring, argmax=True)
    C0, I0 = brute_matmul(A, B, semiring)
    np.testing.assert_array_equal(C, C0)
    np.testing.assert_array_equal(Ix, I0)
    np.testing.assert_array_equal(reference.matmul(A, B, semiring), C0)
    assert C.dtype == np.dtype(dtype) and Ix.dtype == np.int32


I32 = np.iinfo(np.int32)


@pytest.mark.parametrize(
    "semiring, a, b, want",
    [
        ("maxplus", I32.max - 1, 5, I32.max),  # saturates
        ("maxplus", I32.min + 1, -5, I32.min),
        ("maxplus", I32.min, I32.max, I32.min),  # the zero absorbs first
        ("minplus", I32.min, I32.max, I32.max),
        ("minplus", I32.min, 3, I32.min),
        ("maxmul", I32.max, -1, I32.min),
        ("maxmul", I32.max, 0, I32.min),
        ("maxmul", I32.max, 2, I32.max),
        ("maxmul", I32.min, I32.min, I32.min),
        ("maxmul", 1 << 20, 1 << 20, I32.max),
        ("maxmul", -(1 << 20), 1 << 20, I32.min),
        ("maxmul", -3, -4, 12),
    ],
)
def test_integer_rules(semiring, a, b, want):
    C = reference.matmul(np.array([[a]], np.int32), np.array([[b]], np.int32), semiring)
    assert C[0, 0] == want


def test_int64_saturation():
    big = np.iinfo(np.int64).max - 2
    C = reference.matmul(np.array([[big]], np.int64), np.array([[big]], np.int64), "maxmul")
    assert C[0, 0] == np.iinfo(np.int64).max
    C = reference.matmul(np.array([[big]], np.int64), np.array([[7]], np.int64), "maxplus")
    assert C[0, 0] == np.iinfo(np.int64).max


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_nan_is_ignored_and_all_nan_gives_zero(semiring):
    A = np.array([[np.nan, 1.0], [np.nan, np.nan]], np.float32)
    B = np.array([[5.0], [2.0]], np.float32)
    C, Ix = reference.matmul(A, B, semiring, argmax=True)
    assert C[0, 0] == reference.matmul(A[:1, 1:], B[1:], semiring)[0, 0]
    assert Ix[0, 0] == 1
    assert C[1, 0] == reference.zero(semiring, np.float32) and Ix[1, 0] == 0


def test_inf_minus_inf_is_nan_and_ignored():
    A = np.array([[np.inf, 1.0]])
    B = np.array([[-np.inf], [2.0]])
    C, Ix = reference.matmul(A, B, "maxplus", argmax=True)
    assert C[0, 0] == 3.0 and Ix[0, 0] == 1


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_ties_go_to_smallest_k(semiring):
    A = np.ones((3, 6), np.float64)
    B = np.ones((6, 4), np.float64)
    _, Ix = reference.matmul(A, B, semiring, argmax=True)
    assert (Ix == 0).all()
    B[2:, :] = 2.0 if semiring != "minplus" else 0.0
    _, Ix = reference.matmul(A, B, semiring, argmax=True)
    assert (Ix == 2).all()


def test_k_zero():
    for dtype in DTYPES:
        C, Ix = reference.matmul(np.zeros((3, 0), dtype), np.zeros((0, 2), dtype), "minplus", argmax=True)
        assert (C == reference.zero("minplus", np.dtype(dtype))).all() and (Ix == -1).all()


small_ints = st.integers(-50, 50)
with_infs = st.one_of(small_ints, st.sampled_from([I32.min, I32.max]))


def _matrix(draw, elements, rows, cols):
    return np.array(draw(st.lists(elements, min_size=rows * cols, max_size=rows * cols)), np.int32).reshape(rows, cols)


@st.composite
def chain(draw, elements):
    m, k, j, n = (draw(st.integers(1, 4)) for _ in range(4))
    return _matrix(draw, elements, m, k), _matrix(draw, elements, k, j), _matrix(draw, elements, j, n)


@settings(max_examples=60, deadline=None)
@given(chain(with_infs), st.sampled_from(["maxplus", "minplus"]))
def test_associativity_with_infinities(mats, semiring):
    A, B, C = mats
    left = reference.matmul(reference.matmul(A, B, semiring), C, semiring)
    right = reference.matmul(A, reference.matmul(B, C, semiring), semiring)
    np.testing.assert_array_equal(left, right)


@settings(max_examples=40, deadline=None)
@given(chain(st.integers(0, 9)))
def test_associativity_maxmul_nonnegative(mats):
    A, B, C = mats
    left = reference.matmul(reference.matmul(A, B, "maxmul"), C, "maxmul")
    right = reference.matmul(A, reference.matmul(B, C, "maxmul"), "maxmul")
    np.testing.assert_array_equal(left, right)


def identity(semiring: str, n: int, dtype) -> np.ndarray:
    one = 1 if semiring == "maxmul" else 0
    E = np.full((n, n), reference.zero(semiring, np.dtype(dtype)), dtype)
    np.fill_diagonal(E, one)
    return E


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(SEMIRINGS),
    st.sampled_from(["float64", "int64"]),
    st.integers(1, 5),
    st.integers(1, 5),
    st.data(),
)
def test_identity(semiring, dtype, m, n, data):
    dtype = np.dtype(dtype)
    lo = 1 if semiring == "maxmul" else -100  # max-times is a semiring on the non-negatives
    vals = st.integers(lo, 100)
    if semiring != "maxmul":
        z = reference.zero(semiring, dtype)
        vals = st.one_of(vals, st.just(z))
    A = np.array(data.draw(st.lists(vals, min_size=m * n, max_size=m * n)), dtype).reshape(m, n)
    np.testing.assert_array_equal(reference.matmul(A, identity(semiring, n, dtype), semiring), A)
    np.testing.assert_array_equal(reference.matmul(identity(semiring, m, dtype), A, semiring), A)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(0, 5), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_backward_matches_brute_force(m, k, n, seed):
    rng = np.random.default_rng(seed)
    A = rng.integers(-2, 3, (m, k)).astype(np.float64)
    B = rng.integers(-2, 3, (k, n)).astype(np.float64)
    _, Ix = reference.matmul(A, B, "maxplus", argmax=True)
    G = rng.standard_normal((m, n))
    gA, gB = reference.matmul_backward(G, Ix, A.shape, B.shape)
    wantA, wantB = np.zeros_like(A), np.zeros_like(B)
    for i in range(m):
        for j in range(n):
            if 0 <= Ix[i, j] < k:
                wantA[i, Ix[i, j]] += G[i, j]
                wantB[Ix[i, j], j] += G[i, j]
    np.testing.assert_allclose(gA, wantA)
    np.testing.assert_allclose(gB, wantB)


def test_bmm_broadcasts_a_2d_operand_and_backward_sums_it():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 3, 5)).astype(np.float32)
    B = rng.standard_normal((5, 2)).astype(np.float32)
    C, Ix = reference.bmm(A, B, "maxplus", argmax=True)
    for b in range(4):
        np.testing.assert_array_equal(C[b], reference.matmul(A[b], B, "maxplus"))
    G = rng.standard_normal(C.shape).astype(np.float32)
    gA, gB = reference.matmul_backward(G, Ix, A.shape, B.shape)
    assert gA.shape == A.shape and gB.shape == B.shape
    want = sum(reference.matmul_backward(G[b], Ix[b], A.shape[1:], B.shape)[1] for b in range(4))
    np.testing.assert_allclose(gB, want, rtol=1e-5)
