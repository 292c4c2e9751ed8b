"""lazykern.tn.algebras._scaledsum_kernels: the scaled-sum kernels' CUDA source run on the CPU (built with the
host's C++ compiler under tests/_kbest_host.py's emulation of blocks, threads, shared memory and barriers)
around NumPy's matrix product, against the NumPy step of :class:`~lazykern.tn.algebras.scaledsum.ScaledSumAlgebra`."""

from __future__ import annotations

import ctypes
import math
from importlib import resources

import numpy as np
import pytest

from lazykern.tn._contract import Algebra
from lazykern.tn.algebras import _scaledsum_kernels as K
from lazykern.tn.algebras import scaledsum
from lazykern.tn.algebras.logsum import TINY

from . import _kbest_host

SIDE = ("void **p, long long rows, int R, int K, long long sb, long long sr, long long sk, long long eb, "
        "long long er, long long ek, double c")  # fmt: skip
FINISH = "void **p, long long outputs, int M, int N, long long ab, long long bb, double c, double tiny"


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if _kbest_host.compiler() is None:
        pytest.skip("no host C++ compiler to build the kernels' source with")
    parts = [_kbest_host.SHIM, resources.files("lazykern.tn.algebras").joinpath("scaledsum.cu").read_text("utf-8")]
    call = "(const double *)p[0], (const double *)p[1], (double *)p[2], (double *)p[3], (double *)p[4], "
    for name, team in K.SIDES.items():
        parts += [
            K.side_source(name, team),
            _kbest_host.runner(name, SIDE, call + "rows, R, K, sb, sr, sk, eb, er, ek, c"),
        ]
    finish = ("(const double *)p[0], (const double *)p[1], (const double *)p[2], (const double *)p[3], "
              "(const double *)p[4], (const double *)p[5], (double *)p[6], (int *)p[7], "
              "outputs, M, N, ab, bb, c, tiny")  # fmt: skip
    parts += [K.finish_source("ss_finish"), _kbest_host.runner("ss_finish", FINISH, finish)]
    return _kbest_host.library("\n".join(parts), tmp_path_factory.mktemp("scaledsum_host"), "scaledsum")


def _launch(lib, call, pointers):
    name, blocks, args = call
    ptrs = (ctypes.c_void_p * pointers)(*args[:pointers])
    rest = args[pointers:]
    kinds = {"ss_finish": ("q", "i", "i", "q", "q", "d", "d")}.get(
        name, ("q", "i", "i", "q", "q", "q", "q", "q", "q", "d")
    )
    typed = [
        {"q": ctypes.c_longlong, "i": ctypes.c_int, "d": ctypes.c_double}[k](v)
        for k, v in zip(kinds, rest, strict=True)
    ]
    getattr(lib, f"run_{name}")(ctypes.c_int(blocks), ctypes.c_int(K.THREADS), ptrs, *typed)


def _step(lib, A, B, c):
    """The device route's step (:meth:`ScaledSumAlgebra._device`), its kernels emulated: (s, logw, flag)."""
    be = _kbest_host.HOST
    (s,), _ = Algebra("maxplus", be).bmm((A[0],), (B[0],), False)
    s = np.ascontiguousarray(s)
    sides = []
    for (t, logs), columns in ((A, False), (B, True)):
        out, call = K.side_arguments(be, t, logs, columns, c)
        _launch(lib, call, 5)
        sides.append(out)
    (EA, a, xa), (EB, b, yb) = sides
    total = np.ascontiguousarray(np.matmul(EA, EB))
    (logw, flag), call = K.finish_arguments(be, s, total, a, xa, b, yb, c, TINY)
    _launch(lib, call, 8)
    return s, logw, int(flag[0]), call


def _operand(rng, shape, transposed=False, gap=6):
    """(t, l): whole t in a range of ``gap`` with a fifth -inf (l -inf there), l in [0, 2)."""
    t = rng.integers(-gap, gap + 1, shape).astype(np.float64)
    t[rng.random(shape) < 0.2] = -np.inf
    logs = np.where(np.isinf(t), -np.inf, rng.random(shape) * 2)
    if transposed:  # read across its unit stride
        t, logs = (np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1) for x in (t, logs))
    return t, logs


