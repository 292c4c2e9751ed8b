"""lazykern.tn.algebras._kbest_kernels: the k-best kernels' CUDA source run on the CPU (tests/_kbest_host.py
builds it with the host's C++ compiler under an emulation of blocks, threads, shared memory and barriers)
against the NumPy k-best product; which kernel a step takes; the tiled kernels' NVRTC builds for sm_90."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.tn._backend import Backend
from lazykern.tn.algebras import _kbest_kernels, kbest

from . import _kbest_host

NUMPY = Backend("numpy", np)
P, Q = 2147483647, 2147483629  # 2^31 - 1 (its own reduction in the tiled kernel) and the next prime (Barrett's)
# (k, value dtype, ring: "v" values / "i64" / "m" modulo P / "q" modulo Q / "p" paired with P, tile)
CASES = [
    (2, "float32", "p", "s"),
    (2, "float32", "i64", "s"),
    (2, "float64", "m", "s"),
    (2, "float32", "q", "s"),
    (3, "float32", "m", "s"),
    (3, "float64", "q", "s"),
    (4, "float64", "i64", "s"),
    (3, "float32", "v", "s"),
    (2, "float32", "v", "s"),
    (2, "float32", "i64", ""),
    (2, "float32", "p", ""),
    (2, "float64", "q", ""),
    (3, "float32", "m", ""),
]
# float64 counts ("f"), checked against exact Python integers (test_float_counts_are_exact_below_2_53)
FLOATS = [(2, "float32", "f", "s"), (2, "float32", "f", ""), (3, "float64", "f", "s"), (4, "float32", "f", "")]
SHAPES = {"s": ((2, 37, 19), (2, 19, 45)), "": ((2, 5, 7), (1, 7, 4))}
MODULUS = {"m": P, "q": Q, "p": P}


def _name(k: int, dtype: str, ring: str, tile: str) -> str:
    return _kbest_kernels.kernel_name(
        k, np.dtype(dtype), ring != "v", MODULUS.get(ring, 0), ring == "p", tile, floats=ring == "f"
    )


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if _kbest_host.compiler() is None:
        pytest.skip("no host C++ compiler to build the kernels' source with")
    kernels = {}
    for k, dtype, ring, tile in CASES + FLOATS:
        name = _name(k, dtype, ring, tile)
        value = "double" if dtype == "float64" else "float"
        counts, paired = ring != "v", ring == "p"
        number = 2 if ring in "mq" else 0 if ring == "f" else 1
        kernels[name] = _kbest_kernels.source(name, value, k, number, counts, paired, tile)
    return _kbest_host.build(kernels, tmp_path_factory.mktemp("kbest_host"))


def _operand(rng, shape, k, dtype, ring, transposed):
    """k-best parts of ``shape`` (b, rows, cols): distinct values sorted from the largest, -inf padded
    (count 0 there), counts below 2^62 (residues below P for "m"), laid out column-major per batch entry
    when ``transposed``."""
    values = np.full((k, *shape), -np.inf, dtype=dtype)
    counts = np.zeros((k, *shape), dtype=np.int64)
    for index in np.ndindex(*shape):
        pool = np.sort(rng.choice(np.arange(-5, 6), size=rng.integers(0, k + 1), replace=False))[::-1]
        values[(slice(0, len(pool)), *index)] = pool
        counts[(slice(0, len(pool)), *index)] = rng.integers(1, 2**62, len(pool)) % MODULUS.get(ring, 2**62)

    def lay(x):
        return np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1) if transposed else x.copy()

    parts = [lay(v) for v in values]
    if ring != "v":
        parts += [lay(c) for c in counts]
    if ring == "p":
        parts += [lay(c % P) for c in counts]
    return tuple(parts)


@pytest.mark.parametrize("k,dtype,ring,tile", CASES)
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_kernel_source_equals_the_array_product(lib, k, dtype, ring, tile, layout, monkeypatch):
    """The kernel, built from its CUDA source and run on the CPU, gives the NumPy product's values and
    counts exactly: tiles that overhang the matrix on every side, a K that is not a multiple of the
    tile's, a broadcast batch, operands read along either axis."""
    monkeypatch.setattr(_kbest_kernels, "TILED_MIN_MACS", 0)
    rng = np.random.default_rng(k * 7 + len(tile))
    (sa, sb) = SHAPES[tile]
    A = _operand(rng, sa, k, dtype, ring, transposed=layout == "columns")
    B = _operand(rng, sb, k, dtype, ring, transposed=layout == "rows")
    name, got = _kbest_host.product(lib, A, B, k, ring != "v", MODULUS.get(ring, 0), ring == "p")
    assert name == _name(k, dtype, ring, tile)  # the step took the kernel under test
    if ring == "p":
        alg = kbest.paired_algebra(k, P)("maxplus", NUMPY)
    else:
        alg = kbest.algebra(k, ring != "v", MODULUS.get(ring, 0))("maxplus", NUMPY)
    want, _ = alg.bmm(A, B, False)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    assert np.isfinite(want[0]).any()  # the product is not empty


