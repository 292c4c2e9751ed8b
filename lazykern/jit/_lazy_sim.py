"""``@lazy_kernel`` under ``NUMBA_ENABLE_CUDASIM=1``: run in Numba's simulator, count as on a GPU.

Nothing is cached (there is no binary to keep), but a first call with a new signature counts
as a miss and a compile, here and in the cache's counters, so :func:`lazykern.testing.assert_compiled`
reads the same on both.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from .._numba import args as _numba_args
from .._numba import internals
from ..errors import LaunchError
from ..launch._launch import parse_launch_config
from ..store.cache import record


class Kernel(Protocol):
    """What the simulated launcher needs of its ``LazyKernel``."""

    py_func: Any
    options: dict[str, Any]
    extensions: list[Any]

    def _count(self, name: str, delta: float = 1) -> None: ...

    def _check_count(self, args: tuple[Any, ...]) -> None: ...


class SimState:
    """One kernel's simulator state, shared by its launchers: the signatures seen (each one a
    "compile") and Numba's simulated dispatcher, made on first use."""

    __slots__ = ("lock", "signatures", "dispatcher")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.signatures: dict[tuple[Any, ...], None] = {}
        self.dispatcher: Any = None


class SimLauncher:
    """Runs the kernel in Numba's simulator; counts signatures and calls, caches nothing."""

    __slots__ = ("kernel", "state", "config")

    def __init__(self, kernel: Kernel, state: SimState, config: Any) -> None:
        parse_launch_config(config)  # same checks and errors as on a GPU
        self.kernel = kernel
        self.state = state
        self.config = config

    def __call__(self, *args: Any) -> None:
        k, state = self.kernel, self.state
        k._check_count(args)
        sig = tuple(sim_type(a, i) for i, a in enumerate(args))
        k._count("calls")
        with state.lock:
            new = sig not in state.signatures
            if new:
                state.signatures[sig] = None
            if state.dispatcher is None:
                from numba import cuda

                # The simulator takes fastmath and debug; extensions map arguments as on a GPU.
                state.dispatcher = cuda.jit(k.py_func, fastmath=k.options["fastmath"], debug=k.options["debug"])
                state.dispatcher.extensions = list(k.extensions)
            dispatcher = state.dispatcher
        if new:  # the simulator's compile of a new signature
            k._count("misses")
            k._count("compiles")
            for what in ("lookups", "misses", "compiles"):
                record(what)
        dispatcher[self.config](*args)


def sim_type(value: Any, index: int) -> str:
    """A simulated argument's signature entry: its scalar type, array dtype and rank, or tuple of those."""
    t = _numba_args.scalar_types().get(value.__class__)
    if t is not None:
        return str(t)
    hint = internals.arg_hint(value)  # cuda.In / Out / InOut: typed as what they wrap
    if hint is not None:
        return sim_type(hint[0], index)
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"array({dtype}, {len(shape)}d)"
    if isinstance(value, tuple):
        return "(" + ", ".join(sim_type(v, index) for v in value) + ")"
    t = _numba_args.passable_type(value)  # records, enum members, user types: as Numba types them
    if t is not None:
        return str(t)
    raise LaunchError(
        f"argument {index} has unsupported type {type(value).__name__}: pass arrays, records, "
        "Python or NumPy scalars, enum members, or tuples of scalars"
    )
