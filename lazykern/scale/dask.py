"""Tropical products of Dask arrays, and kernel warm-up for Dask clusters.

:func:`matmul` multiplies chunk pairs with ``tropical.matmul`` (the GPU for
CuPy chunks, the NumPy reference otherwise) and folds the partial products
over the contracted dimension in a tree of elementwise max/min. A partial
product is never NaN (its accumulator starts at the semiring zero and NaN
terms are skipped), yet the combine still prefers a number over NaN, as
fmax/fmin do. With ``argmax=True`` each partial carries ``(C, K)`` with ``K``
already offset by its chunk's first k; the combine keeps the left (smaller-k)
side on ties, so the tree returns the smallest winning k, as one kernel would.

:func:`warm_workers` fills every worker's kernel cache before a job, from a
cache bundle or by compiling, so no task waits on NVRTC.

:func:`contract_network` spreads the slices of one sliced tensor-network contraction over a
cluster's workers: one task per contiguous group of slices, each contracting its group and
returning the partial result, which the client adds in the semiring.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import LazykernError
from ..families import resolve as resolve_family

log = logging.getLogger("lazykern")

SEMIRINGS = ("maxplus", "minplus", "maxmul")
_SPLIT_EVERY = 4


def _require_dask() -> Any:
    try:
        import dask.array as da
    except ImportError as exc:
        raise ImportError(
            'lazykern.dask needs dask: pip install "dask[array,distributed]" (or lazykern[test])'
        ) from exc
    return da


def _check_semiring(semiring: str) -> bool:
    """True when the semiring minimizes."""
    if semiring not in SEMIRINGS:
        raise ValueError(f"semiring must be one of {SEMIRINGS}, got {semiring!r}")
    return semiring == "minplus"


def _xp(x: Any) -> Any:
    """The array module of a chunk: CuPy for CuPy arrays, NumPy otherwise."""
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def _on_chunk_device(x: Any) -> contextlib.AbstractContextManager[Any]:
    """CuPy runs elementwise work on its current device: make that the chunk's own."""
    if _xp(x) is np:
        return contextlib.nullcontext()
    import cupy

    device: contextlib.AbstractContextManager[Any] = cupy.cuda.Device(x.device.id)
    return device


def _default_backend() -> Callable[..., Any]:
    from .. import tropical

    return tropical.matmul


def _semiring_zero(dtype: np.dtype[Any], minimize: bool) -> Any:
    if dtype.kind == "f":
        return np.inf if minimize else -np.inf
    info = np.iinfo(dtype)
    return info.max if minimize else info.min


# -- task functions (run on workers; module-level so they pickle by reference) --
def _chunk_product(
    a: Any, b: Any, *, semiring: str, argmax: bool, k0: int, k_dtype: np.dtype[Any], backend: Callable[..., Any] | None
) -> Any:
    a, b = _single(a), _single(b)
    fn = backend if backend is not None else _default_backend()
    if not argmax:
        return fn(a, b, semiring=semiring)
    c, k = fn(a, b, semiring=semiring, argmax=True)
    with _on_chunk_device(k):
        return c, (k + k0).astype(k_dtype, copy=False)


def _single(blocks: Any) -> Any:
    """The one block along the contracted index. Without ``concatenate=True`` dask hands a
    task the list of them (here always one): with it, dask would copy that one block
    through a concatenate on whatever GPU is current, off the block's own device."""
    return blocks[0] if isinstance(blocks, list) else blocks


def _zero_product(a: Any, b: Any, *, fill: Any, argmax: bool, k_dtype: np.dtype[Any]) -> Any:
    a, b = _single(a), _single(b)
    xp = _xp(a)
    with _on_chunk_device(a):
        c = xp.full((a.shape[0], b.shape[1]), fill, dtype=a.dtype)
        return (c, xp.zeros(c.shape, dtype=k_dtype)) if argmax else c


def _better(xp: Any, c_new: Any, c_old: Any, minimize: bool) -> Any:
    """Where the right operand wins: strictly better, or a number against NaN."""
    win = c_new < c_old if minimize else c_new > c_old
    if c_new.dtype.kind == "f":
        win |= xp.isnan(c_old) & ~xp.isnan(c_new)
    return win


