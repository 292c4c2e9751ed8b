"""A loaded kernel's occupancy, asked of the driver as numba-cuda's context asks it.

``forall``'s block size is what numba-cuda 0.30's ``ForAll`` gets from
``Context.get_max_potential_block_size``: that method no longer calls
``cuOccupancyMaxPotentialBlockSize`` but answers the kernel's ``max_threads_per_block`` attribute
(the shared memory and the 1024 limit it is given are not read), so it is
``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`` here too; ``max_cooperative_grid_blocks`` is
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` times the device's SM count
(``_Kernel.max_cooperative_grid_blocks``). The function is the cubin loaded in the current
context: a library's ``CUkernel``, which ``cuLaunchKernel`` takes cast to ``CUfunction`` but the
attribute and occupancy queries do not (CUDA_ERROR_INVALID_HANDLE on the H100): they are asked of the
current context's ``CUfunction`` from ``cuKernelGetFunction``.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from cuda.bindings import driver as _cu

from ..errors import DriverError


def _check(err: Any, call: str) -> None:
    if err != _cu.CUresult.CUDA_SUCCESS:
        raise DriverError(f"{call} failed: {getattr(err, 'name', err)}")


def forall_block_size(cufunc: Any) -> int:
    """The block size numba-cuda's ``forall`` launches ``cufunc`` with (see the module docstring)."""
    return function_attribute(cufunc, "MAX_THREADS_PER_BLOCK")


def max_cooperative_grid_blocks(cufunc: Any, device: int, blockdim: Any, dynsmemsize: int = 0) -> int:
    """The most blocks of ``blockdim`` threads (a number or a tuple) a cooperative launch of
    ``cufunc`` can run at once on ``device``."""
    threads = math.prod(blockdim) if isinstance(blockdim, tuple) else int(blockdim)
    err, per_sm = _cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(_function(cufunc), threads, dynsmemsize)
    _check(err, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    return int(per_sm) * _sm_count(device)


@functools.cache
def _sm_count(device: int) -> int:
    attr = _cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    err, count = _cu.cuDeviceGetAttribute(attr, _cu.CUdevice(device))
    _check(err, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)")
    return int(count)


def function_attribute(cufunc: Any, name: str) -> int:
    """A ``CU_FUNC_ATTRIBUTE_<name>`` of a loaded kernel (registers, shared / local / constant bytes)."""
    attr = getattr(_cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
    err, value = _cu.cuFuncGetAttribute(attr, _function(cufunc))
    _check(err, f"cuFuncGetAttribute({name})")
    return int(value)


def _function(handle: Any) -> Any:
    """The current context's ``CUfunction`` of a loaded kernel handle (a library's ``CUkernel`` cast to
    ``CUfunction``, or a module's function, which is returned as it is)."""
    err, fn = _cu.cuKernelGetFunction(_cu.CUkernel(int(handle)))
    return fn if err == _cu.CUresult.CUDA_SUCCESS else _cu.CUfunction(int(handle))
