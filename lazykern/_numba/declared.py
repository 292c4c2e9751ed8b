"""Declared signatures (``lazy_kernel(sig)``, as ``cuda.jit(sig)``): which one a launch runs, and
its arguments converted to it, the way numba-cuda 0.30 does both.

- One signature (not in a list): numba-cuda marks the dispatcher *specialized* and launches that
  overload whatever the arguments' types (``CUDADispatcher.call``); each argument is then converted
  to its declared type by ``_Kernel._prepare_args``: an integer through ``ctypes.c_<type>(value)``
  (a Python float to an ``int32`` parameter is a ``TypeError`` there), a float through
  ``ctypes.c_float`` / ``c_double``, a pointer passed as the integer it is.
- A list: numba's own C dispatcher picks the overload (exact match first, then the best safe or
  unsafe conversion; "No matching definition for argument type(s) ..." otherwise). Here it picks
  too: a ``CUDADispatcher`` that holds one stand-in overload per declared signature and never
  compiles answers which signature numba-cuda would launch.

Where numba-cuda passes an array's data under a declared array type whatever the array's dtype or
layout (a silent wrong answer), the launch is refused instead.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import LaunchError
from ..launch import _device
from . import args as _args


@functools.cache
def _types() -> Any:
    from numba.cuda import types

    return types


def is_pointer(t: Any) -> bool:
    """``CPointer(...)`` or ``voidptr``: a parameter passed as an address."""
    types = _types()
    return isinstance(t, (types.CPointer, types.RawPointer))


def pointer_value(value: Any, index: int) -> int:
    """The address a pointer parameter receives: a Python or NumPy integer as it is, a ctypes
    pointer's or ``c_void_p``'s address, the data address of a device array or any object with
    ``__cuda_array_interface__``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value) & 0xFFFF_FFFF_FFFF_FFFF  # intptr_t, as cuda.core passes a Python int
    if isinstance(value, ctypes.c_void_p):
        return int(value.value or 0)
    if isinstance(value, ctypes._Pointer):
        # ctypes' own cast (not a type escape): the pointer's address as a c_void_p
        return int(ctypes.cast(value, ctypes.c_void_p).value or 0)
    try:
        cai = value.__cuda_array_interface__
    except AttributeError:
        cai = None
    if cai is not None:
        return _device.cai_pointer(cai)  # the one pointer reader
    raise LaunchError(
        f"argument {index} ({type(value).__name__}) cannot be passed to a pointer parameter: pass an integer "
        "address, a ctypes pointer or c_void_p, or a device array (its data address is passed)"
    )


class Declared:
    """A kernel's declared signatures and whether it is specialized (one signature, not a list)."""

    __slots__ = ("signatures", "specialized", "_matcher")

    def __init__(self, signatures: Sequence[tuple[Any, ...]], specialized: bool) -> None:
        self.signatures = tuple(signatures)
        self.specialized = specialized
        self._matcher: Any = None

    def select(self, py_func: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The declared signature numba-cuda would launch for ``args`` (its TypeError otherwise)."""
        if self.specialized:
            return self.signatures[0]
        if self._matcher is None:
            self._matcher = _matcher(py_func, self.signatures)
        chosen: tuple[Any, ...] = _choose(self._matcher, args).argtypes
        return chosen

    def describe(self, types: tuple[Any, ...], args: tuple[Any, ...]) -> tuple[list[tuple[Any, str, Any]], bool]:
        """``(described, unchanged)``: each argument as :func:`args.classify` describes it, typed and
        converted as its declared type; ``unchanged``: no value was converted and every argument has
        exactly its declared type (then the hot path may launch such arguments as they come)."""
        if len(types) != len(args):
            raise LaunchError(
                f"Signature mismatch: {len(args)} argument types given, but function takes {len(types)} arguments"
            )
        out, unchanged = [], True
        for i, (t, value) in enumerate(zip(types, args)):
            if is_pointer(t):
                out.append((t, _args.VALUE, pointer_value(value, i)))
                unchanged = False
                continue
            actual, kind, prepared = _args.classify(value, i)
            if actual == t:
                out.append((t, kind, prepared))
                continue
            unchanged = False
            out.append((t, kind, convert(t, actual, prepared, i)))
        return out, unchanged


def convert(t: Any, actual: Any, value: Any, index: int) -> Any:
    """``value`` (typed ``actual``) as a parameter of declared type ``t``, converted as numba-cuda's
    ``_prepare_args`` converts it; refused where numba-cuda would pass data under the wrong type."""
    types = _types()
    try:
        if isinstance(t, types.Boolean):
            return np.bool_(value)
        if isinstance(t, types.Integer):
            return np.dtype(str(t)).type(getattr(ctypes, f"c_{t}")(value).value)
        if t == types.float16:
            return np.float16(value)
        if t == types.float32:
            return np.float32(ctypes.c_float(value).value)
        if t == types.float64:
            return np.float64(ctypes.c_double(value).value)
        if isinstance(t, types.Complex):
            part = np.float32 if t == types.complex64 else np.float64
            return (np.complex64 if t == types.complex64 else np.complex128)(
                complex(part(value.real), part(value.imag))
            )
    except (TypeError, ValueError, AttributeError) as exc:  # ctypes' own words: "int expected instead of float"
        raise LaunchError(f"argument {index} ({actual}) cannot be passed as {t}: {exc}") from None
    if isinstance(t, types.BaseTuple) and isinstance(actual, types.BaseTuple) and len(t) == len(actual):
        items = [convert(ti, ai, vi, index) if ti != ai else vi for ti, ai, vi in zip(t, actual, value)]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(t, types.Array) and isinstance(actual, types.Array) and _compatible_array(actual, t):
        return value
    raise LaunchError(
        f"argument {index} is {actual}, which the declared type {t} cannot take without reading its data as "
        "another type (numba.cuda.jit would pass it anyway): pass an argument of the declared type"
    )


def _compatible_array(actual: Any, declared: Any) -> bool:
    """Same dtype and rank, and a layout the declared one covers (any-layout 'A' takes every layout)."""
    return bool(
        actual.dtype == declared.dtype
        and actual.ndim == declared.ndim
        and (declared.layout == "A" or declared.layout == actual.layout)
    )


class _StandIn:
    """What numba's C dispatcher reads of an overload while choosing it: no code, its signature."""

    objectmode = False
    entry_point = None  # registered with no target context: the dispatcher's finalizer finds nothing to remove

    def __init__(self, argtypes: tuple[Any, ...]) -> None:
        from numba.cuda import types

        self.argtypes = argtypes
        self.signature = types.void(*argtypes)


def _matcher(py_func: Any, signatures: Sequence[tuple[Any, ...]]) -> Any:
    """A numba-cuda ``CUDADispatcher`` of ``py_func`` holding a stand-in overload per signature,
    with compiling disabled: its C dispatcher chooses as ``cuda.jit([sig, ...])`` does."""
    from numba.cuda.dispatcher import CUDADispatcher

    disp = CUDADispatcher(py_func, targetoptions={})
    for sig in signatures:
        disp.add_overload(_StandIn(sig), sig)
    disp.disable_compile()
    return disp


def _choose(matcher: Any, args: tuple[Any, ...]) -> Any:
    """The stand-in numba-cuda's C dispatcher picks for ``args`` (``Dispatcher._cuda_call``)."""
    from numba.cuda import dispatcher

    return dispatcher._dispatcher.Dispatcher._cuda_call(matcher, *args, **{dispatcher._LAUNCH_CONFIG_KW: None})