CASES = [  # (A's shape, B's shape, A read across, B read across)
    ((2, 5, 7), (2, 7, 4), False, False),
    ((1, 6, 3), (3, 3, 5), True, False),  # A broadcast over the batch
    ((3, 4, 300), (1, 300, 2), False, True),  # long rows: a block a row, B read across
    ((1, 1, 700), (1, 700, 1), True, True),
    ((2, 3, 1), (2, 1, 3), False, False),  # an outer product
]


@pytest.mark.parametrize("sa,sb,ta,tb", CASES)
@pytest.mark.parametrize("c", [0.0, 0.7, 3.0])
def test_the_kernels_give_the_numpy_steps_log_weights(lib, sa, sb, ta, tb, c):
    rng = np.random.default_rng(sa[2] + sb[2] + int(10 * c))
    A, B = _operand(rng, sa, ta), _operand(rng, sb, tb)
    blank = sa[1] > 1  # a row of A with no term: every output of it -inf
    if blank:
        A[0][0, 0, :] = A[1][0, 0, :] = -np.inf
    s, logw, flag, call = _step(lib, A, B, c)
    alg = scaledsum.algebra(c)("maxplus", _kbest_host.HOST)
    (want_s, want_l), _ = alg.bmm(A, B, False)
    assert np.array_equal(s, want_s) and flag == 0
    assert np.array_equal(np.isinf(logw), np.isinf(want_l)) and (not blank or (logw[0, 0] == -np.inf).all())
    finite = np.isfinite(want_l)
    assert finite.any() and np.allclose(logw[finite], want_l[finite], rtol=1e-14, atol=1e-14)
    assert call[0] == "ss_finish"


def test_long_and_short_rows_take_their_kernels():
    be = _kbest_host.HOST
    short = np.zeros((1, 4, K.LONG_ROW - 1)), np.zeros((1, 4, K.LONG_ROW - 1))
    long = np.zeros((1, 4, K.LONG_ROW)), np.zeros((1, 4, K.LONG_ROW))
    assert K.side_arguments(be, *short, False, 1.0)[1][0] == "ss_side_rows"
    assert K.side_arguments(be, *long, False, 1.0)[1][0] == "ss_side_long"
    wide = np.zeros((1, 3, 500)), np.zeros((1, 3, 500))  # B of K = 3 and 500 columns
    assert K.side_arguments(be, *wide, True, 1.0)[1][0] == "ss_side_rows"


def test_a_sum_that_may_have_underflowed_raises_the_flag(lib):
    """Every k pairs an entry far below its row's best with one far below its column's: the scaled sum
    underflows (below TINY) though the entry's weight is above 0. The flag says so, and the device step
    then redoes the entries by the streamed sum: the NumPy step's answer, log(2) here."""
    big = 800.0
    A = (np.array([[[0.0, -big]]]), np.zeros((1, 1, 2)))  # row best at k = 0
    B = (np.array([[[-big], [0.0]]]), np.zeros((1, 2, 1)))  # column best at k = 1
    s, logw, flag, _ = _step(lib, A, B, 1.0)
    assert s.item() == -big and flag == 1
    alg = scaledsum.algebra(1.0)("maxplus", _kbest_host.HOST)
    (_, want), _ = alg.bmm(A, B, False)
    assert want.item() == pytest.approx(math.log(2.0), rel=1e-15)


def test_nan_is_taken_as_the_array_maximum_takes_it(lib):
    """A NaN best t propagates (as NumPy's maximum does), never read as a number."""
    A = (np.array([[[np.nan, 0.0]]]), np.zeros((1, 1, 2)))
    B = (np.array([[[0.0], [0.0]]]), np.zeros((1, 2, 1)))
    be = _kbest_host.HOST
    (E, top, xtop), call = K.side_arguments(be, *A, False, 1.0)
    _launch(lib, call, 5)
    assert np.isnan(top).all()
    del B