def _combine(*parts: Any, minimize: bool, argmax: bool) -> Any:
    """Fold partial products in k order; ties keep the earlier (smaller k) one. Runs on the
    first part's device; parts computed on another GPU are copied there first."""
    first = parts[0][0] if argmax else parts[0]
    with _on_chunk_device(first):
        parts = tuple(_here(p, argmax) for p in parts)
        if not argmax:
            xp = _xp(parts[0])
            reduce = xp.fmin if minimize else xp.fmax
            acc = parts[0]
            for p in parts[1:]:
                acc = reduce(acc, p)
            return acc
        c, k = parts[0]
        xp = _xp(c)
        for c_new, k_new in parts[1:]:
            win = _better(xp, c_new, c, minimize)
            c = xp.where(win, c_new, c)
            k = xp.where(win, k_new, k)
        return c, k


def _here(part: Any, argmax: bool) -> Any:
    """``part`` on the current CuPy device (a copy if it lives on another one)."""
    arrays = part if argmax else (part,)
    if _xp(arrays[0]) is np:
        return part
    import cupy

    dev = cupy.cuda.Device().id
    moved = tuple(x if x.device.id == dev else x.copy() for x in arrays)  # copy(): to the current device
    return moved if argmax else moved[0]


def _pick(pair: Any, index: int) -> Any:
    return pair[index]


def _meta(like: Any, dtype: np.dtype[Any]) -> Any:
    from dask.array.utils import meta_from_array

    return meta_from_array(like, ndim=2, dtype=dtype)


def matmul(
    A: Any,
    B: Any,
    *,
    semiring: str = "maxplus",
    argmax: bool = False,
    backend: Callable[..., Any] | None = None,
    split_every: int = _SPLIT_EVERY,
    k_dtype: Any = np.int32,
) -> Any:
    """Tropical ``C = A (x) B`` of 2-D Dask arrays (NumPy or CuPy chunks), lazily.

    Returns a Dask array ``C`` (``(C, K)`` with ``argmax=True``) whose chunks
    follow A's row chunks and B's column chunks. B's row chunks are aligned
    to A's column chunks when they differ. ``backend(a, b, semiring=, argmax=)``
    multiplies one chunk pair and defaults to ``lazykern.tropical.matmul``;
    ``split_every`` partials are combined per tree node; K has dtype ``k_dtype``.

    Each chunk product runs on the GPU holding its chunks, whatever device is current. Dask
    itself copies a CuPy array embedded in the graph (``da.from_array(cupy_array)``) when it
    computes, and that copy lands on the current device: make GPU chunks inside tasks
    (``da.from_delayed``, ``map_blocks``) to keep them on their GPU.
    """
    da = _require_dask()
    minimize = _check_semiring(semiring)
    if split_every < 2:
        raise ValueError(f"split_every must be >= 2, got {split_every}")
    A, B = da.asarray(A), da.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul needs A (m, k) and B (k, n), got A {A.shape} and B {B.shape}")
    if A.dtype != B.dtype:
        raise TypeError(f"A and B must share a dtype, got {A.dtype} and {B.dtype}: cast one of them first")
    dtype = A.dtype
    c_meta = _meta(A._meta, dtype)
    k_dt = np.dtype(k_dtype)
    k_meta = _meta(A._meta, k_dt)
    if B.chunks[0] != A.chunks[1]:
        B = B.rechunk({0: A.chunks[1]})

    def blocks(kk: int, fn: Callable[..., Any], **kwargs: Any) -> Any:
        return da.blockwise(fn, "ij", A.blocks[:, kk], "ik", B.blocks[kk, :], "kj", dtype=dtype, meta=c_meta, **kwargs)

    starts = np.concatenate([[0], np.cumsum(A.chunks[1])[:-1]]).astype(int)
    partials = [
        blocks(kk, _chunk_product, semiring=semiring, argmax=argmax, k0=int(starts[kk]), k_dtype=k_dt, backend=backend)
        for kk, width in enumerate(A.chunks[1])
        if width > 0  # slicing can leave empty chunks; a backend need not take k = 0
    ]
    if not partials:  # k = 0: every entry is the semiring zero
        zero = _semiring_zero(dtype, minimize)
        partials = [blocks(0, _zero_product, fill=zero, argmax=argmax, k_dtype=k_dt)]

    while len(partials) > 1:
        partials = [
            da.map_blocks(_combine, *group, dtype=dtype, meta=c_meta, minimize=minimize, argmax=argmax)
            if len(group) > 1
            else group[0]
            for group in (partials[i : i + split_every] for i in range(0, len(partials), split_every))
        ]
    (result,) = partials
    if not argmax:
        return result
    C = result.map_blocks(_pick, 0, dtype=dtype, meta=c_meta)
    K = result.map_blocks(_pick, 1, dtype=k_dt, meta=k_meta)
    return C, K


