"""Launching a ``@lazy_kernel``: the launch layer's target for Numba-Python kernels.

The hot path keys a dispatch table with one dict lookup per argument (the id of its
Numba type), fills the instance's parameter block and launches it with
:meth:`Launcher.launch_buffer`. Anything else (a first call, a CUDA-array-interface
object, host arrays, a cooperative kernel, a bad argument) takes the general path:
type every argument, find or build the instance, copy host arrays, launch through
cuda.core (:meth:`Launcher.launch`), and remember the instance for the hot path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .._numba import args as _numba_args
from ..errors import LaunchError
from ..launch import _launch
from ..launch._launch import Launcher, driver_error
from . import _host_copy
from ._lazy_instance import Instance


class Kernel(Protocol):
    """What the dispatcher needs of its ``LazyKernel``."""

    __name__: str

    def _count(self, name: str, delta: float = 1) -> None: ...

    def _check_count(self, args: tuple[Any, ...]) -> None: ...

    def _instance(self, types: tuple[Any, ...]) -> Instance: ...


class Dispatcher:
    """Finds the instance for a launch's arguments and launches it (see the module docstring)."""

    __slots__ = ("kernel", "fast", "key")

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.fast: dict[tuple[Any, ...], Instance] = {}  # fast key -> instance (hot path)
        self.key = _numba_args.make_fast_key()

    @staticmethod
    def arrays(args: Sequence[Any]) -> Sequence[Any]:
        """Every argument may name the launch's device."""
        return args

    def run(self, launcher: Launcher, args: tuple[Any, ...], ctx: int) -> None:
        # The hot path: one key per argument (dict lookups), one dict lookup per table, one launch.
        inst = self.fast.get(tuple(map(self.key, args)))
        if inst is None:
            self.call(launcher, args)
            return
        cufn = inst.cufunctions.get(ctx)
        if cufn is None or inst.cooperative:
            launch(launcher, inst, inst.function(), args)
            return
        fill, params = inst.fill, inst.params
        assert (
            fill is not None and params is not None
        )  # cufn is set only once the instance has loaded, its plan with it
        with params.lock:
            try:
                fill(params.block, *args)
            except Exception:
                self.call(launcher, args)  # the general path gives the precise error
                return
            (err,) = _launch.launch_buffer(cufn, *launcher.buffer_config, params.extra)
        if err:
            raise _error(launcher, inst, driver_error(err))

    def call(self, launcher: Launcher, args: tuple[Any, ...]) -> None:
        """The general path: type every argument, find or build the instance, copy host arrays, launch."""
        kernel = self.kernel
        kernel._count("calls")
        kernel._check_count(args)
        described = [_numba_args.classify(a, i) for i, a in enumerate(args)]
        inst = kernel._instance(tuple(d[0] for d in described))
        fn = inst.function()
        fast = tuple(map(self.key, args))
        if _numba_args.SLOW not in fast:
            self.fast[fast] = inst
        values = [d[2] for d in described]
        hosts = [(i, d[2]) for i, d in enumerate(described) if d[1] == _numba_args.HOST]
        if not hosts:
            launch(launcher, inst, fn, values)
            return
        _host_copy.launch_with_copies(
            lambda vals: launch(launcher, inst, fn, vals),
            values,
            hosts,
            stream=launcher.user_stream,
            core_stream=launcher.stream,
            name=kernel.__name__,
        )


def launch(launcher: Launcher, inst: Instance, fn: Any, args: Sequence[Any]) -> None:
    """cuda.core.launch with one Python value per kernel parameter (any instance, cooperative too)."""
    pack = inst.pack
    assert pack is not None  # set when `fn` (inst.function()) was loaded
    try:
        launcher.launch(fn, pack(*args), cooperative=inst.cooperative)
    except Exception as exc:
        raise _error(launcher, inst, exc) from exc


def _error(launcher: Launcher, inst: Instance, exc: Exception) -> LaunchError:
    sig = ", ".join(str(t) for t in inst.types)
    return LaunchError(f"launch of {launcher.name!r} ({sig}) failed: {exc}")
