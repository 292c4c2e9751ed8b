"""One contraction step (lazykern/tn/_contract.py) on the GPU route's host stand-in: a backend that is
not NumPy's, over NumPy arrays."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lazykern.tn import _contract, _strided
from lazykern.tn._backend import Backend
from lazykern.tn._contract import Algebra, Term


def test_a_step_the_row_kernel_cannot_take_copies_nothing(monkeypatch):
    """K > KMAX: no copy of the large operand can fit the row kernel, so the strided route declines
    before copying it (it used to copy X into (contracted, rest, batch) order and then decline)."""
    be = Backend("cupy", np)
    alg = Algebra("maxplus", be)
    rng = np.random.default_rng(0)
    X = Term((rng.standard_normal((16, 16, 16)).astype(np.float32).transpose(2, 0, 1),), ("c", "a", "b"))
    Y = Term((rng.standard_normal((16, 2)).astype(np.float32),), ("c", "d"))
    copies = []
    real = Backend.contiguous
    monkeypatch.setattr(Backend, "contiguous", lambda self, x: copies.append(x.shape) or real(self, x))
    assert not _strided.fits_rows(X.labels, Y.labels, (16, 2), {"a", "b", "d"})
    assert _contract._strided_step(alg, X, Y, {"a", "b", "d"}) is None and copies == []
    assert _strided.fits_rows(X.labels, ("b", "d"), (16, 2), {"a", "c", "d"}) is False  # K = 16 again
    assert _strided.fits_rows(("a", "b"), ("b", "d"), (4, 8), {"a", "d"})  # K = 4, N = 8
    out, _ = _contract.contract(alg, X, Y, {"a", "b", "d"}, False)
    want = np.max(X.parts[0][:, :, :, None] + Y.parts[0][:, None, None, :], axis=0)  # (a, b, d)
    np.testing.assert_array_equal(np.moveaxis(out.parts[0], [out.labels.index(x) for x in "abd"], [0, 1, 2]), want)


def test_parts_laid_out_alike_are_arranged_as_the_first():
    """A term of several parts (values and counts): each part comes out of _arrange exactly as it
    would alone (same entries, same strides), whether its strides equal the first part's or not."""
    be = Backend("cupy", np)
    rng = np.random.default_rng(1)
    base = rng.standard_normal((2, 3, 4, 5))
    labels = ("a", "b", "c", "d")
    orders = [[("a",), ("b", "d"), ("c",)], [("a",), ("c",), ("b", "d")]]
    layouts = [base, base.transpose(2, 0, 3, 1).copy().transpose(1, 3, 0, 2), base[:, :, ::-1]]
    for first, second in itertools.product(layouts, repeat=2):
        parts = (first.astype(np.float32), second.astype(np.int64), first.astype(np.int64))
        together, swapped = _contract._arrange(be, Term(parts, labels), orders)
        for part, got in zip(parts, together):
            (alone,), alone_swapped = _contract._arrange(be, Term((part,), labels), orders)
            assert swapped == alone_swapped and got.shape == alone.shape and got.strides == alone.strides
            np.testing.assert_array_equal(got, alone)


def test_a_binary_operand_of_six_parts_is_copied_in_two_launches(monkeypatch):
    """A k-best operand (2 float32 values, 2 int64 counts, 2 residues) whose layout needs a copy: one
    bit-permutation launch per dtype and one allocation per dtype in the step, not one per part; the
    arranged parts equal NumPy's own arrangement."""
    from lazykern.tn import _permute

    be = Backend("cupy", np)
    rng = np.random.default_rng(5)
    labels = tuple("abcdefgh")
    parts = tuple(rng.integers(0, 9, size=(2,) * 8).astype(d) for d in ["float32"] * 2 + ["int64"] * 4)
    launches, allocations = [], []
    real_parts, real_empty = _permute.copy_parts, Backend.empty
    monkeypatch.setattr(
        _permute, "copy_parts", lambda *a: launches.append(len({p.dtype for p in a[1]})) or real_parts(*a)
    )
    monkeypatch.setattr(_permute, "copy", lambda *a: pytest.fail("a part copied on its own"))
    monkeypatch.setattr(
        Backend, "empty", lambda self, x, shape: allocations.append(shape) or real_empty(self, x, shape)
    )
    orders = [[("a", "b"), ("e", "c", "h"), ("d", "f", "g")], [("a", "b"), ("d", "f", "g"), ("e", "c", "h")]]
    got, swapped = _contract._arrange(be, Term(parts, labels), orders)
    want, want_swapped = _contract._arrange(Backend("numpy", np), Term(parts, labels), orders)
    assert launches == [2] and len(allocations) == 2 and swapped == want_swapped
    assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))


@pytest.mark.gpu
def test_pointer_is_the_array_interfaces_address():
    """Backend.pointer reads the library's own attribute; it must name the same first entry as the
    CUDA Array Interface for views at an offset, transposed and reversed."""
    cupy = pytest.importorskip("cupy")
    be = Backend("cupy", cupy)
    x = cupy.arange(60, dtype=cupy.float32).reshape(3, 4, 5)
    for view in (x, x[1:], x[:, 2:].transpose(2, 0, 1), x[::-1, :, 3], x[2, 1:3]):
        assert be.pointer(view) == view.__cuda_array_interface__["data"][0]


@pytest.mark.gpu
def test_kbest_launch_refuses_a_part_of_another_dtype():
    """The k-best kernel reads counts as int64 and values as the first part's dtype: a part of any
    other dtype is refused, not read as the wrong bits."""
    cupy = pytest.importorskip("cupy")
    from lazykern.tn.algebras import _kbest_kernels

    be = Backend("cupy", cupy)
    v = cupy.zeros((1, 2, 3), cupy.float32)
    good = (v, v, cupy.ones((1, 2, 3), cupy.int64), cupy.zeros((1, 2, 3), cupy.int64))
    bad = good[:3] + (cupy.zeros((1, 2, 3), cupy.int32),)
    B = tuple(cupy.ascontiguousarray(p.transpose(0, 2, 1)) for p in good)
    out = _kbest_kernels.launch(be, good, B, 2, True, 0)
    assert len(out) == 4 and out[0].shape == (1, 2, 2)
    with pytest.raises(TypeError, match="int32"):
        _kbest_kernels.launch(be, bad, B, 2, True, 0)
