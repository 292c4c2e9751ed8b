"""The repeated-call path of the tropical API: one dictionary hit, then launches.

The first call with a given (array type, shapes, strides, dtypes, devices,
semiring, flags, out=, stream) validates and plans everything through the
general path in :mod:`.api`, which then builds a :class:`ProductCall` or
:class:`BackwardCall`: the prepared launches (loaded kernel, parameter block
with the scalars written once, launch configuration), the stream (a fixed one's
driver handle resolved once) and how to allocate the outputs. This table is the
one cache of the tropical call path: :func:`product` and :func:`backward` compute
a call's key, find its call with one lookup and run it (read the pointers,
allocate stream-ordered from :mod:`lazykern.memory`, launch); everything else
happens only on a miss. A key only matches arrays whose every property the plan
depends on is equal, so a change of shape, stride, dtype or device misses and
goes through the general path.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _fork
from ..launch import _device, memory
from ..launch._launch import Prepared, custream, launch_packed
from . import _arrays

_CACHE_SIZE = 4096
_entries: dict[tuple[Any, ...], Any] = {}


def remember(key: tuple[Any, ...] | None, entry: Any) -> Any:
    if key is not None:
        if len(_entries) >= _CACHE_SIZE:
            _entries.clear()
        _entries[key] = entry
    return entry


@_fork.on_child
def clear() -> None:
    """Forget every cached call (tests; a device reset; a forked child: the parent's streams are not its own)."""
    _entries.clear()


# -- the one path: key, lookup, run ------------------------------------------------------------
_UNCACHED = object()  # an out= (or stream) the table does not key: the general path every time


def product(A: Any, B: Any, out: Any, semiring: Any, argmax: Any, stream: Any, copy: Any, batched: bool,
            general: Callable[..., Any]) -> Any:  # fmt: skip
    """Every matmul / bmm: the call's key, one lookup, the launch. A miss (or a call no key can
    stand for) is ``general(A, B, semiring, argmax, out, stream, copy, batched, key)``, the API's
    validating path, which plans, :func:`remember` s the call under ``key`` (None: not) and runs it.

    The key holds every property the plan depends on; its parts are read once, here, inline (the
    walk of ``A`` from the public call to the launch is counted by tests/test_tropical_hot.py).
    A Numba array's part is a code kept on the array with its address (:func:`_kept`)."""
    cls = A.__class__
    kind = _arrays.fast_kind(cls)
    key = None
    if kind is not None and B.__class__ is cls and copy is False and (argmax is True or argmax is False):
        sk = None if stream is None else _stream_key(stream)
        if kind.name == "numba" and sk is not _UNCACHED:  # shape, strides, dtype, buffer: fixed for life
            a = A.__dict__.get(_KEPT) or _kept(A, kind)
            b = B.__dict__.get(_KEPT) or _kept(B, kind)
            out_ptrs = None
            if out is None:
                oc: Any = None
            elif not argmax and out.__class__ is cls:
                c = out.__dict__.get(_KEPT) or _kept(out, kind)
                oc, out_ptrs = c[0], (c[1], 0)
            elif argmax and out.__class__ is tuple and len(out) == 2 and {o.__class__ for o in out} == {cls}:
                c, i = (o.__dict__.get(_KEPT) or _kept(o, kind) for o in out)
                oc, out_ptrs = (c[0], i[0]), (c[1], i[1])
            else:
                oc = _UNCACHED
            if oc is not _UNCACHED:
                key = (cls, a[0], b[0], oc, semiring, argmax, batched, sk)
                call = _entries.get(key)
                if call is not None:
                    return call.run(call.handle_numba, False, a[1], b[1], out, out_ptrs)
        elif sk is not _UNCACHED:
            desc = kind.desc
            if out is None:
                ok = None
            elif argmax:
                ok = _pair_key(out, cls, desc)
            else:
                ok = desc(out) if out.__class__ is cls else _UNCACHED
            if ok is not _UNCACHED:
                key = (cls, desc(A), desc(B), ok, semiring, argmax, batched, sk)
                call = _entries.get(key)
                if call is not None:
                    ptr = kind.ptr
                    handle, current = call.stream()
                    if out is None:
                        return call.run(handle, current, ptr(A), ptr(B), None, None)
                    out_ptrs = (ptr(out[0]), ptr(out[1])) if argmax else (ptr(out), 0)
                    return call.run(handle, current, ptr(A), ptr(B), out, out_ptrs)
    return general(A, B, semiring, argmax, out, stream, copy, batched, key)


# A Numba array's (description code, address), kept on the array: its shape, strides, dtype,
# device and buffer never change. Codes are never reused (a table that starts over hands out
# new ones), so two arrays share a code only when their descriptions are equal.
_KEPT = "_lazykern_hot"
_codes: dict[tuple[Any, ...], int] = {}
_next_code = itertools.count(1)


def _kept(x: Any, kind: _arrays.FastKind) -> tuple[int, int]:
    desc = kind.desc(x)
    code = _codes.get(desc)
    if code is None:
        if len(_codes) >= _CACHE_SIZE:
            _codes.clear()
        code = _codes[desc] = next(_next_code)
    kept = x.__dict__[_KEPT] = (code, kind.ptr(x))
    return kept


def backward(g: Any, ix: Any, A_shape: Any, B_shape: Any, out: Any, stream: Any, general: Callable[..., Any]) -> Any:
    """Every matmul_backward: key, lookup, launch; a miss is ``general(g, ix, A_shape, B_shape,
    out, stream, key)``."""
    key = backward_key(g, ix, A_shape, B_shape, out, stream)
    call = _entries.get(key) if key is not None else None
    if call is None:
        return general(g, ix, A_shape, B_shape, out, stream, key)
    ptr = call.kind.ptr
    handle, current = call.stream()
    return call.run(handle, current, ptr(g), ptr(ix), out, None if out is None else (ptr(out[0]), ptr(out[1])))


def backward_key(g: Any, ix: Any, A_shape: Any, B_shape: Any, out: Any, stream: Any) -> tuple[Any, ...] | None:
    """The cache key of a matmul_backward call, or None (general path every time)."""
    kind = _arrays.fast_kind(g.__class__)
    if kind is None or ix.__class__ is not g.__class__:
        return None
    desc = kind.desc
    ok = None if out is None else _pair_key(out, g.__class__, desc)
    sk = _stream_key(stream)
    if ok is _UNCACHED or sk is _UNCACHED:
        return None
    if A_shape.__class__ is not tuple:
        A_shape = tuple(A_shape)
    if B_shape.__class__ is not tuple:
        B_shape = tuple(B_shape)
    return ("backward", g.__class__, desc(g), desc(ix), A_shape, B_shape, ok, sk)


def _pair_key(out: Any, cls: type, desc: Any) -> Any:
    if out.__class__ is not tuple or len(out) != 2:
        return _UNCACHED
    o0, o1 = out
    if o0.__class__ is not cls or o1.__class__ is not cls:
        return _UNCACHED
    return (desc(o0), desc(o1))


def _stream_key(stream: Any) -> Any:
    """``stream`` itself as a key part (the cache keeps it alive, so it stays the same stream), or
    _UNCACHED: an unhashable stream, or a raw handle where several GPUs are (its number may come
    back as a stream of another device)."""
    if stream is None:
        return None
    if stream.__class__ is int:
        return _UNCACHED if _device.several() else stream
    try:
        hash(stream)
    except TypeError:
        return _UNCACHED
    return stream


# -- launches --------------------------------------------------------------------------------
class Launch(Prepared):
    """One kernel launch with everything but the leading pointers fixed (scalars packed once)."""

    __slots__ = ()

    def __init__(self, kernel: Any, grid: tuple[int, ...], threads: int, args: list[Any], pointers: int = 4) -> None:
        super().__init__(kernel, grid, threads, args, pointers)


class Outs:
    """How a call allocates its outputs of the caller's array kind: all of them in one buffer."""

    __slots__ = ("kind", "parts", "offsets", "nbytes", "new", "torch_parts", "torch_device")

    def __init__(self, kind: str, parts: memory.Parts, device: int) -> None:
        self.kind = kind
        self.parts = tuple((tuple(shape), np.dtype(dtype)) for shape, dtype in parts)
        self.offsets, self.nbytes = memory.layout(self.parts)
        # Numba arrays: memory.NumbaOutputs.new itself (no call through _library_new on the hot path)
        self.new: Callable[[int, int, bool, Any, Callable[[], Any]], tuple[Any, int, int]] = self._library_new
        if kind == "numba":
            templates = [memory.numba_template(*p) for p in self.parts]
            numba_parts = [(t, o, t["alloc_size"]) for t, o in zip(templates, self.offsets)]
            self.new = memory.NumbaOutputs(numba_parts, self.nbytes, device).new
        self.torch_parts: list[tuple[tuple[int, ...], Any]] | None = None
        self.torch_device = None
        if kind == "torch":  # torch's dtypes and device, made once (torch.empty's arguments)
            import torch

            self.torch_parts = [(shape, getattr(torch, dtype.name)) for shape, dtype in self.parts]
            self.torch_device = torch.device("cuda", device)

    def _library_new(
        self, device: int, handle: int, current: bool, context: Any, owner: Callable[[], Any]
    ) -> tuple[Any, int, int]:
        """``new(device, handle, current, context, owner)``: (the output or the pair of outputs,
        the first's address, the second's or 0) made for work on ``handle``; ``current``:
        ``handle`` is the operands' library's current stream; ``owner()`` gives that stream's
        object, kept alive with a pool buffer; ``context``: Numba's (Numba arrays only)."""
        library = memory.on_library_stream(handle, current)
        if self.kind == "cupy":
            if library:
                arrays, ptrs = memory.cupy_arrays_own(self.parts, self.offsets, self.nbytes)
            else:
                arrays, ptrs = memory.cupy_arrays(self.parts, self.offsets, self.nbytes, device, handle, owner())
        elif library:
            assert self.torch_parts is not None  # a torch kind
            arrays, ptrs = memory.torch_tensors_own(self.torch_parts, self.torch_device)
        else:
            arrays, ptrs = memory.torch_tensors(self.parts, self.offsets, self.nbytes, device, handle, owner())
        if len(arrays) == 1:
            return arrays[0], ptrs[0], 0
        return (arrays[0], arrays[1]), ptrs[0], ptrs[1]


def out_kind(kind: str) -> str:
    """The library an output of an operand of ``kind`` is made by (foreign CAI objects get Numba arrays)."""
    return kind if kind in ("cupy", "torch") else "numba"


class _Call:
    """What every cached call shares: its device, context and stream."""

    __slots__ = ("device", "ctx", "numba_ctx", "handle", "cu", "kind", "producer_stream", "owner", "handle_numba")

    def __init__(
        self, device: int, kind: str, handle: int | None, producer_stream: int | None, owner: Any = None
    ) -> None:
        self.device = device
        self.owner = owner  # the object of the fixed stream (None: the library's current one)
        self.ctx = _device.current_context()
        self.numba_ctx = _device.primary_context(device) if out_kind(kind) == "numba" else None
        self.kind = _arrays.fast_kinds().get(kind)
        self.handle = handle  # None: the operands' library's current stream, read per call
        self.cu = None if handle is None else custream(handle)  # the fixed stream's driver handle
        self.producer_stream = producer_stream
        # Numba operands have no library stream to follow: the stream is fixed when planned.
        self.handle_numba = handle if handle is not None else (producer_stream or 0)

    def _owner(self) -> Any:
        """The object of this call's stream: the fixed one's, or the library's current stream."""
        if self.handle is not None:
            return self.owner
        kind = self.kind
        return None if kind is None or kind.current is None else kind.current(self.device)

    def stream(self) -> tuple[int, bool]:
        """(the stream of this call, ordered after the operands' producer; whether it is the
        operands' library's current stream, whose own allocator may then make the outputs)."""
        handle = self.handle
        kind = self.kind
        if kind is None or kind.producer is None:
            return (handle if handle is not None else (self.producer_stream or 0)), False
        producer = kind.producer(self.device)
        if handle is None:
            return producer, True
        if producer != handle:
            _arrays.stream_wait(handle, producer, self.device)
            return handle, False
        return handle, True

    def on_current(self, handle: int) -> bool:
        """Whether ``handle`` is the current stream the operands' library had when this call was
        planned (the general path's answer to :meth:`stream`'s second part)."""
        kind = self.kind
        return kind is not None and kind.producer is not None and handle == self.producer_stream


class ProductCall(_Call):
    """A planned product: allocate C (and argmax) in one buffer, launch (split-K: workspace,
    launch, reduce, free)."""

    __slots__ = ("main", "reduce", "outs", "argmax", "ws_bytes", "ws_values")

    def __init__(self, device: int, kind: str, handle: int | None, producer_stream: int | None,
                 main: Launch, reduce: Launch | None, out_shape: tuple[int, ...], dtype: np.dtype,
                 argmax: bool, ws: tuple[int, int], owner: Any = None) -> None:  # fmt: skip
        super().__init__(device, kind, handle, producer_stream, owner)
        self.main, self.reduce, self.argmax = main, reduce, argmax
        parts = [(out_shape, dtype), (out_shape, np.dtype("int32"))] if argmax else [(out_shape, dtype)]
        self.outs = Outs(out_kind(kind), tuple(parts), device)
        self.ws_bytes, self.ws_values = ws

    def run(self, handle: int, current: bool, pa: int, pb: int, out: Any, out_ptrs: tuple[int, int] | None) -> Any:
        device = self.device
        token = _device.enter(device) if _device.current_context() != self.ctx else None
        try:
            if out is None:
                result, pc, pi = self.outs.new(device, handle, current, self.numba_ctx, self._owner)
            else:
                assert out_ptrs is not None  # callers pass them with out=
                pc, pi = out_ptrs
                result = out
            stream = self.cu if handle == self.handle else custream(handle)
            main = self.main
            reduce = self.reduce
            if reduce is None:
                launch_packed(stream, main, pa, pb, pc, pi)
                return result
            nbytes = self.ws_bytes
            w = memory.allocate(nbytes, device, handle)  # freed right after its last use, stream-ordered
            iw = w + self.ws_values if self.argmax else 0
            try:
                launch_packed(stream, main, pa, pb, w, iw)
                launch_packed(stream, reduce, w, iw, pc, pi)
            finally:
                memory.free(w, nbytes, handle, self._owner(), device)
            return result
        finally:
            if token is not None:
                _device.leave_ordered(token, handle)


class BackwardCall(_Call):
    """A planned backward: allocate (grad_A, grad_B) in one buffer, zero what the plan adds into,
    one launch for both."""

    __slots__ = ("launch", "zero", "outs")

    def __init__(self, device: int, kind: str, handle: int | None, producer_stream: int | None,
                 launch: Launch | None, zero: tuple[int, int], shapes: tuple[tuple[int, ...], tuple[int, ...]],
                 dtype: np.dtype, owner: Any = None) -> None:  # fmt: skip
        super().__init__(device, kind, handle, producer_stream, owner)
        self.launch = launch  # None: nothing to add (K == 0 or an empty grad_C)
        self.zero = zero  # bytes of grad_A, grad_B to zero first (0: the kernel stores every element)
        self.outs = Outs(out_kind(kind), ((shapes[0], dtype), (shapes[1], dtype)), device)

    def run(self, handle: int, current: bool, pg: int, pix: int, out: Any,
            out_ptrs: tuple[int, int] | None) -> tuple[Any, Any]:  # fmt: skip
        device = self.device
        token = _device.enter(device) if _device.current_context() != self.ctx else None
        try:
            za, zb = self.zero
            if out is None:
                result: tuple[Any, Any]
                result, pA, pB = self.outs.new(device, handle, current, self.numba_ctx, self._owner)
                if za and zb and pB == pA + self.outs.offsets[1]:  # one buffer (not torch's own): one memset
                    za, zb = self.outs.nbytes, 0
            else:
                assert out_ptrs is not None  # callers pass them with out=
                pA, pB = out_ptrs
                result = (out[0], out[1])
            if za:
                memory.memset_zero(pA, za, handle)
            if zb:
                memory.memset_zero(pB, zb, handle)
            launch = self.launch
            if launch is not None:
                launch_packed(self.cu if handle == self.handle else custream(handle), launch, pg, pix, pA, pB)
            return result
        finally:
            if token is not None:
                _device.leave_ordered(token, handle)