def test_large_steps_take_the_tiled_kernels():
    assert _kbest_kernels.tiling(1024, 4096, 128, 16) == "s"
    assert _kbest_kernels.tiling(2048, 128, 8, 2048) == ""  # 8 columns: the narrow tile was slower
    assert _kbest_kernels.tiling(1, 8, 4096, 4096) == ""  # rows of a 32-row tile mostly empty
    assert _kbest_kernels.tiling(1, 64, 64, 4) == ""  # a small step: one launch's latency either way


def test_tiled_kernels_are_in_the_family_and_compile_for_sm90(cache):
    fam = _kbest_kernels.make_family(cache)
    names = ["kbest2_f32_p_ts", "kbest3_f64_m_ts"]
    assert set(names) <= set(fam.names()) and fam.compiled() == []
    assert [kern.name for kern in fam.warm(names, arch="sm_90")] == names


def _float_count_operand(rng, shape, k, dtype, transposed):
    """k-best parts with float64 counts: small (below 2^12) or large (2^40 to 2^52), so products and sums
    pass 2^53 on some entries and stay far below it on others."""
    A = _operand(rng, shape, k, dtype, "i64", transposed)
    out = list(A[:k])
    for c in A[k:]:
        pick = rng.integers(0, 8, c.shape)
        small, large = rng.integers(1, 1 << 12, c.shape), rng.integers(1 << 40, 1 << 52, c.shape)
        fill = np.where(pick < 6, small, large).astype(np.float64)
        out.append(_like(c, np.where(c != 0, fill, 0.0)))
    return tuple(out)


def _like(c, x):
    """``x`` laid out as ``c`` (the same strides: the kernel reads every part through one set)."""
    order = np.argsort(c.strides)[::-1]
    out = np.ascontiguousarray(x.transpose(order)).transpose(np.argsort(order))
    assert out.strides == c.strides
    return out


def _assert_float_count(got: float, exact: int) -> None:
    """Below 2^53 the exact count; from 2^53 on, at least 2^53 (then the caller counts again)."""
    if exact < kbest.FLOAT_EXACT:
        assert got == exact
    else:
        assert got >= kbest.FLOAT_EXACT


@pytest.mark.parametrize("k,dtype,ring,tile", FLOATS)
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_float_counts_are_exact_below_2_53(lib, k, dtype, ring, tile, layout, monkeypatch):
    """Float64 counts: the kernel's and the array product's count is the exact count wherever that is
    below 2^53 and at least 2^53 elsewhere (against exact Python integers); values the exact k best."""
    monkeypatch.setattr(_kbest_kernels, "TILED_MIN_MACS", 0)
    rng = np.random.default_rng(17 * k + len(tile))
    sa, sb = SHAPES[tile]
    A = _float_count_operand(rng, sa, k, dtype, transposed=layout == "columns")
    B = _float_count_operand(rng, sb, k, dtype, transposed=layout == "rows")
    name, got = _kbest_host.product(lib, A, B, k, True, 0, floats=True)
    assert name == _name(k, dtype, ring, tile)
    host, _ = kbest.algebra(k, True, floats=True)("maxplus", NUMPY).bmm(A, B, False)
    exact = _kbest_host.exact_product(A, B, k)
    kinds = set()
    for (b, i, j), best in exact.items():
        for q in range(k):
            value, count = best[q] if q < len(best) else (-np.inf, 0)
            assert got[q][b, i, j] == value and host[q][b, i, j] == value
            _assert_float_count(got[k + q][b, i, j], count)
            _assert_float_count(host[k + q][b, i, j], count)
            kinds.add("past" if count >= kbest.FLOAT_EXACT else "exact" if count > 0 else "none")
    assert {"past", "exact"} <= kinds  # both sides of 2^53 were reached


def test_float_counts_take_no_modulus_and_float64_operands():
    with pytest.raises(ValueError, match="float k-best counts"):
        kbest.algebra(2, True, 7, floats=True)
    with pytest.raises(ValueError, match="float k-best counts"):
        kbest.algebra(2, False, floats=True)
    alg = kbest.algebra(2, True, floats=True)
    with pytest.raises(TypeError, match="float64"):
        alg.prepare(NUMPY, (np.zeros(3, np.float32), np.ones(3, np.int64)), 0)
