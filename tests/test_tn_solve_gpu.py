"""lazykern.tn.solve on the GPU (CuPy, torch): every property equal to the NumPy path's answer."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import properties as Q
from lazykern.tn import solve

pytestmark = pytest.mark.gpu

PROPERTIES = [
    Q.SizeMax(),
    Q.SizeMax(3),
    Q.SizeMin(2),
    Q.CountingMax(),
    Q.CountingMax(2),
    Q.CountingMin(3),
    Q.CountingAll(),
    Q.GraphPolynomial(),
    Q.ConfigsMax(2),
    Q.ConfigsAll(),
]


def _instances():
    P = pytest.importorskip("lazykern.tn.problems")
    return [
        P.IndependentSet(nx.petersen_graph()),
        P.IndependentSet(nx.random_regular_graph(3, 40, seed=4), weights=list(range(1, 41))),
        P.MaxCut(nx.random_regular_graph(3, 16, seed=5)),
        P.Coloring(nx.petersen_graph(), 3),
        P.IndependentSet(nx.petersen_graph(), openvertices=(0, 5)),
    ]


def _same(a, b):
    if isinstance(a, np.ndarray) and a.dtype == object:
        return a.shape == b.shape and all(_same(x, y) for x, y in zip(a.ravel(), b.ravel()))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("module", ["cupy", "torch"])
@pytest.mark.parametrize("index", range(5))
def test_every_property_on_the_device_equals_numpy(module, index):
    pytest.importorskip(module)
    p = _instances()[index]
    for prop in PROPERTIES:
        if p.openvertices and isinstance(prop, (Q.ConfigsMax, Q.ConfigsAll)):
            continue  # an array of lists of arrays: the scalar properties cover open vertices
        if isinstance(prop, Q.ConfigsAll) and solve(p, Q.CountingAll()) > 10**4:
            continue
        assert _same(solve(p, prop, module=module), solve(p, prop)), prop
    logz = solve(p, Q.PartitionFunction(1.5), module=module)
    assert np.allclose(logz, solve(p, Q.PartitionFunction(1.5)), rtol=1e-12)
    size, config = solve(p, Q.SingleConfigMax(), module=module) if not p.openvertices else (None, None)
    if size is not None:
        assert size == solve(p, Q.SizeMax())[0] and p.size(config) == size


@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_exact_counts_past_int64_on_the_device(module):
    P = pytest.importorskip("lazykern.tn.problems")
    pytest.importorskip(module)
    p = P.IndependentSet(nx.grid_2d_graph(12, 12))
    assert solve(p, Q.CountingAll(), module=module) == 162481813349792588536582997  # OEIS A006506(12)
    assert solve(p, Q.CountingMax(2), module=module) == solve(p, Q.CountingMax(2))


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("modulus", [0, 2147483647])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kbest_kernel_equals_the_array_product(k, modulus, dtype, monkeypatch):
    cupy = pytest.importorskip("cupy")
    from lazykern.tn._backend import Backend
    from lazykern.tn.algebras import kbest

    rng = np.random.default_rng(k)
    be = Backend("cupy", cupy)
    alg = kbest.algebra(k, counts=True, modulus=modulus)("maxplus", be)

    def operand(shape):
        """k-best numbers: distinct values sorted from the largest, -inf padded, counts 0 there."""
        values = np.full((*shape, k), -np.inf, dtype=dtype)
        counts = np.zeros((*shape, k), dtype=np.int64)
        for index in np.ndindex(*shape):
            pool = np.sort(rng.choice(np.arange(-6, 7), size=rng.integers(0, k + 1), replace=False))[::-1]
            values[index][: len(pool)] = pool
            counts[index][: len(pool)] = rng.integers(1, 2**40, len(pool)) % (modulus or 2**40)
        return tuple(cupy.asarray(np.ascontiguousarray(values[..., q])) for q in range(k)) + tuple(
            cupy.asarray(np.ascontiguousarray(counts[..., q])) for q in range(k)
        )

    A, B = operand((3, 5, 7)), operand((1, 7, 4))  # B's batch of 1 broadcasts
    got, _ = alg.bmm(A, B, False)
    monkeypatch.setattr(kbest, "USE_KERNEL", False)
    want, _ = alg.bmm(A, B, False)
    for g, w in zip(got, want):
        assert np.array_equal(cupy.asnumpy(g), cupy.asnumpy(w))


def test_kbest_launch_allocates_once_per_dtype_and_looks_up_its_kernel_once(monkeypatch):
    """The k-best step's results: each dtype's parts views of one allocation, exact against the array
    product when its operands are themselves such views; the family asked once per kernel and device."""
    cupy = pytest.importorskip("cupy")
    from lazykern.tn._backend import Backend
    from lazykern.tn.algebras import _kbest_kernels, kbest

    k = 2
    be = Backend("cupy", cupy)
    rng = np.random.default_rng(21)
    alg = kbest.algebra(k, counts=True)("maxplus", be)

    def operand(shape):
        v = be.empty_parts([cupy.zeros(1, cupy.float32)] * k, shape)
        c = be.empty_parts([cupy.zeros(1, cupy.int64)] * k, shape)
        v[0][...] = cupy.asarray(rng.integers(-6, 7, shape).astype(np.float32))
        v[1][...] = v[0] - 1 - cupy.asarray(rng.integers(0, 3, shape).astype(np.float32))
        for x in c:
            x[...] = cupy.asarray(rng.integers(1, 2**30, shape))
        return tuple(v) + tuple(c)

    A, B = operand((2, 6, 8)), operand((1, 8, 5))
    got, _ = alg.bmm(A, B, False)
    assert got[0].base is got[1].base and got[2].base is got[3].base and got[0].base is not got[2].base
    asked = []
    real = _kbest_kernels.family().get
    monkeypatch.setattr(_kbest_kernels.family(), "get", lambda *a, **kw: asked.append(a) or real(*a, **kw))
    again, _ = alg.bmm(A, B, False)
    assert asked == []  # the loaded kernel kept per (name, device)
    monkeypatch.setattr(kbest, "USE_KERNEL", False)
    want, _ = alg.bmm(A, B, False)
    for g, a, w in zip(got, again, want):
        assert np.array_equal(cupy.asnumpy(g), cupy.asnumpy(w)) and np.array_equal(cupy.asnumpy(a), cupy.asnumpy(w))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_paired_kbest_kernel_equals_the_two_rings(dtype):
    """The paired kernel (counts modulo 2^64 and modulo a prime in one product) against the two rings'
    own kernels on the same operands."""
    cupy = pytest.importorskip("cupy")
    from lazykern.tn._backend import Backend
    from lazykern.tn.algebras import kbest

    k, p = 2, 2147483647
    rng = np.random.default_rng(11)
    be = Backend("cupy", cupy)

    def operand(shape):
        values = np.full((*shape, k), -np.inf, dtype=dtype)
        counts = np.zeros((*shape, k), dtype=np.int64)
        for index in np.ndindex(*shape):
            pool = np.sort(rng.choice(np.arange(-6, 7), size=rng.integers(0, k + 1), replace=False))[::-1]
            values[index][: len(pool)] = pool
            counts[index][: len(pool)] = rng.integers(1, 2**62, len(pool))
        v = tuple(cupy.asarray(np.ascontiguousarray(values[..., q])) for q in range(k))
        c = tuple(cupy.asarray(np.ascontiguousarray(counts[..., q])) for q in range(k))
        return v, c, tuple(x % p for x in c)

    (av, ac, ar), (bv, bc, br) = operand((3, 5, 9)), operand((1, 9, 4))
    got, _ = kbest.paired_algebra(k, p)("maxplus", be).bmm(av + ac + ar, bv + bc + br, False)
    wide, _ = kbest.algebra(k, True)("maxplus", be).bmm(av + ac, bv + bc, False)
    narrow, _ = kbest.algebra(k, True, p)("maxplus", be).bmm(av + ar, bv + br, False)
    for g, w in zip(got, wide + narrow[k:]):
        assert np.array_equal(cupy.asnumpy(g), cupy.asnumpy(w))


@pytest.mark.parametrize("k,ring", [(2, "p"), (2, "i64"), (3, "m"), (2, "v")])
@pytest.mark.parametrize("tile", ["s", "n"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tiled_kbest_kernel_equals_the_array_product(k, ring, tile, dtype, monkeypatch):
    """The tiled k-best kernels on the device against the array product and the
    one-thread-per-output kernel: tiles overhanging the matrix, K not a multiple of the tile's, a
    broadcast batch, A read along its rows and columns, many equal sums (values in -6..6)."""
    cupy = pytest.importorskip("cupy")
    from lazykern.tn._backend import Backend
    from lazykern.tn.algebras import kbest

    p = 2147483647
    rng = np.random.default_rng(k + len(ring))
    be = Backend("cupy", cupy)
    shapes = {"s": ((3, 45, 21), (1, 21, 70)), "n": ((3, 70, 21), (1, 21, 20))}[tile]

    def operand(shape, transposed):
        values = np.full((k, *shape), -np.inf, dtype=dtype)
        counts = np.zeros((k, *shape), dtype=np.int64)
        for index in np.ndindex(*shape):
            pool = np.sort(rng.choice(np.arange(-6, 7), size=rng.integers(0, k + 1), replace=False))[::-1]
            values[(slice(0, len(pool)), *index)] = pool
            counts[(slice(0, len(pool)), *index)] = rng.integers(1, 2**62, len(pool)) % (p if ring == "m" else 2**62)
        arrays = list(values) + (list(counts) if ring != "v" else []) + ([c % p for c in counts] if ring == "p" else [])
        if transposed:
            return tuple(cupy.asarray(np.ascontiguousarray(a.transpose(0, 2, 1))).transpose(0, 2, 1) for a in arrays)
        return tuple(cupy.asarray(a) for a in arrays)

    A, B = operand(shapes[0], transposed=True), operand(shapes[1], transposed=False)
    if ring == "p":
        alg = kbest.paired_algebra(k, p)("maxplus", be)
    else:
        alg = kbest.algebra(k, ring != "v", p if ring == "m" else 0)("maxplus", be)
    batch, M, K = shapes[0]
    assert kbest.tiling(batch, M, shapes[1][2], K) == tile
    tiled, _ = alg.bmm(A, B, False)
    monkeypatch.setattr(kbest, "TILED", False)
    untiled, _ = alg.bmm(A, B, False)
    monkeypatch.setattr(kbest, "USE_KERNEL", False)
    want, _ = alg.bmm(A, B, False)
    for t, u, w in zip(tiled, untiled, want, strict=True):
        assert np.array_equal(cupy.asnumpy(t), cupy.asnumpy(w)) and np.array_equal(cupy.asnumpy(u), cupy.asnumpy(w))


@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_the_partition_function_with_exact_offsets_on_the_device(module):
    """Weights near +-2^40 that cancel (tn/algebras/scaledsum.py): the device's steps, its underflowed
    entries redone by the streamed sum, agree with the host's to float64's precision of log Z."""
    pytest.importorskip(module)
    P = pytest.importorskip("lazykern.tn.problems")
    g = nx.random_regular_graph(3, 30, seed=6)
    weights = [(-1) ** v * 2**40 + v for v in range(30)]
    for p in (P.IndependentSet(g, weights=weights), P.DominatingSet(g, weights=weights)):
        for beta in (1.0, -0.3):
            host = solve(p, Q.PartitionFunction(beta))
            assert solve(p, Q.PartitionFunction(beta), module=module) == pytest.approx(host, rel=1e-13)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("floats", [8, 4])
def test_float_count_kbest_kernels_on_the_device(k, dtype, floats, monkeypatch):
    """Float64 / float32 counts on the device (tiled and one thread per output): the exact count wherever
    it is below 2^53 / 2^24, at least that elsewhere, against exact Python integers; counts small or
    large against that line."""
    cupy = pytest.importorskip("cupy")
    from lazykern.tn._backend import Backend
    from lazykern.tn.algebras import kbest

    from . import _kbest_host

    rng = np.random.default_rng(40 + k)
    be = Backend("cupy", cupy)

    def operand(shape):
        values = np.full((k, *shape), -np.inf, dtype=dtype)
        counts = np.zeros((k, *shape), dtype=f"f{floats}")
        for index in np.ndindex(*shape):
            pool = np.sort(rng.choice(np.arange(-6, 7), size=rng.integers(0, k + 1), replace=False))[::-1]
            values[(slice(0, len(pool)), *index)] = pool
            pick = rng.integers(0, 8, len(pool))
            a, b, c = (12, 40, 52) if floats == 8 else (6, 14, 20)
            small, large = rng.integers(1, 1 << a, len(pool)), rng.integers(1 << b, 1 << c, len(pool))
            counts[(slice(0, len(pool)), *index)] = np.where(pick < 6, small, large)
        return tuple(cupy.asarray(a) for a in (*values, *counts))

    A, B = operand((3, 45, 21)), operand((1, 21, 70))
    alg = kbest.algebra(k, True, floats=floats)("maxplus", be)
    assert kbest.tiling(3, 45, 70, 21) == "s"
    tiled, _ = alg.bmm(A, B, False)
    monkeypatch.setattr(kbest, "TILED", False)
    untiled, _ = alg.bmm(A, B, False)
    exact = _kbest_host.exact_product(A, B, k)
    line = kbest.FLOAT_EXACT[floats]
    kinds = set()
    for got in (tiled, untiled):
        host = [cupy.asnumpy(x) for x in got]
        for (b, i, j), best in exact.items():
            best = best + [(-np.inf, 0)] * (k - len(best))
            assert [host[q][b, i, j] for q in range(k)] == [v for v, _ in best]
            for q, (_, c) in enumerate(best):
                got_count = host[k + q][b, i, j]
                assert got_count == c if c < line else got_count >= line
                kinds.add(c >= line)
    assert kinds == {False, True}


@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_counting_max_past_2_53_on_the_device(module, monkeypatch):
    """CountingMax(k > 1): counts below 2^24 from the float32 pass, below 2^53 from the float64 one,
    counts past it (every configuration at one size) from the integer rings, equal to the host's. The
    isolated vertices are contracted as one network (not counted apart on the host: _components)."""
    pytest.importorskip(module)
    monkeypatch.setattr("lazykern.tn._components.SMALL", 0)
    P = pytest.importorskip("lazykern.tn.problems")
    g = nx.random_regular_graph(3, 60, seed=3)
    isolated = P.IndependentSet((70, [(0, 1), (1, 2)]), weights=[0] * 70)
    near = P.IndependentSet((56, [(0, 1), (1, 2)]), weights=[0] * 56)
    middle = P.IndependentSet((40, [(0, 1), (1, 2)]), weights=[0] * 40)
    for p in (P.IndependentSet(g), isolated, near, middle):
        for prop in (Q.CountingMax(2), Q.CountingMax(3), Q.CountingMin(2)):
            assert solve(p, prop, module=module) == solve(p, prop)
    assert solve(isolated, Q.CountingMax(2), module=module) == [(0, 5 * 2**67)]
    assert solve(near, Q.CountingMax(2), module=module) == [(0, 5 * 2**53)]
    assert solve(middle, Q.CountingMax(2), module=module) == [(0, 5 * 2**37)]


@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_counting_max_one_takes_a_float_pass_and_the_exact_one_past_it(module, monkeypatch):
    """CountingMax() on a GPU: one float32 pass of the k-best kernels (k = 1) answers where the count is
    below 2^24; past it (25 edges and a hub joined to all their ends: 2^25 largest independent sets, one
    network; a min: CountingMin of a chain of 26 spins with every coupling 0, 2^26 states of energy 0) the
    counting algebra counts again, exactly. (25 disjoint edges would be 25 small components, counted on
    the host.)"""
    pytest.importorskip(module)
    P = pytest.importorskip("lazykern.tn.problems")
    from lazykern.tn.solving import sizes

    exact = []
    real = sizes._count_exactly
    monkeypatch.setattr(sizes, "_count_exactly", lambda *a: exact.append(1) or real(*a))
    small = P.IndependentSet(nx.random_regular_graph(3, 60, seed=6))
    want = solve(small, Q.CountingMax())  # the host's: the counting algebra
    exact.clear()
    assert solve(small, Q.CountingMax(), module=module) == want and exact == []
    pairs = P.IndependentSet((51, [(2 * i, 2 * i + 1) for i in range(25)] + [(v, 50) for v in range(50)]))
    assert solve(pairs, Q.CountingMax(), module=module) == [(25, 2**25)] and exact == [1]
    flat = P.SpinGlass((26, [(i, i + 1) for i in range(25)]), J=[0] * 25)
    assert solve(flat, Q.CountingMin(), module=module) == [(0, 2**26)] and exact == [1, 1]
