"""The one launch layer: ``kernel[grid, block, stream, shmem](*args)`` for every kernel kind.

:class:`Kernel` (cubins with a fixed signature, the tropical API's kernels) and
``@lazy_kernel`` instances (Numba-Python kernels) both hand out a
:class:`Launcher` from a :class:`LauncherCache`. The launcher holds what a
launch configuration fixes (grid, block, shared memory, the stream as
cuda.core and driver handles, the stream's device); its call vets the launch
against an open graph capture, makes the arrays' device current where there
are several GPUs, then writes a loaded ``Kernel``'s arguments into its reused
parameter block (:class:`Params`) and calls :data:`launch_buffer` itself, or
hands the arguments to the target's ``run`` (a lazy kernel's dispatcher), which
launches with :meth:`Launcher.launch` (cuda.core) or :data:`launch_buffer`. The
tropical API's repeated calls launch a :class:`Prepared` (configuration and
scalars written once) with :func:`launch_packed`. No other module launches a kernel.

Per launch: a dict hit for the launcher, one write of the block, one driver call.
"""

from __future__ import annotations

import ctypes
import numbers
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from cuda.bindings import driver as _cu
from cuda.core import LaunchConfig, Stream, launch

from .. import _fork
from ..errors import LaunchConfigError, LaunchError, LaunchTypeError
from . import _capture, _device
from ._device import current_context

_LAUNCHER_CACHE = 512


class Target(Protocol):
    """What a launcher launches: a :class:`PackedTarget`, or any object with
    ``run(launcher, args, ctx)``; ``arrays(args)`` are the arguments that may name the
    launch's device."""

    def arrays(self, args: Sequence[Any]) -> Sequence[Any]: ...


class PackedTarget(Target, Protocol):
    """A target without ``run`` (a :class:`~lazykern.Kernel`): packed and launched by the launcher itself."""

    _by_context: dict[int, Any]  # CUcontext handle -> loaded function
    _cufunctions: dict[int, Any]  # CUcontext handle -> its CUfunction (the prepared path)
    params: Params | None  # the kernel's parameter block (None: launched through cuda.core)

    def pack(self, args: Sequence[Any]) -> Sequence[Any]: ...

    def fill(self, block: Any, *args: Any) -> None: ...

    def _function_slow(self) -> Any: ...


def dim3(value: Any, what: str) -> tuple[int, ...]:
    """A grid or block size as 1 to 3 positive ints; LaunchError otherwise."""
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    # numba-cuda's rule (normalize_kernel_dimensions): entries are Integral (1.5 is a TypeError, not 1),
    # at most 3 of them (a ValueError); and here each at least 1 (the driver would refuse it later)
    if not isinstance(value, (tuple, list)) or not all(
        type(v) is int or isinstance(v, numbers.Integral) for v in value
    ):
        raise LaunchTypeError(f"{what} must be an int or a tuple of up to 3 ints, got {value!r}")
    dims = tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise LaunchConfigError(f"{what} must have 1 to 3 positive entries, got {value!r}")
    return dims


def parse_launch_config(config: Any) -> tuple[tuple[int, ...], tuple[int, ...], Any, int]:
    """``[grid, block(, stream(, shared_mem))]`` -> (grid, block, stream, shared_mem), checked."""
    if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
        raise LaunchError(
            "launch as kernel[grid, block], kernel[grid, block, stream] or kernel[grid, block, stream, shared_mem]"
        )
    grid, block = dim3(config[0], "grid"), dim3(config[1], "block")
    stream = config[2] if len(config) > 2 else 0
    shmem = int(config[3]) if len(config) > 3 else 0
    return grid, block, stream, shmem


def device_pointer(value: Any, index: int) -> int:
    """The device address of kernel argument ``index``; LaunchError saying what to pass otherwise."""
    try:
        ptr = _device.pointer(value)
    except TypeError:
        pass
    else:
        if not 0 <= ptr < 1 << 63:  # kernels take a signed 64-bit address (np.intp)
            raise LaunchError(f"argument {index} is {ptr:#x}, which is no device address")
        return ptr
    if isinstance(value, np.ndarray):
        raise LaunchError(
            f"argument {index} is a NumPy (host) array; kernels take device arrays: "
            "pass numba.cuda.to_device(a), a CuPy array or a CUDA tensor"
        )
    raise LaunchError(
        f"argument {index} ({type(value).__name__}) is not a device array: "
        "expected an object with __cuda_array_interface__"
    )


def core_stream(stream: Any) -> Stream:
    """A cuda.core Stream for a Numba, CuPy or PyTorch stream, a cuda.core Stream, a raw
    handle, or 0/None (the default stream). Made once per launcher (launchers are cached),
    so no table of its own: :func:`custream` is the one stream table."""
    return Stream.from_handle(_device.stream_handle(stream))


# CUDA's launch "extra" keys (cuda.h: CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE).
_BUFFER_POINTER, _BUFFER_SIZE = 1, 2
_STRUCT_CHARS = frozenset("?bBhHiIlLqQefd")  # NumPy dtype chars that are also native struct codes


