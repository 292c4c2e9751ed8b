"""Which GPU owns an array or a stream, and making that GPU current for one call.

Every launching entry point asks here where its operands live and runs under
that device's primary context (the one Numba, CuPy and PyTorch all use), so
what the call allocates, loads and launches lands on the operands' device
whatever device the caller left current. Operands on different devices, or a
stream of another device, raise ``ValueError`` before anything is launched.

Lookups are cheap where they can be: a PyTorch tensor or a CuPy array names
its device; a Numba device array is asked once (``cuPointerGetAttribute``)
and remembers the answer on itself; a context's device is remembered per
context handle. Only a foreign ``__cuda_array_interface__`` object costs a
driver call per lookup.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from cuda.bindings import driver as _cu

from .. import _fork
from .._numba import internals
from ..compile.compiler import arch_of
from ..errors import DriverError, LaunchError

_DEVICE_ORDINAL = 9  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
_CACHED = "_lazykern_device"  # set on Numba arrays and streams: their device cannot change
_MISSING = object()
_DEFAULT_STREAMS = (0, 1, 2)  # 0 and CU_STREAM_LEGACY / CU_STREAM_PER_THREAD: follow the current context
_SCALARS = (int, float, bool, complex, np.generic, np.ndarray, tuple, str, bytes, type(None))

_resolvers: dict[type, Callable[[Any], int | None]] = {}
_context_devices: dict[int, int] = {}  # CUcontext handle -> device ordinal
_primary: dict[int, Any] = {}  # device ordinal -> Numba primary Context
_lock = _fork.lock()


# -- driver queries (tests replace these with fakes) ----------------------------------
def _driver() -> Any:  # cuda.bindings.driver, which has no types
    return _cu


@functools.cache
def _pointer_attribute() -> Callable[..., int]:
    lib = ctypes.CDLL("nvcuda.dll" if os.name == "nt" else "libcuda.so.1")
    fn = lib.cuPointerGetAttribute
    fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_uint64]
    fn.restype = ctypes.c_int
    return fn


def pointer_device(ptr: int) -> int | None:
    """The ordinal of the GPU owning device address ``ptr`` (None for a null pointer).

    Asks libcuda itself: cuda.bindings (13.3 at least; cuda-python issue #2928) reads this
    attribute back from the wrong field and answers 0 for every device, which sent device-1
    arrays to device 0's context (issue 18's illegal addresses).
    """
    if not ptr:
        return None
    dev = ctypes.c_int(-1)
    try:
        get = _pointer_attribute()
    except OSError as exc:
        raise (no_driver(exc) or exc) from None
    err = get(ctypes.byref(dev), _DEVICE_ORDINAL, ptr)
    if err != 0:
        raise ValueError(
            f"address {ptr:#x} is not device memory this process can use (CUresult {err}): "
            "pass arrays allocated on a GPU of this process"
        )
    return dev.value


def stream_handle_device(handle: int) -> int | None:
    """The ordinal of the GPU a raw stream handle belongs to (None for the default streams)."""
    if handle in _DEFAULT_STREAMS:
        return None
    drv = _driver()
    get = getattr(drv, "cuStreamGetDevice", None)  # CUDA 12.8+
    if get is not None:
        err, dev = get(drv.CUstream(handle))
        if int(err) == 0:
            return int(dev)
    else:
        err, ctx = drv.cuStreamGetCtx(drv.CUstream(handle))
        if int(err) == 0:
            return context_device(int(ctx))
    raise ValueError(f"stream handle {handle:#x} is not a stream this process can use ({err})")


NO_DRIVER = (
    "no NVIDIA GPU driver on this machine (libcuda not found), so nothing can run on a GPU here. "
    "To run kernels without a GPU, turn on Numba's CUDA simulator: NUMBA_ENABLE_CUDASIM=1 "
    "(set before numba is imported); to compile kernels for a GPU machine, run `lazykern warm` "
    "ahead of time (no GPU needed)."
)


def no_driver(exc: BaseException) -> LaunchError | None:
    """The one-line LaunchError for ``exc`` when it says the driver library is missing, else None.

    Every launch reaches the driver first through :func:`current_context`; without a
    driver, cuda.bindings fails there with a long traceback from its library loader.
    """
    from cuda.pathfinder import DynamicLibNotFoundError  # import on first use: only on failure

    if isinstance(exc, DynamicLibNotFoundError) or (isinstance(exc, OSError) and "libcuda" in str(exc)):
        return LaunchError(NO_DRIVER)
    return None


def current_context(_get: Callable[[], tuple[Any, ...]] = _cu.cuCtxGetCurrent) -> int:
    """The calling thread's current CUcontext handle (0 when there is none).

    Raises :class:`LaunchError` (:data:`NO_DRIVER`) where there is no GPU driver.
    """
    try:
        return int(_get()[1])
    except Exception as exc:
        error = no_driver(exc)
        if error is None:
            raise
        raise error from None


def context_device(handle: int) -> int | None:
    """The device of a CUcontext handle (None for 0), remembered per handle."""
    if not handle:
        return None
    dev = _context_devices.get(handle)
    if dev is None:
        drv = _driver()
        get = getattr(drv, "cuCtxGetDevice_v2", None)  # CUDA 13: any context, not just the current one
        if get is not None:
            err, dev = get(drv.CUcontext(handle))
        elif handle == current_context():
            err, dev = drv.cuCtxGetDevice()
        else:
            raise LaunchError(f"cannot tell the device of CUDA context {handle:#x} with this driver binding")
        if int(err) != 0:
            raise LaunchError(f"cuCtxGetDevice failed for context {handle:#x}: {err}")
        dev = _context_devices[handle] = int(dev)
    return dev


def current() -> int | None:
    """The device of the current context, or None where no context is current."""
    return context_device(current_context())


@functools.cache
def count() -> int:
    """Number of CUDA devices this process sees (0 without a driver)."""
    try:
        from numba import cuda

        return len(cuda.gpus)
    except Exception:  # no driver: no devices
        return 0


@functools.cache
def several() -> bool:
    """Whether this process sees more than one GPU: with one, every array is on it and the
    launch paths skip the lookups."""
    return count() > 1 and not simulating()


# -- arrays ---------------------------------------------------------------------------
def of_array(x: Any) -> int | None:
    """The ordinal of the GPU owning array ``x``; None for host arrays, scalars and raw addresses.

    Knows Numba device arrays, CuPy arrays, PyTorch tensors, lazykern's
    ``DeviceScalar`` and any object with ``__cuda_array_interface__``.
    """
    cls = type(x)
    resolve = _resolvers.get(cls)
    if resolve is None:
        resolve = _resolvers[cls] = _resolver_for(cls, x)
    return resolve(x)


def _resolver_for(cls: type, x: Any) -> Callable[[Any], int | None]:
    if issubclass(cls, _SCALARS):
        return _no_device
    module = cls.__module__ or ""
    if module.startswith("torch") and hasattr(x, "is_cuda"):
        return _torch_device
    if module.startswith("cupy") and hasattr(x, "device"):
        return _cupy_device
    if module.startswith("lazykern") and hasattr(x, "device"):  # DeviceScalar
        return _own_device
    if hasattr(x, "device_ctypes_pointer") and hasattr(x, "__dict__"):
        return _numba_device
    if hasattr(x, "__cuda_array_interface__"):
        return _cai_device
    return _no_device


def _no_device(x: Any) -> None:
    return None


def _torch_device(x: Any) -> int | None:
    index: int | None = x.device.index if x.is_cuda else None
    return index


def _cupy_device(x: Any) -> int:
    ordinal: int = x.device.id
    return ordinal


def _own_device(x: Any) -> int | None:
    ordinal: int | None = x.device
    return ordinal


def _numba_device(x: Any) -> int | None:
    # Numba's own context on the array can be wrong (an imported foreign array gets the
    # context current at import): the driver's answer, asked once, is kept on the array.
    d = x.__dict__
    dev: int | None
    try:
        dev = d[_CACHED]
    except KeyError:
        dev = d[_CACHED] = pointer_device(pointer(x))
    return dev


def cai_pointer(cai: dict[str, Any]) -> int:
    """The data address in a ``__cuda_array_interface__`` dict (0 for an empty array)."""
    return int(cai["data"][0] or 0)


def _cai_device(x: Any) -> int | None:
    return pointer_device(pointer(x))


def pointer(x: Any) -> int:
    """The device address ``x`` stands for; TypeError if it is not a device array.

    The one pointer reader: a raw ``int`` address (what the tropical API passes),
    a Numba device array, any ``__cuda_array_interface__`` object, or the simulator's
    array (its host buffer's address, which is what a simulated kernel reads).
    """
    if x.__class__ is int:
        return x
    if x.__class__ in _numba_classes:
        # Numba's property chain builds a ctypes object per read (0.35 us, three times a launch):
        # read once, kept on the array, whose buffer never changes (as its device, _CACHED).
        array: Any = x  # (mypy narrows x by the set's element type)
        d = array.__dict__
        ptr: int | None = d.get(KEPT_POINTER)
        if ptr is None:
            ptr = d[KEPT_POINTER] = array.device_ctypes_pointer.value or 0
        return ptr
    try:
        ptr = x.device_ctypes_pointer.value or 0
    except AttributeError:
        pass
    else:
        if _is_numba_array(x):
            _numba_classes.add(x.__class__)
            x.__dict__[KEPT_POINTER] = ptr
        return ptr
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return cai_pointer(cai)
    host = getattr(x, "_ary", None)  # the simulator's FakeCUDAArray wraps a NumPy array
    if isinstance(host, np.ndarray):
        host_address: int = host.__array_interface__["data"][0]
        return host_address
    if isinstance(x, np.integer):
        return int(x)
    raise TypeError(f"{type(x).__name__} is not a device array")


KEPT_POINTER = "_lazykern_pointer"  # set on Numba device arrays: the address their buffer has for life
_numba_classes: set[type] = set()  # Numba device array classes met so far (pointer's fast path)


def _is_numba_array(x: Any) -> bool:
    """A Numba device array (its buffer fixed at construction), not a look-alike whose
    ``device_ctypes_pointer`` may move: only those get their address kept."""
    return (x.__class__.__module__ or "").startswith("numba.") and "gpu_data" in getattr(x, "__dict__", ())


def of_args(args: Sequence[Any]) -> int | None:
    """The one device of a launch's array arguments (None if none is a device array).

    Raises ValueError naming two arguments on different devices. On every launch with
    several GPUs: the per-argument work is one dict lookup, and one more for a Numba array.
    """
    dev = None
    first = 0
    get = _resolvers.get
    for i, value in enumerate(args):
        resolve = get(value.__class__)
        if resolve is _no_device:
            continue
        if resolve is _numba_device:
            d = value.__dict__.get(_CACHED, _MISSING)
            if d is _MISSING:
                d = resolve(value)
        else:
            d = of_array(value)
        if d is not None and d != dev:
            if dev is not None:
                raise ValueError(
                    f"argument {first} is on device {dev} but argument {i} is on device {d}: "
                    "a kernel runs on one GPU; copy the arrays to one device first"
                )
            dev, first = d, i
    return dev


def common(named: Iterable[tuple[str, int | None]]) -> int | None:
    """The one device among ``(name, device)`` pairs (None entries ignored), else ValueError."""
    dev, owner = None, ""
    for name, d in named:
        if d is None:
            continue
        if dev is None:
            dev, owner = d, name
        elif d != dev:
            raise ValueError(
                f"{owner} is on device {dev} but {name} is on device {d}: "
                "put them on one device (and pass a stream of that device)"
            )
    return dev


# -- streams --------------------------------------------------------------------------
def stream_handle(stream: Any) -> int:
    """A raw CUstream handle from a Numba/CuPy/PyTorch stream, a cuda.core Stream or an int."""
    if stream is None:
        return 0
    if isinstance(stream, (int, np.integer)):
        return int(stream)
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy Stream
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    handle = getattr(stream, "handle", None)  # numba Stream (CUstream or ctypes), cuda.core Stream
    if handle is not None:
        value = getattr(handle, "value", handle)
        try:
            return int(value or 0)
        except TypeError:
            pass
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    raise TypeError(f"stream must be a Numba, CuPy or PyTorch stream or a raw handle, got {type(stream).__name__}")


def names_device(stream: Any) -> bool:
    """Whether a launcher may resolve ``stream``'s device once and keep it: a stream object
    (kept alive by the launcher, so it stays the same stream), not a raw handle, whose number a
    later stream on another device may reuse. Raw handles name no device at launch, like raw
    pointers: whoever passes them (the tropical API) has checked and activated the device."""
    return stream is not None and not isinstance(stream, (int, np.integer))


def of_stream(stream: Any) -> int | None:
    """The ordinal of the GPU a stream belongs to; None for the default streams (they follow
    whichever device is current, which the call makes the operands' one)."""
    if stream is None:
        return None
    if isinstance(stream, (int, np.integer)):
        return stream_handle_device(int(stream))
    module = type(stream).__module__ or ""
    if module.startswith("torch"):
        index: int | None = stream.device.index
        return index
    if module.startswith("cupy"):
        dev = getattr(stream, "device_id", -1)
        if isinstance(dev, int) and dev >= 0:
            return dev
    d = getattr(stream, "__dict__", None)
    if d is not None:
        dev = d.get(_CACHED, _MISSING)
        if dev is _MISSING:
            dev = d[_CACHED] = stream_handle_device(stream_handle(stream))
        return dev
    return stream_handle_device(stream_handle(stream))


# -- making a device current ------------------------------------------------------------
def primary_context(device: int) -> Any:
    """Numba's primary context of ``device`` (retained once), ValueError for a device that does not exist."""
    ctx = _primary.get(device)
    if ctx is None:
        from numba import cuda

        n = count()
        if not 0 <= device < n:
            raise ValueError(f"device {device} does not exist: this process sees {n} GPU(s), ordinals 0..{n - 1}")
        # Work on a second device is where Numba would load one library into two contexts.
        internals.one_owner_per_library()
        with _lock:
            ctx = _primary.get(device)
            if ctx is None:
                ctx = _primary[device] = _retain_primary(cuda.gpus[device])
                _context_devices[int(ctx.handle)] = device
    return ctx


def _retain_primary(gpu: Any) -> Any:
    """Numba's ``get_primary_context()`` without its side effect on the caller's context stack.

    Numba (0.30) makes the device current with ``cuCtxSetCurrent``, which *replaces* the top
    of the stack, then pops it: the context that was current is gone. Pushing a second copy of
    it first lets that pop take the copy.
    """
    ctx = getattr(gpu, "primary_context", None)
    if ctx is not None:  # retained already: Numba returns it without touching the stack
        return ctx
    drv = _driver()
    handle = current_context()
    if not handle:
        return gpu.get_primary_context()
    drv.cuCtxPushCurrent(drv.CUcontext(handle))
    ctx = gpu.get_primary_context()
    if int(ctx.handle) == handle:  # it was current already: Numba popped nothing, drop the copy
        drv.cuCtxPopCurrent()
    return ctx


@functools.cache
def simulating() -> bool:
    """Numba's CPU simulator has one pretend device and no driver: nothing to switch."""
    from numba.cuda import config  # the public alias of numba.cuda.core.config

    return bool(config.ENABLE_CUDASIM)


def enter(device: int | None) -> Any:
    """Make ``device`` current if it is not; returns what :func:`leave` needs to undo it."""
    if device is None or simulating():
        return None
    handle = current_context()
    if handle and context_device(handle) == device:
        return None
    ctx = primary_context(device)
    ctx.push()
    return ctx


def leave(token: Any) -> None:
    if token is not None:
        token.pop()


_LEGACY = (0, 1)  # CUstream 0 and CU_STREAM_LEGACY: the current context's legacy default stream
_order_events: dict[tuple[int, int], Any] = {}  # (context, thread) -> the event ordering the caller after


def leave_ordered(token: Any, handle: int) -> None:
    """Leave the arrays' device as :func:`leave` does, with the caller's context ordered after the work.

    A call made while another device is current runs on the arrays' device; when its work went to that
    device's legacy default stream (``handle`` 0: Numba arrays, which name no stream), nothing orders it
    before what the caller does next on its own legacy stream. Numba's ``copy_to_host`` copies in the
    *current* context and does not wait for another context's streams: it read outputs before the kernel
    wrote them (two H200s under load, issue 45: 7 wrong products in 6 runs of the multi-GPU tests). So
    the caller's legacy stream waits for an event recorded after the work (no host sync). With no
    context current at the call, Numba's next copy makes device 0's current: work on device 0 is then on
    that very stream, work on another device is waited for on the host. A named stream is the caller's
    to order, as in CUDA.
    """
    if token is None:
        return
    if handle not in _LEGACY:
        leave(token)
        return
    work = current_context()
    key = (work, threading.get_ident())
    event = _order_events.get(key)
    if event is None:  # an event belongs to the context it is made in: made here, before leaving
        err, event = _cu.cuEventCreate(_cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        _checked(err, "cuEventCreate")
        _order_events[key] = event
    try:
        _checked(_cu.cuEventRecord(event, handle)[0], "cuEventRecord")
    finally:
        leave(token)
    if current_context():
        _checked(_cu.cuStreamWaitEvent(0, event, 0)[0], "cuStreamWaitEvent")
    elif context_device(work) != 0:  # none current: Numba's next copy makes device 0's current, the same stream
        _checked(_cu.cuEventSynchronize(event)[0], "cuEventSynchronize")


@_fork.on_child
def _forget_order_events() -> None:
    """A forked child has none of its parent's contexts, so none of their events."""
    _order_events.clear()


def _checked(err: Any, what: str) -> None:
    if int(err) != 0:
        raise DriverError(f"{what} failed while ordering the caller's stream after another device's work: {err}")


class on:
    """``with on(device):`` the device's primary context is current inside (no-op for None or
    when it already is); the previous one is current again afterwards.

    ``order``: the stream handle the block's work goes to. Where that is the device's legacy default
    stream (0: Numba arrays name no stream) and the block switched devices, the caller's context is
    ordered after the work on leaving (:func:`leave_ordered`): Numba's ``copy_to_host`` copies in the
    caller's context and waits for none of another context's streams (issue 45: a product's first call on
    device 1, planned inside such a block, was read before it was written under load)."""

    __slots__ = ("device", "order", "_token")

    def __init__(self, device: int | None, order: int | None = None) -> None:
        self.device = device
        self.order = order
        self._token = None

    def __enter__(self) -> int | None:
        self._token = enter(self.device)
        return self.device

    def __exit__(self, *exc: Any) -> None:
        token, self._token = self._token, None
        if self.order is None:
            leave(token)
        else:
            leave_ordered(token, self.order)


def resolve_or_current(device: int | None) -> int:
    """``device``, or the current device, or 0 where no context is current yet."""
    if device is not None:
        return device
    cur = current()
    return 0 if cur is None else cur


@functools.cache
def arch(device: int) -> str:
    """``sm_XY`` of a device, asked of the CUDA driver, not of numba.cuda: importing that takes about half
    a second, which a fresh process's first compiles (their arch is part of their key) would wait for.
    Numba's answer where it is imported already, under its simulator, or where the driver gives none."""
    capability = None if _numba_decides() else _driver_capability(device)
    if capability is None:
        from numba import cuda

        capability = tuple(cuda.gpus[device].compute_capability)
    return arch_of(capability)


def _numba_decides() -> bool:
    """numba.cuda is imported (asking it costs nothing) or its simulator may be switched on."""
    import sys

    return "numba.cuda" in sys.modules or bool(os.environ.get("NUMBA_ENABLE_CUDASIM"))


def _driver_capability(device: int) -> tuple[int, int] | None:
    """(major, minor) of driver device ``device``: the ordinal numba.cuda.gpus and CuPy number by."""
    attribute = _cu.CUdevice_attribute
    try:
        (err,) = _cu.cuInit(0)
        if int(err) != 0:
            return None
        err, dev = _cu.cuDeviceGet(device)
        if int(err) != 0:
            return None
        found = []
        for which in (
            attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        ):
            err, value = _cu.cuDeviceGetAttribute(which, dev)
            if int(err) != 0:
                return None
            found.append(int(value))
    except Exception:  # no libcuda: numba's answer (or its error) decides
        return None
    return found[0], found[1]
