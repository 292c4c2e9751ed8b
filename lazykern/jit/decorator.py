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
that one instantiation from the :class:`~lazykern.store.cache.KernelCache`,
compiling it with numba-cuda only if no process on the machine has done so
before. The cache entry holds the cubin, its mangled symbol and a JSON launch
plan, so a fresh process launches from the cubin alone: no typing, no
lowering. Launches go through the launch layer (:mod:`lazykern.launch._launch`).

``saxpy.warm(sigs, arch="sm_90")`` compiles ahead of time and needs no GPU.

Under ``NUMBA_ENABLE_CUDASIM=1`` the kernel runs in Numba's simulator with
the same call syntax, and the cache is bypassed entirely (there is no binary
to keep); ``signatures`` and ``stats()`` still count what was called, a first
call with a new signature counting as a miss and a compile (so
:func:`lazykern.testing.assert_compiled` reads the same on both).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Sequence
from types import FunctionType
from typing import Any, cast

from .. import _fork
from .._numba import args as _numba_args
from .._numba import compile as _numba_compile
from .._numba import internals
from .._numba.declared import Declared
from .._numba.signature import arg_range, is_signature, normalize_signature
from ..compile import compiler
from ..errors import LaunchConfigError, LaunchTypeError, LazykernError
from ..launch._device import simulating as _simulating
from ..launch._launch import Launchable, Launcher, LauncherCache
from ..store.cache import KernelCache, default_cache
from . import _lazy_entry
from ._forall import ForAll
from ._lazy_instance import Instance
from ._lazy_launch import Dispatcher
from ._lazy_sim import SimLauncher, SimState
from ._overloads import Overload, Overloads, SimOverloads

__all__ = ["LazyKernel", "lazy_kernel", "normalize_signature"]

# The kernel options of numba.cuda.jit (numba-cuda 0.30), with its defaults and meanings.
_OPTION_DEFAULTS: dict[str, Any] = {
    "fastmath": False,
    "lineinfo": False,
    "debug": None,  # None: as numba-cuda, NUMBA_CUDA_DEBUGINFO
    "opt": None,  # None: as numba-cuda, NUMBA_OPT != 0
    "max_registers": None,
    "launch_bounds": None,
    "lto": None,  # None: as numba-cuda does, on wherever nvJitLink is available (off with debug)
    "inline": "never",
    "forceinline": False,
    "shared_memory_carveout": None,
    "extensions": (),
}


def lazy_kernel(
    func: Any = None,
    *,
    cache: KernelCache | bool | None = None,
    link: Sequence[Any] = (),
    device: bool = False,
    **options: Any,
) -> Any:
    """Decorate a Numba-Python kernel; compile nothing until it is called.

    Options, with ``numba.cuda.jit``'s meanings and defaults: ``fastmath``, ``lineinfo``,
    ``debug``, ``opt``, ``max_registers``, ``launch_bounds``, ``lto``, ``inline``,
    ``forceinline``, ``shared_memory_carveout``, ``extensions``; each is part of the key.
    ``link`` lists files or ``numba.cuda.CUSource`` objects to link (their contents are part
    of the key). ``cache`` is a :class:`KernelCache` (default
    :func:`lazykern.store.cache.default_cache`); ``cache=True`` / ``False`` (``cuda.jit``'s
    file cache switch) is accepted and changes nothing: every instantiation is stored.

    ``func`` may also be a signature or a list of them, as for ``cuda.jit``: a launch runs the
    signature ``cuda.jit(sig)`` would (one signature: always it, its arguments converted to it;
    a list: the one Numba's dispatcher picks) and the key is the declared signature's. They are
    compiled on first use (or by :meth:`LazyKernel.warm`), not at decoration time.

    ``device=True`` makes a device function, as ``cuda.jit(device=True)`` does (it is one):
    compiled when a kernel that calls it compiles, callable from ``@lazy_kernel`` and
    ``@cuda.jit`` kernels alike, its code part of every calling ``@lazy_kernel``'s key.
    """
    if device:
        return _device_function(func, cache=cache, link=link, **options)
    if options.get("boundscheck"):
        raise NotImplementedError("bounds checking is not supported for CUDA (as numba.cuda.jit)")
    options.pop("boundscheck", None)
    unknown = sorted(set(options) - set(_OPTION_DEFAULTS))
    if unknown:
        raise TypeError(f"lazy_kernel got unknown options {unknown}; supported: {sorted(_OPTION_DEFAULTS)}")
    if options.get("inline") is not None and isinstance(options["inline"], bool):
        options["inline"] = "always" if options["inline"] else "never"  # numba-cuda's old spelling
    _numba_compile.carveout(options.get("shared_memory_carveout"))  # refuse a bad value now, as cuda.jit
    _warn_like_cuda_jit(options)
    store = cache if isinstance(cache, KernelCache) else None
    declared = None
    if func is not None and is_signature(func):  # cuda.jit("void(float32[:])") / cuda.jit([sig, ...])
        sigs = func if isinstance(func, list) else [func]
        # numba-cuda: one signature makes a specialized dispatcher; a list, one that chooses.
        declared = Declared([normalize_signature(sig) for sig in sigs], specialized=not isinstance(func, list))
        func = None

    def wrap(fn: Callable[..., Any]) -> LazyKernel:
        return LazyKernel(fn, cache=store, link=link, declared=declared, **options)

    return wrap(func) if func is not None else wrap


