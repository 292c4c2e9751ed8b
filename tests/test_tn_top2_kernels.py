"""lazykern.tn.algebras._top2_kernels: the top-two kernels' CUDA source run on the CPU (built with the host's
C++ compiler under tests/_kbest_host.py's emulation of blocks, threads, shared memory and barriers) against
the NumPy top-two product and exact Python-int counts; which kernel a step takes; chunked sums."""

from __future__ import annotations

import ctypes
import itertools
import types

import numpy as np
import pytest

from lazykern.tn._contract import Algebra
from lazykern.tn.algebras import _kbest_kernels, _top2_kernels, top2

from . import _kbest_host

# (value dtype, count dtype, tile): the tiles "s" and "n", and one thread per output ("")
CASES = [("float32", "float32", "s"), ("float64", "float64", "s"), ("float32", "float64", "n"),
         ("float64", "float32", ""), ("float32", "float32", "")]  # fmt: skip
SHAPES = {"s": ((2, 37, 19), (2, 19, 45)), "n": ((2, 70, 19), (2, 19, 21)), "": ((2, 5, 23), (1, 23, 4))}


def _runner(name: str) -> str:
    params = ("void **p, long long first, int M, int N, int K, long long sa, long long ars, long long acs, "
              "long long sb, long long brs, long long bcs, int chunks, int chunk")  # fmt: skip
    call = ("(const V *)p[0], (const CT *)p[1], (const CT *)p[2], (const V *)p[3], (const CT *)p[4], "
            "(const CT *)p[5], (V *)p[6], (CT *)p[7], (CT *)p[8], first, M, N, K, sa, ars, acs, sb, brs, bcs, "
            "chunks, chunk")  # fmt: skip
    return _kbest_host.runner(name, params, call)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if _kbest_host.compiler() is None:
        pytest.skip("no host C++ compiler to build the kernels' source with")
    from importlib import resources

    parts = [_kbest_host.SHIM, resources.files("lazykern.tn.algebras").joinpath("top2.cu").read_text("utf-8")]
    for value, count, tile in CASES:
        name = _top2_kernels.kernel_name(np.dtype(value), np.dtype(count), tile)
        v, c = ("double" if x == "float64" else "float" for x in (value, count))
        parts += [_top2_kernels.source(name, v, c, tile), f"#define V {v}", f"#define CT {c}", _runner(name)]
        parts += ["#undef V", "#undef CT"]
    for v, c in itertools.product(("float", "double"), repeat=2):
        name = _top2_kernels.merge_name(*(np.dtype("float64" if x == "double" else "float32") for x in (v, c)))
        parts += [_top2_kernels.merge_source(name, v, c), f"#define V {v}", f"#define CT {c}", _merge_runner(name)]
        parts += ["#undef V", "#undef CT"]
    return _kbest_host.library("\n".join(parts), tmp_path_factory.mktemp("top2_host"), "top2")


def _merge_runner(name: str) -> str:
    params = "void **p, int xs, int ys, long long outputs"
    call = ("(const V *)p[0], (const CT *)p[1], (const CT *)p[2], xs, (const V *)p[3], (const CT *)p[4], "
            "(const CT *)p[5], ys, (V *)p[6], (CT *)p[7], (CT *)p[8], outputs")  # fmt: skip
    return _kbest_host.runner(name, params, call)


def _merge(lib, X, Y=None):
    """The merge kernel's result (chunks of X along its leading axis, or slices X and Y), run on the CPU."""
    out, (name, blocks, args) = _top2_kernels.merge_arguments(_kbest_host.HOST, X, Y)
    ptrs = (ctypes.c_void_p * 9)(*args[0:3], *args[4:7], *args[8:11])
    run = getattr(lib, f"run_{name}")
    run(ctypes.c_int(blocks), ctypes.c_int(_top2_kernels.THREADS), ptrs, ctypes.c_int(args[3]), ctypes.c_int(args[7]),
        ctypes.c_longlong(args[11]))  # fmt: skip
    return out


