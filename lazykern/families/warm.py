"""Ahead-of-time compilation of a family's kernels, in parallel worker processes.

The one warm engine: the ``lazykern warm`` command, the ``%lazykern warm`` magic
and :func:`lazykern.dask.warm_workers` all come here.

The parent decides what is missing (a cache lookup per kernel and arch) and
hands only those to workers; each worker imports the family by its spec and
calls ``family.get(name, arch)``, which compiles with NVRTC (no GPU needed)
and stores the cubin in the shared on-disk cache. Workers are started with
``spawn`` (forking a process that has touched CUDA is unsafe) by :mod:`lazykern.families._procpool`,
which stops them, whatever ends the run: done, an error, Ctrl-C or SIGTERM.

Each result says whether its binary reached the store (``stored``): the cache may be off
(``LAZYKERN_CACHE=0``), unusable, read-only or too small, and then warming persists nothing;
:attr:`WarmSummary.where` says where the binaries went.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import html
import time
import warnings
from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import closing
from typing import Any

from ..compile.compiler import normalize_arch, observed_only
from ..errors import CompileError, LazykernError, LazykernWarning, warn_user
from ..store import _later
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
    stored: bool = True  # the binary is in the on-disk store (False: compiled, then lost)
    warnings: tuple[str, ...] = ()  # what the cache said while compiling it (why it was not stored)

    def first_lines(self, n: int = 4) -> str:
        return "\n".join(self.error.strip().splitlines()[:n])


@dataclasses.dataclass
class WarmSummary:
    family: str
    results: list[WarmResult]
    seconds: float
    where: str = ""  # the store's directory, "memory" (this process only) or "nowhere" (worker processes)
    why: str = ""  # why not the disk store, when ``where`` is not a directory
    warnings: tuple[str, ...] = ()  # what the cache said during the run, each once

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    def not_stored(self) -> list[WarmResult]:
        """Kernels compiled (or found) whose binary is not in the on-disk store."""
        return [r for r in self.results if r.status != "failed" and not r.stored]

    @property
    def ok(self) -> bool:
        return self.count("failed") == 0

    @property
    def persisted(self) -> bool:
        """Every kernel that compiled is in the on-disk store."""
        return not self.not_stored()

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(r.name)}</code></td><td>{r.arch}</td><td>{r.status}</td>"
            f"<td>{r.seconds:.2f}</td><td><pre>{html.escape(r.first_lines())}</pre></td></tr>"
            for r in self.results
        )
        head = (
            f"<b>lazykern warm {html.escape(self.family)}</b>: {self.count('compiled')} compiled, "
            f"{self.count('cached')} already cached, {self.count('failed')} failed in {self.seconds:.1f} s; "
            f"binaries: {html.escape(self.where)}" + (f" ({html.escape(self.why)})" if self.why else "")
        )
        return (
            f"{head}<table><tr><th>kernel</th><th>arch</th><th>status</th><th>s</th><th>error</th></tr>{rows}</table>"
        )


def compile_one(spec: str, name: str, arch: str) -> WarmResult:
    """Worker body: compile (or find) one kernel and make sure it is stored. Errors come back as data."""
    start = time.perf_counter()
    stored = False
    failed: WarmResult | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LazykernWarning)
        try:
            family = resolve_family(spec)
            with observed_only():  # nobody waits for the binary: compile once, observed
                kernel = family.get(name, arch)
            key = family.key(name, arch)
            try:
                _later.wait_for(key)  # a fresh compile is stored once its traced pass says what it read
            except BaseException:  # Ctrl-C or SIGTERM: warm stops now, without this kernel's store
                _later.abandon(key)
                raise
            # Held in this process from another cache dir, or pruned since: stored with the record of
            # what it read (never while that record is still coming: an entry is not stored without it).
            if family.cache.peek(key) is None and not kernel.meta.get("stored_after_trace"):
                family.cache.store(key, kernel.code, kernel.meta)
            stored = family.cache.directory is not None and family.cache.peek(key) is not None
        except CompileError as exc:
            failed = WarmResult(name, arch, "failed", time.perf_counter() - start, exc.log or str(exc))
        except Exception as exc:  # one broken kernel must not stop the others
            failed = WarmResult(name, arch, "failed", time.perf_counter() - start, f"{type(exc).__name__}: {exc}")
    said = tuple(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, LazykernWarning)))
    if failed is not None:
        return dataclasses.replace(failed, stored=False, warnings=said)
    status = "compiled" if kernel.meta.get("compiled_now", True) else "cached"
    return WarmResult(name, arch, status, time.perf_counter() - start, stored=stored, warnings=said)


def plan(family: Any, names: Sequence[str], archs: Sequence[str]) -> tuple[list[tuple[str, str]], list[WarmResult]]:
    """Split (name, arch) pairs into those to compile and those already in the cache."""
    todo: list[tuple[str, str]] = []
    cached: list[WarmResult] = []
    for arch in archs:
        for name in names:
            if family.cache.lookup(family.key(name, arch)) is not None:
                cached.append(WarmResult(name, arch, "cached", stored=family.cache.directory is not None))
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

    ``jobs == 1`` compiles in this process; more uses worker processes (spawned), each
    compile bounded by ``TASK_TIMEOUT`` seconds. ``on_start(n_to_compile)`` and
    ``on_result(result)`` drive a progress display. What the cache warned about (a
    read-only directory, a size limit too small) is said once, at the end.
    Ctrl-C (``KeyboardInterrupt``) stops the workers before it propagates; kernels
    already stored stay stored.
    """
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LazykernWarning)
        summary = _warm(spec, patterns, archs, jobs, everything, on_start, on_result)
    said = [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]
    summary.warnings = tuple(dict.fromkeys([*said, *(m for r in summary.results for m in r.warnings)]))
    for message in summary.warnings:
        warn_user(message, LazykernWarning)
    summary.seconds = time.perf_counter() - start
    return summary


