"""A family of kernels compiled lazily: one shared preamble, one fragment each.

``family[name]`` compiles preamble + that fragment only (one NVRTC call) the
first time any process on the machine asks for it, for the current device's
arch; every later request loads the cubin from the store.

A fragment may have a *twin*: a Numba-Python kernel with the same parameters
(arrays where the fragment takes pointers). Under Numba's CUDA simulator, or
with ``family.use_twins = True``, ``family[name][grid, block](...)`` runs the
twin, so code calling C++ fragments can be tested on a machine with no GPU.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import _fork
from ..compile import compiler
from ..compile.source import FamilySource, Fragment, Generate, check_signature
from ..errors import LazykernError
from ..jit.decorator import LazyKernel
from ..launch._device import simulating
from ..launch.kernel import Kernel
from ..store import _later
from ..store.cache import KernelCache, Later, default_cache, make_key

log = logging.getLogger("lazykern")


class KernelFamily:
    """Named CUDA C++ fragments over a shared preamble, compiled on first use.

    >>> fam = KernelFamily("demo", "#define ONE 1\\n")
    >>> fam.add("one", 'extern "C" __global__ void one(int *a) { *a = ONE; }', signature=["ptr"])
    >>> fam.names(), fam.compiled()
    (['one'], [])
    """

    def __init__(
        self,
        name: str,
        preamble: str = "",
        *,
        options: Sequence[str] = ("-std=c++17",),
        fragments: Mapping[str, str] | None = None,
        cache: KernelCache | None = None,
        route: str = "nvrtc",
        core: Iterable[str] | None = None,
    ) -> None:
        if route not in compiler.ROUTES:
            raise ValueError(f"route must be one of {compiler.ROUTES}, got {route!r}")
        self.source = FamilySource(name, preamble, options)
        self.route = route
        self._cache = cache
        self._kernels: dict[tuple[str, str], Kernel] = {}
        self._lock = _fork.lock()  # guards _building and compile_calls, never held while compiling
        self._building: dict[tuple[str, str], threading.Lock] = {}  # one per (name, arch): others don't wait
        self.compile_calls = 0  # NVRTC calls made by this family in this process
        self._core = None if core is None else list(core)
        self._twins: dict[str, LazyKernel] = {}
        self.use_twins: bool | None = None  # None: run twins under the CUDA simulator only
        self.simulator_note = ""  # what to do instead, added to the error for a fragment with no twin
        if fragments:
            self.source.update(fragments)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def cache(self) -> KernelCache:
        return self._cache if self._cache is not None else default_cache()

    def add(
        self,
        name: str,
        code: str,
        *,
        symbol: str | None = None,
        signature: Iterable[str] | None = None,
        options: Sequence[str] = (),
        twin: Any = None,
    ) -> None:
        """Register a fragment; compiles nothing.

        ``twin``: a Numba-Python kernel (a function or a ``@lazy_kernel``) taking the
        same parameters, run instead of the fragment under the CUDA simulator.
        """
        signature = check_signature(name, signature)  # before the twin: its parameter count comes from it
        if twin is not None:
            twin = _as_twin(twin, self.name, name, None if signature is None else len(signature), self._cache)
        self.source.add(name, code, symbol=symbol, signature=signature, options=options)
        if twin is not None:
            self._twins[name] = twin
        else:
            self._twins.pop(name, None)

    def twin(self, name: str) -> LazyKernel:
        """The Numba-Python twin of fragment ``name``; LazykernError if it has none."""
        twin = self._twins.get(name)
        if twin is None:
            self.source.fragment(name)  # an unknown name raises its own clear error
            raise LazykernError(
                f"kernel {name!r} of family {self.name!r} is CUDA C++, which the CUDA simulator cannot run, "
                f"and it has no twin: register one with add({name!r}, ..., twin=python_kernel), "
                "or mark the test @pytest.mark.gpu" + (f". {self.simulator_note}" if self.simulator_note else "")
            )
        return twin

    def twins(self) -> list[str]:
        """Names of the fragments that have a twin."""
        return [n for n in self.names() if n in self._twins]

    def runs_twins(self) -> bool:
        """Whether ``family[name]`` gives twins: ``use_twins``, or else whether the simulator is on."""
        return simulating() if self.use_twins is None else bool(self.use_twins)

    def add_generator(self, generate: Generate, names: Callable[[], Iterable[str]]) -> None:
        """Make fragments on request instead of registering each one: ``generate(name)`` returns
        ``(code, signature)`` or None for a name it does not know; ``names()`` lists its names.

        >>> fam = KernelFamily("gen")
        >>> fam.add_generator(lambda n: (f'extern "C" __global__ void {n}() {{}}', ()) if n == "k" else None,
        ...                   lambda: ["k"])
        >>> fam.names(), fam.source.fragment("k").symbol
        (['k'], 'k')
        """
        self.source.add_generator(generate, names)

    def names(self) -> list[str]:
        return self.source.names()

    def core_names(self) -> list[str]:
        """The kernels worth compiling ahead of time (``lazykern warm``'s default): all, unless
        the family was given a ``core`` set."""
        if self._core is None:
            return self.names()
        known = set(self.names())
        return [n for n in self._core if n in known]

    def compiled(self) -> list[str]:
        """Names this process has compiled or loaded so far."""
        return sorted({name for name, _ in self._kernels})

    def key(self, name: str, arch: str | None = None) -> str:
        arch = compiler.normalize_arch(arch)
        return make_key(
            self.source.translation_unit(name),
            arch=arch,
            options=self.source.options_for(name),
            route=self.route,
            toolchain=self.cache.toolchain(),
        )

    def __getitem__(self, name: str) -> Kernel | LazyKernel:
        """The kernel ``name`` for the current device, or its twin (see :meth:`runs_twins`)."""
        return self.twin(name) if self.runs_twins() else self.get(name)

    def get(self, name: str, arch: str | None = None) -> Kernel:
        """The kernel ``name`` for ``arch`` (default: the current device's)."""
        arch = compiler.normalize_arch(arch)
        kernel = self._kernels.get((name, arch))
        if kernel is not None:
            return kernel
        frag = self.source.fragment(name)
        with self._lock:
            building = self._building.setdefault((name, arch), _fork.lock())
        with building:
            kernel = self._kernels.get((name, arch))
            if kernel is None:
                kernel = self._build(frag, arch)
                self._kernels[(name, arch)] = kernel
        return kernel

    def prefetch(self, names: Iterable[str], arch: str | None = None) -> list[threading.Thread]:
        """Start building ``names`` for ``arch`` (default: the current device's) at once, each in a thread
        of its own, and return those threads: for kernels a caller knows it is about to launch (a
        contraction's plan names them), so their compiles run beside each other and beside the caller's
        own work, not one after another at each first launch. A :meth:`get` of one meanwhile waits for
        its build (the per-kernel lock) rather than starting another. The caller owns the threads and
        joins them before its call returns (a build it ends up not needing included); a build that fails
        is left to the ``get`` that needs it to raise."""
        arch = compiler.normalize_arch(arch)
        threads = []
        for name in dict.fromkeys(names):
            if (name, arch) in self._kernels:
                continue
            thread = threading.Thread(
                target=self._prefetch_one, args=(name, arch), daemon=True, name="lazykern-prefetch"
            )
            thread.start()
            threads.append(thread)
        return threads

    def _prefetch_one(self, name: str, arch: str) -> None:
        try:
            self.get(name, arch)
        except Exception as exc:  # the launch that needs it builds it again and raises there
            log.debug("lazykern: prefetching %s for %s failed: %s", name, arch, exc)

    def _build(self, frag: Fragment, arch: str) -> Kernel:
        source = self.source.translation_unit(frag.name)
        options = self.source.options_for(frag.name)
        toolchain = self.cache.toolchain()
        key = make_key(source, arch=arch, options=options, route=self.route, toolchain=toolchain)
        start = time.perf_counter()
        identity = {
            "family": self.name,
            "kernel": frag.name,
            "symbol": frag.symbol,
            "arch": arch,
            "options": list(options),
            "target": "cubin",
            "route": self.route,
            "toolchain": toolchain,
        }

        def compile_now() -> tuple[bytes, dict[str, Any]] | Later:
            with self._lock:
                self.compile_calls += 1
            result, trace = compiler.compile_deferred(
                source, name=frag.name, arch=arch, options=options, route=self.route
            )
            meta = {
                **identity,
                "compile_seconds": round(result.seconds, 6),
                "nvrtc": ".".join(map(str, compiler.nvrtc_version())),
            }
            if trace is None:
                return result.code, _with_headers(meta, result.headers, result.memory_only)

            def finish() -> tuple[bytes, dict[str, Any]]:
                # What is stored is the observed compile's own binary with its record (one observation).
                code, headers, memory_only = trace.result(result)
                recorded = _with_headers(meta, headers, memory_only)
                with self._lock:  # the kernel's meta gets the record too (warm stores it in another store)
                    answer["recorded"] = (
                        recorded
                        if code == result.code
                        else _with_headers(
                            meta, None, memory_only or "the observed compile gave another binary than the one served"
                        )
                    )
                    _settle(answer)
                return (code or b""), recorded

            # The kernel serves now; its entry is stored when the observed compile is done. Until
            # then ``stored_after_trace`` tells this process's kernel from the stored entry.
            return Later(result.code, {**meta, "stored_after_trace": True}, finish)

        answer: dict[str, dict[str, Any]] = {}
        # Served only if the stored header names exactly this kernel, built exactly this way.
        entry, fresh = self.cache.get_or_compile(key, compile_now, expect=identity, headers=True)
        meta = dict(entry.meta, fetch_seconds=time.perf_counter() - start, compiled_now=fresh)
        kernel = Kernel(
            frag.name, frag.symbol, entry.code, arch=arch, signature=frag.signature, meta=meta, family=self.name
        )
        with self._lock:
            answer["kernel"] = kernel.meta
            _settle(answer)
        return kernel

    def warm(self, names: Iterable[str] | None = None, arch: str | Iterable[str] | None = None) -> list[Kernel]:
        """Compile ahead of time (no GPU needed): every fragment, or ``names``, for each arch."""
        archs = [arch] if arch is None or isinstance(arch, str) else list(arch)
        wanted = self.names() if names is None else list(names)
        with compiler.observed_only():  # nobody waits for these binaries: each compiled once, observed
            kernels = [self.get(n, a) for a in archs for n in wanted]
        _later.wait_all()  # warming promises stored binaries: their stores wait for the header traces
        return kernels

    def __repr__(self) -> str:
        return f"<KernelFamily {self.name!r}: {len(self.names())} fragments, {len(self.compiled())} compiled>"

    def _repr_html_(self) -> str:
        from html import escape

        done = set(self.compiled())
        rows = "".join(
            f"<tr><td><code>{escape(n)}</code></td><td>{'compiled' if n in done else 'not compiled'}</td></tr>"
            for n in self.names()
        )
        head = f"<b>KernelFamily {escape(self.name)}</b>: {len(done)} of {len(self.names())} compiled"
        return f"{head}<details><summary>kernels</summary><table>{rows}</table></details>"


def _settle(answer: dict[str, dict[str, Any]]) -> None:
    """Once both are there, give the kernel's meta the record its store was written with."""
    if "kernel" in answer and "recorded" in answer:
        target, recorded = answer["kernel"], answer["recorded"]
        for field in ("headers", "memory_only"):
            if field in recorded:
                target[field] = recorded[field]
        target.pop("stored_after_trace", None)


def _with_headers(meta: dict[str, Any], headers: dict[str, Any] | None, memory_only: str) -> dict[str, Any]:
    """``meta`` with the record of what the compile read, verified on every load (KernelCache.lookup);
    without one the binary is not persisted."""
    if headers is not None:
        return {**meta, "headers": headers}
    return {**meta, "memory_only": memory_only}


def _as_twin(twin: Any, family: str, name: str, nparams: int | None, cache: KernelCache | None) -> LazyKernel:
    if isinstance(twin, LazyKernel):
        kernel = twin
    else:
        py = getattr(twin, "py_func", twin)  # a numba.cuda.jit dispatcher carries its function
        if not callable(py) or not hasattr(py, "__code__"):
            raise TypeError(f"twin of {name!r} must be a Python kernel function or a @lazy_kernel, got {twin!r}")
        kernel = LazyKernel(py, cache=cache)
        kernel.described = f"{name!r} of family {family!r} (run by its Numba-Python twin {py.__name__!r})"
    lo, hi = kernel.arg_count
    if nparams is not None and not lo <= nparams <= hi:
        raise TypeError(
            f"twin {kernel.__name__!r} of {name!r} takes {lo if lo == hi else f'{lo} to {hi}'} arguments, "
            f"but the fragment's signature has {nparams}: give the twin the fragment's parameters"
        )
    return kernel
