"""The cache entry of one ``@lazy_kernel`` instantiation: its key, then found or compiled.

The key covers what makes two compiles the same as far as the bytecode shows: the reached code
(``_numba.key``; with lineinfo every line number too), the signature, arch, Numba / numba-cuda /
NVVM versions, linked files and the compile options. What typing and lowering reached beyond that
(functions Numba resolved, values it froze into the code) is a manifest stored with the entry and
verified on every load (``_numba.resolved``), as are the headers linked CUDA C++ read
(``_numba.linked``: by stat, so a warm hit lexes nothing); an entry whose code holds an address of its process
is never stored (``memory_only``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import FunctionType
from typing import Any

from .._numba import compile as _numba_compile
from .._numba import internals, resolved
from .._numba.key import describe_type, fingerprint, lines_compiled
from .._numba.signature import relaxed
from ..store.cache import KernelCache, make_key


def instance_key(
    py_func: FunctionType, link: Sequence[Any], options: dict[str, Any], types: tuple[Any, ...], arch: str
) -> str:
    """The cache key of ``py_func`` instantiated for ``types`` on ``arch`` (recomputed, so edits show)."""
    import numba
    import numba_cuda

    digest, links = fingerprint(py_func, link, lines=lines_compiled(options))
    extra: dict[str, Any] = {
        # by class and key, as Numba compares types: namedtuple fields in order, no per-process counter
        "signature": [describe_type(t) for t in types],
        "numba": numba.__version__,
        "numba_cuda": getattr(numba_cuda, "__version__", "?"),
        "nvvm": internals.nvvm_version(),
        "links": links,
    }
    # Numba options are not NVRTC flags (make_key parses those): they go in `extra`.
    extra["options"] = {k: repr(v) for k, v in options.items()}
    return make_key(digest, arch=arch, route="numba", extra=json.dumps(extra, sort_keys=True))


def get_or_compile(
    cache: KernelCache,
    py_func: FunctionType,
    link: Sequence[Any],
    options: dict[str, Any],
    types: tuple[Any, ...],
    arch: str,
    *,
    relax: bool = True,
) -> tuple[Any, bool]:
    """(entry, compiled here) for ``types`` on ``arch``; with ``relax`` an any-layout
    instantiation (e.g. warmed as ``float32[:]``) serves a contiguous one too."""
    key = instance_key(py_func, link, options, types, arch)
    loose = relaxed(types) if relax else types
    also = (instance_key(py_func, link, options, loose, arch),) if loose != types else ()
    # A stored header must name this kernel and arch (the signature differs under `also`).
    expect = {"family": "lazy_kernel", "kind": "numba-kernel", "name": py_func.__qualname__, "arch": arch}
    return cache.get_or_compile(
        key,
        lambda: _numba_compile.compile_kernel(py_func, types, arch=arch, options=options, link=link),
        expect=expect,
        also=also,
        check=lambda entry: resolved.verify(entry.meta.get("manifest"), py_func),
    )


def compile_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options as compiled, each a function of the program (they enter the key as ``repr``):
    ``None`` resolved as numba-cuda resolves it (``debug`` and ``opt`` from Numba's settings,
    ``lto`` to whether nvJitLink is available, off with ``debug``), fastmath flags sorted,
    extensions named by class."""
    out = dict(options)
    config = internals.numba_config()
    if out["debug"] is None:
        out["debug"] = bool(config.CUDA_DEBUGINFO_DEFAULT)
    if out["opt"] is None:
        out["opt"] = config.OPT != 0
    if out["lto"] is None:
        out["lto"] = internals.have_nvjitlink() and not out["debug"]
    if isinstance(out["fastmath"], (set, frozenset, list, tuple)):
        out["fastmath"] = sorted(out["fastmath"])
    # An extension maps arguments at launch (it changes no code): its class names it in the key.
    out["extensions"] = [f"{type(e).__module__}.{type(e).__qualname__}" for e in out["extensions"]]
    return out