def _warm(
    spec: str,
    patterns: Sequence[str] | None,
    archs: Sequence[str | None],
    jobs: int,
    everything: bool,
    on_start: Callable[[int], None] | None,
    on_result: Callable[[WarmResult], None] | None,
) -> WarmSummary:
    family = resolve_family(spec)
    pool = family.names() if patterns or everything else family.core_names()
    names = select(pool, patterns)
    if not names:
        raise LazykernError(f"no kernel of family {spec!r} matches {list(patterns or [])}")
    arch_list = list(dict.fromkeys(normalize_arch(a) for a in archs))
    todo, results = plan(family, names, arch_list)
    if on_start is not None:
        on_start(len(todo))
    in_process = jobs <= 1 or len(todo) <= 1
    # Workers get "module:attr": an entry point seen here may not be visible to them.
    with closing(_run(declared().get(spec, spec), todo, jobs, in_process)) as running:
        for r in running:
            results.append(r)
            if on_result is not None:
                on_result(r)
    order = {(n, a): i for i, (n, a) in enumerate((n, a) for a in arch_list for n in names)}
    results.sort(key=lambda r: order[(r.name, r.arch)])
    cache = family.cache
    # Off or unusable disk: a compile in this process stays in its memory; one in a worker dies with it.
    where = cache.directory or ("memory" if in_process or not todo else "nowhere")
    return WarmSummary(getattr(family, "name", spec), results, 0.0, where, cache.degraded or "")


TASK_TIMEOUT = 900.0  # seconds one kernel may compile in a worker before it is stopped (a hung compiler)


def _run(spec: str, todo: list[tuple[str, str]], jobs: int, in_process: bool) -> Generator[WarmResult, None, None]:
    if in_process:
        for name, arch in todo:
            yield compile_one(spec, name, arch)
        return
    from . import _procpool  # import on first use: startup time (the CLI imports this module)

    tasks = [(spec, name, arch) for name, arch in todo]
    with closing(_procpool.run(compile_one, tasks, jobs, task_timeout=TASK_TIMEOUT)) as outcomes:
        for out in outcomes:
            if out.ok:
                yield out.value
            else:
                _, name, arch = out.task
                yield WarmResult(name, arch, "failed", 0.0, out.error, stored=False)
