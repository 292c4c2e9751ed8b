"""A compiled kernel: loaded once per CUDA context (a device's primary context), launched Numba-style.

``kernel[grid, block, stream, shared_mem](*args)`` gets a launcher from the
launch layer (:mod:`lazykern.launch._launch`), which writes the arguments into the
kernel's reused parameter block (:attr:`Kernel.params`, laid out from the
signature when the first launcher is made: a kernel only looked up, as a warm
start does, generates nothing) and calls the driver's ``cuLaunchKernel``; a kernel without a
signature, or with a type the block cannot hold, is packed with
:meth:`Kernel.pack` and launched with ``cuda.core.launch``. Nothing synchronizes
after a launch.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .. import _exit, _fork
from .._numba import internals
from ..compile.compiler import arch_of
from ..errors import LaunchError
from . import _device
from ._device import current_context
from ._launch import Launchable, Launcher, LauncherCache, Params, cufunction, device_pointer, param_format

PTR = "ptr"


def _fast_scalar(conv: type, value: Any) -> Any:
    out = conv(value)
    if type(out) is not conv:  # np.float32(array) gives an array, not a scalar
        raise TypeError("not a scalar")
    return out


def _scalar_packer(dtype: np.dtype[Any], index: int) -> Callable[[Any], Any]:
    conv = dtype.type

    def pack(value: Any) -> Any:
        if hasattr(value, "__cuda_array_interface__") or isinstance(value, np.ndarray):
            raise LaunchError(f"argument {index} must be a {dtype.name} scalar, got an array")
        try:
            return conv(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise LaunchError(f"argument {index} must be a {dtype.name} scalar, got {value!r}: {exc}") from None

    return pack


def _infer_packer(value: Any, index: int) -> Callable[[Any], Any]:
    if isinstance(value, np.generic):
        return _scalar_packer(value.dtype, index)
    if isinstance(value, (bool, int, float)):
        raise LaunchError(
            f"argument {index} is a Python {type(value).__name__}, whose C type is ambiguous: "
            "declare signature= for this kernel or pass a NumPy scalar such as np.int32(...)"
        )

    def pointer(v: Any) -> Any:
        return np.intp(device_pointer(v, index))

    return pointer


log = logging.getLogger("lazykern")

# Every module a Kernel loaded, with its Numba context and its kernel: what the exit teardown
# unloads (lazykern._exit). Numba owns the module; lazykern holds only the proxy Numba returns.
_loaded: list[tuple[Any, Any, weakref.ref[Kernel]]] = []
_loaded_lock = _fork.lock()


@_fork.on_child
def _forget_loaded() -> None:
    _loaded.clear()  # the parent's modules: nothing of the child's to unload


@_exit.on_exit("modules")
def unload_all() -> None:
    """Unload every module lazykern loaded, per context with that context current: each kernel first
    forgets its loaded functions, then Numba's own path runs (``unload_module``, then the context's
    deallocation queue flushed), after the context's queued work has finished."""
    with _loaded_lock:
        loaded, _loaded[:] = list(_loaded), []
    contexts: dict[int, tuple[Any, list[Any]]] = {}
    for ctx, module, ref in loaded:
        kernel = ref()
        if kernel is not None:
            kernel.forget_loaded()
        contexts.setdefault(id(ctx), (ctx, []))[1].append(module)
    for ctx, modules in contexts.values():
        try:
            ctx.push()
        except Exception as exc:  # the context is gone already: so are its modules
            log.debug("lazykern exit: context of device %s not usable: %s", getattr(ctx, "device", "?"), exc)
            continue
        try:
            ctx.synchronize()  # no launch of these modules still queued
            for module in modules:
                try:
                    ctx.unload_module(module)
                except (KeyError, ReferenceError):  # unloaded already (a context reset)
                    pass
            ctx.deallocations.clear()
        finally:
            ctx.pop()


@_exit.on_exit("modules")
def one_unload_per_library() -> None:
    """Before Numba's exit finalizers: a library that modules of several contexts still share
    (loaded before lazykern patched Numba's loads, :func:`internals.one_owner_per_library`) is
    unloaded by one of them only."""
    detached = internals.detach_shared_unloads()
    if detached:
        log.debug("lazykern exit: %d shared module unloads left to their first context", detached)


