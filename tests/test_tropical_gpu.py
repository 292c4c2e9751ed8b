"""Every tropical instantiation on a GPU against the NumPy reference (run with `pytest -m gpu`)."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern import tropical
from lazykern.tropical import api, plan, reference

pytestmark = pytest.mark.gpu

SEMIRINGS = reference.SEMIRINGS
DTYPES = ["float32", "float64", "int32", "int64"]


def adversarial(rng, shape, dtype, huge=False):
    """Small integers (many ties), with infinities / NaN / integer extremes sprinkled in."""
    dtype = np.dtype(dtype)
    X = rng.integers(-4, 5, size=shape).astype(dtype)
    if dtype.kind == "f":
        specials = np.array([np.inf, -np.inf, np.nan], dtype)
    else:
        info = np.iinfo(dtype)
        specials = [info.min, info.max]
        if huge:  # outside the fast path's range: the block falls back to exact arithmetic
            specials += [info.max - 1, info.min + 1, info.max // 3, -(info.max // 3)]
        specials = np.array(specials, dtype)
    mask = rng.random(shape) < 0.08
    X[mask] = rng.choice(specials, size=int(mask.sum()))
    return X


@pytest.fixture
def tile(request, monkeypatch):
    monkeypatch.setattr(api, "_FORCE_TILE", request.param)
    return request.param


def to_dev(x):
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(x))


def transposed_view(x):
    """A device array equal to ``x`` whose memory is ``x.T`` row-major (strides swapped).

    Numba's ``DeviceNDArray.T`` launches a transpose kernel and returns a C-contiguous
    copy, so it cannot make a view; build one from the copy's memory instead.
    """
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    base = to_dev(x.T)
    item = base.dtype.itemsize
    # element (i, k) lives at k * M + i of x.T's row-major memory (explicit: Numba normalises
    # the stride of a length-1 dimension, so base.strides[::-1] is not it when M or K is 1)
    return DeviceNDArray(x.shape, (item, item * x.shape[0]), base.dtype, gpu_data=base.gpu_data)


def run(A, B, semiring, argmax, batched=False, **kw):
    fn = tropical.bmm if batched else tropical.matmul
    res = fn(to_dev(A), to_dev(B), semiring, argmax=argmax, **kw)
    return tuple(r.copy_to_host() for r in res) if argmax else res.copy_to_host()


def check(A, B, semiring, argmax, batched=False, **kw):
    got = run(A, B, semiring, argmax, batched, **kw)
    want = (reference.bmm if batched else reference.matmul)(A, B, semiring, argmax)
    if argmax:
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("tile", ["", "s", "t"], indirect=True)
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_matmul_every_instantiation(semiring, dtype, argmax, tile):
    rng = np.random.default_rng(1)
    A = adversarial(rng, (133, 37), dtype)  # no dimension a multiple of any tile
    B = adversarial(rng, (37, 141), dtype)
    check(A, B, semiring, argmax)


@pytest.mark.parametrize("tile", ["", "s"], indirect=True)
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_bmm_every_instantiation(semiring, dtype, argmax, tile):
    rng = np.random.default_rng(2)
    A = adversarial(rng, (7, 70, 19), dtype)
    B = adversarial(rng, (7, 19, 45), dtype)
    check(A, B, semiring, argmax, batched=True)
    check(A[:1], B[:1], semiring, argmax, batched=True)  # batch 1
    check(A, B[0], semiring, argmax, batched=True)  # broadcast B
    check(A[0], B, semiring, argmax, batched=True)  # broadcast A


ROW_SHAPES = {
    "r": [(1000, 4, 4), (133, 5, 7), (64, 8, 8), (37, 1, 3), (9, 0, 2)],
    "r4": [(1000, 4, 4), (133, 3, 4), (64, 4, 1), (37, 1, 3), (9, 0, 2)],
}


@pytest.mark.parametrize("rows", ["r", "r4"])
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_row_kernels_every_layout_and_batch(semiring, dtype, argmax, rows, monkeypatch):
    monkeypatch.setattr(api, "_FORCE_TILE", rows)
    rng = np.random.default_rng(13)
    for M, K, N in ROW_SHAPES[rows]:
        A, B = adversarial(rng, (M, K), dtype), adversarial(rng, (K, N), dtype)
        check(A, B, semiring, argmax)
        if K > 0:  # "tt": both operands strided views
            want = reference.matmul(A, B, semiring, argmax)
            got = tropical.matmul(transposed_view(A), transposed_view(B), semiring, argmax=argmax)
            for g, w in zip(got if argmax else (got,), want if argmax else (want,), strict=True):
                np.testing.assert_array_equal(g.copy_to_host(), w)
        A3, B3 = adversarial(rng, (6, M, K), dtype), adversarial(rng, (6, K, N), dtype)
        check(A3, B3, semiring, argmax, batched=True)
        check(A3, B3[0], semiring, argmax, batched=True)  # broadcast B
        check(A3[0], B3, semiring, argmax, batched=True)  # broadcast A
    name = f"{semiring}_{api.DTYPE_CODE[np.dtype(dtype)]}{'_argmax' if argmax else ''}_{rows}"
    assert name in tropical.family.compiled()


def test_tiny_products_pick_the_row_kernels():
    rng = np.random.default_rng(14)
    A, B = rng.standard_normal((2**16, 4)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32)
    check(A, B, "maxplus", False)
    A3, B3 = rng.standard_normal((2**14, 4, 4)), rng.standard_normal((2**14, 4, 4))
    check(A3, B3, "minplus", True, batched=True)
    A, B = rng.standard_normal((5000, 6)).astype(np.float32), rng.standard_normal((6, 8)).astype(np.float32)
    check(A, B, "maxmul", True)
    assert {"maxplus_f32_r4", "minplus_f64_argmax_r4", "maxmul_f32_argmax_r"} <= set(tropical.family.compiled())


# ------------------------------------------------------------------ split-K --
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_splitk_every_instantiation(semiring, dtype, argmax, monkeypatch):
    """Ragged K slices (no dimension a multiple of a tile or of BK), batches, broadcasts, specials."""
    monkeypatch.setattr(api, "_FORCE_TILE", "splitk")
    rng = np.random.default_rng(15)
    A, B = adversarial(rng, (70, 301), dtype), adversarial(rng, (301, 45), dtype)
    assert plan.split_k(api.DTYPE_CODE[np.dtype(dtype)], argmax, 1, 70, 45, 301, sms=api.sm_count(0))[0] >= 3
    check(A, B, semiring, argmax)
    A3, B3 = adversarial(rng, (3, 33, 203), dtype), adversarial(rng, (3, 203, 65), dtype)
    check(A3, B3, semiring, argmax, batched=True)
    check(A3, B3[0], semiring, argmax, batched=True)  # broadcast B
    check(A3[0], B3, semiring, argmax, batched=True)  # broadcast A
    if np.dtype(dtype).kind == "i":  # a block of huge values: that slice falls back to exact arithmetic
        A[:, 150:] = adversarial(rng, (70, 151), dtype, huge=True)
        check(A, B, semiring, argmax)
    name = f"{semiring}_{api.DTYPE_CODE[np.dtype(dtype)]}{'_argmax' if argmax else ''}"
    assert {f"{name}_splitk", f"reduce_{name}"} <= set(tropical.family.compiled())


@pytest.mark.parametrize("layout", ["nt", "tn", "tt"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_splitk_transposed_views(dtype, layout, monkeypatch):
    monkeypatch.setattr(api, "_FORCE_TILE", "splitk")
    rng = np.random.default_rng(16)
    A, B = adversarial(rng, (77, 517), dtype), adversarial(rng, (517, 51), dtype)
    dA = transposed_view(A) if layout[0] == "t" else to_dev(A)
    dB = transposed_view(B) if layout[1] == "t" else to_dev(B)
    for semiring in SEMIRINGS:
        C, Ix = tropical.matmul(dA, dB, semiring, argmax=True)
        want = reference.matmul(A, B, semiring, argmax=True)
        np.testing.assert_array_equal(C.copy_to_host(), want[0])
        np.testing.assert_array_equal(Ix.copy_to_host(), want[1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_splitk_ties_across_slices_pick_the_smallest_k(dtype):
    """The maximum is attained in several slices (and several times in one): the first k wins."""
    M, K, N = 64, 4096, 64  # choose_tile splits this one by itself
    code = api.DTYPE_CODE[np.dtype(dtype)]
    assert tropical.choose_tile(code, True, 1, M, N, K) == "splitk"
    splits, kslice = plan.split_k(code, True, 1, M, N, K, sms=api.sm_count(0))
    assert splits >= 4
    A = np.zeros((M, K), dtype)
    B = np.zeros((K, N), dtype)
    A[:, 3 * kslice + 5] = 7  # slice 3
    A[:, kslice + 1] = 7  # slice 1: the winner
    A[:, kslice + 9] = 7  # slice 1 again, later k
    A[:10, kslice + 1] = 6  # rows 0..9: slice 1 now loses its first 7; k = kslice + 9 wins
    for semiring in ("maxplus", "maxmul"):
        check(A, B + 1, semiring, True)
    C, Ix = run(A, B + 1, "maxplus", True)
    assert (Ix[10:] == kslice + 1).all() and (Ix[:10] == kslice + 9).all()
    assert (C == 8).all()
    C, Ix = run(np.zeros((M, K), dtype), np.zeros((K, N), dtype), "minplus", True)  # every k ties: k = 0
    assert (Ix == 0).all() and (C == 0).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_splitk_nan_and_infinities(dtype):
    M, K, N = 50, 2000, 60
    rng = np.random.default_rng(17)
    A = rng.integers(-3, 4, (M, K)).astype(dtype)
    B = rng.integers(-3, 4, (K, N)).astype(dtype)
    A[:5] = -np.inf  # rows whose every product is the zero: C = -inf, argmax 0
    A[5:10] = np.nan  # every product NaN: the zero again
    A[10:15, 1500:] = np.inf  # +inf only in the last slices
    B[:, :3] = np.inf
    A[15:20, :] = -np.inf
    A[15:20, 1999] = 1.0  # one finite product, the very last k
    assert tropical.choose_tile("f32", True, 1, M, N, K) == "splitk"
    for semiring in SEMIRINGS:
        check(A, B, semiring, True)
        check(A, B, semiring, False)


@pytest.mark.parametrize("shape", [(64, 4096, 64), (256, 256, 256), (1, 5000, 1), (3000, 1024, 9)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_splitk_shapes_the_library_picks(shape, dtype):
    M, K, N = shape
    rng = np.random.default_rng(18)
    A, B = adversarial(rng, (M, K), dtype), adversarial(rng, (K, N), dtype)
    assert tropical.choose_tile(api.DTYPE_CODE[np.dtype(dtype)], True, 1, M, N, K) == "splitk"
    check(A, B, "maxplus", True)
    check(A, B, "minplus", False)


def test_splitk_workspace_is_freed_stream_ordered():
    from numba import cuda

    from lazykern.launch import memory

    rng = np.random.default_rng(19)
    A, B = to_dev(rng.standard_normal((64, 4096))), to_dev(rng.standard_normal((4096, 64)))
    s1, s2 = cuda.stream(), cuda.stream()
    live = memory.stats()["live"]
    r1 = tropical.matmul(A, B, argmax=True, stream=s1)
    r2 = tropical.matmul(A, B, argmax=True, stream=s2)
    r3 = tropical.matmul(A, B, "minplus", stream=s1)
    assert memory.stats()["live"] == live + 3  # a buffer of outputs per call; the workspaces went back to the pool
    want = reference.matmul(A.copy_to_host(), B.copy_to_host(), "maxplus", argmax=True)
    for C, Ix in (r1, r2):
        np.testing.assert_array_equal(C.copy_to_host(), want[0])
        np.testing.assert_array_equal(Ix.copy_to_host(), want[1])
    np.testing.assert_array_equal(r3.copy_to_host(), reference.matmul(A.copy_to_host(), B.copy_to_host(), "minplus"))


@pytest.mark.parametrize("tile", ["", "s"], indirect=True)
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_integer_extremes_take_the_exact_path(semiring, dtype, argmax, tile):
    rng = np.random.default_rng(3)
    A = adversarial(rng, (300, 50), dtype)
    B = adversarial(rng, (50, 260), dtype)
    A[200:] = adversarial(rng, (100, 50), dtype, huge=True)  # only the last row blocks see huge values
    check(A, B, semiring, argmax)
    check(adversarial(rng, (40, 9), dtype, huge=True), adversarial(rng, (9, 30), dtype, huge=True), semiring, argmax)


def integer_argmax_case(semiring, dtype, rng):
    """(A, B): infinity classes, ties and the zero laid out across K tiles; rows 64.. also saturate.

    Z is the semiring zero (lo for max-plus, hi for min-plus), W the other infinity.
    Rows 0-9: W at k=5 (times 0) and k=40 (times W, a larger sum on the fast path),
    k=3 is W times Z (the zero) for columns < 10, W times a finite value for the rest.
    Rows 10-19: every product is the zero. Rows 20-29: finite ties at k=17 and k=33.
    Rows 30-39: W only at k=99 (the last tile). Rows 64-127 repeat rows 0-63 (another
    row block); with ``huge`` they also hold operands outside the fast range (their
    blocks fall back to exact arithmetic), sums that saturate to W at k=7 and a W at
    k=2 (rows 104-109) or k=60 (rows 110-115).
    """
    info = np.iinfo(dtype)
    s = 1 if semiring == "maxplus" else -1
    Z, W = (info.min, info.max) if s == 1 else (info.max, info.min)
    M, K, N = 128, 100, 70
    A = rng.integers(-3, 4, (M, K)).astype(dtype)
    B = rng.integers(-3, 4, (K, N)).astype(dtype)
    special = [2, 3, 5, 7, 40, 50, 60, 99]
    B[5], B[40], B[50], B[99], B[2], B[60], B[7] = 0, W, W, 1, 0, 0, s * 5
    B[3, :10] = Z
    A[0:10, [3, 5, 40]] = W
    A[10:20] = Z
    A[20:30, special] = Z
    A[20:30, 17] = A[20:30, 33] = s * 10
    B[17] = B[33] = 0
    A[30:40, special] = Z
    A[30:40, 99] = W
    A[64:] = A[:64]
    return A, B, Z, W


@pytest.mark.parametrize("huge", [False, True])
@pytest.mark.parametrize("tile", ["", "s"], indirect=True)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_integer_argmax_infinities_ties_and_saturation(semiring, dtype, tile, huge):
    """The tiled fast-ring argmax (and the exact per-k fallback) keep the exact semantics."""
    rng = np.random.default_rng(21)
    A, B, Z, W = integer_argmax_case(semiring, dtype, rng)
    s = 1 if semiring == "maxplus" else -1
    info = np.iinfo(dtype)
    if huge:
        A[104:116, [2, 3, 5, 40, 50, 60, 99]] = Z
        A[104:116, 7] = s * (info.max - 1)  # unsafe for the fast ring; saturates to W
        A[104:110, 2] = W  # W first, the saturated tie later: k = 2
        A[110:116, 60] = W  # the saturated sum first: k = 7
    C, Ix = run(A, B, semiring, True)
    want = reference.matmul(A, B, semiring, argmax=True)
    np.testing.assert_array_equal(C, want[0])
    np.testing.assert_array_equal(Ix, want[1])
    for r0 in (0, 64):
        assert (Ix[r0 : r0 + 10, :10] == 5).all() and (C[r0 : r0 + 10] == W).all()
        assert (Ix[r0 : r0 + 10, 10:] == 3).all()
        assert (Ix[r0 + 10 : r0 + 20] == 0).all() and (C[r0 + 10 : r0 + 20] == Z).all()
        assert (Ix[r0 + 20 : r0 + 30] == 17).all() and (C[r0 + 20 : r0 + 30] == s * 10).all()
        assert (Ix[r0 + 30 : r0 + 40] == 99).all() and (C[r0 + 30 : r0 + 40] == W).all()
    if huge:
        assert (Ix[104:110] == 2).all() and (Ix[110:116] == 7).all() and (C[104:116] == W).all()


@pytest.mark.parametrize("tile", ["", "s"], indirect=True)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_integer_argmax_fast_and_exact_blocks_agree(semiring, dtype, tile):
    """The same rows in a fast block and in a block that fell back give the same C and argmax."""
    rng = np.random.default_rng(22)
    info = np.iinfo(dtype)
    A = adversarial(rng, (128, 150), dtype)
    B = adversarial(rng, (150, 200), dtype)
    check_fallback_block_agrees(A, B, semiring, info.min + 1 if semiring == "maxplus" else info.max - 1)


def check_fallback_block_agrees(A, B, semiring, unsafe):
    """Rows 64.. repeat rows 0..63, plus one operand ``unsafe`` for the fast path: that row block
    falls back, and its answers (but the last row's) equal the fast block's and the reference."""
    A[64:] = A[:64]
    A[127, -1] = unsafe
    C, Ix = run(A, B, semiring, True)
    want = reference.matmul(A, B, semiring, argmax=True)
    np.testing.assert_array_equal(C, want[0])
    np.testing.assert_array_equal(Ix, want[1])
    np.testing.assert_array_equal(C[:63], C[64:127])
    np.testing.assert_array_equal(Ix[:63], Ix[64:127])


def packed_argmax_case(semiring, rng, M=133, K=200, N=141):
    """Small finite i32 operands (the packed argmax path) with ties planted at tile and span edges.

    Rows 0-9 win at k = 15 and 16 (a K tile's edge), rows 10-19 at 63 and 64 (a span's),
    rows 20-29 at 31, 32 and K - 1, rows 30-39 only at K - 1; the smallest k must win.
    Rows 40.. hold +-bound, the largest operand every packed variant takes.
    """
    s = -1 if semiring == "minplus" else 1
    bound = 4095 if semiring == "maxmul" else 2**22
    A = rng.integers(-3, 4, (M, K)).astype(np.int32)
    B = rng.integers(-3, 4, (K, N)).astype(np.int32)
    mask = rng.random((M - 40, K)) < 0.05
    A[40:][mask] = rng.choice(np.array([-bound, bound], np.int32), size=int(mask.sum()))
    plant = {(0, 10): (15, 16), (10, 20): (63, 64), (20, 30): (31, 32, K - 1), (30, 40): (K - 1,)}
    for (r0, r1), ks in plant.items():
        A[r0:r1, list(ks)] = s * 1000
    B[[15, 16, 31, 32, 63, 64, K - 1]] = 1 if semiring == "maxmul" else 0
    return A, B, plant


@pytest.mark.parametrize("tile", ["", "s", "t", "splitk"], indirect=True)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_packed_integer_argmax_ties_edges_and_bounds(semiring, layout, tile):
    """i32 argmax on small finite operands: the first k wins across K tiles, spans and split-K slices."""
    rng = np.random.default_rng(24)
    A, B, plant = packed_argmax_case(semiring, rng)
    dA = transposed_view(A) if layout[0] == "t" else to_dev(A)
    dB = transposed_view(B) if layout[1] == "t" else to_dev(B)
    C, Ix = (r.copy_to_host() for r in tropical.matmul(dA, dB, semiring, argmax=True))
    want = reference.matmul(A, B, semiring, argmax=True)
    np.testing.assert_array_equal(C, want[0])
    np.testing.assert_array_equal(Ix, want[1])
    for (r0, r1), ks in plant.items():
        assert (Ix[r0:r1] == ks[0]).all()


@pytest.mark.parametrize("tile", ["", "s"], indirect=True)
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_packed_integer_argmax_batched_and_fallback_blocks_agree(semiring, tile):
    """bmm on the packed path; a block with an operand beyond the packed bound falls back, same answers."""
    rng = np.random.default_rng(25)
    A, B, _ = packed_argmax_case(semiring, rng, M=128, K=150, N=70)
    check(np.stack([A, A[::-1]]), np.stack([B, B]), semiring, True, batched=True)
    check_fallback_block_agrees(A, B, semiring, 2**24 + 1 if semiring != "maxmul" else 8192)  # beyond every bound


@pytest.mark.parametrize("layout", ["nt", "tn", "tt"])
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_transposed_views_are_read_in_place(semiring, dtype, argmax, layout, monkeypatch):
    monkeypatch.setattr(api, "_FORCE_TILE", "")
    rng = np.random.default_rng(4)
    A = adversarial(rng, (150, 45), dtype)
    B = adversarial(rng, (45, 131), dtype)
    dA = transposed_view(A) if layout[0] == "t" else to_dev(A)
    dB = transposed_view(B) if layout[1] == "t" else to_dev(B)
    res = tropical.matmul(dA, dB, semiring, argmax=argmax)
    want = reference.matmul(A, B, semiring, argmax)
    if argmax:
        np.testing.assert_array_equal(res[0].copy_to_host(), want[0])
        np.testing.assert_array_equal(res[1].copy_to_host(), want[1])
    else:
        np.testing.assert_array_equal(res.copy_to_host(), want)
    assert f"{semiring}_{'i64' if dtype == 'int64' else 'f32'}{'_argmax' if argmax else ''}_{layout}" in (
        tropical.family.compiled()
    )


@pytest.mark.parametrize(
    "shape", [(1, 1, 1), (4, 4, 4), (1000, 3, 2), (2, 5, 3000), (3, 0, 5), (0, 4, 5), (5, 4, 0), (1, 2000, 1)]
)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_edge_shapes(shape, dtype):
    M, K, N = shape
    rng = np.random.default_rng(5)
    A, B = adversarial(rng, (M, K), dtype), adversarial(rng, (K, N), dtype)
    for semiring in SEMIRINGS:
        check(A, B, semiring, True)
        check(A, B, semiring, False)


def test_numpy_inputs_round_trip():
    rng = np.random.default_rng(6)
    A, B = rng.standard_normal((70, 30)), rng.standard_normal((30, 20))
    C, Ix = tropical.matmul(A, B, "minplus", argmax=True)
    assert isinstance(C, np.ndarray)
    want = reference.matmul(A, B, "minplus", argmax=True)
    np.testing.assert_array_equal(C, want[0])
    np.testing.assert_array_equal(Ix, want[1])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batched", [False, True])
def test_backward_matches_reference(dtype, batched):
    rng = np.random.default_rng(7)
    if batched:
        A, B = adversarial(rng, (3, 90, 33), dtype), adversarial(rng, (33, 70), dtype)
    else:
        A, B = adversarial(rng, (130, 33), dtype), adversarial(rng, (33, 140), dtype)
    fn = tropical.bmm if batched else tropical.matmul
    _, Ix = fn(to_dev(A), to_dev(B), "maxplus", argmax=True)
    G = rng.standard_normal(Ix.shape).astype(dtype)
    gA, gB = tropical.matmul_backward(to_dev(G), Ix, A.shape, B.shape)
    wA, wB = reference.matmul_backward(G, Ix.copy_to_host(), A.shape, B.shape)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(gA.copy_to_host(), wA, rtol=tol, atol=tol)
    np.testing.assert_allclose(gB.copy_to_host(), wB, rtol=tol, atol=tol)


BACKWARD_CASES = [  # (batch or None, M, K, N, A broadcast, B broadcast): every plan of plan.backward_plan
    (None, 40, 3000, 50, False, False),  # grad_B in 3 K chunks (f32; f64: 6)
    (None, 33, 9000, 40, False, False),  # grad_A in 2 K chunks (f64: 3)
    (None, 5000, 20, 40, False, False),  # grad_B strips split into row groups
    (None, 40, 300, 3000, False, False),  # grad_A rows split into column groups
    (None, 20, 70, 10, False, False),  # short rows: the per-element atomic kernel
    (3, 64, 700, 48, True, False),  # a broadcast A: its gradient sums the batch
    (3, 64, 700, 48, False, True),
]


@pytest.mark.parametrize("case", BACKWARD_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_backward_every_plan(dtype, case):
    """Random argmax (with out-of-range -1 and K entries, which add nothing) against the reference."""
    batch, M, K, N, bcast_a, bcast_b = case
    rng = np.random.default_rng(8)
    lead = () if batch is None else (batch,)
    Ix = rng.integers(-1, K + 1, lead + (M, N)).astype(np.int32)
    G = rng.standard_normal(Ix.shape).astype(dtype)
    A_shape = (M, K) if bcast_a or batch is None else (batch, M, K)
    B_shape = (K, N) if bcast_b or batch is None else (batch, K, N)
    gA, gB = tropical.matmul_backward(to_dev(G), to_dev(Ix), A_shape, B_shape)
    wA, wB = reference.matmul_backward(G, Ix, A_shape, B_shape)
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(gA.copy_to_host(), wA, rtol=tol, atol=tol)
    np.testing.assert_allclose(gB.copy_to_host(), wB, rtol=tol, atol=tol)
    out = (to_dev(np.full(A_shape, 7, dtype)), to_dev(np.full(B_shape, 7, dtype)))  # reused: overwritten
    tropical.matmul_backward(to_dev(G), to_dev(Ix), A_shape, B_shape, out=out)
    np.testing.assert_allclose(out[0].copy_to_host(), wA, rtol=tol, atol=tol)
    np.testing.assert_allclose(out[1].copy_to_host(), wB, rtol=tol, atol=tol)


def test_out_and_stream():
    from numba import cuda

    rng = np.random.default_rng(8)
    A, B = rng.standard_normal((200, 64)).astype(np.float32), rng.standard_normal((64, 300)).astype(np.float32)
    s = cuda.stream()
    C = cuda.device_array((200, 300), np.float32)
    Ix = cuda.device_array((200, 300), np.int32)
    res = tropical.matmul(to_dev(A), to_dev(B), "maxmul", argmax=True, out=(C, Ix), stream=s)
    assert res[0] is C and res[1] is Ix
    s.synchronize()
    want = reference.matmul(A, B, "maxmul", argmax=True)
    np.testing.assert_array_equal(C.copy_to_host(), want[0])
    np.testing.assert_array_equal(Ix.copy_to_host(), want[1])


def test_strided_operand_needs_copy():
    cupy = pytest.importorskip("cupy")
    A = cupy.asarray(np.random.default_rng(9).standard_normal((40, 60)).astype(np.float32))
    B = cupy.ones((30, 7), cupy.float32)
    with pytest.raises(ValueError, match="copy=True"):
        tropical.matmul(A[:, ::2], B)
    C = tropical.matmul(A[:, ::2], B, copy=True)
    np.testing.assert_array_equal(C.get(), reference.matmul(A[:, ::2].get(), B.get(), "maxplus"))


def test_cupy_inputs_on_the_current_stream():
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(10)
    A, B = rng.standard_normal((300, 40)), rng.standard_normal((40, 200))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        dA, dB = cupy.asarray(A), cupy.asarray(B)
        C = tropical.matmul(dA, dB.T.copy().T, "maxplus")  # B as a transposed view
        assert isinstance(C, cupy.ndarray)
    s.synchronize()
    np.testing.assert_array_equal(C.get(), reference.matmul(A, B, "maxplus"))


def test_torch_inputs_and_autograd():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    from lazykern.tropical import torch as ttorch

    rng = np.random.default_rng(11)
    A0, B0 = rng.standard_normal((3, 50, 20)), rng.standard_normal((20, 40))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        A = torch.tensor(A0, device="cuda", requires_grad=True)
        B = torch.tensor(B0, device="cuda", requires_grad=True)
        C = ttorch.matmul(A, B, "maxplus")
        C.backward(torch.ones_like(C))
    s.synchronize()
    want, Ix = reference.bmm(A0, B0, "maxplus", argmax=True)
    np.testing.assert_array_equal(C.detach().cpu().numpy(), want)
    wA, wB = reference.matmul_backward(np.ones_like(want), Ix, A0.shape, B0.shape)
    np.testing.assert_allclose(A.grad.cpu().numpy(), wA)
    np.testing.assert_allclose(B.grad.cpu().numpy(), wB)
    At = torch.tensor(A0[0].T.copy(), device="cuda").t()  # a transposed view, read in place
    T = tropical.matmul(At, torch.tensor(B0, device="cuda"), "minplus")
    assert isinstance(T, torch.Tensor)
    np.testing.assert_array_equal(T.cpu().numpy(), reference.matmul(A0[0], B0, "minplus"))


@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
@pytest.mark.parametrize("batched", [False, True])
def test_torch_gradcheck(semiring, batched):
    """torch.autograd.gradcheck (finite differences, f64) through the GPU kernels, backward included."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    from lazykern.tropical import torch as ttorch

    gen = torch.Generator(device="cuda").manual_seed(5)
    shape_a = (3, 17, 9) if batched else (17, 9)
    A = torch.randn(shape_a, dtype=torch.float64, device="cuda", generator=gen, requires_grad=True)
    B = torch.randn(9, 11, dtype=torch.float64, device="cuda", generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ttorch.matmul(a, b, semiring), (A, B), eps=1e-6, atol=1e-6)


def test_second_call_compiles_nothing():
    rng = np.random.default_rng(12)
    A, B = to_dev(rng.standard_normal((64, 64))), to_dev(rng.standard_normal((64, 64)))
    tropical.matmul(A, B)
    before = tropical.family.compile_calls
    for _ in range(3):
        tropical.matmul(A, B)
    assert tropical.family.compile_calls == before


MUL_FAST_BOUND = {"int32": 46340, "int64": 2**31 - 1}  # lk::Num<T>::mul_unit


def maxmul_case(dtype, rng, K):
    """(A, B) for max-times on the fast ring: operands at +-w (the bound), ties, all-equal rows.

    Rows 0-9, columns 0-4: every product is -w^2 (w times -w), the smallest finite
    product, which is also what the padding of a ragged last K tile multiplies to:
    argmax 0. Columns 5..: rows 10-19 have +w^2 at k = 1 and k = K - 1 (a tie in the
    last, ragged tile): argmax 1; rows 20-29 finite ties of 6 at k = 4, 20, 36.
    Rows 64-127 repeat rows 0-63 (another row block, which tests may push onto the
    exact ring).
    """
    w = MUL_FAST_BOUND[dtype]
    M, N = 128, 70
    A = rng.integers(-3, 4, (M, K)).astype(dtype)
    B = rng.integers(-3, 4, (K, N)).astype(dtype)
    A[0:10] = w
    B[:, :] = np.where(rng.random((K, N)) < 0.5, B, -w)
    A[10:20] = -1
    A[10:20, [1, K - 1]] = w
    B[1] = B[K - 1] = w
    A[20:30] = 0
    A[20:30, [4, 20, 36]] = 2
    B[[4, 20, 36]] = 3
    B[:, :5] = -w
    A[64:] = A[:64]
    return A, B, w


@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("K", [100, 96, 1])
@pytest.mark.parametrize("tile", ["", "s", "t"], indirect=True)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_maxmul_fast_path_bounds_ties_and_padding(dtype, tile, K, argmax):
    """Operands at +-w stay on the fast ring and give the exact products; padding never wins."""
    rng = np.random.default_rng(31)
    A, B, w = maxmul_case(dtype, rng, max(K, 40))
    A, B = np.ascontiguousarray(A[:, :K]), np.ascontiguousarray(B[:K])
    check(A, B, "maxmul", argmax)
    if argmax and K == 100:
        C, Ix = run(A, B, "maxmul", True)
        assert (Ix[0:10, :5] == 0).all() and (C[0:10, :5] == -(w * w)).all()
        assert (Ix[10:20, 5:] == 1).all() and (C[10:20, 5:] == w * w).all()
        assert (Ix[20:30, 5:] == 4).all() and (C[20:30, 5:] == 6).all()


@pytest.mark.parametrize("spoiler", ["lo", "hi", "over", "huge"])
@pytest.mark.parametrize("tile", ["", "s"], indirect=True)
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_maxmul_fast_and_exact_blocks_agree(dtype, tile, spoiler):
    """One operand outside the fast range sends its row block to the exact ring: same results.

    ``over`` is w + 1 (the first value the fast ring refuses), ``huge`` saturates
    (hi // 2 times 3), ``lo`` / ``hi`` are the infinities (lo absorbs, hi times a
    value <= 0 gives lo).
    """
    rng = np.random.default_rng(32)
    info = np.iinfo(dtype)
    A, B, w = maxmul_case(dtype, rng, 100)
    value = {"lo": info.min, "hi": info.max, "over": w + 1, "huge": info.max // 2}[spoiler]
    A[127, 99] = value
    A[120:124, 50] = value
    B[50, :7] = [3, 0, -2, info.max, info.min, 1, -1]
    for argmax in (False, True):
        check(A, B, "maxmul", argmax)
    C, Ix = run(A, B, "maxmul", True)
    np.testing.assert_array_equal(C[:56], C[64:120])
    np.testing.assert_array_equal(Ix[:56], Ix[64:120])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_maxmul_mixed_blocks_adversarial(dtype):
    """Sprinkled infinities (exact blocks) beside infinity-free blocks (fast), bmm too."""
    rng = np.random.default_rng(33)
    A = rng.integers(-9, 10, (3, 200, 70)).astype(dtype)
    B = rng.integers(-9, 10, (3, 70, 150)).astype(dtype)
    A[1, 130:] = adversarial(rng, (70, 70), dtype)
    B[2] = adversarial(rng, (70, 150), dtype)
    for argmax in (False, True):
        check(A, B, "maxmul", argmax, batched=True)
        check(A[0], B[0], "maxmul", argmax)
        check(A[1], B[1], "maxmul", argmax)


@pytest.mark.parametrize("tile", ["", "s", "t", "splitk"], indirect=True)
@pytest.mark.parametrize("layout", ["nn", "tt"])
@pytest.mark.parametrize("argmax", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_maxmul_absorbs_its_zero_and_takes_zero_times_inf_as_zero(dtype, argmax, layout, tile):
    """Nonnegative operands with infinities in some row blocks only: a block holding one leaves the plain
    IEEE product (-inf * -inf = +inf, 0 * inf = NaN) for the exact one, the others keep it; rows 128..
    repeat rows 0.. without the infinities, and every entry equals the reference (argmax included)."""
    rng = np.random.default_rng(74)
    M, K, N = 300, 700, 130
    A = rng.integers(0, 4, (M, K)).astype(dtype)
    B = rng.integers(0, 4, (K, N)).astype(dtype)
    A[1, 5], B[5, 7] = np.inf, 0.0  # C[1, 7] may reach 0 * inf = 0
    A[2, :] = -np.inf
    B[:, 3] = -np.inf  # column 3 and row 2: the zero times the zero is the zero, never +inf
    A[4, 600:] = np.inf  # +inf in late K tiles only (a late switch to the exact product)
    A[5, :], B[:, 9] = 0.0, np.inf  # C[5, 9]: every product 0 * inf = 0
    A[6, 10] = np.nan
    A[8, :], A[8, 0], B[0, 11] = 0.0, np.inf, 0.0  # C[8, 11] = 0 from k = 0 on (0 * inf = 0 first: argmax 0)
    A[256:] = -A[256:]  # negative results, no infinity: looked at, kept
    A[128:256] = A[:128]
    A[128:136] = rng.integers(0, 4, (8, K)).astype(dtype)  # the copies lose their infinities
    ops = [to_dev(A) if layout[0] == "n" else transposed_view(A), to_dev(B) if layout[1] == "n" else transposed_view(B)]
    res = tropical.matmul(*ops, "maxmul", argmax=argmax)
    got = tuple(r.copy_to_host() for r in res) if argmax else (res.copy_to_host(),)
    want = reference.matmul(A, B, "maxmul", argmax=argmax)
    want = want if argmax else (want,)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0][2].tolist() == [-np.inf] * N and got[0][5, 9] == got[0][8, 11] == 0.0 and not np.isnan(got[0]).any()
    if argmax:
        np.testing.assert_array_equal(got[1], want[1])
    Ab, Bb = np.stack([A[:64], A[64:128]]), np.stack([B, B[:, ::-1].copy()])
    np.testing.assert_array_equal(tropical.bmm(to_dev(Ab), to_dev(Bb), "maxmul").copy_to_host(),
                                  reference.bmm(Ab, Bb, "maxmul"))  # fmt: skip