# -- cluster warm-up -------------------------------------------------------
FamilySpec = str | Callable[[], Any]
DEFAULT_FAMILY = "tropical"


def _warm_from_family(spec: FamilySpec, names: Sequence[str] | None, arch: Any) -> dict[str, Any]:
    start = time.perf_counter()
    family = resolve_family(spec)
    before = family.compile_calls
    kernels = family.warm(names, arch)
    return {
        "mode": "kernels",
        "kernels": len(kernels),
        "compiled": family.compile_calls - before,
        "seconds": time.perf_counter() - start,
        "cache": family.cache.directory,
        "pid": os.getpid(),
    }


def _warm_from_bundle(data: bytes, name: str, cache_dir: str | None) -> dict[str, Any]:
    from ..store.cache import KernelCache, default_cache
    from . import bundle

    start = time.perf_counter()
    cache = KernelCache(cache_dir) if cache_dir else default_cache()
    fd, path = tempfile.mkstemp(prefix="lazykern-bundle-", suffix="-" + os.path.basename(name))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        report = bundle.import_bundle(path=path, cache=cache)
    finally:
        os.unlink(path)
    return {
        "mode": "bundle",
        "report": dataclasses.asdict(report) if dataclasses.is_dataclass(report) else report,
        "seconds": time.perf_counter() - start,
        "cache": cache.directory,
        "pid": os.getpid(),
    }


DEFAULT_WARM_TIMEOUT = 600.0  # seconds warm_workers waits for every worker


def warm_workers(
    client: Any,
    *,
    bundle: str | os.PathLike[str] | None = None,
    kernels: Iterable[str] | None = None,
    arch: str | Iterable[str] | None = None,
    family: FamilySpec = DEFAULT_FAMILY,
    cache_dir: str | os.PathLike[str] | None = None,
    workers: Sequence[str] | None = None,
    timeout: float = DEFAULT_WARM_TIMEOUT,
) -> dict[str, dict[str, Any]]:
    """Fill each worker's kernel cache now, so no task compiles at job time.

    Give ``bundle=`` (a file from ``lazykern cache export``; its bytes travel to
    every worker and go through ``lazykern.bundle.import_bundle`` into the
    worker's cache, or ``cache_dir`` when given) or ``kernels=`` (names to
    compile, or load, on every worker through ``family.warm(kernels, arch)``;
    ``arch=None`` means each worker's own GPU). ``family`` is a registered name
    (:mod:`lazykern.families`), ``"module:attr"`` or a zero-argument factory, resolved on the
    worker. Returns a summary per worker address.

    ``timeout`` (seconds, default 600) bounds the whole call: a worker that has not answered by
    then (hung, or busy with a task that never ends) has its warm-up cancelled, and
    :class:`~lazykern.errors.LazykernError` names it; the call never waits forever.
    """
    if (bundle is None) == (kernels is None):
        raise ValueError("warm_workers needs exactly one of bundle= (a cache bundle path) or kernels= (names)")
    targets = list(workers) if workers is not None else None
    if bundle is not None:
        if arch is not None:
            raise ValueError("arch= applies to kernels=; a bundle carries the archs it was exported with")
        path = os.fspath(bundle)
        with open(path, "rb") as fh:
            data = fh.read()
        where = os.fspath(cache_dir) if cache_dir is not None else None
        log.info("shipping cache bundle %s (%d bytes) to the workers", path, len(data))
        return on_each_worker(client, targets, timeout, _warm_from_bundle, data, os.path.basename(path), where)
    assert kernels is not None  # exactly one of bundle=, kernels= (checked above)
    return on_each_worker(client, targets, timeout, _warm_from_family, family, list(kernels), arch)


