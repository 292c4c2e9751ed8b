"""Launching a ``debug=True`` ``@lazy_kernel``: zero its error code, launch, read it back, raise.

As numba-cuda's ``_Kernel.launch`` does for a debug kernel: the read-back is synchronous, and a
non-zero code raises the exception the kernel's Python code raised (see :mod:`lazykern._numba.debug`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as _cu

from .._numba import debug as _debug
from ..errors import LaunchError


def _check(result: Any, what: str) -> Any:
    err, *rest = result
    if err != _cu.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"debug=True kernel: {what} failed ({err!r})")
    return rest[0] if len(rest) == 1 else rest


def launch_checked(launch: Callable[[], None], handle: int, symbol: str, table: dict[str, Any], stream: int) -> None:
    """``launch()`` with the error code of the kernel ``symbol`` zeroed before and checked after, on
    ``stream`` (a raw handle); ``handle`` is the loaded kernel's (a ``CUkernel`` of a library, as
    Numba loads cubins, or a ``CUfunction`` of a module)."""
    global_of = _globals(handle, symbol)

    def read(suffix: str) -> int:
        value = ctypes.c_int()
        _check(_cu.cuMemcpyDtoH(ctypes.addressof(value), global_of(suffix), 4), f"reading {suffix}")
        return value.value

    errcode = global_of("errcode")
    _check(_cu.cuMemsetD32Async(errcode, 0, 1, _cu.CUstream(stream)), "zeroing the error code")
    launch()
    _check(_cu.cuStreamSynchronize(_cu.CUstream(stream)), "waiting for the kernel")
    code = read("errcode")
    if code:
        _debug.raise_for(table, code, read, symbol)


def _globals(handle: int, symbol: str) -> Callable[[str], Any]:
    """``global_of(suffix)``: the device address of the int32 ``<symbol>__<suffix>__`` in the current
    context, looked up where the kernel was loaded (Numba loads cubins as libraries)."""
    err, library = _cu.cuKernelGetLibrary(_cu.CUkernel(handle))
    if err == _cu.CUresult.CUDA_SUCCESS:

        def lookup(name: bytes) -> Any:
            return _cu.cuLibraryGetGlobal(library, name)
    else:  # a module's function
        module = _check(_cu.cuFuncGetModule(_cu.CUfunction(handle)), "cuFuncGetModule")

        def lookup(name: bytes) -> Any:
            return _cu.cuModuleGetGlobal(module, name)

    def global_of(suffix: str) -> Any:
        ptr, size = _check(lookup(f"{symbol}__{suffix}__".encode()), f"reading {suffix}")
        if size != ctypes.sizeof(ctypes.c_int):
            raise LaunchError(f"debug=True kernel {symbol}: its {suffix} global has {size} bytes, not 4")
        return ptr

    return global_of
