"""A compiled kernel: loaded once per device, launched Numba-style.

``kernel[grid, block, stream, shared_mem](*args)`` packs the arguments with a
plan fixed by the kernel's signature and hands them to ``cuda.core.launch``
on the Numba stream's handle. Nothing synchronizes after a launch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from cuda.core import launch

from . import _capture, _device
from ._device import current_context
from .errors import LaunchError

PTR = "ptr"
_LAUNCHER_CACHE = 512


def _dim3(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    try:
        dims = tuple(int(v) for v in value)
    except TypeError:
        raise LaunchError(f"{what} must be an int or a tuple of up to 3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise LaunchError(f"{what} must have 1 to 3 positive entries, got {value!r}")
    return dims


def _device_pointer(value: Any, index: int) -> int:
    ptr = getattr(value, "device_ctypes_pointer", None)  # Numba device arrays: fastest
    if ptr is not None:
        return ptr.value or 0
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        return cai["data"][0]
    if isinstance(value, np.ndarray):
        raise LaunchError(
            f"argument {index} is a NumPy (host) array; kernels take device arrays: "
            "pass numba.cuda.to_device(a), a CuPy array or a CUDA tensor"
        )
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)  # a raw device address
    raise LaunchError(
        f"argument {index} ({type(value).__name__}) is not a device array: "
        "expected an object with __cuda_array_interface__"
    )


def _fast_pointer(value: Any, index: int) -> int:
    try:
        return value.device_ctypes_pointer.value or 0  # Numba device arrays: 0.08 us
    except AttributeError:
        return _device_pointer(value, index)


def _fast_scalar(conv: type, value: Any) -> Any:
    out = conv(value)
    if type(out) is not conv:  # np.float32(array) gives an array, not a scalar
        raise TypeError("not a scalar")
    return out


def _scalar_packer(dtype: np.dtype, index: int):
    conv = dtype.type

    def pack(value: Any) -> Any:
        if hasattr(value, "__cuda_array_interface__") or isinstance(value, np.ndarray):
            raise LaunchError(f"argument {index} must be a {dtype.name} scalar, got an array")
        try:
            return conv(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise LaunchError(f"argument {index} must be a {dtype.name} scalar, got {value!r}: {exc}") from None

    return pack


def _infer_packer(value: Any, index: int):
    if isinstance(value, np.generic):
        return _scalar_packer(value.dtype, index)
    if isinstance(value, (bool, int, float)):
        raise LaunchError(
            f"argument {index} is a Python {type(value).__name__}, whose C type is ambiguous: "
            "declare signature= for this kernel or pass a NumPy scalar such as np.int32(...)"
        )
    return lambda v, i=index: np.intp(_device_pointer(v, i))


class Kernel:
    """A compiled ``extern "C"`` kernel and its loaded modules, one per device."""

    def __init__(
        self,
        name: str,
        symbol: str,
        code: bytes,
        *,
        arch: str,
        signature: Sequence[str] | None = None,
        meta: dict[str, Any] | None = None,
        family: str | None = None,
    ) -> None:
        self.name = name
        self.symbol = symbol
        self.code = code
        self.arch = arch
        self.family = family
        self.meta = dict(meta or {})
        self.signature = None if signature is None else tuple(str(s) for s in signature)
        self._plan = None if self.signature is None else self._make_plan(self.signature)
        self._arrays = None if self.signature is None else self._array_picker(self.signature)
        self._functions: dict[int, Any] = {}  # device ordinal -> loaded kernel
        self._by_context: dict[int, Any] = {}  # CUcontext handle -> loaded kernel (hot path)
        self._load_lock = threading.Lock()
        self._launchers: dict[tuple, _Launcher] = {}

    @staticmethod
    def _make_plan(signature: Sequence[str]):
        """A packing function generated for the signature: one call, no per-argument loop."""
        env: dict[str, Any] = {"_ptr": _fast_pointer, "_scalar": _fast_scalar}
        params, exprs = [], []
        for i, t in enumerate(signature):
            params.append(f"a{i}")
            if t == PTR:
                exprs.append(f"_ptr(a{i}, {i})")  # cuda.core passes a Python int as a pointer
                continue
            try:
                env[f"_t{i}"] = np.dtype(t).type
            except TypeError:
                raise ValueError(f"signature entry {i} must be 'ptr' or a NumPy dtype name, got {t!r}") from None
            exprs.append(f"_scalar(_t{i}, a{i})")
        src = f"def pack({', '.join(params)}):\n    return ({', '.join(exprs)}{',' if exprs else ''})\n"
        exec(src, env)  # noqa: S102 - built only from 'ptr' and validated dtype names
        return env["pack"]

    @staticmethod
    def _array_picker(signature: Sequence[str]):
        """``pick(*args)``: the pointer arguments only, the ones that can name a device."""
        ptrs = [f"a{i}" for i, t in enumerate(signature) if t == PTR]
        params = ", ".join(f"a{i}" for i in range(len(signature)))
        src = f"def pick({params}):\n    return ({', '.join(ptrs)}{',' if ptrs else ''})\n"
        env: dict[str, Any] = {}
        exec(src, env)  # noqa: S102 - built only from argument positions
        return env["pick"]

    def arrays(self, args: Sequence[Any]) -> Sequence[Any]:
        """The arguments that may be device arrays (all of them without a signature)."""
        pick = self._arrays
        if pick is None:
            return args
        try:
            return pick(*args)
        except TypeError:  # wrong count: pack() reports it
            return args

    # -- loading ------------------------------------------------------------
    def function(self) -> Any:
        """The cuda.core kernel for the current context's device, loading the cubin on first use.

        The hot path asks the driver for the current context (0.2 us) instead of
        Numba's ``current_context()`` (3 us) and looks it up in a dict.
        """
        fn = self._by_context.get(current_context())
        if fn is None:
            fn = self._function_slow()
        return fn

    def _function_slow(self) -> Any:
        from numba import cuda

        ctx = cuda.current_context()  # creates the context if there is none yet
        dev = ctx.device.id
        with self._load_lock:
            fn = self._functions.get(dev)
            if fn is None:
                fn = self._load(ctx)
                self._functions[dev] = fn
            self._by_context[current_context()] = fn
        return fn

    def _load(self, ctx) -> Any:
        from cuda.core import ObjectCode

        try:
            obj = ObjectCode.from_cubin(self.code, name=self.name)
            module = ctx.create_module_image(obj)
            return module.get_function(self.symbol).kernel
        except Exception as exc:
            raise LaunchError(
                f"could not load kernel {self.name!r} (compiled for {self.arch}) on device "
                f"{ctx.device.id} ({ctx.device.name}, sm_{''.join(map(str, ctx.device.compute_capability))}): {exc}"
            ) from exc

    @property
    def loaded_devices(self) -> tuple[int, ...]:
        return tuple(self._functions)

    # -- launching ------------------------------------------------------------
    def __getitem__(self, config: tuple) -> _Launcher:
        try:
            launcher = self._launchers.get(config)
        except TypeError:  # unhashable config (lists): fine, just not cached
            launcher = None
        if launcher is None:
            launcher = _Launcher(self, config)
            if len(self._launchers) >= _LAUNCHER_CACHE:
                self._launchers.clear()
            try:
                self._launchers[config] = launcher
            except TypeError:  # unhashable config (lists): fine, just not cached
                pass
        return launcher

    def pack(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """Arguments as the C types the kernel takes (fast path, then a checked path for errors)."""
        plan = self._plan
        if plan is None:
            return tuple(_infer_packer(v, i)(v) for i, v in enumerate(args))
        try:
            return plan(*args)
        except Exception:
            return self._pack_checked(args)

    def _pack_checked(self, args: Sequence[Any]) -> tuple[Any, ...]:
        sig = self.signature or ()
        if len(args) != len(sig):
            raise LaunchError(f"kernel {self.name!r} takes {len(sig)} arguments {sig}, got {len(args)}")
        out = []
        for i, (t, v) in enumerate(zip(sig, args)):
            out.append(np.intp(_device_pointer(v, i)) if t == PTR else _scalar_packer(np.dtype(t), i)(v))
        return tuple(out)

    def __repr__(self) -> str:
        return f"<lazykern Kernel {self.name!r} {self.arch} {len(self.code)} B>"

    def _repr_html_(self) -> str:
        from html import escape

        secs = self.meta.get("compile_seconds", "?")
        return (
            f"<b>Kernel</b> <code>{escape(self.name)}</code>: compiled for {escape(self.arch)}, "
            f"{len(self.code):,} bytes, compile {secs} s, loaded on devices {list(self.loaded_devices)}"
        )


def parse_launch_config(config: Any) -> tuple[tuple[int, ...], tuple[int, ...], Any, int]:
    """``[grid, block(, stream(, shared_mem))]`` -> (grid, block, stream, shared_mem), checked."""
    if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
        raise LaunchError(
            "launch as kernel[grid, block], kernel[grid, block, stream] or kernel[grid, block, stream, shared_mem]"
        )
    grid, block = _dim3(config[0], "grid"), _dim3(config[1], "block")
    stream = config[2] if len(config) > 2 else 0
    shmem = int(config[3]) if len(config) > 3 else 0
    return grid, block, stream, shmem


_streams: dict[int, Any] = {}


def core_stream(stream: Any) -> Any:
    """A cuda.core Stream for a Numba, CuPy or PyTorch stream, a raw handle, or 0/None (default stream)."""
    from cuda.core import Stream

    handle = _device.stream_handle(stream)
    s = _streams.get(handle)
    if s is None:
        s = _streams[handle] = Stream.from_handle(handle)
    return s


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


class _Launcher:
    __slots__ = ("kernel", "config", "stream", "user_stream", "stream_device")

    def __init__(self, kernel: Kernel, config: Any) -> None:
        from cuda.core import LaunchConfig

        grid, block, stream, shmem = parse_launch_config(config)
        self.kernel = kernel
        self.user_stream = stream  # keeps a Numba stream alive while this launcher is cached
        self.stream = core_stream(stream)
        self.stream_device = _device.of_stream(stream) if _device.names_device(stream) else None
        self.config = LaunchConfig(grid=grid, block=block, shmem_size=shmem)

    def __call__(self, *args: Any) -> None:
        kernel = self.kernel
        if _capture.active and _capture.intercept(self, self.user_stream, args, name=kernel.name):
            return  # recorded by a simulated capture
        packed = kernel.pack(args)
        ctx = current_context()
        token = None
        if _device.several():  # raw int pointers name no device: the tropical API activates it itself
            dev = launch_device(kernel.arrays(args), self.stream_device, kernel.name)
            if dev is not None and dev != _device.context_device(ctx):
                token = _device.enter(dev)
                ctx = current_context()
        try:
            fn = kernel._by_context.get(ctx)
            launch(self.stream, self.config, fn if fn is not None else kernel._function_slow(), *packed)
        except Exception as exc:
            raise LaunchError(f"launch of {kernel.name!r} failed: {exc}") from exc
        finally:
            if token is not None:
                _device.leave(token)