def param_format(signature: Sequence[str]) -> str | None:
    """The native ``struct`` format of a kernel's parameters ("ptr" or NumPy dtype names), laid
    out as the C ABI lays them (natural alignment); None for a type struct cannot pack (complex)."""
    codes = []
    for t in signature:
        char = "q" if t == "ptr" else np.dtype(t).char
        if char not in _STRUCT_CHARS:
            return None
        codes.append(char)
    return "@" + "".join(codes)


class Params:
    """A kernel's parameter block, reused by every launch: cuLaunchKernel copies it before it
    returns, so one block per kernel serves all launches (under ``lock``, between threads).

    ``fill(block, *values)`` writes every parameter; ``extra`` is cuLaunchKernel's ``extra``
    argument naming the block.
    """

    __slots__ = ("fill", "block", "extra", "lock", "_size", "_extra")

    def __init__(self, fmt: str) -> None:
        layout = struct.Struct(fmt)
        self.fill = layout.pack_into
        self.block = (ctypes.c_char * max(layout.size, 1))()
        self._size = ctypes.c_size_t(layout.size)
        self._extra = (ctypes.c_void_p * 5)(
            _BUFFER_POINTER, ctypes.addressof(self.block), _BUFFER_SIZE, ctypes.addressof(self._size), 0
        )
        self.extra = ctypes.addressof(self._extra)
        self.lock = threading.Lock()


def cufunction(fn: Any) -> Any:
    """The driver's CUfunction of a loaded cuda.core kernel (what :data:`launch_buffer` takes)."""
    return _cu.CUfunction(int(fn.handle))


_custreams: dict[int, Any] = {}


def custream(handle: int) -> Any:
    """The driver's CUstream for a raw stream handle: the one stream table of lazykern (every
    launch path resolves handles here), one object per handle (made once: 0.3 us)."""
    s = _custreams.get(handle)
    if s is None:
        s = _custreams[handle] = _cu.CUstream(handle)
    return s


@_fork.on_child
def forget_streams() -> None:
    """A forked child's streams are not its parent's: the table starts empty there."""
    _custreams.clear()


class Prepared:
    """One kernel at one launch configuration, its trailing scalars written once: a launch
    writes only the ``pointers`` leading addresses into the block and calls the driver."""

    __slots__ = ("name", "cufn", "grid", "dims", "params", "head", "tail")

    def __init__(self, kernel: Any, grid: Sequence[int], threads: int, scalars: Sequence[Any], pointers: int) -> None:
        sig = kernel.signature
        if sig is None or any(t != "ptr" for t in sig[:pointers]) or "ptr" in sig[pointers:]:
            raise ValueError(f"kernel {kernel.name} does not take {pointers} pointers then scalars: {sig}")
        if len(scalars) != len(sig) - pointers:
            raise ValueError(f"kernel {kernel.name} takes {len(sig) - pointers} scalars after its pointers: {scalars}")
        self.name = kernel.name
        self.grid = (*grid, *(1,) * (3 - len(grid)))
        self.dims = (*self.grid, threads, 1, 1, 0)  # cuLaunchKernel's grid, block, shared memory
        self.cufn = kernel.cufunction()  # loads the cubin on the current (the call's) device
        # Converted here, not by kernel.pack: its generated packer (an exec, 0.13 ms) is not needed on this path.
        self.tail = tuple(np.dtype(t).type(v) for t, v in zip(sig[pointers:], scalars))
        fmt = param_format(sig)
        if fmt is None:
            raise ValueError(f"kernel {kernel.name} takes a parameter the launch block cannot hold: {sig}")
        self.params = Params(fmt)
        self.params.fill(self.params.block, 0, *([0] * pointers), *self.tail)
        self.head = struct.Struct("@" + "q" * pointers).pack_into  # the leading addresses: offsets 0, 8, ...


def launch_packed(stream: Any, prepared: Prepared, *pointers: int) -> None:
    """A launch whose configuration and scalars are prepared (the tropical repeated-call path):
    ``stream`` is a :func:`custream`, ``pointers`` the kernel's leading addresses, already vetted."""
    params = prepared.params
    with params.lock:
        prepared.head(params.block, 0, *pointers)
        (err,) = launch_buffer(prepared.cufn, *prepared.dims, stream, 0, params.extra)
    if err:
        raise LaunchError(f"launch of {prepared.name!r} failed: {driver_error(err)}")


def launch_device(args: Sequence[Any], stream_device: int | None, name: str) -> int | None:
    """The device a launch runs on: its device arrays' one, else its stream's; ValueError (before
    anything is launched) for arrays on two devices or a stream of another device."""
    dev = _device.of_args(args)
    if dev is None:
        return stream_device
    if stream_device is not None and stream_device != dev:
        raise ValueError(
            f"kernel {name!r}: the arrays are on device {dev} but the stream belongs to device {stream_device}; "
            "launch on a stream of the arrays' device"
        )
    return dev