def _run(lib, A, B, T=None):
    """A step by the emulated kernels: the product, then (chunks) the merge kernel, as on a device."""
    out, call = _top2_kernels.arguments(_kbest_host.HOST, A, B, T)
    assert call is not None
    name, blocks, args = call
    ptrs = (ctypes.c_void_p * 9)(*args[:9])
    first, M, N, K, sa, ars, acs, sb, brs, bcs, chunks, chunk = args[9:]
    getattr(lib, f"run_{name}")(
        ctypes.c_int(blocks), ctypes.c_int(_top2_kernels.THREADS), ptrs, ctypes.c_longlong(first),
        *(ctypes.c_int(x) for x in (M, N, K)), *(ctypes.c_longlong(x) for x in (sa, ars, acs, sb, brs, bcs)),
        ctypes.c_int(chunks), ctypes.c_int(chunk),
    )  # fmt: skip
    if out[1].ndim == 4:
        assert all(np.array_equal(k, h, equal_nan=True) for k, h in zip(_merge(lib, out), _top2_kernels.merged(
            _kbest_host.HOST, out)))  # fmt: skip
    return name, _top2_kernels.merged(_kbest_host.HOST, out)


def _operand(rng, shape, value, count, transposed):
    """(values, count, count one below) of ``shape``: small integer values, a fifth -inf (counts 0 there)."""
    v = rng.integers(-3, 4, shape).astype(value)
    v[rng.random(shape) < 0.2] = -np.inf
    c0 = np.where(np.isinf(v), 0, rng.integers(1, 50, shape)).astype(count)
    c1 = np.where(np.isinf(v), 0, rng.integers(0, 50, shape)).astype(count)

    def lay(x):
        return np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1) if transposed else x.copy()

    return lay(v), lay(c0), lay(c1)


def _exact(A, B):
    """(b, i, j) -> (best value, exact counts at it and one below) by Python ints, term by term."""
    batch = max(A[0].shape[0], B[0].shape[0])
    out = {}
    for b, i, j in np.ndindex(batch, A[0].shape[1], B[0].shape[2]):
        ba, bb = (b if A[0].shape[0] > 1 else 0), (b if B[0].shape[0] > 1 else 0)
        terms = {}
        for k in range(A[0].shape[2]):
            x, y = A[0][ba, i, k], B[0][bb, k, j]
            if np.isfinite(x) and np.isfinite(y):
                (x0, x1), (y0, y1) = (int(A[q][ba, i, k]) for q in (1, 2)), (int(B[q][bb, k, j]) for q in (1, 2))
                for s, c in ((x + y, x0 * y0), (x + y - 1, x0 * y1 + x1 * y0)):
                    terms[s] = terms.get(s, 0) + c
        top = max(terms, default=-np.inf)
        out[b, i, j] = (top, terms.get(top, 0), terms.get(top - 1, 0))
    return out


# which operands are read across their unit stride: A's rows and B's columns, or either, or neither (the
# tiled kernel stages each layout by code of its own)
LAYOUTS = {"rows": (False, True), "columns": (True, False), "both along": (False, False), "both across": (True, True)}