# The options numba.cuda.jit takes for a device function (numba-cuda 0.30).
_DEVICE_OPTIONS = frozenset(("debug", "opt", "lineinfo", "fastmath", "inline", "forceinline"))


def _device_function(func: Any, *, cache: Any, link: Sequence[Any], **options: Any) -> Any:
    """``lazy_kernel(device=True)``: Numba's own device function, which is already lazy (compiled for
    each caller's argument types when the caller compiles) and which the first key walks
    (``_numba.key``); ``cache`` has nothing to store (the caller's binary holds its code)."""
    from numba import cuda

    if link:
        raise ValueError("link keyword invalid for device function")  # numba.cuda.jit's words
    unknown = sorted(set(options) - _DEVICE_OPTIONS)
    if unknown:
        raise TypeError(
            f"lazy_kernel(device=True) got options {unknown}; a device function takes {sorted(_DEVICE_OPTIONS)}"
        )
    if func is None:
        return cuda.jit(device=True, **options)
    return cuda.jit(func, device=True, **options)


def _warn_like_cuda_jit(options: dict[str, Any]) -> None:
    """The warnings ``numba.cuda.jit`` gives for option combinations (opt=None resolves to on there too)."""
    if not options.get("debug"):
        return
    if options.get("opt") is not False:
        warnings.warn(
            "debug=True with opt=True is not supported by CUDA. This may result in a crash"
            " - set debug=False or opt=False.",
            internals.invalid_config_warning(),
            stacklevel=3,
        )
    if options.get("lineinfo"):
        warnings.warn(
            "debug and lineinfo are mutually exclusive. Use debug to get full debug info (this disables some "
            "optimizations), or lineinfo for line info only with code generation unaffected.",
            internals.invalid_config_warning(),
            stacklevel=3,
        )


