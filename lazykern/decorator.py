"""``@lazy_kernel``: Numba-Python kernels compiled per signature, cached across processes.

>>> from numba import cuda
>>> from lazykern import lazy_kernel
>>> @lazy_kernel
... def saxpy(a, x, y, out):
...     i = cuda.grid(1)
...     if i < out.size:
...         out[i] = a * x[i] + y[i]
>>> saxpy.signatures        # nothing is compiled at decoration time
[]

``saxpy[blocks, threads, stream](2.0, x, y, out)`` types the arguments (dict
lookups on the hot path), and the first call with a new signature fetches
that one instantiation from the :class:`~lazykern.cache.KernelCache`,
compiling it with numba-cuda only if no process on the machine has done so
before. The cache entry holds the cubin, its mangled symbol and a JSON launch
plan, so a fresh process launches from the cubin alone: no typing, no
lowering. Launches go straight to ``cuda.core.launch``.

``saxpy.warm(sigs, arch="sm_90")`` compiles ahead of time and needs no GPU.

Under ``NUMBA_ENABLE_CUDASIM=1`` the kernel runs in Numba's simulator with
the same call syntax, and the cache is bypassed entirely (there is no binary
to keep); ``signatures`` and ``stats()`` still count what was called, a first
call with a new signature counting as a miss and a compile (so
:func:`lazykern.testing.assert_compiled` reads the same on both).
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cuda.bindings import driver as _cu

from . import _capture, _device, _numba_args, _numba_compile, compiler
from ._device import current_context
from ._numba_key import fingerprint
from .cache import KernelCache, default_cache, make_key
from .cache import record as _record
from .errors import CaptureError, LaunchError, LazykernError
from .kernel import Kernel, core_stream, launch_device, parse_launch_config

log = logging.getLogger("lazykern")

_OPTION_DEFAULTS: dict[str, Any] = {
    "fastmath": False,
    "lineinfo": False,
    "opt": True,
    "max_registers": None,
    "launch_bounds": None,
    "lto": None,  # None: as numba-cuda does, on wherever nvJitLink is available
}
_LAUNCHER_CACHE = 512


def lazy_kernel(
    func: Callable | None = None,
    *,
    cache: KernelCache | None = None,
    link: Sequence[Any] = (),
    **options: Any,
) -> LazyKernel | Callable[[Callable], LazyKernel]:
    """Decorate a Numba-Python kernel; compile nothing until it is called.

    Options (as for ``numba.cuda.jit``): ``fastmath``, ``lineinfo``, ``opt``,
    ``max_registers``, ``launch_bounds``, ``lto``; ``link`` lists files or
    ``numba.cuda.CUSource`` objects to link (their contents are part of the key).
    ``cache`` defaults to :func:`lazykern.cache.default_cache`.
    """
    unknown = sorted(set(options) - set(_OPTION_DEFAULTS))
    if unknown:
        raise TypeError(f"lazy_kernel got unknown options {unknown}; supported: {sorted(_OPTION_DEFAULTS)}")

    def wrap(fn: Callable) -> LazyKernel:
        return LazyKernel(fn, cache=cache, link=link, **options)

    return wrap(func) if func is not None else wrap


@functools.cache
def _simulating() -> bool:
    from numba.cuda import config as cuda_config

    return bool(cuda_config.ENABLE_CUDASIM)


class LazyKernel:
    """A Numba-Python kernel instantiated lazily, one signature at a time."""

    def __init__(
        self,
        py_func: Callable,
        *,
        cache: KernelCache | None = None,
        link: Sequence[Any] = (),
        **options: Any,
    ) -> None:
        if not callable(py_func) or not hasattr(py_func, "__code__"):
            raise TypeError(f"lazy_kernel decorates a Python function, got {type(py_func).__name__}")
        self.py_func = py_func
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func
        self.options = {**_OPTION_DEFAULTS, **options}
        self.link = tuple(link)
        self._cache = cache
        self._nargs = _arg_range(py_func)
        self._fast: dict[tuple, _Instance] = {}  # fast key -> instance (hot path)
        self._instances: dict[tuple, _Instance] = {}  # Numba types -> instance
        self._launchers: dict[Any, Any] = {}
        self._lock = threading.RLock()
        self._sim_dispatcher: Any = None
        self._sim_signatures: dict[tuple, None] = {}
        self._warmed: dict[tuple[str, ...], None] = {}
        self._counts = {"calls": 0, "hits": 0, "misses": 0, "compiles": 0, "compile_seconds": 0.0}

    # -- public ------------------------------------------------------------
    @property
    def cache(self) -> KernelCache:
        return self._cache if self._cache is not None else default_cache()

    @property
    def signatures(self) -> list[str]:
        """Signatures instantiated in this process (called, loaded or warmed), in order."""
        if _simulating():
            return [", ".join(s) for s in self._sim_signatures]
        seen = {", ".join(str(t) for t in types): None for types in self._instances}
        seen.update({", ".join(s): None for s in self._warmed})
        return list(seen)

    def stats(self) -> dict[str, Any]:
        """This kernel's counts in this process.

        ``calls``: launches through the general path plus first launches (the
        hot path does not count, to stay a few dict lookups); ``hits``:
        instantiations found in the cache; ``misses``/``compiles``: compiled
        here; ``compile_seconds``: time spent compiling them.
        """
        with self._lock:
            out = dict(self._counts)
        out["signatures"] = len(self.signatures)
        out["simulator"] = _simulating()
        return out

    def key(self, signature: Any, arch: str | tuple[int, int] | None = None) -> str:
        """The cache key of one instantiation (recomputed, so edits to reached code show)."""
        types = normalize_signature(signature)
        return self._key(types, compiler.normalize_arch(arch))

    def warm(self, signatures: Iterable[Any], arch: str | tuple[int, int] | None = None) -> list[dict[str, Any]]:
        """Compile (or find) these signatures for ``arch`` ahead of time; no GPU needed.

        A signature is a tuple of Numba types, e.g. ``(float32, float32[::1])``
        (``[::1]`` is the contiguous layout device arrays have; ``[:]`` also
        serves them, a little slower), or a string ``"void(float32, float32[::1])"``.
        """
        if _simulating():
            raise LazykernError("warm() compiles cubins and is not available under NUMBA_ENABLE_CUDASIM=1")
        arch = compiler.normalize_arch(arch)
        out = []
        for sig in signatures:
            types = normalize_signature(sig)
            _numba_args.plan_for(types)  # refuse unsupported types before compiling
            entry, compiled = self._entry(types, arch, relaxed=False)
            with self._lock:
                self._warmed[tuple(str(t) for t in types)] = None
            out.append(
                {"signature": [str(t) for t in types], "arch": arch, "compiled": compiled, "bytes": len(entry.code)}
            )
        return out

    def __getitem__(self, config: Any) -> Any:
        launcher = self._launchers.get(config) if isinstance(config, tuple) else None
        if launcher is None:
            launcher = _SimLauncher(self, config) if _simulating() else _Launcher(self, config)
            if len(self._launchers) >= _LAUNCHER_CACHE:
                self._launchers.clear()
            try:
                self._launchers[config] = launcher
            except TypeError:  # unhashable config: fine, just not cached
                pass
        return launcher

    def __call__(self, *args: Any) -> None:
        raise LaunchError(
            f"kernel {self.__name__!r} needs a launch configuration: call it as {self.__name__}[grid, block](...)"
        )

    def __repr__(self) -> str:
        return f"<lazy_kernel {self.__qualname__} signatures={self.signatures}>"

    def _repr_html_(self) -> str:
        s = self.stats()
        sigs = "".join(f"<li><code>({sig})</code></li>" for sig in self.signatures) or "<li>none yet</li>"
        counts = ", ".join(f"{k} {v}" for k, v in s.items() if k != "signatures")
        return f"<b>lazy_kernel</b> <code>{self.__qualname__}</code>: {counts}<ul>{sigs}</ul>"

    # -- keys and entries ----------------------------------------------------
    def _key(self, types: tuple, arch: str) -> str:
        import numba
        import numba_cuda

        digest, links = fingerprint(self.py_func, self.link)
        extra: dict[str, Any] = {
            "signature": [str(t) for t in types],
            "numba": numba.__version__,
            "numba_cuda": getattr(numba_cuda, "__version__", "?"),
            "nvvm": _nvvm_version(),
            "links": links,
        }
        if self.options["lineinfo"]:  # line numbers end up in the binary
            code = self.py_func.__code__
            extra["where"] = [code.co_filename, code.co_firstlineno]
        # Numba options are not NVRTC flags (make_key parses those): they go in `extra`.
        extra["options"] = {k: repr(v) for k, v in self._compile_options.items()}
        return make_key(digest, arch=arch, route="numba", extra=json.dumps(extra, sort_keys=True))

    def _entry(self, types: tuple, arch: str, *, relaxed: bool = True):
        """The cache entry for ``types`` on ``arch``: found, or compiled now; returns (entry, compiled)."""
        key = self._key(types, arch)
        loose = _relaxed(types) if relaxed else types
        # An any-layout instantiation (e.g. warmed as float32[:]) serves too.
        also = (self._key(loose, arch),) if loose != types else ()
        options, link = self._compile_options, self.link
        entry, compiled = self.cache.get_or_compile(
            key,
            lambda: _numba_compile.compile_kernel(self.py_func, types, arch=arch, options=options, link=link),
            also=also,
        )
        if compiled:
            self._count("misses")
            self._count("compiles")
            self._count("compile_seconds", entry.compile_seconds)
        else:
            self._count("hits")
        return entry, compiled

    @functools.cached_property
    def _compile_options(self) -> dict[str, Any]:
        options = dict(self.options)
        if options["lto"] is None:
            from numba.cuda.cudadrv.driver import _have_nvjitlink

            options["lto"] = bool(_have_nvjitlink())
        return options

    def _count(self, name: str, delta: float = 1) -> None:
        with self._lock:
            self._counts[name] += delta

    # -- dispatch (general path) ---------------------------------------------
    def _check_count(self, args: tuple) -> None:
        lo, hi = self._nargs
        if not lo <= len(args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise LaunchError(f"kernel {self.__name__!r} takes {want} arguments, got {len(args)}")

    def _instance(self, types: tuple) -> _Instance:
        inst = self._instances.get(types)
        if inst is None:
            with self._lock:
                inst = self._instances.get(types)
                if inst is None:
                    _numba_args.plan_for(types)  # clear LaunchError for unsupported types, before any compile
                    inst = self._instances[types] = _Instance(self, types)
        return inst

    def _call(self, launcher: _Launcher, args: tuple) -> None:
        """Type every argument, find or build the instance, copy host arrays, launch."""
        self._count("calls")
        self._check_count(args)
        described = [_numba_args.classify(a, i) for i, a in enumerate(args)]
        types = tuple(d[0] for d in described)
        inst = self._instance(types)
        fn = inst.function()
        fast = tuple(map(self._fast_key, args))
        if _numba_args.SLOW not in fast:
            self._fast[fast] = inst
        hosts = [(i, d[2]) for i, d in enumerate(described) if d[1] == _numba_args.HOST]
        values = [d[2] for d in described]
        if not hosts:
            launcher.launch(inst, fn, values)
            return
        _refuse_if_capturing(launcher, hosts)
        stream = launcher.numba_stream()
        from numba import cuda

        copies = []
        for i, host in hosts:
            dev = cuda.to_device(host, stream=stream)
            values[i] = dev
            copies.append((host, dev))
        launcher.launch(inst, fn, values)
        for host, dev in copies:
            if host.flags.writeable:
                dev.copy_to_host(host, stream=stream)
        if stream:
            stream.synchronize()
        else:
            cuda.synchronize()

    @functools.cached_property
    def _fast_key(self) -> Callable[[Any], Any]:
        """Per-argument hot-path key: the *id* of the argument's Numba type.

        Numba types hash in Python (``hash(self.key)``, recursively), which
        made a dict lookup on a tuple of them cost more than the rest of the
        launch; their ids hash in C. Types are interned and every type in a key
        stays alive in its instance, so an id can never stand for another type.
        """
        table = {cls: id(t) for cls, t in _numba_args.scalar_types().items()}
        slow = _numba_args.SLOW

        def fast_key(value: Any, _get: Callable = table.get, _id: Callable = id) -> Any:
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
                return slow
            try:
                value.__dict__["_lazykern_numba_type"] = nt  # alive as long as the array, so its id stays unique
            except AttributeError:
                pass
            return _id(nt)

        return fast_key


class _Instance:
    """One signature of a lazy kernel: its launch plan, its parameter block and its loaded
    functions, one per context."""

    __slots__ = (
        "owner", "types", "pack", "plan", "cooperative", "functions", "cufunctions", "kernels",
        "fill", "block", "extra", "block_lock", "_block_size", "_extra",
    )  # fmt: skip

    def __init__(self, owner: LazyKernel, types: tuple) -> None:
        self.owner = owner
        self.types = types
        self.pack: Callable[..., tuple] | None = None
        self.plan: list | None = None
        self.cooperative = False
        self.functions: dict[int, Any] = {}  # CUcontext handle -> cuda.core kernel
        self.cufunctions: dict[int, Any] = {}  # CUcontext handle -> CUfunction (hot path)
        self.kernels: dict[str, Kernel] = {}  # arch -> loaded Kernel
        self.fill: Callable[..., None] | None = None
        self.block: Any = None  # the parameter block, reused: cuLaunchKernel copies it before returning
        self.extra = 0
        self.block_lock = threading.Lock()

    def function(self) -> Any:
        from numba.cuda.cudadrv.devices import get_context

        ctx = get_context()  # creates the context if there is none yet
        fn = self.functions.get(current_context())
        if fn is None:
            fn = self._load(ctx)
        return fn

    def _load(self, ctx: Any) -> Any:
        cc = ctx.device.compute_capability
        arch = f"sm_{cc[0]}{cc[1]}"
        with self.owner._lock:
            kernel = self.kernels.get(arch)
            if kernel is None:
                entry, _ = self.owner._entry(self.types, arch)
                meta = entry.meta
                if self.pack is None:
                    self._set_plan(meta)
                kernel = self.kernels[arch] = Kernel(
                    self.owner.__qualname__, meta["symbol"], entry.code, arch=arch, meta=meta, family="lazy_kernel"
                )
            fn = kernel.function()
            handle = current_context()
            self.cufunctions[handle] = _cu.CUfunction(int(fn.handle))
            self.functions[handle] = fn
        return fn

    def _set_plan(self, meta: dict[str, Any]) -> None:
        self.plan = meta["plan"]
        self.cooperative = bool(meta.get("cooperative", False))
        size, self.fill = _numba_args.make_buffer_filler(self.plan)
        self.block = (ctypes.c_char * max(size, 1))()
        self._block_size = ctypes.c_size_t(size)
        self._extra = (ctypes.c_void_p * 5)(
            _BUFFER_POINTER, ctypes.addressof(self.block), _BUFFER_SIZE, ctypes.addressof(self._block_size), 0
        )
        self.extra = ctypes.addressof(self._extra)
        self.pack = _numba_args.make_packer(self.plan)


# CUDA's launch "extra" keys (cuda.h: CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE).
_BUFFER_POINTER, _BUFFER_SIZE = 1, 2


class _Launcher:
    """``kernel[grid, block, stream, shmem]``: the launch configuration, built once and cached."""

    __slots__ = (
        "kernel", "config", "shape", "stream", "user_stream", "_fast", "_key", "_ctx", "_launch", "_coop",
        "dims", "shmem", "cu_stream", "stream_device",
    )  # fmt: skip

    def __init__(self, kernel: LazyKernel, config: Any) -> None:
        from cuda.core import LaunchConfig, launch

        grid, block, stream, shmem = parse_launch_config(config)
        self.kernel = kernel
        self.user_stream = stream  # keeps a Numba stream alive while this launcher is cached
        self.stream = core_stream(stream)
        self.stream_device = _device.of_stream(stream) if _device.names_device(stream) else None
        self.shape = (grid, block, shmem)
        self.config = LaunchConfig(grid=grid, block=block, shmem_size=shmem)
        self.dims = (*grid, *(1,) * (3 - len(grid)), *block, *(1,) * (3 - len(block)))
        self.shmem = shmem
        self.cu_stream = _cu.CUstream(int(self.stream.handle))
        self._coop = None  # built on first need: cuda.core checks the device supports it
        self._fast = kernel._fast
        self._key = kernel._fast_key
        self._ctx = current_context
        self._launch = launch

    def __call__(self, *args: Any) -> None:
        # The hot path: one key per argument (dict lookups), one dict lookup per table, one launch.
        if _capture.active and _capture.intercept(self, self.user_stream, args, name=self.kernel.__name__):
            return  # recorded by a simulated capture
        ctx = self._ctx()
        token = None
        if _device.several():  # the arrays' device current for the launch (and any host-array copies)
            dev = launch_device(args, self.stream_device, self.kernel.__name__)
            if dev is not None and dev != _device.context_device(ctx):
                token = _device.enter(dev)
                ctx = self._ctx()
        try:
            inst = self._fast.get(tuple(map(self._key, args)))
            if inst is None:
                self.kernel._call(self, args)
                return
            cufn = inst.cufunctions.get(ctx)
            if cufn is None or inst.cooperative:
                self.launch(inst, inst.function(), args)
                return
            with inst.block_lock:
                try:
                    inst.fill(inst.block, *args)
                except Exception:
                    self.kernel._call(self, args)  # the general path gives the precise error
                    return
                (err,) = _cuLaunchKernel(cufn, *self.dims, self.shmem, self.cu_stream, 0, inst.extra)
        finally:
            if token is not None:
                _device.leave(token)
        if err:
            raise self._error(inst, _driver_error(err))

    def launch(self, inst: _Instance, fn: Any, args: Sequence[Any]) -> None:
        """The general path: cuda.core.launch with one Python value per kernel parameter."""
        try:
            self._launch(self.stream, self._coop_config() if inst.cooperative else self.config, fn, *inst.pack(*args))
        except Exception as exc:
            raise self._error(inst, exc) from exc

    def _coop_config(self) -> Any:
        if self._coop is None:
            from cuda.core import LaunchConfig

            grid, block, shmem = self.shape
            self._coop = LaunchConfig(grid=grid, block=block, shmem_size=shmem, is_cooperative=True)
        return self._coop

    def _error(self, inst: _Instance, exc: Exception) -> LaunchError:
        sig = ", ".join(str(t) for t in inst.types)
        return LaunchError(f"launch of {self.kernel.__name__!r} ({sig}) failed: {exc}")

    def numba_stream(self) -> Any:
        """The launch stream as a Numba stream (or 0), for copying host arrays."""
        s = self.user_stream
        if s is None or s == 0:
            return 0
        if hasattr(s, "handle"):
            return s
        from numba import cuda

        return cuda.external_stream(int(s))


_cuLaunchKernel = _cu.cuLaunchKernel


def _driver_error(err: Any) -> Exception:
    _, name = _cu.cuGetErrorName(err)
    return RuntimeError(name.decode() if isinstance(name, bytes) else str(err))


class _SimLauncher:
    """Runs the kernel in Numba's simulator; counts signatures and calls, caches nothing."""

    __slots__ = ("kernel", "config")

    def __init__(self, kernel: LazyKernel, config: Any) -> None:
        parse_launch_config(config)  # same checks and errors as on a GPU
        self.kernel = kernel
        self.config = config

    def __call__(self, *args: Any) -> None:
        k = self.kernel
        k._check_count(args)
        sig = tuple(_sim_type(a, i) for i, a in enumerate(args))
        with k._lock:
            k._counts["calls"] += 1
            if sig not in k._sim_signatures:  # the simulator's compile of a new signature
                k._sim_signatures[sig] = None
                k._counts["misses"] += 1
                k._counts["compiles"] += 1
                _record_sim_compile()
            if k._sim_dispatcher is None:
                from numba import cuda

                k._sim_dispatcher = cuda.jit(k.py_func)
        k._sim_dispatcher[self.config](*args)


