from __future__ import annotations

import numpy as np
import pytest

from lazykern import Kernel, LaunchError


def _kernel(signature=("ptr", "int32")):
    return Kernel("k", "k", b"\x7fELF", arch="sm_90", signature=signature)


class FakeDeviceArray:
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (1,), "typestr": "<f4", "version": 3}


def test_pack_follows_signature():
    packed = _kernel().pack([FakeDeviceArray(1234), 7])
    assert packed == (1234, np.int32(7)) and isinstance(packed[1], np.int32)


def test_pack_rejects_host_arrays_and_bad_scalars():
    k = _kernel()
    with pytest.raises(LaunchError, match="host"):
        k.pack([np.zeros(3), 1])
    with pytest.raises(LaunchError, match="int32 scalar"):
        k.pack([FakeDeviceArray(1), "seven"])
    with pytest.raises(LaunchError, match="takes 2 arguments"):
        k.pack([FakeDeviceArray(1)])


def test_inferred_packing_needs_numpy_scalars():
    k = _kernel(signature=None)
    assert k.pack([FakeDeviceArray(5), np.float64(2.0)]) == (np.intp(5), np.float64(2.0))
    with pytest.raises(LaunchError, match="ambiguous"):
        k.pack([FakeDeviceArray(5), 2])


def test_bad_signature_entry():
    with pytest.raises(ValueError, match="signature entry 1"):
        _kernel(signature=("ptr", "notatype"))


@pytest.mark.gpu
def test_family_kernel_runs_on_gpu(family):
    from numba import cuda

    a = cuda.to_device(np.arange(1000, dtype=np.float32))
    k = family["scale_f32"]
    stream = cuda.stream()
    k[(4,), (256,), stream](a, 1000)
    stream.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), np.arange(1000, dtype=np.float32) * 3)
    b = cuda.to_device(np.arange(10, dtype=np.int32))
    family["scale_i32"][1, 32](b, np.int32(10))
    cuda.synchronize()
    np.testing.assert_array_equal(b.copy_to_host(), np.arange(10) * 3)