@pytest.mark.parametrize("value,count,tile", CASES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_kernel_source_gives_the_exact_counts(lib, value, count, tile, layout, monkeypatch):
    """Tiles overhanging the matrix on every side, a K not a multiple of the tile's, a broadcast batch,
    operands read along either axis: the counts equal the exact ones and NumPy's product."""
    monkeypatch.setattr(_kbest_kernels, "tiling", lambda *shape: tile)
    rng = np.random.default_rng(len(tile) + 3 * len(layout))
    sa, sb = SHAPES[tile]
    A = _operand(rng, sa, value, count, transposed=LAYOUTS[layout][0])
    B = _operand(rng, sb, value, count, transposed=LAYOUTS[layout][1])
    batch = max(A[0].shape[0], B[0].shape[0])
    wide = [np.broadcast_to(x[0], (batch, *x[0].shape[1:])) for x in (A, B)]
    (T,), _ = Algebra("maxplus", _kbest_host.HOST).bmm((wide[0],), (wide[1],), False)
    T = np.ascontiguousarray(T)
    name, (got, c0, c1) = _run(lib, A, B, T if tile else None)  # one thread per output finds T itself
    assert name == _top2_kernels.kernel_name(np.dtype(value), np.dtype(count), tile)
    assert np.array_equal(got, T)
    exact = _exact(A, B)
    for (b, i, j), (v, e0, e1) in exact.items():
        assert (T[b, i, j], c0[b, i, j], c1[b, i, j]) == (v, e0, e1) or (
            v == -np.inf and c0[b, i, j] == 0 == c1[b, i, j]
        )
    numpy_alg = top2.algebra(np.dtype(count).itemsize)("maxplus", _kbest_host.HOST)
    _, n0, n1 = top2._host_bmm(A, B, T)
    assert np.array_equal(c0, n0) and np.array_equal(c1, n1) and c0.dtype == np.dtype(count)
    assert numpy_alg.nparts == 3 and np.isfinite(T).any() and (c1 > 0).any()


def test_a_step_of_few_outputs_is_cut_along_its_sum(lib, monkeypatch):
    """Few outputs over a long sum: chunks of the sum, each compared with the whole sum's best value,
    their counts added (the chunks' slices on a leading axis)."""
    monkeypatch.setattr(_kbest_kernels, "tiling", lambda *shape: "")
    monkeypatch.setattr(_top2_kernels, "ROW_THREADS", 64)
    monkeypatch.setattr(_top2_kernels, "CHUNK_MIN", 8)
    rng = np.random.default_rng(5)
    A = _operand(rng, (1, 2, 75), "float32", "float32", False)
    B = _operand(rng, (1, 75, 3), "float32", "float32", False)
    (T,), _ = Algebra("maxplus", _kbest_host.HOST).bmm((A[0],), (B[0],), False)
    out, call = _top2_kernels.arguments(_kbest_host.HOST, A, B)
    assert call is not None and out[0].shape == (9, 1, 2, 3) and call[2][-2:] == (9, 9)  # 75 // 8 chunks of 9
    _, (got, c0, c1) = _run(lib, A, B)
    _, n0, n1 = top2._host_bmm(A, B, T)
    assert np.array_equal(got, T) and c0.shape == (1, 2, 3) and np.array_equal(c0, n0) and np.array_equal(c1, n1)


def _chunks(rng, shape, value, count):
    """(T, c0, c1) of ``shape``: values from few levels (ties, values one apart), -inf, a NaN or two."""
    T = rng.integers(-2, 2, shape).astype(value)
    T[rng.random(shape) < 0.2] = -np.inf
    T.flat[rng.integers(0, T.size, 2)] = np.nan
    c0 = np.where(np.isinf(T), 0, rng.integers(0, 1 << 20, shape)).astype(count)
    c1 = np.where(np.isinf(T), 0, rng.integers(0, 1 << 20, shape)).astype(count)
    return T, c0, c1


@pytest.mark.parametrize("value,count", [("float32", "float32"), ("float64", "float64"), ("float32", "float64"),
                                         ("float64", "float32")])  # fmt: skip
def test_the_merge_kernel_merges_chunks_and_slices_as_the_arrays_do(lib, value, count):
    """Chunks along a leading axis and two slices' results, with ties, values one apart, -inf (one below
    itself) and NaN (taken, as the maximum takes it): the merge kernel's values and counts equal NumPy's
    formula (``merged``) and the algebra's sum of slices, and every count the exact one (Python ints)."""
    rng = np.random.default_rng(7)
    X = _chunks(rng, (5, 3, 7, 6), value, count)
    got = _merge(lib, X)
    want = _top2_kernels.merged(_kbest_host.HOST, X)
    assert all(g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want))
    for at in np.ndindex(3, 7, 6):
        column = [(X[0][(i, *at)], int(X[1][(i, *at)]), int(X[2][(i, *at)])) for i in range(5)]
        if any(np.isnan(v) for v, _, _ in column):
            assert np.isnan(got[0][at])
            continue
        top = max(v for v, _, _ in column)
        assert got[0][at] == top and int(got[1][at]) == sum(a for v, a, _ in column if v == top)
        assert int(got[2][at]) == sum(b for v, _, b in column if v == top) + sum(a for v, a, _ in column
                                                                                 if v == top - 1)  # fmt: skip
    Y = _chunks(rng, (3, 7, 6), value, count)
    slices = tuple(x[0] for x in X), Y
    got = _merge(lib, *slices)
    alg = top2.algebra(np.dtype(count).itemsize)("maxplus", _kbest_host.HOST)
    want = alg.add(*slices)
    assert all(g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want))