def _record_sim_compile() -> None:
    _record("lookups")
    _record("misses")
    _record("compiles")


def _sim_type(value: Any, index: int) -> str:
    t = _numba_args.scalar_types().get(value.__class__)
    if t is not None:
        return str(t)
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"array({dtype}, {len(shape)}d)"
    if isinstance(value, tuple):
        return "(" + ", ".join(_sim_type(v, index) for v in value) + ")"
    raise LaunchError(
        f"argument {index} has unsupported type {type(value).__name__}: pass arrays, "
        "Python or NumPy scalars, or tuples of scalars"
    )


# -- helpers ------------------------------------------------------------------------
def normalize_signature(sig: Any) -> tuple:
    """A tuple of Numba types, a ``"void(float32, ...)"`` string or a Numba signature -> argument types."""
    from numba.cuda.core import sigutils

    try:
        args, ret = sigutils.normalize_signature(sig)
    except Exception as exc:
        raise TypeError(f"not a kernel signature: {sig!r} ({exc})") from None
    if ret is not None and str(ret) != "none":
        raise TypeError(f"a kernel returns nothing, but signature {sig!r} declares {ret}")
    return tuple(args)


def _relaxed(types: tuple) -> tuple:
    """The same signature with every array typed as any-layout ('A')."""
    from numba.cuda import types as nt

    return tuple(t.copy(layout="A") if isinstance(t, nt.Array) and t.layout != "A" else t for t in types)


