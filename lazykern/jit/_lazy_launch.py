"""Launching a ``@lazy_kernel``: the launch layer's target for Numba-Python kernels.

The hot path keys a dispatch table with the argument pattern's type codes (the id
of each argument's Numba type: a scalar's by its class, a device array's as kept
on the array), read by one generated function per arity with no Python call per
argument, then fills the instance's parameter block and launches it with
:data:`lazykern.launch._launch.launch_buffer`, as a ``Kernel`` launches. Anything
else (a first call, a CUDA-array-interface object, host arrays, a cooperative
kernel, a bad argument) takes the general path: type every argument, find or build
the instance, copy host arrays, launch through cuda.core (:meth:`Launcher.launch`),
and remember the instance for the hot path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._numba import args as _numba_args
from ..errors import LaunchError
from ..launch import _launch
from ..launch._launch import Launcher, driver_error
from . import _host_copy, _lazy_debug
from ._lazy_instance import Instance


class Kernel(Protocol):
    """What the dispatcher needs of its ``LazyKernel``."""

    __name__: str
    extensions: list[Any]

    def _count(self, name: str, delta: float = 1) -> None: ...

    def _check_count(self, args: tuple[Any, ...]) -> None: ...

    def _instance(self, types: tuple[Any, ...]) -> Instance: ...


class Dispatcher:
    """Finds the instance for a launch's arguments and launches it (see the module docstring)."""

    __slots__ = ("kernel", "fast", "key", "patterns")

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.fast: dict[tuple[Any, ...], Instance] = {}  # type codes -> instance (hot path)
        self.key = _numba_args.make_fast_key()  # one argument's code (general path: it also keeps array types)
        self.patterns: dict[int, Callable[..., tuple[Any, ...]]] = {}  # arity -> its codes reader

    @staticmethod
    def arrays(args: Sequence[Any]) -> Sequence[Any]:
        """Every argument may name the launch's device."""
        return args

    def run(self, launcher: Launcher, args: tuple[Any, ...], ctx: int) -> None:
        # The hot path: the pattern's codes in one call, one dict lookup, one launch.
        codes = self.patterns.get(len(args))
        if codes is None:
            codes = self.patterns[len(args)] = type_codes(len(args))
        try:
            inst = self.fast.get(codes(*args))
        except AttributeError:  # an argument with neither a scalar class nor a __dict__ (general path)
            inst = None
        if inst is None:
            self.call(launcher, args)
            return
        cufn = inst.cufunctions.get(ctx)
        if cufn is None or inst.cooperative or inst.debug is not None:
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
        retr: list[Any] = []
        if kernel.extensions:  # they may map any argument on any launch: no hot path
            described = _extend(kernel.extensions, described, args, launcher, retr)
        else:
            fast = tuple(map(self.key, args))
            if _numba_args.SLOW not in fast:
                self.fast[fast] = inst
        try:
            self._launch(launcher, inst, fn, described)
        finally:
            for write_back in retr:
                write_back()

    def _launch(self, launcher: Launcher, inst: Instance, fn: Any, described: list[tuple[Any, str, Any]]) -> None:
        kernel = self.kernel
        values = [d[2] for d in described]
        hosts = [(i, d[2], d[1]) for i, d in enumerate(described) if d[1] in _numba_args.HOST_KINDS]
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


# Where make_fast_key keeps a device array's Numba type and its code (the type's id) on the array
# (tests/test_lazy_launch.py checks the names against it): None, the code of an array the general
# path has not typed, matches no entry.
KEPT_TYPE = "_lazykern_numba_type"
KEPT_CODE = "_lazykern_numba_code"


@functools.cache
def type_codes(arity: int) -> Callable[..., tuple[Any, ...]]:
    """``codes(a0, a1, ...)``: each argument's code as :func:`_numba_args.make_fast_key` gives it
    (the id of its Numba type), read inline: a scalar by its class, a device array by the code
    the general path kept on it. An argument with neither gets the code of no type, so the call
    misses and the general path types it (and keeps an array's type for next time)."""
    names = [f"a{i}" for i in range(arity)]
    parts = [f"_scalar({n}.__class__) or {n}.__dict__.get(_KEPT)" for n in names]
    src = f"def codes({', '.join(names)}):\n    return ({', '.join(parts)}{',' if parts else ''})\n"
    env: dict[str, Any] = {
        "_scalar": {cls: id(t) for cls, t in _numba_args.scalar_types().items()}.get,
        "_KEPT": KEPT_CODE,
    }
    exec(compile(src, "<lazykern type codes>", "exec"), env)  # noqa: S102 - built from argument positions only
    codes: Callable[..., tuple[Any, ...]] = env["codes"]
    return codes


def launch(launcher: Launcher, inst: Instance, fn: Any, args: Sequence[Any]) -> None:
    """cuda.core.launch with one Python value per kernel parameter (any instance, cooperative too)."""
    pack = inst.pack
    assert pack is not None  # set when `fn` (inst.function()) was loaded
    try:
        packed = pack(*args)
    except Exception as exc:
        raise _error(launcher, inst, exc) from exc

    def go() -> None:
        try:
            launcher.launch(fn, packed, cooperative=inst.cooperative)
        except Exception as exc:
            raise _error(launcher, inst, exc) from exc

    if inst.debug is None:
        go()
    else:  # debug=True: the kernel's error code is zeroed before and checked after, as numba-cuda does
        _lazy_debug.launch_checked(go, int(fn.handle), inst.symbol, inst.debug, int(launcher.stream.handle))


def _extend(
    extensions: list[Any],
    described: list[tuple[Any, str, Any]],
    args: tuple[Any, ...],
    launcher: Launcher,
    retr: list[Any],
) -> list[tuple[Any, str, Any]]:
    """Each argument through the kernel's ``extensions`` as numba-cuda maps it (last added first,
    ``prepare_args(ty, val, stream=, retr=)``); what they return is packed as the compiled type."""
    stream = _host_copy.numba_stream(launcher.user_stream)
    out = []
    for i, (ty, kind, value) in enumerate(described):
        new_ty, new = ty, args[i]
        for extension in reversed(extensions):
            new_ty, new = extension.prepare_args(new_ty, new, stream=stream, retr=retr)
        if new is args[i] and new_ty == ty:
            out.append((ty, kind, value))
            continue
        mapped = _numba_args.classify(new, i)
        if _numba_args.plan_for((new_ty,)) != _numba_args.plan_for((ty,)):
            raise LaunchError(
                f"argument {i}: an extension mapped {ty} to {new_ty}, which the kernel compiled for {ty} "
                "cannot take (its parameters differ); map arguments to values of the same type"
            )
        out.append((ty, mapped[1], mapped[2]))
    return out


def _error(launcher: Launcher, inst: Instance, exc: Exception) -> LaunchError:
    sig = ", ".join(str(t) for t in inst.types)
    return LaunchError(f"launch of {launcher.name!r} ({sig}) failed: {exc}")