def test_slices_of_other_shapes_or_dtypes_are_left_to_the_array_operations():
    """The merge kernel takes two slices' results of one shape and dtypes only (a 0-d result too); the host
    never launches it."""
    fake = types.SimpleNamespace(xp=types.SimpleNamespace(), on_host=False, dtype=lambda x: x.dtype)
    X = tuple(np.zeros((2, 3), np.float32) for _ in range(3))
    assert _top2_kernels.add(fake, X, tuple(x[:1] for x in X)) is None
    assert _top2_kernels.add(fake, X, (X[0].astype(np.float64), X[1], X[2])) is None
    assert _top2_kernels.add(fake, X, (X[0], X[1].astype(np.float64), X[2])) is None
    assert _top2_kernels.add(_kbest_host.HOST, X, X) is None


def test_an_empty_sum_counts_nothing():
    A = tuple(np.zeros((1, 3, 0), np.float32) for _ in range(3))
    B = tuple(np.zeros((1, 0, 2), np.float32) for _ in range(3))
    (T, c0, c1), call = _top2_kernels.arguments(_kbest_host.HOST, A, B)
    assert call is None and not c0.any() and not c1.any() and c0.shape == (1, 3, 2) and (T == -np.inf).all()


def test_mixed_dtypes_are_refused():
    A = (np.zeros((1, 2, 2), np.float32), np.zeros((1, 2, 2), np.float32), np.zeros((1, 2, 2), np.float32))
    B = (np.zeros((1, 2, 2), np.float32), np.zeros((1, 2, 2), np.float64), np.zeros((1, 2, 2), np.float32))
    with pytest.raises(TypeError, match="counts are float64"):
        _top2_kernels.arguments(_kbest_host.HOST, A, B)
    B = (B[0], B[2], B[2])
    with pytest.raises(ValueError, match="takes no best values"):  # a 2 x 2 step: one thread per output
        _top2_kernels.arguments(_kbest_host.HOST, A, B, np.zeros((1, 2, 2), np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_device_products_equal_numpys(module):
    """The device's top-two product (tropical GEMM, then the counts kernel) on steps of every kernel:
    the tiles, one thread per output, a chunked sum, a broadcast batch, operands read along either axis."""
    xp = pytest.importorskip(module)
    from lazykern.tn._backend import Backend

    be = Backend(module, xp)
    dev = (lambda x: xp.asarray(x)) if module == "cupy" else (lambda x: xp.as_tensor(x, device="cuda"))
    host = (lambda x: x.get()) if module == "cupy" else (lambda x: x.cpu().numpy())
    rng = np.random.default_rng(0)
    shapes = [((3, 70, 40), (3, 40, 90)), ((2, 130, 33), (1, 33, 20)), ((4, 5, 7), (4, 7, 6)),
              ((1, 2, 5000), (1, 5000, 3))]  # fmt: skip
    for (sa, sb), layout, (value, count) in zip(shapes * 2, ["rows"] * 4 + ["columns"] * 4,
                                                 [("float32", "float32"), ("float64", "float64")] * 4):  # fmt: skip
        A = _operand(rng, sa, value, count, transposed=layout == "columns")
        B = _operand(rng, sb, value, count, transposed=layout == "rows")
        alg = top2.algebra(np.dtype(count).itemsize)
        want, _ = alg("maxplus", _kbest_host.HOST).bmm(A, B, False)
        got, _ = alg("maxplus", be).bmm(tuple(dev(x) for x in A), tuple(dev(x) for x in B), False)
        for g, w in zip(got, want):
            g = host(g)
            assert g.dtype == w.dtype and np.array_equal(g, w), (sa, sb, layout)


@pytest.mark.gpu
def test_counting_two_on_the_device_takes_the_top_two_kernels(monkeypatch):
    cupy = pytest.importorskip("cupy")
    import networkx as nx

    from lazykern.tn import problems as P
    from lazykern.tn import properties as Q
    from lazykern.tn import solve

    launched = []
    real = _top2_kernels.launch
    monkeypatch.setattr(_top2_kernels, "launch", lambda *a: launched.append(1) or real(*a))
    cubic = [nx.random_regular_graph(3, n, seed=n) for n in (80, 40, 50)]
    problems = [
        P.IndependentSet(cubic[0]),
        P.MaxCut(cubic[1]),
        P.DominatingSet(cubic[2]),
        P.MaximalIS(nx.star_graph(8)),
    ]
    for p in problems:
        for prop in (Q.CountingMax(2), Q.CountingMin(2)):
            assert solve(p, prop, module="cupy") == solve(p, prop)
    assert launched and cupy is not None