def on_each_worker(
    client: Any, workers: list[str] | None, timeout: float, fn: Callable[..., Any], *args: Any
) -> dict[str, Any]:
    """``fn(*args)`` once on each worker, as a task pinned to it, within ``timeout`` seconds overall.

    Tasks rather than ``Client.run``: ``run`` has no timeout, so one hung worker would hang the caller.
    """
    import distributed

    targets = workers if workers is not None else list(client.scheduler_info()["workers"])
    futures = {
        w: client.submit(fn, *args, workers=[w], allow_other_workers=False, pure=False, key=f"lazykern-warm-{w}")
        for w in targets
    }
    try:
        distributed.wait(list(futures.values()), timeout=timeout)
    except (TimeoutError, distributed.TimeoutError) as exc:
        late = sorted(w for w, f in futures.items() if not f.done())
        client.cancel(list(futures.values()))
        raise LazykernError(
            f"warm_workers: no answer within {timeout:g} s from {', '.join(late)}; their warm-up was cancelled "
            "(pass a larger timeout=, or check those workers)"
        ) from exc
    return {w: f.result() for w, f in futures.items()}


# -- sliced tensor networks ------------------------------------------------
ARRAY_MODULES = ("numpy", "cupy", "torch")


def _on_worker(x: np.ndarray, module: str) -> Any:
    """A host operand as ``module``'s array on the worker's current device."""
    if module == "cupy":
        import cupy

        return cupy.asarray(x)
    if module == "torch":
        import torch

        return torch.as_tensor(x, device="cuda")
    return x


def _slice_group(
    network: tuple[list[tuple[Any, ...]], tuple[Any, ...], list[Any], str, type[Any]],
    plan: Any,
    start: int,
    stop: int,
    module: str,
    moduli: tuple[int, ...] = (),
) -> tuple[tuple[np.ndarray, ...], tuple[Any, ...]]:
    """One task: slices ``start`` to ``stop`` of the network, contracted with ``module``'s arrays on
    this worker; the partial comes back as host arrays (parts) and its labels. ``moduli``: a
    counting pass modulo those primes (none: the network's own algebra)."""
    from ..tn.einsum import build_network, contract_slices

    inputs, output, operands, semiring, algebra = network
    if moduli:  # a pass modulo primes: its algebra is rebuilt here, not pickled (a class made at run time)
        from ..tn import counting

        algebra = counting.algebra(*moduli)
    here = [
        tuple(_on_worker(p, module) for p in op) if isinstance(op, tuple) else _on_worker(op, module) for op in operands
    ]
    net = build_network(inputs, output, here, semiring, algebra)
    term = contract_slices(net, plan, start, stop, {} if plan.sliced else None)
    return tuple(net.be.to_host(p) for p in term.parts), tuple(term.labels)


