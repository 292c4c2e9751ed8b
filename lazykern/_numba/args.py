"""How Python arguments become a Numba kernel's parameters, without Numba's compiler.

Numba's kernel ABI flattens each argument: an array becomes
``meminfo, parent, nitems, itemsize, data, shape..., strides...`` (all
pointer-sized), a complex number its real and imaginary parts, a tuple its
items; other scalars are passed by value. That expansion is written down per
signature as a JSON *plan* and stored with the cubin, so a process that loads
the cubin from the cache can launch it without typing or lowering anything.

Typing is cheap: Numba device arrays carry their type (``_numba_type_``,
cached on the array) and scalars are typed by class, so the launch path keys
its dispatch table with dict lookups only. CUDA-array-interface objects and
host (NumPy) arrays take a slower, general path.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import LaunchError
from ..launch import _device
from . import internals

SLOW = object()  # a fast key part meaning "type this argument on the general path"

DEVICE = "device"  # a Numba device array (or an adapted CUDA-array-interface object)
CAI = "cai"  # an object exposing __cuda_array_interface__
HOST = "host"  # a NumPy array or record: copied in before and out after the launch
HOST_IN = "host-in"  # cuda.In(array): copied in only
HOST_OUT = "host-out"  # cuda.Out(array): copied out only
HOST_NESTED = "host-nested"  # a tuple holding NumPy arrays or records: each copied in and back
VALUE = "value"  # a scalar, an enum member or a tuple of scalars
HOST_KINDS = frozenset((HOST, HOST_IN, HOST_OUT, HOST_NESTED))


@functools.cache
def _types() -> Any:  # the module numba.cuda.types (numba-cuda has no types)
    from numba.cuda import types

    return types


@functools.cache
def scalar_types() -> dict[type, Any]:
    """Python and NumPy scalar classes -> the Numba type Numba gives their instances."""
    from numba.cuda.np.numpy_support import from_dtype

    t = _types()
    table: dict[type, Any] = {float: t.float64, int: t.int64, bool: t.boolean, complex: t.complex128}
    for (
        name
    ) in "bool_ int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 complex64 complex128".split():
        cls = getattr(np, name)
        table[cls] = from_dtype(np.dtype(cls))
    return table


def make_fast_key() -> Callable[[Any], Any]:
    """Per-argument hot-path key: the *id* of the argument's Numba type, or ``SLOW``.

    Numba types hash in Python (``hash(self.key)``, recursively), which
    made a dict lookup on a tuple of them cost more than the rest of the
    launch; their ids hash in C. Types are interned and every type in a key
    stays alive in its instance, so an id can never stand for another type.
    """
    table = {cls: id(t) for cls, t in scalar_types().items()}

    def fast_key(
        value: Any, _get: Callable[[type], int | None] = table.get, _id: Callable[[object], int] = id, _slow: Any = SLOW
    ) -> Any:
        t = _get(value.__class__)
        if t is not None:
            return t
        try:  # a device array's type cannot change: it is remembered on the array itself
            return _id(value.__dict__["_lazykern_numba_type"])
        except (KeyError, AttributeError):
            pass
        try:
            nt = value._numba_type_  # builds the type anew each time: ~0.8 us
        except AttributeError:
            return _slow
        try:
            d = value.__dict__
        except AttributeError:
            pass
        else:
            d["_lazykern_numba_type"] = nt  # alive as long as the array, so its id stays unique
            d["_lazykern_numba_code"] = _id(nt)  # what the hot path's codes reader reads (no id() call there)
        return _id(nt)

    return fast_key


def classify(value: Any, index: int) -> tuple[Any, str, Any]:
    """``(numba type, source kind, prepared value)`` for one argument, on the general path."""
    t = scalar_types().get(value.__class__)
    if t is not None:
        return t, VALUE, value
    hint = internals.arg_hint(value)
    if hint is not None:  # cuda.In / Out / InOut around a host array or record, as @cuda.jit takes
        inner, kind = hint
        t, inner_kind, prepared = classify(inner, index)
        if inner_kind != HOST:
            return t, inner_kind, prepared  # already on the device: Numba copies nothing either
        return t, kind, prepared
    nt = getattr(value, "_numba_type_", None)
    if nt is not None:
        return nt, DEVICE, value
    if isinstance(value, (np.ndarray, np.void)):  # np.void: a record (structured scalar), passed by pointer
        return internals.typeof(value), HOST, value
    cai = _cuda_array_interface(value, index)
    if cai is not None:
        view = CaiView(cai, index)
        return view.numba_type(), CAI, view
    t = passable_type(value)
    if t is not None:
        return t, HOST_NESTED if holds_host_data(value) else VALUE, value
    raise LaunchError(
        f"argument {index} has unsupported type {type(value).__name__}: pass a device array "
        "(Numba, CuPy, PyTorch: anything with __cuda_array_interface__), a NumPy array or record, "
        "a Python or NumPy scalar, an enum member, or a tuple of scalars"
    )


def holds_host_data(value: Any) -> bool:
    """Whether a (nested) tuple holds NumPy arrays or records, which numba-cuda copies to the device."""
    return isinstance(value, tuple) and any(isinstance(v, (np.ndarray, np.void)) or holds_host_data(v) for v in value)


def passable_type(value: Any) -> Any:
    """Numba's type of a tuple, enum member, datetime or user-typed value (``typeof_impl``), if a
    kernel can take it (see :func:`plan_for`); None otherwise."""
    try:
        t = internals.typeof(value)
    except ValueError:
        return None
    if internals.simulating() and not type(t).__module__.startswith("numba."):
        return t  # a user's type: the simulator passes the object itself (no data model to check)
    try:
        plan_for((t,))
    except LaunchError:
        return None
    return t


def _cuda_array_interface(value: Any, index: int) -> dict[str, Any] | None:
    try:
        cai: dict[str, Any] = value.__cuda_array_interface__
        return cai
    except AttributeError:
        return None
    except Exception as exc:  # e.g. a tensor that requires grad refuses to export itself
        name = type(value).__name__
        raise LaunchError(f"argument {index} ({name}) could not export its device memory: {exc}") from exc


class _Pointer:
    """Both spellings of a device address the packers read: Numba's ``gpu_data.device_pointer``
    and the ctypes pointer ``device_ctypes_pointer.value``."""

    __slots__ = ("device_pointer", "value")

    def __init__(self, address: int) -> None:
        self.device_pointer = self.value = address


class CaiView:
    """A CUDA-array-interface object seen with exactly the attributes the packer reads."""

    __slots__ = ("dtype", "shape", "strides", "size", "gpu_data", "device_ctypes_pointer", "ndim")

    def __init__(self, cai: dict[str, Any], index: int) -> None:
        try:
            self.dtype = np.dtype(cai["typestr"])
            self.shape = tuple(int(s) for s in cai["shape"])
            address = _device.cai_pointer(cai)
        except (KeyError, TypeError, ValueError) as exc:
            raise LaunchError(f"argument {index} has a malformed __cuda_array_interface__: {exc}") from None
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        strides = cai.get("strides")
        self.strides = tuple(int(s) for s in strides) if strides is not None else _c_strides(self.shape, self.dtype)
        self.gpu_data = self.device_ctypes_pointer = _Pointer(address)

    def numba_type(self) -> Any:
        """What Numba types the array as (same rules as ``DeviceNDArray._numba_type_``)."""
        from numba.cuda.np.numpy_support import from_dtype

        broadcast = 0 in self.strides and self.size != 0
        if not broadcast and self.strides == _c_strides(self.shape, self.dtype):
            layout = "C"
        elif not broadcast and self.strides == _f_strides(self.shape, self.dtype):
            layout = "F"
        else:
            layout = "A"
        return _types().Array(from_dtype(self.dtype), self.ndim, layout)


def _c_strides(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    out, step = [], dtype.itemsize
    for s in reversed(shape):
        out.append(step)
        step *= max(s, 1)
    return tuple(reversed(out))


def _f_strides(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    out, step = [], dtype.itemsize
    for s in shape:
        out.append(step)
        step *= max(s, 1)
    return tuple(out)


# -- plans ---------------------------------------------------------------------
def plan_for(argtypes: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The JSON-able argument expansion for a Numba signature; refuses what it cannot pass."""
    return [_plan_one(t, i) for i, t in enumerate(argtypes)]


