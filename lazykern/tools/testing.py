"""Helpers for testing code that uses lazykern, on a GPU or under Numba's simulator.

>>> import numpy as np
>>> from lazykern import tropical
>>> from lazykern.testing import assert_matches_reference
>>> A, B = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
>>> C = assert_matches_reference(tropical.matmul, tropical.reference.matmul, A, B, "maxplus", device=False)
>>> C
array([[3., 3.],
       [6., 6.]])

(``device=True``, the default, first copies NumPy arguments to device arrays: on
a GPU, or simulated ones under the simulator.)

* :func:`assert_compiled` / :func:`assert_no_compile`: context managers that
  count compiles (NVRTC, numba-cuda, or the simulator's first call of a new
  signature) and fail with what was counted.
* :func:`assert_matches_reference`: run a function on device arrays and its
  NumPy reference on host arrays, compare (the idea of CuPy's
  ``numpy_cupy_allclose``).
* :func:`every_backend`: run one test on the GPU and under the simulator
  (needs lazykern's pytest plugin, which pytest loads by itself).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..store import cache as _cache

__all__ = [
    "CompileCount",
    "assert_compiled",
    "assert_matches_reference",
    "assert_no_compile",
    "backend",
    "every_backend",
    "to_device",
    "to_host",
]


def _compiles(target: Any) -> int:
    """Compiles so far by ``target``: a @lazy_kernel, a KernelFamily, a KernelCache, or None (the process)."""
    from ..families.family import KernelFamily
    from ..jit.decorator import LazyKernel
    from ..store.cache import KernelCache

    if target is None:
        return _cache.process_totals()["compiles"]
    if isinstance(target, LazyKernel):
        return int(target.stats()["compiles"])
    if isinstance(target, KernelFamily):
        return target.compile_calls + sum(int(target.twin(n).stats()["compiles"]) for n in target.twins())
    if isinstance(target, KernelCache):
        return int(target.stats()["compiles"])
    raise TypeError(
        f"can count the compiles of a @lazy_kernel, a KernelFamily or a KernelCache, got {type(target).__name__}"
    )


class CompileCount:
    """What an :func:`assert_compiled` block counted (``count`` is set when the block ends)."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.count = 0


@contextlib.contextmanager
def assert_compiled(target: Any = None, n: int | None = None) -> Iterator[CompileCount]:
    """Fail unless the block compiles exactly ``n`` kernels of ``target`` (or at least one when n is None).

    ``target``: a ``@lazy_kernel``, a ``KernelFamily`` (its fragments and twins),
    a ``KernelCache``, or None for every cache in the process. Under the CUDA
    simulator, the first call of a ``@lazy_kernel`` (or twin) with a new
    signature counts as its compile.
    """
    counted = CompileCount(target)
    before = _compiles(target)
    yield counted
    counted.count = _compiles(target) - before
    what = "the process" if target is None else repr(target)
    if n is None and counted.count == 0:
        raise AssertionError(f"expected {what} to compile something in this block; it compiled nothing")
    if n is not None and counted.count != n:
        raise AssertionError(f"expected {what} to compile {n} kernel(s) in this block; it compiled {counted.count}")


@contextlib.contextmanager
def assert_no_compile(target: Any = None) -> Iterator[CompileCount]:
    """Fail if the block compiles anything (of ``target``, or anywhere in the process).

    Every route counts: ``KernelFamily`` fragments, ``@lazy_kernel``
    instantiations (found in the store or compiled), and the simulator's first
    calls; a kernel loaded from a store warmed by another process is a hit.
    """
    with assert_compiled(target, 0) as counted:
        yield counted


# -- arrays -----------------------------------------------------------------------
def to_device(x: Any) -> Any:
    """A NumPy array as a Numba device array (a simulated one under the simulator); anything else as is."""
    if isinstance(x, np.ndarray):
        from numba import cuda

        return cuda.to_device(x)
    return x


def to_host(x: Any) -> Any:
    """Device arrays (Numba, CuPy, torch) as NumPy arrays; tuples and lists element by element."""
    if isinstance(x, (tuple, list)):
        return type(x)(to_host(v) for v in x)
    if isinstance(x, np.ndarray) or np.isscalar(x):
        return x
    for copy in ("copy_to_host", "get"):
        fn = getattr(x, copy, None)
        if callable(fn):
            return fn()
    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().numpy()
    return np.asarray(x)


def assert_matches_reference(
    fn: Callable[..., Any],
    reference: Callable[..., Any],
    *args: Any,
    rtol: float = 1e-6,
    atol: float = 0.0,
    equal_nan: bool = True,
    device: bool = True,
    **kwargs: Any,
) -> Any:
    """Run ``fn`` on device copies of the NumPy arguments and ``reference`` on the arguments as given;
    assert the results agree (arrays, or tuples of arrays such as ``(C, argmax)``) and return fn's, on the host.

    Integer results must be equal; floating ones within ``rtol``/``atol``, NaN
    equal to NaN. ``device=False`` hands ``fn`` the NumPy arrays themselves
    (functions that copy on their own, such as ``tropical.matmul``).
    """
    ref = reference(*[np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args], **kwargs)
    got = to_host(fn(*[to_device(a) if device else a for a in args], **kwargs))
    _compare(got, ref, rtol, atol, equal_nan, "result")
    return got


def _compare(got: Any, ref: Any, rtol: float, atol: float, equal_nan: bool, what: str) -> None:
    if isinstance(ref, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(ref):
            raise AssertionError(f"{what}: the reference gave {len(ref)} results, the device run {got!r}")
        for i, (g, r) in enumerate(zip(got, ref)):
            _compare(g, r, rtol, atol, equal_nan, f"{what}[{i}]")
        return
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        raise AssertionError(
            f"{what}: device run gave {got.dtype}{list(got.shape)}, the reference {ref.dtype}{list(ref.shape)}"
        )
    if ref.dtype.kind in "fc":
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=what)
    else:
        np.testing.assert_array_equal(got, ref, err_msg=what)


# -- backends ---------------------------------------------------------------------
def backend() -> str:
    """ "simulator" when Numba runs kernels in its CUDA simulator, "device" otherwise."""
    from numba.cuda import config as cuda_config

    return "simulator" if cuda_config.ENABLE_CUDASIM else "device"


def every_backend(test: Callable[..., Any]) -> Any:
    """Run ``test`` on every backend: the GPU ("device") and Numba's simulator ("simulator").

    The test may take a ``lazykern_backend`` argument to learn which. The backend
    this process does not have runs in a child pytest (the simulator, on a GPU
    machine); the device run is skipped where there is no GPU.
    """
    import pytest

    test = pytest.mark.usefixtures("lazykern_backend")(test)
    return pytest.mark.parametrize("lazykern_backend", ["device", "simulator"], indirect=True)(test)