def contract_network(
    client: Any,
    inputs: Sequence[Sequence[Any]],
    output: Sequence[Any],
    operands: Sequence[Any],
    *,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Any] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    algebra: type[Any] | None = None,
    groups: int | None = None,
    module: str = "numpy",
) -> Any:
    """:func:`lazykern.tn.einsum.contract_network` with its slices spread over ``client``'s workers.

    ``operands`` are NumPy arrays (or (values, counts) pairs with ``algebra=CountingAlgebra`` from
    :mod:`lazykern.tn.counting`). The client plans (``optimize``, ``slices``, ``memory_limit``
    and ``max_time`` as there; give ``memory_limit`` for the workers' devices, the default is the
    host's), ships the network and the plan to the workers once, and submits one task per group of
    slices (``groups``, default one per worker): each worker contracts its group with ``module``'s
    arrays ("numpy", or "cupy" / "torch" on the worker's GPU, as a ``dask_cuda.LocalCUDACluster``
    gives each worker one) and returns its partial as host arrays; the client adds the partials in
    the semiring in group order, so the result equals :func:`lazykern.tn.einsum.contract_network`'s.
    Returns NumPy arrays: the result, or (values, counts) for counting.

    Integer counts are exact, as :func:`lazykern.tn.counting.einsum`'s: when int64 may not hold
    them, every pass (modulo 2^64, then 31-bit primes) runs over all the workers in one ring, the
    partials add in that ring, and the Chinese remainder theorem rebuilds the counts (an object
    array of Python ints; a Python int for a scalar result). A prime pass carries two residues: their
    int32 counts take the bytes of the int64 count the plan was made for.
    """
    from ..launch._batch_split import split_batch
    from ..tn import counting
    from ..tn._contract import Algebra, Term
    from ..tn.einsum import build_network

    if module not in ARRAY_MODULES:
        raise ValueError(f"module must be one of {ARRAY_MODULES}, got {module!r}")
    algebra = Algebra if algebra is None else algebra
    host: list[Any] = [tuple(np.asarray(p) for p in op) if isinstance(op, tuple) else np.asarray(op) for op in operands]
    inputs = [tuple(t) for t in inputs]
    output = tuple(output)
    net = build_network(inputs, output, host, semiring, algebra)
    if getattr(algebra, "counting", False) and not getattr(algebra, "moduli", ()) and not _exact_counting(net, algebra):
        host = counting.float_counts(net.be, host, magnitudes=False)  # float counts: every operand's in float64
        net = build_network(inputs, output, host, semiring, algebra)
    plan = net.plan(optimize, slices, memory_limit, max_time)
    count = len(client.nthreads()) if groups is None else int(groups)
    if count < 1:
        raise ValueError(f"groups must be a positive number of slice groups, got {groups!r}")
    ranges = [(a, b) for a, b in split_batch(plan.nslices, count) if b > a]
    [shipped] = client.scatter([(inputs, output, host, semiring, algebra)], broadcast=True)

    def one_pass(moduli: tuple[int, ...], shipped: Any = shipped, net: Any = net) -> Any:
        """The whole contraction over the workers, counting modulo ``moduli`` (none: the algebra's own)."""
        futures = [
            client.submit(
                _slice_group,
                shipped,
                plan,
                a,
                b,
                module,
                moduli,
                key=f"lazykern-slices-{a}-{b}-{shipped.key}" + "".join(f"-mod{p}" for p in moduli),
            )
            for a, b in ranges
        ]
        log.info("tropical network: %d slices in %d Dask tasks (moduli %s)", plan.nslices, len(futures), moduli)
        here = net if not moduli else build_network(inputs, output, host, semiring, counting.algebra(*moduli))
        total = None
        for parts, labels in client.gather(futures):
            term = Term(parts, labels)
            total = term if total is None else Term(here.alg.add(total.parts, term.parts), labels)
        assert total is not None  # a plan has at least one slice, so at least one group
        return here.finish(total)

    def upper() -> Any:
        """What the float64 pass (:func:`lazykern.tn.counting.float_counts`) over the workers, the prime
        passes' plan, proves about every count (:func:`lazykern.tn.counting.proven`)."""
        floats = counting.float_counts(net.be, host)
        [mags] = client.scatter([(inputs, output, floats, semiring, algebra)], broadcast=True)
        values, counts = one_pass((), mags, build_network(inputs, output, floats, semiring, algebra))
        return counting.proven(
            net.be, host, values, counts, counting.plan_roundings(inputs, output, net.sizes, plan), True
        )

    if not _exact_counting(net, algebra):
        return one_pass(())
    return counting.exact(net.be, [t.labels for t in net.leaves], output, host, net.sizes, one_pass, upper=upper)


def _exact_counting(net: Any, algebra: type[Any]) -> bool:
    """Integer counts of the counting algebra's own ring (int64): these are rebuilt exactly. A given
    prime's algebra or float counts are one pass, as asked."""
    return bool(
        getattr(algebra, "counting", False)
        and not algebra.moduli
        and all(net.be.dtype(t.parts[1]).kind != "f" for t in net.leaves)
    )