class Kernel(Launchable):
    """A compiled ``extern "C"`` kernel and its loaded modules, one per context."""

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
        self.signature = None if signature is None else tuple(map(str, signature))
        if self.signature is not None:
            self._check_signature(self.signature)
        # Made on first need (a pack, the first launcher), not here: a warm start that only looks a
        # kernel up pays for none of the generated functions or the parameter block (~0.3 ms).
        self._plan: Callable[..., tuple[Any, ...]] | None = None
        self._arrays: Callable[..., tuple[Any, ...]] | None = None
        # The launch path: the parameters written straight into one reused block (no signature,
        # or a type the block cannot hold: cuda.core packs them per launch instead).
        self.params: Params | None = None
        self._block_made = self.signature is None
        self._functions: dict[int, Any] = {}  # device ordinal -> loaded kernel
        self._by_context: dict[int, Any] = {}  # CUcontext handle -> loaded kernel (hot path)
        self._cufunctions: dict[int, Any] = {}  # CUcontext handle -> its CUfunction (hot path)
        self._load_lock = _fork.lock()
        self._launchers = LauncherCache(self._new_launcher)

    def _new_launcher(self, config: Any) -> Launcher:
        if not self._block_made:
            self._make_block()
        return Launcher(self, config, self.name)

    def _make_block(self) -> None:
        """The reused parameter block and its filler, made before the first launcher launches."""
        with self._load_lock:
            if self._block_made:
                return
            assert self.signature is not None  # no signature: nothing to make
            fmt = param_format(self.signature)
            if fmt is not None:
                params = Params(fmt)
                self.fill = self._filler_factory(self.signature)(params.fill)
                self.params = params  # set after fill: a launch that sees the block sees its filler
            self._block_made = True

    @staticmethod
    @functools.cache
    def _check_signature(signature: tuple[str, ...]) -> None:
        """ValueError for an entry that is neither 'ptr' nor a NumPy dtype name."""
        for i, t in enumerate(signature):
            if t == PTR:
                continue
            try:
                np.dtype(t)
            except TypeError:
                raise ValueError(f"signature entry {i} must be 'ptr' or a NumPy dtype name, got {t!r}") from None

    # The three generated functions depend on the signature alone: made once per signature (an
    # exec costs ~50 us, and a family's kernels share a few signatures), so a warm process that
    # loads many kernels does not compile them again.
    @staticmethod
    @functools.cache
    def _make_plan(signature: tuple[str, ...]) -> Callable[..., tuple[Any, ...]]:
        """A packing function generated for the signature: one call, no per-argument loop."""
        env: dict[str, Any] = {"_ptr": _device.pointer, "_scalar": _fast_scalar}
        params, exprs = [], []
        for i, t in enumerate(signature):
            params.append(f"a{i}")
            if t == PTR:
                exprs.append(f"_ptr(a{i})")  # cuda.core passes a Python int as a pointer
                continue
            try:
                env[f"_t{i}"] = np.dtype(t).type
            except TypeError:
                raise ValueError(f"signature entry {i} must be 'ptr' or a NumPy dtype name, got {t!r}") from None
            exprs.append(f"_scalar(_t{i}, a{i})")
        src = f"def pack({', '.join(params)}):\n    return ({', '.join(exprs)}{',' if exprs else ''})\n"
        exec(src, env)  # noqa: S102 - built only from 'ptr' and validated dtype names
        pack: Callable[..., tuple[Any, ...]] = env["pack"]
        return pack

    @staticmethod
    @functools.cache
    def _filler_factory(signature: tuple[str, ...]) -> Callable[..., Callable[..., None]]:
        """``make(pack_into)`` -> ``fill(block, *args)``: every parameter written into the block in one
        call, the values as given (pointers read from the arrays). A value struct does not take as is
        (a float for an int, out of range) raises, and the launcher falls back to :meth:`pack`."""
        names = [f"a{i}" for i in range(len(signature))]
        values = [f"_ptr({n})" if t == PTR else n for n, t in zip(names, signature)]
        src = (
            "def make(_pack_into):\n"
            f"    def fill(_block, {''.join(n + ', ' for n in names)}):\n"
            f"        _pack_into(_block, 0, {', '.join(values)})\n"
            "    return fill\n"
        )
        env: dict[str, Any] = {"_ptr": _device.pointer}
        exec(src, env)  # noqa: S102 - built only from argument positions and 'ptr'
        make: Callable[..., Callable[..., None]] = env["make"]
        return make

    @staticmethod
    @functools.cache
    def _array_picker(signature: tuple[str, ...]) -> Callable[..., tuple[Any, ...]]:
        """``pick(*args)``: the pointer arguments only, the ones that can name a device."""
        ptrs = [f"a{i}" for i, t in enumerate(signature) if t == PTR]
        params = ", ".join(f"a{i}" for i in range(len(signature)))
        src = f"def pick({params}):\n    return ({', '.join(ptrs)}{',' if ptrs else ''})\n"
        env: dict[str, Any] = {}
        exec(src, env)  # noqa: S102 - built only from argument positions
        pick: Callable[..., tuple[Any, ...]] = env["pick"]
        return pick

    def arrays(self, args: Sequence[Any]) -> Sequence[Any]:
        """The arguments that may be device arrays (all of them without a signature)."""
        pick = self._arrays
        if pick is None:
            if self.signature is None:
                return args
            pick = self._arrays = self._array_picker(self.signature)
        try:
            picked: Sequence[Any] = pick(*args)
        except TypeError:  # wrong count: pack() reports it
            return args
        return picked

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
            handle = current_context()
            self._cufunctions[handle] = cufunction(fn)
            self._by_context[handle] = fn
        return fn

    def cufunction(self) -> Any:
        """The driver's CUfunction for the current context's device (loading the cubin on first use)."""
        cufn = self._cufunctions.get(current_context())
        if cufn is None:
            self._function_slow()
            cufn = self._cufunctions[current_context()]
        return cufn

    def _load(self, ctx: Any) -> Any:
        from cuda.core import ObjectCode

        internals.one_owner_per_library()  # before any module of ours or Numba's is loaded twice
        try:
            obj = ObjectCode.from_cubin(self.code, name=self.name)
            with _relaxed_capture():
                module = ctx.create_module_image(obj)
                fn = module.get_function(self.symbol).kernel
            with _loaded_lock:
                _loaded.append((ctx, module, weakref.ref(self)))
            _exit.install()  # numba.cuda is imported by now: the teardown runs before its finalizers
            return fn
        except Exception as exc:
            raise LaunchError(
                f"could not load kernel {self.name!r} (compiled for {self.arch}) on device "
                f"{ctx.device.id} ({ctx.device.name}, {arch_of(ctx.device.compute_capability)}): {exc}"
            ) from exc

    def forget_loaded(self) -> None:
        """Drop every loaded function (the modules are being unloaded); a later launch loads again."""
        with self._load_lock:
            self._functions.clear()
            self._by_context.clear()
            self._cufunctions.clear()
            self._launchers.clear()

    @property
    def loaded_devices(self) -> tuple[int, ...]:
        return tuple(self._functions)

    # -- launching ------------------------------------------------------------
    def pack(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """Arguments as the C types the kernel takes (fast path, then a checked path for errors)."""
        plan = self._plan
        if plan is None:
            if self.signature is None:
                return tuple(_infer_packer(v, i)(v) for i, v in enumerate(args))
            plan = self._plan = self._make_plan(self.signature)
        try:
            packed: tuple[Any, ...] = plan(*args)
            return packed
        except Exception:
            return self._pack_checked(args)

    def _pack_checked(self, args: Sequence[Any]) -> tuple[Any, ...]:
        sig = self.signature or ()
        if len(args) != len(sig):
            raise LaunchError(f"kernel {self.name!r} takes {len(sig)} arguments {sig}, got {len(args)}")
        out = []
        for i, (t, v) in enumerate(zip(sig, args)):
            out.append(np.intp(device_pointer(v, i)) if t == PTR else _scalar_packer(np.dtype(t), i)(v))
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


@contextlib.contextmanager
def _relaxed_capture() -> Iterator[None]:
    """Relax this thread's stream-capture mode while a cubin loads.

    Loading a module is an "unsafe" call while this thread captures a stream (the driver
    invalidates the capture), and a kernel's first launch inside ``graph.capture`` loads
    its cubin: the load touches no stream, so it may run in relaxed mode (as PyTorch does for
    its lazy initialisations); the previous mode is restored after.
    """
    from cuda.bindings import driver as drv

    err, previous = drv.cuThreadExchangeStreamCaptureMode(drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
    try:
        yield
    finally:
        if err == drv.CUresult.CUDA_SUCCESS:
            drv.cuThreadExchangeStreamCaptureMode(previous)
