"""Ahead-of-time compilation of a family's kernels, in parallel worker processes.

The one warm engine: the ``lazykern warm`` command, the ``%lazykern warm`` magic
and :func:`lazykern.dask.warm_workers` all come here.

The parent decides what is missing (a cache lookup per kernel and arch) and
hands only those to workers; each worker imports the family by its spec and
calls ``family.get(name, arch)``, which compiles with NVRTC (no GPU needed)
and stores the cubin in the shared on-disk cache. Workers are started with
``spawn``: forking a process that has touched CUDA is unsafe.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import html
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..compile.compiler import normalize_arch
from ..errors import CompileError, LazykernError
from . import declared
from . import resolve as resolve_family


def split_list(values: Sequence[str] | None) -> list[str]:
    """``["sm_80,sm_90", "sm_100"]`` -> ``["sm_80", "sm_90", "sm_100"]``."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def kernel_label(row: dict[str, Any]) -> str:
    """The kernel's name in a cache row: families store ``kernel``, ``@lazy_kernel`` stores ``name``."""
    return str(row.get("kernel") or row.get("name") or "-")


def select(names: Iterable[str], patterns: Sequence[str] | None) -> list[str]:
    """Names matching any of the glob ``patterns`` (all names when there are none)."""
    names = list(names)
    if not patterns:
        return names
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


@dataclasses.dataclass
class WarmResult:
    name: str
    arch: str
    status: str  # "compiled", "cached" or "failed"
    seconds: float = 0.0
    error: str = ""

    def first_lines(self, n: int = 4) -> str:
        return "\n".join(self.error.strip().splitlines()[:n])


@dataclasses.dataclass
class WarmSummary:
    family: str
    results: list[WarmResult]
    seconds: float

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return self.count("failed") == 0

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(r.name)}</code></td><td>{r.arch}</td><td>{r.status}</td>"
            f"<td>{r.seconds:.2f}</td><td><pre>{html.escape(r.first_lines())}</pre></td></tr>"
            for r in self.results
        )
        head = (
            f"<b>lazykern warm {html.escape(self.family)}</b>: {self.count('compiled')} compiled, "
            f"{self.count('cached')} already cached, {self.count('failed')} failed in {self.seconds:.1f} s"
        )
        return (
            f"{head}<table><tr><th>kernel</th><th>arch</th><th>status</th><th>s</th><th>error</th></tr>{rows}</table>"
        )


def compile_one(spec: str, name: str, arch: str) -> WarmResult:
    """Worker body: compile (or find) one kernel. Errors come back as data, not exceptions."""
    start = time.perf_counter()
    try:
        family = resolve_family(spec)
        kernel = family.get(name, arch)
        key = family.key(name, arch)
        if family.cache.lookup(key) is None:  # held in this process from another cache dir
            family.cache.store(key, kernel.code, kernel.meta)
    except CompileError as exc:
        return WarmResult(name, arch, "failed", time.perf_counter() - start, exc.log or str(exc))
    except Exception as exc:  # one broken kernel must not stop the others
        return WarmResult(name, arch, "failed", time.perf_counter() - start, f"{type(exc).__name__}: {exc}")
    compiled = bool(kernel.meta.get("compiled_now", True))
    return WarmResult(name, arch, "compiled" if compiled else "cached", time.perf_counter() - start)


def plan(family: Any, names: Sequence[str], archs: Sequence[str]) -> tuple[list[tuple[str, str]], list[WarmResult]]:
    """Split (name, arch) pairs into those to compile and those already in the cache."""
    todo: list[tuple[str, str]] = []
    cached: list[WarmResult] = []
    for arch in archs:
        for name in names:
            if family.cache.lookup(family.key(name, arch)) is not None:
                cached.append(WarmResult(name, arch, "cached"))
            else:
                todo.append((name, arch))
    return todo, cached


def warm(
    spec: str,
    *,
    patterns: Sequence[str] | None = None,
    archs: Sequence[str | None] = (None,),
    jobs: int = 1,
    everything: bool = False,
    on_start: Callable[[int], None] | None = None,
    on_result: Callable[[WarmResult], None] | None = None,
) -> WarmSummary:
    """Compile every selected kernel of family ``spec`` that the cache lacks.

    Without ``patterns`` the family's core set is selected (``KernelFamily.core_names()``),
    or every kernel with ``everything``; patterns match among all kernels.

    ``jobs == 1`` compiles in this process; more uses a spawn-context process
    pool. ``on_start(n_to_compile)`` and ``on_result(result)`` drive a progress display.
    """
    start = time.perf_counter()
    family = resolve_family(spec)
    pool = family.names() if patterns or everything else family.core_names()
    names = select(pool, patterns)
    if not names:
        raise LazykernError(f"no kernel of family {spec!r} matches {list(patterns or [])}")
    arch_list = list(dict.fromkeys(normalize_arch(a) for a in archs))
    todo, results = plan(family, names, arch_list)
    if on_start is not None:
        on_start(len(todo))
    # Workers get "module:attr": an entry point seen here may not be visible to them.
    for r in _run(declared().get(spec, spec), todo, jobs):
        results.append(r)
        if on_result is not None:
            on_result(r)
    order = {(n, a): i for i, (n, a) in enumerate((n, a) for a in arch_list for n in names)}
    results.sort(key=lambda r: order[(r.name, r.arch)])
    return WarmSummary(getattr(family, "name", spec), results, time.perf_counter() - start)


def _run(spec: str, todo: list[tuple[str, str]], jobs: int) -> Iterable[WarmResult]:
    if jobs <= 1 or len(todo) <= 1:
        for name, arch in todo:
            yield compile_one(spec, name, arch)
        return
    import concurrent.futures as cf  # import on first use: startup time (the CLI imports this module)
    import multiprocessing  # import on first use: startup time

    workers = min(jobs, len(todo))
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(compile_one, spec, name, arch): (name, arch) for name, arch in todo}
        for fut in cf.as_completed(futures):
            name, arch = futures[fut]
            try:
                yield fut.result()
            except Exception as exc:  # a worker died (killed, out of memory)
                yield WarmResult(name, arch, "failed", 0.0, f"worker process failed: {type(exc).__name__}: {exc}")
