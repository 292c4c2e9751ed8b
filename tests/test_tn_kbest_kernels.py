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
    (1, "float32", "m", "s"),
    (1, "float64", "p", ""),
    (1, "float32", "i64", "n"),
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
    (2, "float32", "p", "n"),
    (2, "float32", "q", "n"),
    (3, "float64", "m", "n"),
    (4, "float64", "i64", "n"),
]
# float64 / float32 counts ("f8", "f4"), checked against exact Python integers (test_float_counts_are_exact...)
FLOATS = [
    (1, "float32", "f4", "s"),
    (1, "float32", "f4", ""),
    (1, "float64", "f8", "n"),
    (2, "float32", "f8", "s"),
    (2, "float32", "f4", "s"),
    (2, "float64", "f4", ""),
    (3, "float64", "f8", "s"),
    (3, "float32", "f4", "s"),
    (4, "float32", "f8", ""),
    (2, "float32", "f4", "n"),
]
SHAPES = {
    "s": ((2, 37, 19), (2, 19, 45)),
    "n": ((2, 70, 19), (2, 19, 21)),
    "": ((2, 5, 7), (1, 7, 4)),
}
MODULUS = {"m": P, "q": Q, "p": P}


def _name(k: int, dtype: str, ring: str, tile: str) -> str:
    return _kbest_kernels.kernel_name(
        k, np.dtype(dtype), ring != "v", MODULUS.get(ring, 0), ring == "p", tile, floats=_floats(ring)
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
        number = 2 if ring in "mq" else 0 if _floats(ring) else 1
        ctype = {8: "double", 4: "float"}.get(_floats(ring), "long long")
        kernels[name] = _kbest_kernels.source(name, value, k, number, counts, paired, tile, ctype)
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
    monkeypatch.setattr(_kbest_kernels, "tiling", lambda *shape: tile)  # the kernel under test (see below)
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
    assert _kbest_kernels.tiling(64, 2048, 16, 4096) == "n"  # 16 to 31 columns: 64 x 16 tiles
    assert _kbest_kernels.tiling(64, 2048, 31, 4096) == "n" and _kbest_kernels.tiling(64, 48, 16, 4096) == ""
    assert _kbest_kernels.tiling(1, 8, 4096, 4096) == ""  # rows of a 32-row tile mostly empty
    assert _kbest_kernels.tiling(1, 64, 64, 4) == ""  # a small step: one launch's latency either way


def test_tiled_kernels_are_in_the_family_and_compile_for_sm90(cache):
    fam = _kbest_kernels.make_family(cache)
    # "n"'s largest instantiation (k = 4, float64 values and int64 counts) within 48 KB of shared memory
    names = ["kbest2_f32_p_ts", "kbest3_f64_m_ts", "kbest4_f64_i64_tn", "kbest2_f32_p_tn"]
    assert set(names) <= set(fam.names()) and fam.compiled() == []
    assert [kern.name for kern in fam.warm(names, arch="sm_90")] == names


def _floats(ring: str) -> int:
    """The bytes of a float-count ring's counts ("f8": 8, "f4": 4), 0 for the others."""
    return int(ring[1]) if ring[0] == "f" else 0


def _float_count_operand(rng, shape, k, dtype, transposed, floats):
    """k-best parts with float counts of ``floats`` bytes: small or large against the line below which
    they are exact (float64: below 2^12 or 2^40 to 2^52; float32: below 2^6 or 2^14 to 2^20), so products
    and sums pass the line on some entries and stay far below it on others."""
    A = _operand(rng, shape, k, dtype, "i64", transposed)
    out = list(A[:k])
    (a, b, c_) = (12, 40, 52) if floats == 8 else (6, 14, 20)
    for c in A[k:]:
        pick = rng.integers(0, 8, c.shape)
        small, large = rng.integers(1, 1 << a, c.shape), rng.integers(1 << b, 1 << c_, c.shape)
        fill = np.where(pick < 6, small, large).astype(f"f{floats}")
        out.append(_like(c, np.where(c != 0, fill, 0.0)))
    return tuple(out)


def _like(c, x):
    """``x`` laid out as ``c`` (the same strides: the kernel reads every part through one set)."""
    order = np.argsort(c.strides)[::-1]
    out = np.ascontiguousarray(x.transpose(order)).transpose(np.argsort(order))
    assert [s // out.itemsize for s in out.strides] == [s // c.itemsize for s in c.strides]
    return out


def _assert_float_count(got: float, exact: int, floats: int) -> None:
    """Below the line (2^53, 2^24) the exact count; past it, at least the line (the caller counts again)."""
    if exact < kbest.FLOAT_EXACT[floats]:
        assert got == exact
    else:
        assert got >= kbest.FLOAT_EXACT[floats]


@pytest.mark.parametrize("k,dtype,ring,tile", FLOATS)
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_float_counts_are_exact_below_their_line(lib, k, dtype, ring, tile, layout, monkeypatch):
    """Float64 / float32 counts: the kernel's and the array product's count is the exact count wherever
    that is below 2^53 / 2^24 and at least that elsewhere (against exact Python integers); values the
    exact k best."""
    monkeypatch.setattr(_kbest_kernels, "tiling", lambda *shape: tile)  # the kernel under test (see below)
    rng = np.random.default_rng(17 * k + len(tile))
    sa, sb = SHAPES[tile]
    floats = _floats(ring)
    A = _float_count_operand(rng, sa, k, dtype, layout == "columns", floats)
    B = _float_count_operand(rng, sb, k, dtype, layout == "rows", floats)
    name, got = _kbest_host.product(lib, A, B, k, True, 0, floats=floats)
    assert name == _name(k, dtype, ring, tile)
    host, _ = kbest.algebra(k, True, floats=floats)("maxplus", NUMPY).bmm(A, B, False)
    exact = _kbest_host.exact_product(A, B, k)
    kinds = set()
    for (b, i, j), best in exact.items():
        for q in range(k):
            value, count = best[q] if q < len(best) else (-np.inf, 0)
            assert got[q][b, i, j] == value and host[q][b, i, j] == value
            _assert_float_count(got[k + q][b, i, j], count, floats)
            _assert_float_count(host[k + q][b, i, j], count, floats)
            kinds.add("past" if count >= kbest.FLOAT_EXACT[floats] else "exact" if count > 0 else "none")
    assert {"past", "exact"} <= kinds  # both sides of the line were reached


def test_float_counts_take_no_modulus_and_float64_operands():
    for bad in (dict(modulus=7, floats=8), dict(counts=False, floats=4), dict(floats=2), dict(floats=True)):
        with pytest.raises(ValueError, match="float k-best counts"):
            kbest.algebra(2, **{"counts": True} | bad)
    with pytest.raises(TypeError, match="float64"):
        kbest.algebra(2, True, floats=8).prepare(NUMPY, (np.zeros(3, np.float32), np.ones(3, np.int64)), 0)
    with pytest.raises(TypeError, match="float32"):
        kbest.algebra(2, True, floats=4).prepare(NUMPY, (np.zeros(3, np.float32), np.ones(3, np.float64)), 0)
