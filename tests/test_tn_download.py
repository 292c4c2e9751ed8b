"""Many small device arrays back on the host (lazykern/tn/_upload.py's download): views of one buffer in one
copy of it, the rest one copy each, every array's entries as they were."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lazykern.tn import _upload


class _Device:
    """A stand-in for a CuPy array: host entries behind a device pointer, a base it may view."""

    def __init__(self, host: np.ndarray, base: _Device | None = None, ptr: int = 0):
        self.host, self.base = host, base
        self.data = SimpleNamespace(ptr=ptr)
        self.flags, self.dtype, self.itemsize = host.flags, host.dtype, host.itemsize
        self.size, self.shape = host.size, host.shape


def test_views_of_one_buffer_come_back_in_one_copy():
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4, np.float32), np.arange(3, dtype=np.int32)]
    copies: list[int] = []

    def get(x):
        copies.append(x.size)
        return x.host

    flat = _upload.upload(arrays, np.asarray)  # where each one starts in its dtype's buffer
    bases = {}
    devices = []
    for a, view in zip(arrays, flat):
        buffer = view.base if view.base is not None else view
        if a.dtype not in bases:
            bases[a.dtype] = _Device(buffer.reshape(-1), ptr=1 << 20)
        base = bases[a.dtype]
        start = (view.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]) // a.itemsize
        devices.append(_Device(view, base, base.data.ptr + start * a.itemsize))
    loose = _Device(np.arange(5.0))  # no base: a copy of its own
    got = _upload.download([*devices, loose], get)
    for want, back in zip([*arrays, np.arange(5.0)], got):
        np.testing.assert_array_equal(back, want)
        assert back.dtype == want.dtype and back.shape == want.shape
    float_buffer = bases[np.dtype(np.float32)].size
    assert sorted(copies) == sorted([float_buffer, 3, 5])  # the float32 views in one copy; one int32 alone


def test_a_few_views_of_a_large_buffer_are_copied_alone():
    big = _Device(np.arange(1 << 16, dtype=np.float64))
    views = [_Device(big.host[k : k + 4], big, k * 8) for k in (0, 100)]
    copies: list[int] = []
    got = _upload.download(views, lambda x: copies.append(x.size) or x.host)
    assert copies == [4, 4]
    np.testing.assert_array_equal(got[1], np.arange(100.0, 104.0))


@pytest.mark.gpu
def test_download_on_the_gpu():
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(1)
    arrays = [rng.integers(-5, 5, (2,) * k).astype(np.float32) for k in range(1, 6)] + [np.arange(7, dtype=np.int64)]
    device = _upload.upload(arrays, cupy.asarray) + [cupy.arange(4.0)]
    got = _upload.download(device, lambda x: x.get())
    for want, back in zip([*arrays, np.arange(4.0)], got):
        np.testing.assert_array_equal(back, want)
