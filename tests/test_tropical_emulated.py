"""The tropical GEMM kernels' CUDA C++ run on the CPU (g++, :mod:`tests._tropical_emulator`) against the
NumPy reference, on the inputs that break products: NaN, +-inf, integer bounds and sums past them, ties for
argmax, K = 0, sizes off the tiles. A GPU runs the same source (session 61's hostile round: 1,890 cases
over 432 kernels matched; these are a few of each kind, kept small for CI)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from lazykern.tropical import reference

from ._tropical_emulator import Emulator

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) to emulate CUDA kernels")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    return Emulator(tmp_path_factory.mktemp("tropical-emulated"))


def _hostile(rng, dtype, shape):
    if np.dtype(dtype).kind == "f":
        pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 2.5, -3.0], dtype=dtype)
    else:
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, info.min + 1, info.max - 1, 0, 1, -1, 2, -3], dtype=dtype)
    values = rng.integers(-3, 4, shape).astype(dtype)  # small values: ties for argmax
    hostile = rng.random(shape) < 0.3
    values[hostile] = rng.choice(pool, int(hostile.sum()))
    return values


@pytest.mark.parametrize(
    "semiring, dtype, argmax, tile, M, N, K",
    [
        ("maxplus", np.float32, True, None, 33, 17, 29),
        ("minplus", np.float64, False, None, 5, 70, 3),
        ("maxmul", np.float32, True, "t", 9, 9, 40),
        ("maxmul", np.float64, True, "s", 7, 5, 13),  # K off the tile: padded products must never win
        ("maxplus", np.int32, True, "s", 40, 33, 65),
        ("minplus", np.int64, True, None, 3, 4, 0),  # K = 0: the zero, argmax -1
        ("maxmul", np.int64, False, None, 17, 2, 31),
        ("maxplus", np.float64, True, "splitk", 2, 3, 300),
        # split-K of one slice (K too short to split): the batched 64 x 64 tile writes C itself, no reduce
        ("maxplus", np.float32, True, "splitk", 70, 65, 40),
        ("minplus", np.int32, True, "splitk", 64, 64, 17),
        ("maxmul", np.float64, True, "splitk", 65, 3, 1),
        ("maxplus", np.int64, False, "splitk", 5, 64, 64),
        ("maxplus", np.float32, True, "m", 70, 65, 300),  # the medium tile: one slice over a K split-K would cut
        ("minplus", np.float64, False, "m", 3, 100, 130),
    ],
)
def test_a_kernel_equals_the_reference_on_hostile_inputs(emulator, semiring, dtype, argmax, tile, M, N, K):
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    A, B = _hostile(rng, dtype, (M, K)), _hostile(rng, dtype, (K, N))
    plan, C, index = emulator.product(semiring, A, B, argmax, tile=tile)
    want = reference.matmul(A, B, semiring, argmax=argmax)
    values = want[0] if argmax else want
    assert C.dtype == values.dtype and np.array_equal(C, values, equal_nan=True), plan.name
    if argmax:
        assert np.array_equal(index, want[1]), plan.name


@pytest.mark.parametrize(
    "dtype, argmax, tile, M, N, K",
    [
        (np.float32, False, "s", 70, 40, 37),
        (np.float32, True, "s", 70, 9, 20),
        (np.float64, False, None, 20, 70, 33),
        (np.float32, False, "splitk", 3, 5, 600),
    ],
)
def test_float_maxmul_blocks_with_an_infinity_take_the_exact_product(emulator, dtype, argmax, tile, M, N, K):
    """Nonnegative operands, an infinity in some blocks only: those blocks leave the plain IEEE product
    (-inf * -inf = +inf, 0 * inf = NaN) for the exact one, the others keep it; all equal the reference."""
    rng = np.random.default_rng(M + N + K)
    A, B = rng.integers(0, 4, (M, K)).astype(dtype), rng.integers(0, 4, (K, N)).astype(dtype)
    A[1, 5], B[5, :] = np.inf, 0.0  # row 1 reaches 0 * inf = 0 at k = 5
    A[2, :], B[:, 3] = -np.inf, -np.inf  # row 2, column 3: only the zero times the zero
    A[M - 1, K - 1] = np.nan
    if M > 9:
        A[3, :], A[3, 0], B[0, 4] = 0.0, np.inf, 0.0  # C[3, 4] = 0, reached first at k = 0 (argmax 0)
        A[M - 9 :] = -A[M - 9 :]  # negative results without an infinity (M = 70: a block of its own on "s")
    plan, C, index = emulator.product("maxmul", A, B, argmax, tile=tile)
    want = reference.matmul(A, B, "maxmul", argmax=argmax)
    values = want[0] if argmax else want
    assert np.array_equal(C, values, equal_nan=True), plan.name
    assert C[2, 0] == -np.inf and C[0, 3] == -np.inf and (M < 10 or C[3, 4] == 0.0) and not np.isnan(C).any()
    if argmax:
        assert np.array_equal(index, want[1]), plan.name
