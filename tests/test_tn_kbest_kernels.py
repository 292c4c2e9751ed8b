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
# saturating counts ("s"), checked against exact Python integers (test_saturating_kernel_is_the_exact_...)
SATURATING = [(2, "float32", "s", "s"), (2, "float32", "s", ""), (3, "float64", "s", "s"), (4, "float32", "s", "")]
SHAPES = {"s": ((2, 37, 19), (2, 19, 45)), "": ((2, 5, 7), (1, 7, 4))}
MODULUS = {"m": P, "q": Q, "p": P}


def _name(k: int, dtype: str, ring: str, tile: str) -> str:
    return _kbest_kernels.kernel_name(
        k, np.dtype(dtype), ring != "v", MODULUS.get(ring, 0), ring == "p", tile, saturating=ring == "s"
    )


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if _kbest_host.compiler() is None:
        pytest.skip("no host C++ compiler to build the kernels' source with")
    kernels = {}
    for k, dtype, ring, tile in CASES + SATURATING:
        name = _name(k, dtype, ring, tile)
        value = "double" if dtype == "float64" else "float"
        counts, paired = ring != "v", ring == "p"
        number = 2 if ring in "mq" else 3 if ring == "s" else 1
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


def _saturating_operand(rng, shape, k, dtype, transposed):
    """k-best parts whose counts are small (below 2^12), large (2^40 to 2^52) or saturated already, so
    products and sums cross 2^63 - 1 on some entries and stay far below it on others."""
    A = _operand(rng, shape, k, dtype, "i64", transposed)
    for c in A[k:]:
        pick = rng.integers(0, 8, c.shape)
        small, large = rng.integers(1, 1 << 12, c.shape), rng.integers(1 << 40, 1 << 52, c.shape)
        fill = np.where(pick < 5, small, np.where(pick < 7, large, kbest.SATURATED))
        c[...] = np.where(c != 0, fill, 0)
    return A


@pytest.mark.parametrize("k,dtype,ring,tile", SATURATING)
@pytest.mark.parametrize("layout", ["rows", "columns"])
def test_saturating_kernel_is_the_exact_count_or_saturated(lib, k, dtype, ring, tile, layout, monkeypatch):
    """Saturating counts: the kernel's count is min(exact, 2^63 - 1) on every entry (against exact Python
    integers); the array product's is the exact count below 2^62 and saturated from 2^63 - 1 (between
    the two, either); their values are the exact k best."""
    monkeypatch.setattr(_kbest_kernels, "TILED_MIN_MACS", 0)
    rng = np.random.default_rng(17 * k + len(tile))
    sa, sb = SHAPES[tile]
    A = _saturating_operand(rng, sa, k, dtype, transposed=layout == "columns")
    B = _saturating_operand(rng, sb, k, dtype, transposed=layout == "rows")
    name, got = _kbest_host.product(lib, A, B, k, True, 0, saturating=True)
    assert name == _name(k, dtype, ring, tile)
    host, _ = kbest.algebra(k, True, saturating=True)("maxplus", NUMPY).bmm(A, B, False)
    exact = _kbest_host.exact_product(A, B, k)
    kinds = set()
    for (b, i, j), best in exact.items():
        for q in range(k):
            value, count = best[q] if q < len(best) else (-np.inf, 0)
            assert got[q][b, i, j] == value and host[q][b, i, j] == value
            assert int(got[k + q][b, i, j]) == min(count, kbest.SATURATED)
            h = int(host[k + q][b, i, j])
            if count < 1 << 62:
                assert h == count
            elif count < kbest.SATURATED:
                assert h in (count, kbest.SATURATED)
            else:
                assert h == kbest.SATURATED
            kinds.add("saturated" if count >= kbest.SATURATED else "exact" if count > 0 else "none")
    assert {"saturated", "exact"} <= kinds  # both sides of the line were crossed


def test_saturating_counts_refuse_a_modulus():
    with pytest.raises(ValueError, match="saturating"):
        kbest.algebra(2, True, 7, saturating=True)
    with pytest.raises(ValueError, match="saturating"):
        kbest.algebra(2, False, saturating=True)