def _plan_one(t: Any, index: int) -> dict[str, Any]:
    types = _types()
    if isinstance(t, types.Array):
        from numba.cuda.np.numpy_support import as_dtype

        try:
            itemsize = as_dtype(t.dtype).itemsize
        except Exception:  # a user type (typeof_impl + a struct model): its data model's size
            size = internals.data_size(t.dtype)
            if size is None:
                raise LaunchError(f"argument {index}: arrays of {t.dtype} are not supported by lazy_kernel") from None
            itemsize = size
        return {"kind": "array", "ndim": t.ndim, "itemsize": itemsize, "type": str(t)}
    if isinstance(t, types.Complex):
        part = "float32" if t.bitwidth == 64 else "float64"
        return {"kind": "complex", "part": part, "type": str(t)}
    if isinstance(t, types.Boolean):
        return {"kind": "scalar", "dtype": "bool", "type": str(t)}
    if isinstance(t, (types.Integer, types.Float)):
        return {"kind": "scalar", "dtype": str(t), "type": str(t)}
    if isinstance(t, types.BaseTuple):
        return {"kind": "tuple", "items": [_plan_one(s, index) for s in t], "type": str(t)}
    if isinstance(t, types.Record):  # numba-cuda copies the record to the device and passes its address
        return {"kind": "record", "size": int(t.size), "type": str(t)}
    if isinstance(t, types.EnumMember):  # numba-cuda passes the member's value, typed as the enum's dtype
        return {"kind": "enum", "item": _plan_one(t.dtype, index), "type": str(t)}
    if isinstance(t, (types.NPDatetime, types.NPTimedelta)):  # numba-cuda: the int64 count
        return {"kind": "datetime", "type": str(t)}
    if isinstance(t, (types.CPointer, types.RawPointer)):  # a declared CPointer / voidptr: an address
        return {"kind": "pointer", "type": str(t)}
    members = internals.struct_members(t)
    if members is not None and not isinstance(t, (types.Array, types.Buffer)):
        # A user type with a struct data model: the kernel takes its members, flattened. numba-cuda
        # passes one only once a launch extension (extensions=) maps it to a tuple of those members.
        return {"kind": "tuple", "items": [_plan_one(m, index) for m in members], "type": str(t)}
    raise LaunchError(
        f"argument {index} has Numba type {t}, which lazy_kernel cannot pass to a kernel; "
        "supported: arrays, integer/float/complex/bool scalars, records, enum members, "
        "datetime64/timedelta64 scalars, tuples of them, and pointers (CPointer, voidptr) in a declared "
        "signature"
    )