class LazyKernel(Launchable):
    """A Numba-Python kernel instantiated lazily, one signature at a time."""

    def __init__(
        self,
        py_func: Callable[..., Any],
        *,
        cache: KernelCache | None = None,
        link: Sequence[Any] = (),
        declared: Declared | None = None,
        **options: Any,
    ) -> None:
        if not callable(py_func) or not hasattr(py_func, "__code__"):
            raise TypeError(f"lazy_kernel decorates a Python function, got {type(py_func).__name__}")
        self.py_func = cast(FunctionType, py_func)  # checked above: a Python function (it has __code__)
        self.__name__ = py_func.__name__
        # How errors name the kernel: a family's twin names the fragment the user launched (family.py).
        self.described = repr(py_func.__name__)
        self.__qualname__ = py_func.__qualname__
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func
        self._options = options  # as given (specialize() passes them on)
        self.options = {**_OPTION_DEFAULTS, **options}
        self.extensions = list(self.options["extensions"])  # launch-time argument mappers, as numba-cuda's
        self.link = tuple(link)
        self._cache = cache
        self._nargs = arg_range(self.py_func)
        self.declared = declared  # lazy_kernel(sig): the signatures cuda.jit(sig) would compile
        self._specializations: dict[tuple[Any, ...], LazyKernel] = {}
        self._inspected: dict[tuple[tuple[Any, ...], str], Any] = {}  # (types, arch) -> Numba's compile result
        self._instances: dict[tuple[Any, ...], Instance] = {}  # Numba types -> instance
        self._dispatch = Dispatcher(self)
        self._launchers = LauncherCache(self._make_launcher)
        self._lock = _fork.rlock()
        self._sim = SimState()
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
            return [", ".join(s) for s in list(self._sim.signatures)]
        seen = {", ".join(str(t) for t in types): None for types in self._instances}
        seen.update({", ".join(s): None for s in self._warmed})
        return list(seen)

    @property
    def arg_count(self) -> tuple[int, int]:
        """(fewest, most) arguments a launch takes (parameters with defaults may be left out)."""
        return self._nargs

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
        """The cache key of one instantiation (recomputed, so edits to reached code show).

        What only typing reveals (overload implementations, lowering, values Numba froze) is
        not in this key: the entry's manifest holds it and is verified on every load."""
        types = normalize_signature(signature)
        return _lazy_entry.instance_key(
            self.py_func, self.link, self._compile_options, types, compiler.normalize_arch(arch)
        )

    def warm(
        self, signatures: Iterable[Any] | None = None, arch: str | tuple[int, int] | None = None
    ) -> list[dict[str, Any]]:
        """Compile (or find) these signatures for ``arch`` ahead of time; no GPU needed.

        A signature is a tuple of Numba types, e.g. ``(float32, float32[::1])``
        (``[::1]`` is the contiguous layout device arrays have; ``[:]`` also
        serves them, a little slower), or a string ``"void(float32, float32[::1])"``.
        None: the declared signatures (``lazy_kernel(sig)``).
        """
        if _simulating():
            raise LazykernError("warm() compiles cubins and is not available under NUMBA_ENABLE_CUDASIM=1")
        if signatures is None:
            if self.declared is None:
                raise TypeError(f"kernel {self.described} declares no signature: pass the signatures to warm")
            signatures = self.declared.signatures
        arch = compiler.normalize_arch(arch)
        out = []
        for sig in signatures:
            types = normalize_signature(sig)
            _numba_args.plan_for(types)  # refuse unsupported types before compiling
            entry, compiled = self._entry(types, arch, relax=False)
            with self._lock:
                self._warmed[tuple(str(t) for t in types)] = None
            out.append(
                {"signature": [str(t) for t in types], "arch": arch, "compiled": compiled, "bytes": len(entry.code)}
            )
        return out

    def __call__(self, *args: Any) -> None:
        raise LaunchConfigError(  # numba-cuda's words (missing_launch_config_msg), naming the kernel
            f"kernel {self.described}: Kernel launch configuration was not specified. Use the syntax: "
            f"{self.__name__}[blockspergrid, threadsperblock](arg0, arg1, ..., argn)"
        )

    # -- what a numba-cuda dispatcher offers --------------------------------------
    def forall(self, ntasks: int, tpb: int = 0, stream: Any = 0, sharedmem: int = 0) -> ForAll:
        """This kernel configured for ``ntasks`` tasks, one thread each, as ``cuda.jit``'s ``forall``:
        ``ceil(ntasks / tpb)`` blocks of ``tpb`` threads, ``tpb`` chosen as numba-cuda chooses it
        (the kernel's most threads per block, read from the loaded cubin) unless given."""
        return ForAll(self, ntasks, tpb=tpb, stream=stream, sharedmem=sharedmem)

    @property
    def specialized(self) -> bool:
        """Whether this kernel runs one declared signature whatever the arguments (``lazy_kernel(sig)``)."""
        return self.declared is not None and self.declared.specialized

    def specialize(self, *args: Any) -> LazyKernel:
        """This kernel specialized for the types of ``args``, as ``cuda.jit``'s ``specialize``:
        a kernel of that one declared signature (kept per signature; compiled on first use)."""
        if _simulating():
            return self  # as numba-cuda's simulator
        if self.specialized:
            raise RuntimeError("Dispatcher already specialized")  # numba-cuda's words
        types = tuple(t for t, _, _ in self._dispatch.describe(args)[0])
        with self._lock:
            out = self._specializations.get(types)
            if out is None:
                declared = Declared([types], specialized=True)
                out = LazyKernel(self.py_func, cache=self._cache, link=self.link, declared=declared, **self._options)
                self._specializations[types] = out
        return out

    @property
    def overloads(self) -> Any:
        """Signature (a tuple of Numba types) -> overload, for the declared signatures and those
        instantiated here; each has numba-cuda's ``_Kernel`` attributes the docs use
        (``max_cooperative_grid_blocks``, ``regs_per_thread``, ``inspect_*`` ...)."""
        return SimOverloads() if _simulating() else Overloads(self)

    @property
    def definitions(self) -> Any:
        """The overloads (numba's older name)."""
        return self.overloads

    @property
    def definition(self) -> Overload:
        """The one overload of a kernel that has exactly one signature."""
        sigs = self._known_signatures()
        if len(sigs) != 1:
            raise TypeError(f"kernel {self.described} has {len(sigs)} signatures, not one: use .overloads[sig]")
        return Overload(self, sigs[0])

    def inspect_llvm(self, signature: Any = None) -> Any:
        """LLVM IR of one signature, or a dict of every known one (compiled on demand)."""
        return self._inspect(signature, lambda o: o.inspect_llvm())

    def inspect_asm(self, signature: Any = None) -> Any:
        """PTX for the current device of one signature, or a dict of every known one."""
        return self._inspect(signature, lambda o: o.inspect_asm())

    def inspect_sass(self, signature: Any = None) -> Any:
        """SASS of the stored cubin of one signature, or a dict of every known one (nvdisasm needed)."""
        return self._inspect(signature, lambda o: o.inspect_sass())

    def inspect_types(self, file: Any = None) -> None:
        """Numba's typed IR of every known signature, printed to ``file`` (stdout by default)."""
        for types in self._known_signatures():
            Overload(self, types).inspect_types(file=file)

    def get_regs_per_thread(self, signature: Any = None) -> Any:
        """Registers per thread of one signature's cubin (the only one of a specialized kernel), or a dict of all."""
        return self._attribute(signature, "regs_per_thread")

    def get_shared_mem_per_block(self, signature: Any = None) -> Any:
        """Static shared memory per block, in bytes: as :meth:`get_regs_per_thread`."""
        return self._attribute(signature, "shared_mem_per_block")

    def get_max_threads_per_block(self, signature: Any = None) -> Any:
        """The most threads a block may have: as :meth:`get_regs_per_thread`."""
        return self._attribute(signature, "max_threads_per_block")

    def get_const_mem_size(self, signature: Any = None) -> Any:
        """Constant memory, in bytes: as :meth:`get_regs_per_thread`."""
        return self._attribute(signature, "const_mem_size")

    def get_local_mem_per_thread(self, signature: Any = None) -> Any:
        """Local memory per thread, in bytes: as :meth:`get_regs_per_thread`."""
        return self._attribute(signature, "local_mem_per_thread")

    def _attribute(self, signature: Any, name: str) -> Any:
        """numba-cuda's ``get_*``: one signature's value, the specialized kernel's, or a dict of every known one."""
        if signature is not None:
            return getattr(Overload(self, normalize_signature(signature)), name)
        if self.specialized:
            return getattr(self.definition, name)
        return {types: getattr(Overload(self, types), name) for types in self._known_signatures()}

    def _inspect(self, signature: Any, read: Callable[[Overload], Any]) -> Any:
        if signature is not None:
            return read(Overload(self, normalize_signature(signature)))
        return {types: read(Overload(self, types)) for types in self._known_signatures()}

    def __repr__(self) -> str:
        return f"<lazy_kernel {self.__qualname__} signatures={self.signatures}>"

    def _repr_html_(self) -> str:
        s = self.stats()
        sigs = "".join(f"<li><code>({sig})</code></li>" for sig in self.signatures) or "<li>none yet</li>"
        counts = ", ".join(f"{k} {v}" for k, v in s.items() if k != "signatures")
        return f"<b>lazy_kernel</b> <code>{self.__qualname__}</code>: {counts}<ul>{sigs}</ul>"

    # -- what instances, overloads and launchers call back -------------------------
    def _known_signatures(self) -> list[tuple[Any, ...]]:
        """Declared signatures, then those instantiated in this process, in order."""
        seen: dict[tuple[Any, ...], None] = dict.fromkeys(self.declared.signatures if self.declared else ())
        seen.update(dict.fromkeys(list(self._instances)))
        return list(seen)

    def _instance_for(self, args: tuple[Any, ...]) -> Instance:
        """The instance a launch with ``args`` runs."""
        described, _ = self._dispatch.describe(args)
        return self._instance(tuple(d[0] for d in described))

    def _lowered(self, types: tuple[Any, ...], arch: str) -> Any:
        """Numba's compile result for ``types`` on ``arch`` (inspection only; kept in this process)."""
        with self._lock:
            cres = self._inspected.get((types, arch))
            if cres is None:
                cres = self._inspected[(types, arch)] = _numba_compile.lowered(
                    self.py_func, types, arch=arch, options=self._compile_options, link=self.link
                )
        return cres

    def _make_launcher(self, config: Any) -> Launcher | SimLauncher:
        if _simulating():
            return SimLauncher(self, self._sim, config)
        return Launcher(self._dispatch, config, self.__name__)

    def _entry(self, types: tuple[Any, ...], arch: str, *, relax: bool = True) -> tuple[Any, bool]:
        """The cache entry for ``types`` on ``arch``: found, or compiled now; returns (entry, compiled)."""
        entry, compiled = _lazy_entry.get_or_compile(
            self.cache, self.py_func, self.link, self._compile_options, types, arch, relax=relax
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
        return _lazy_entry.compile_options(self.options)

    def _count(self, name: str, delta: float = 1) -> None:
        with self._lock:
            self._counts[name] += delta

    def _check_count(self, args: tuple[Any, ...]) -> None:
        lo, hi = self._nargs
        if not lo <= len(args) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise LaunchTypeError(  # numba's own words (its untyped pass), naming the user's kernel
                f"kernel {self.described}: Signature mismatch: {len(args)} argument types given, but function "
                f"takes {want} arguments"
            )

    def _instance(self, types: tuple[Any, ...]) -> Instance:
        inst = self._instances.get(types)
        if inst is None:
            with self._lock:
                inst = self._instances.get(types)
                if inst is None:
                    _numba_args.plan_for(types)  # clear LaunchError for unsupported types, before any compile
                    inst = self._instances[types] = Instance(self, types)
        return inst
