"""``@lazy_kernel`` under ``NUMBA_ENABLE_CUDASIM=1``: run in Numba's simulator, count as on a GPU.

Nothing is cached (there is no binary to keep), but a first call with a new signature counts
as a miss and a compile, here and in the cache's counters, so :func:`lazykern.testing.assert_compiled`
reads the same on both.
"""

from __future__ import annotations

from typing import Any, Protocol

from ._launch import parse_launch_config
from ._numba import args as _numba_args
from .cache import record
from .errors import LaunchError


class Kernel(Protocol):
    """What the simulated launcher needs of its ``LazyKernel``."""

    py_func: Any
    _lock: Any
    _counts: dict[str, Any]
    _sim_signatures: dict[tuple, None]
    _sim_dispatcher: Any

    def _check_count(self, args: tuple) -> None: ...


class SimLauncher:
    """Runs the kernel in Numba's simulator; counts signatures and calls, caches nothing."""

    __slots__ = ("kernel", "config")

    def __init__(self, kernel: Kernel, config: Any) -> None:
        parse_launch_config(config)  # same checks and errors as on a GPU
        self.kernel = kernel
        self.config = config

    def __call__(self, *args: Any) -> None:
        k = self.kernel
        k._check_count(args)
        sig = tuple(sim_type(a, i) for i, a in enumerate(args))
        with k._lock:
            k._counts["calls"] += 1
            if sig not in k._sim_signatures:  # the simulator's compile of a new signature
                k._sim_signatures[sig] = None
                k._counts["misses"] += 1
                k._counts["compiles"] += 1
                for what in ("lookups", "misses", "compiles"):
                    record(what)
            if k._sim_dispatcher is None:
                from numba import cuda

                k._sim_dispatcher = cuda.jit(k.py_func)
        k._sim_dispatcher[self.config](*args)


def sim_type(value: Any, index: int) -> str:
    """A simulated argument's signature entry: its scalar type, array dtype and rank, or tuple of those."""
    t = _numba_args.scalar_types().get(value.__class__)
    if t is not None:
        return str(t)
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"array({dtype}, {len(shape)}d)"
    if isinstance(value, tuple):
        return "(" + ", ".join(sim_type(v, index) for v in value) + ")"
    raise LaunchError(
        f"argument {index} has unsupported type {type(value).__name__}: pass arrays, "
        "Python or NumPy scalars, or tuples of scalars"
    )