def param_count(plan: list[dict[str, Any]]) -> int:
    n = 0
    for p in plan:
        kind = p["kind"]
        if kind == "array":
            n += 5 + 2 * p["ndim"]
        elif kind == "complex":
            n += 2
        elif kind == "tuple":
            n += param_count(p["items"])
        elif kind == "enum":
            n += param_count([p["item"]])
        else:
            n += 1
    return n


# -- packers -------------------------------------------------------------------
# A scalar's class decides its Numba type, and the type is part of the key that
# selected this plan, so scalars arrive with the right class: cuda.core passes
# NumPy scalars at their width, Python ints as intptr_t (int64) and Python
# floats as double. Only bool (cuda.core would widen a Python bool to intptr_t)
# and complex (split in two) need converting.


def make_packer(plan: list[dict[str, Any]]) -> Callable[..., tuple[Any, ...]]:
    """One function ``pack(a0, a1, ...) -> tuple`` for a plan, generated once per signature.

    A generated function is about twice as fast as a loop over per-argument
    closures; it is built only from the plan (fixed vocabulary), never from
    user text.
    """
    env: dict[str, Any] = {
        "_bool": np.bool_, "_f32": np.float32, "_f64": float, "_ptr": _device.pointer, "_np": np, "_i64": int,
        "_u64": np.uint64,
    }  # fmt: skip
    names = [f"a{i}" for i in range(len(plan))]
    parts: list[str] = []
    for name, p in zip(names, plan):
        parts.extend(_pack_expr(name, p))
    body = ", ".join(parts)
    src = f"def pack({', '.join(names)}):\n    return ({body}{',' if len(parts) == 1 else ''})\n"
    exec(compile(src, "<lazykern packer>", "exec"), env)
    pack: Callable[..., tuple[Any, ...]] = env["pack"]
    return pack


def _pack_expr(expr: str, p: dict[str, Any], array: str | None = None) -> list[str]:
    """The parameters of one argument ``expr`` per plan entry ``p``; ``array``: how an array's
    parameters are read instead, formatted with the array's expression and itemsize."""
    kind = p["kind"]
    if kind == "array":
        if array is not None:
            return [array.format(expr, int(p["itemsize"]))]
        return [
            "0",
            "0",
            f"{expr}.size",
            str(int(p["itemsize"])),
            f"_ptr({expr})",  # read once per Numba array, then kept on it (launch._device.pointer)
            f"*{expr}.shape",
            f"*{expr}.strides",
        ]
    if kind == "scalar":
        if p["dtype"] not in _SCALARS:
            raise LaunchError(f"unknown scalar type {p['dtype']!r} in a stored launch plan; clear the lazykern cache")
        return [f"_bool({expr})" if p["dtype"] == "bool" else expr]
    if kind == "complex":
        conv = "_f32" if p["part"] == "float32" else "_f64"
        return [f"{conv}({expr}.real)", f"{conv}({expr}.imag)"]
    if kind == "tuple":
        out: list[str] = []
        for i, item in enumerate(p["items"]):
            out.extend(_pack_expr(f"{expr}[{i}]", item, array))
        return out
    if kind == "record":
        return [f"_ptr({expr})"]  # the record's device copy (or a DeviceRecord the user made)
    if kind == "enum":
        item = p["item"]
        if item["kind"] == "scalar" and item["dtype"] in _SCALARS:
            return [f"_np.{item['dtype'] if item['dtype'] != 'bool' else 'bool_'}({expr}.value)"]
        return _pack_expr(f"{expr}.value", item)
    if kind == "datetime":
        return [f"_i64({expr}.view(_np.int64))"]
    if kind == "pointer":  # the address, as the declared signature's path converted it (declared.py)
        return [f"_u64({expr})"]
    raise LaunchError(f"unknown argument kind {kind!r} in a stored launch plan; clear the lazykern cache")


