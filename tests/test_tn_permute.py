"""The bit-permutation copy of binary tensors (lazykern/tn/_permute.py) and the layout rule that calls it."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern.tn import _contract, _permute
from lazykern.tn._backend import Backend


def _views(rng: np.random.Generator, dtype: str) -> list[np.ndarray]:
    """Permuted views of binary tensors, some with an axis fixed (a select) or of size 1."""
    out = []
    for n in (1, 3, 7, 12):
        x = rng.integers(-(2**20), 2**20, size=(2,) * n).astype(dtype)
        out.append(x.transpose(rng.permutation(n)))
        if n > 2:
            y = x[(slice(None),) * (n // 2) + (1,)]  # a fixed label: an offset and strides of a larger tensor
            out.append(y.transpose(rng.permutation(y.ndim)))
            z = x.reshape((2,) * (n - 1) + (1, 2)).transpose(rng.permutation(n + 1))  # a size-1 axis anywhere
            out.append(z)
    return out


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64", "int64"])
def test_bit_permutation_reads_what_a_contiguous_copy_holds(dtype):
    rng = np.random.default_rng(7)
    for view in _views(rng, dtype):
        item = view.itemsize
        bits = _permute.bit_strides(view.shape, tuple(s // item for s in view.strides))
        assert bits is not None and len(bits) == sum(n == 2 for n in view.shape)
        base = view.base if view.base is not None else view
        while base.base is not None:
            base = base.base
        offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
        got = _permute.reference(base.reshape(-1), offset, bits)
        assert got.dtype == view.dtype
        assert np.array_equal(got, np.ascontiguousarray(view).reshape(-1))


def test_bit_strides_refuse_other_axes():
    assert _permute.bit_strides((2, 3), (3, 1)) is None
    assert _permute.bit_strides((2,) * (_permute.BITS_MAX + 1), (1,) * (_permute.BITS_MAX + 1)) is None
    assert _permute.bit_strides((2, 1, 2), (1, 7, 2)) == [2, 1]  # bit 0 is the last axis of 2


def test_permute_kernels_are_lazy_and_compile_for_sm90(cache):
    fam = _permute.make_family(cache)
    assert sorted(fam.names()) == ["permute_bits_4", "permute_bits_8"] and fam.compiled() == []
    assert [k.name for k in fam.warm(["permute_bits_4"], arch="sm_90")] == ["permute_bits_4"]
    assert fam.compiled() == ["permute_bits_4"]


def test_merges_says_when_a_reshape_is_a_view():
    x = np.zeros((2, 3, 4, 5))
    assert _contract.merges(x.shape, tuple(s // 8 for s in x.strides), [2, 2])
    t = x.transpose(0, 2, 1, 3)
    strides = tuple(s // 8 for s in t.strides)
    assert not _contract.merges(t.shape, strides, [2, 2])  # 4 and 3 swapped: a copy
    assert _contract.merges(t.shape, strides, [1, 1, 1, 1])
    assert _contract.merges((2, 1, 3), (3, 99, 1), [3])  # a size-1 axis strides anyhow


def test_host_contiguous_is_numpys():
    be = Backend("numpy", np)
    x = np.arange(16.0).reshape((2,) * 4).transpose(3, 1, 0, 2)
    y = be.contiguous(x)
    assert y.flags.c_contiguous and np.array_equal(y, x)
    assert be.contiguous(y) is y


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_gpu_copy_is_the_bit_kernel_and_exact(dtype):
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(3)
    be = Backend("cupy", cupy)
    for n in (3, 7, 12, 20):
        x = rng.integers(-(2**20), 2**20, size=(2,) * n).astype(dtype)
        X = cupy.asarray(x)
        pick = (slice(None),) * (n // 2) + (1,)
        for host, dev in ((x, X), (x[pick], X[pick])):
            perm = tuple(rng.permutation(host.ndim))
            out = be.contiguous(dev.transpose(perm))
            assert out.flags.c_contiguous and np.array_equal(
                cupy.asnumpy(out), np.ascontiguousarray(host.transpose(perm))
            )
    assert f"permute_bits_{np.dtype(dtype).itemsize}" in _permute.family().compiled()


def test_device_route_on_the_host_copies_by_the_kernels_addressing(monkeypatch):
    """A GPU backend over NumPy arrays (the device route's host stand-in) copies binary tensors through
    the kernel's reference; other shapes go to the library's copy."""
    calls = []
    real = _permute.reference
    monkeypatch.setattr(_permute, "reference", lambda *a: calls.append(a[2]) or real(*a))
    be = Backend("cupy", np)
    x = np.arange(2.0**9).reshape((2,) * 9)[:, 1].transpose(3, 0, 6, 1, 2, 7, 4, 5)
    y = be.contiguous(x)
    assert y.flags.c_contiguous and np.array_equal(y, np.ascontiguousarray(x)) and len(calls) == 1
    z = np.arange(12.0).reshape(3, 4).T
    assert np.array_equal(be.contiguous(z), np.ascontiguousarray(z)) and len(calls) == 1