class Launcher:
    """``kernel[grid, block, stream, shmem]``: a launch configuration, built once and cached.

    A :class:`~lazykern.Kernel` (``run`` None) is packed and launched here, inline: it is the
    tropical API's hot path. Other targets (``@lazy_kernel``) get ``run(launcher, args, ctx)``
    called and launch with :meth:`launch` or :data:`launch_buffer` and :attr:`buffer_config`.
    """

    __slots__ = (
        "target", "name", "run", "config", "shape", "buffer_config", "stream", "user_stream", "stream_device",
        "_coop",
    )  # fmt: skip

    def __init__(self, target: Target, config: Any, name: str) -> None:
        grid, block, stream, shmem = parse_launch_config(config)
        self.target = target
        self.name = name
        self.run = getattr(target, "run", None)
        self.user_stream = stream  # keeps a Numba stream alive while this launcher is cached
        self.stream = core_stream(stream)
        self.stream_device = _device.of_stream(stream) if _device.names_device(stream) else None
        self.shape = (grid, block, shmem)
        self.config = LaunchConfig(grid=grid, block=block, shmem_size=shmem)
        dims = (*grid, *(1,) * (3 - len(grid)), *block, *(1,) * (3 - len(block)))
        # cuLaunchKernel's arguments between the function and the parameter block
        self.buffer_config = (*dims, shmem, custream(int(self.stream.handle)), 0)
        self._coop: LaunchConfig | None = None  # built on first need: cuda.core checks the device supports it

    def __call__(self, *args: Any) -> None:
        if _capture.active and _capture.intercept(self, self.user_stream, args, name=self.name):
            return  # recorded by a simulated capture
        token = self._enter_device(args) if _device.several() else None
        try:
            ctx = current_context()
            run = self.run
            if run is not None:
                run(self, args, ctx)
                return
            kernel: PackedTarget = self.target  # type: ignore[assignment]  # no run: a Kernel (no cast() call per launch)
            cufn = kernel._cufunctions.get(ctx)
            params = kernel.params
            if cufn is not None and params is not None:
                with params.lock:
                    try:
                        kernel.fill(params.block, *args)
                    except Exception:  # a value the fast packing does not take as is: convert, or say why not
                        params.fill(params.block, 0, *kernel.pack(args))
                    (err,) = launch_buffer(cufn, *self.buffer_config, params.extra)
                if err:
                    raise LaunchError(f"launch of {self.name!r} failed: {driver_error(err)}")
                return
            packed = kernel.pack(args)
            try:
                fn = kernel._by_context.get(ctx)
                launch(self.stream, self.config, fn if fn is not None else kernel._function_slow(), *packed)
            except Exception as exc:
                raise LaunchError(f"launch of {self.name!r} failed: {exc}") from exc
        finally:
            if token is not None:
                _device.leave_ordered(token, int(self.stream.handle))

    def _enter_device(self, args: tuple[Any, ...]) -> Any:
        """Make the arrays' (else the stream's) device current; what :func:`_device.leave` undoes.
        Raw int pointers name no device: the tropical API makes the device current itself."""
        dev = launch_device(self.target.arrays(args), self.stream_device, self.name)
        if dev is not None and dev != _device.current():
            return _device.enter(dev)
        return None

    def launch(self, fn: Any, packed: Sequence[Any], *, cooperative: bool = False) -> None:
        """cuda.core.launch of ``fn`` with one Python value per kernel parameter."""
        launch(self.stream, self._coop_config() if cooperative else self.config, fn, *packed)

    def _coop_config(self) -> LaunchConfig:
        if self._coop is None:
            grid, block, shmem = self.shape
            self._coop = LaunchConfig(grid=grid, block=block, shmem_size=shmem, is_cooperative=True)
        return self._coop


#: ``launch_buffer(cufn, *launcher.buffer_config, extra)``: cuLaunchKernel with a prepacked
#: parameter block (``extra``); returns ``(CUresult,)``. The ``@lazy_kernel`` hot path.
launch_buffer = _cu.cuLaunchKernel


def driver_error(err: Any) -> Exception:
    """An exception naming a CUresult, for the message of the LaunchError that wraps it."""
    _, name = _cu.cuGetErrorName(err)
    return RuntimeError(name.decode() if isinstance(name, bytes) else str(err))


class LauncherCache(dict[Any, Any]):
    """config -> launcher, built on a miss by ``make(config)``; a hit is a plain dict lookup.

    Bounded: a program that launches with ever new configurations (a grid per input size)
    starts over rather than grow.
    """

    def __init__(self, make: Callable[[Any], Any]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, config: Any) -> Any:
        launcher = self.make(config)
        if len(self) >= _LAUNCHER_CACHE:
            self.clear()
        self[config] = launcher
        return launcher


class Launchable:
    """``kernel[config]``: the cached launcher of a configuration (kernels set ``_launchers``)."""

    _launchers: LauncherCache

    def __getitem__(self, config: Any) -> Any:
        try:
            return self._launchers[config]
        except TypeError:  # unhashable config (lists): fine, just not cached
            return self._launchers.make(config)