_SCALARS = frozenset("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64".split())


# -- parameter buffers ---------------------------------------------------------
# Numba's ABI expands an array into 5 + 2*ndim kernel parameters, and cuda.core
# converts each Python parameter on every launch (~0.1 us each: 2 us for three
# 1-D arrays). One ``struct.pack_into`` into a preallocated buffer handed to
# ``cuLaunchKernel`` as CU_LAUNCH_PARAM_BUFFER_POINTER costs a fraction of that.
# Native ('@') alignment lays the fields out as the kernel's C ABI does.
_STRUCT_CODES = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
}


def struct_format(plan: list[dict[str, Any]], *, packed_arrays: bool = False) -> str:
    """The ``struct`` format of the kernel's parameter block for a plan. ``packed_arrays``: each
    array's parameters as one 8-aligned byte string (what :func:`array_params` keeps), the same
    layout written with one value per array instead of 5 + 2*ndim."""
    codes: list[str] = []
    for p in plan:
        kind = p["kind"]
        if kind == "array":
            count = 5 + 2 * int(p["ndim"])
            codes.append(f"0q{8 * count}s" if packed_arrays else "q" * count)
        elif kind == "complex":
            codes.append("ff" if p["part"] == "float32" else "dd")
        elif kind == "tuple":
            codes.append(struct_format(p["items"], packed_arrays=packed_arrays)[1:])
        elif kind == "scalar" and p["dtype"] in _STRUCT_CODES:
            codes.append(_STRUCT_CODES[p["dtype"]])
        elif kind == "enum":
            codes.append(struct_format([p["item"]], packed_arrays=packed_arrays)[1:])
        elif kind == "record":
            codes.append("q")
        elif kind == "datetime":
            codes.append("q")
        elif kind == "pointer":
            codes.append("Q")
        else:
            raise LaunchError(f"unknown argument kind in a stored launch plan: {p!r}; clear the lazykern cache")
    return "@" + "".join(codes)


KEPT_PARAMS = "_lazykern_params"  # a Numba array's kernel parameters, kept on it


def array_params(x: Any, itemsize: int) -> bytes:
    """An array argument's kernel parameters (Numba's ABI: meminfo, parent, size, itemsize,
    address, shape, strides) as the block holds them: packed once into one byte string, so a
    launch writes an array as one value, not 5 + 2*ndim. Kept on a Numba array, whose shape,
    strides and buffer are fixed for life (:func:`_device.pointer` keeps its address: the sign
    that it is one); read anew for any other array, which may change."""
    shape = tuple(x.shape)
    values = _int64s(5 + 2 * len(shape))(0, 0, x.size, itemsize, _device.pointer(x), *shape, *x.strides)
    d = x.__dict__
    if _device.KEPT_POINTER in d:
        d[KEPT_PARAMS] = values
    return values


@functools.cache
def _int64s(count: int) -> Callable[..., bytes]:
    """``pack(*values)``: ``count`` native int64s as bytes."""
    return struct.Struct(f"@{count}q").pack


def make_buffer_filler(plan: list[dict[str, Any]]) -> tuple[int, Callable[..., None]]:
    """``(size, fill)``: ``fill(buffer, a0, a1, ...)`` writes the kernel's parameter block.

    Generated once per signature from the plan's fixed vocabulary, like :func:`make_packer`.
    """
    layout = struct.Struct(struct_format(plan, packed_arrays=True))
    env: dict[str, Any] = {
        "_bool": np.bool_,
        "_f32": np.float32,
        "_f64": float,
        "_ptr": _device.pointer,
        "_np": np,
        "_i64": int,
        "_u64": np.uint64,
        "_pack_into": layout.pack_into,
        "_kept": KEPT_PARAMS,
        "_params": array_params,
    }
    names = [f"a{i}" for i in range(len(plan))]
    parts: list[str] = []
    # The hot path fills only for arrays it has typed (so they have a __dict__): a Numba array's
    # parameters are read once, then kept on it (array_params) and read inline, one dict lookup.
    array = "({0}.__dict__.get(_kept) or _params({0}, {1}))"
    for name, p in zip(names, plan):
        parts.extend(_pack_expr(name, p, array))
    src = f"def fill(_buf, {', '.join(names)}):\n    _pack_into(_buf, 0, {', '.join(parts)})\n"
    exec(compile(src, "<lazykern parameter block>", "exec"), env)
    fill: Callable[..., None] = env["fill"]
    return layout.size, fill
