"""The kernels an energy's contraction on a GPU launches besides its bit-addressed steps, built ahead in threads.

A contraction's first launch of each kernel waits for its build. The bit-addressed kernels of a plan
are named by the plan and built beside each other once it is made (``Network.prefetch``); the others
(the permutation copies that arrange operands, the row kernels of strided steps and the batched products
of the small steps) are the same few for every large max-plus network of one dtype. With an empty store
a 32 x 32 energy built those six one after another at their first launches: 1.7 s of its 4.2 s on an
H200 (benchmarks/results/s65-h200, call 7). :func:`start` builds them at once, beside the planning that
comes before the first step. A kernel the run then does not launch stays built and stored, unused.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from ..tropical import plan as tplan
from ..tropical.fragments import NUMPY_DTYPES
from . import _arena, _permute
from ._backend import backend_of

log = logging.getLogger("lazykern")
_CODES = {np.dtype(v): k for k, v in NUMPY_DTYPES.items()}
# The product tiles of a sweep's steps (tropical.plan.choose_tile): rows of K, N <= 4 and <= 8 (strided
# steps), tall products (N <= 16) and small ones (batched); "", "m" and "splitk" are built when first launched.
ROW_TILES = ("r4", "r")
BATCHED_TILES = ("t", "s")


def names(semiring: str, dtype: Any) -> tuple[list[str], list[str]]:
    """(permutation-copy kernels, tropical kernels) of a max-plus or min-plus run over values of ``dtype``.

    >>> copies, products = names("maxplus", np.float32)
    >>> copies
    ['permute_bits_4', 'permute_tiled_4']
    >>> products
    ['maxplus_f32_r4', 'maxplus_f32_r', 'bmm_maxplus_f32_t', 'bmm_maxplus_f32_s']
    """
    dt = np.dtype(dtype)
    code = _CODES[dt]
    copies = [_permute.kernel_name(dt.itemsize), _permute.kernel_name(dt.itemsize, tiled=True)]
    products = [s.name for t in ROW_TILES for s in tplan.kernel_specs(semiring, code, False, "nn", False, t)]
    products += [s.name for t in BATCHED_TILES for s in tplan.kernel_specs(semiring, code, False, "nn", True, t)]
    return copies, products


def start(module: Any, dtype: Any, semiring: str) -> list[threading.Thread]:
    """Start building :func:`names` for the current device of ``module`` (cupy or torch; numpy: nothing)
    and return the threads, for the caller to join before it returns. Values of a dtype the tropical
    family has no kernels for (object, int8) start nothing."""
    found = _device_like(module, dtype)
    if found is None:
        return []
    be, like = found
    from ..launch import _device
    from ..tropical._family import family

    arch = _device.arch(be.device_of(like) or 0)
    copies, products = names(semiring, dtype)
    threads = _permute.family().prefetch(copies, arch=arch) + family.prefetch(products, arch=arch)
    log.debug("tn kit: building %d of %s for %s ahead", len(threads), copies + products, arch)
    return threads


def start_top2(module: Any, dtype: Any, floats: int) -> list[threading.Thread]:
    """Start building the top-two pass's kernels (:mod:`.algebras._top2_kernels`: one thread per output,
    both tiles, the merge) for values of ``dtype`` and counts of ``floats`` bytes, and the copy that
    arranges its three parts, on ``module``'s current GPU: the threads, to join. With an empty store a
    150-vertex CountingMax(2) built them one after another at their first launches (1.9 s, session 81)."""
    found = _device_like(module, dtype)
    if found is None:
        return []
    be, like = found
    from ..launch import _device
    from .algebras import _top2_kernels

    arch = _device.arch(be.device_of(like) or 0)
    value, counts = np.dtype(dtype), np.dtype(f"f{floats}")
    products = [_top2_kernels.kernel_name(value, counts, t) for t in ("", *_top2_kernels.TILES)]
    products.append(_top2_kernels.merge_name(value, counts))
    copies = [_permute.kernel_name(n, parts=True) for n in sorted({value.itemsize, counts.itemsize})]
    return _permute.family().prefetch(copies, arch=arch) + _top2_kernels.family().prefetch(products, arch=arch)


def start_scaledsum(module: Any) -> list[threading.Thread]:
    """Start building the partition function's scaled-sum kernels (:mod:`.algebras._scaledsum_kernels`) on
    ``module``'s current GPU: the threads, to join."""
    found = _device_like(module, np.float64)
    if found is None:
        return []
    be, like = found
    from ..launch import _device
    from .algebras import _scaledsum_kernels

    names = [*_scaledsum_kernels.SIDES, "ss_finish"]
    return _scaledsum_kernels.family().prefetch(names, arch=_device.arch(be.device_of(like) or 0))


def start_arena(module: Any, dtype: Any, semiring: str, tiles: list[tuple[int, int]]) -> list[threading.Thread]:
    """Start building the arena's kernels of steps ``tiles`` (spins out, spins in: a sweep's bit-addressed
    steps, :mod:`._arena`) where the arena can run (CuPy, its dtypes): the threads, to join. The run's own
    prefetch, once its network is built and its plan priced, finds them built or building."""
    found = _device_like(module, dtype)
    if found is None or not tiles or not _arena.capable(semiring, np.dtype(dtype), found[0]):
        return []
    return _arena.prefetch(found[0], found[1], semiring, tiles)


def _device_like(module: Any, dtype: Any) -> tuple[Any, Any] | None:
    """(backend, an empty array) of ``dtype`` on ``module``'s current GPU; None on the host or for a
    dtype the tropical family has no kernels for."""
    dt = np.dtype(dtype)
    if getattr(module, "__name__", "") == "numpy" or dt not in _CODES:
        return None
    if module.__name__ == "torch":
        like = module.empty((0,), dtype=getattr(module, dt.name), device="cuda")
    else:
        like = module.empty(0, dt)
    be, like = backend_of(like)
    return None if be.on_host or be.xp is np else (be, like)


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join()