def _arg_range(fn: Callable) -> tuple[int, int]:
    code = fn.__code__
    if code.co_flags & 0x04:  # *args
        raise TypeError(f"kernel {fn.__name__!r} takes *args, which Numba kernels cannot")
    n = code.co_argcount
    return n - len(fn.__defaults__ or ()), n


@functools.cache
def _nvvm_version() -> str:
    try:
        from numba.cuda.cudadrv import nvvm

        return ".".join(map(str, nvvm.NVVM().get_version()))
    except Exception:  # no libNVVM: nothing can compile anyway, keys still differ by numba-cuda version
        return "?"


def _refuse_if_capturing(launcher: _Launcher, hosts: list) -> None:
    """Host arrays need synchronous copies, which break CUDA-graph capture: refuse them there."""
    from cuda.bindings import driver

    handle = int(launcher.stream.handle)
    err, status = driver.cuStreamIsCapturing(driver.CUstream(handle))
    capturing = status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
    if err == driver.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT or (err == driver.CUresult.CUDA_SUCCESS and capturing):
        which = ", ".join(str(i) for i, _ in hosts)
        raise CaptureError(
            f"kernel {launcher.kernel.__name__!r} got NumPy (host) arrays as arguments {which} while a CUDA "
            "graph is being captured; copies to and from the host cannot be captured. Pass device arrays "
            "(numba.cuda.to_device(a), CuPy, torch) instead."
        )
