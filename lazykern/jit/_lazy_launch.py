"""Launching a ``@lazy_kernel``: the launch layer's target for Numba-Python kernels.

The hot path keys a dispatch table with the argument pattern's type codes (the id
of each argument's Numba type: a scalar's by its class, a device array's as kept
on the array), read inline by one generated function per arity (:func:`hot_run`, which
the launcher calls directly for a kernel of one arity) with no Python call per argument,
then fills the instance's parameter block and launches it with
:data:`lazykern.launch._launch.launch_buffer`, as a ``Kernel`` launches: the same driver
calls, the current context and one cuLaunchKernel. Anything
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
from .._numba.declared import Declared
from ..errors import LaunchError, LaunchTypeError
from ..launch import _launch
from ..launch._launch import Launcher, driver_error
from . import _host_copy, _lazy_debug
from ._lazy_instance import Instance


class Kernel(Protocol):
    """What the dispatcher needs of its ``LazyKernel``."""

    __name__: str
    described: str
    extensions: list[Any]
    declared: Declared | None
    py_func: Any

    def _count(self, name: str, delta: float = 1) -> None: ...

    def _check_count(self, args: tuple[Any, ...]) -> None: ...

    def _instance(self, types: tuple[Any, ...]) -> Instance: ...

    @property
    def _nargs(self) -> tuple[int, int]: ...


class Dispatcher:
    """Finds the instance for a launch's arguments and launches it (see the module docstring)."""

    __slots__ = ("kernel", "fast", "key", "patterns", "run")

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.fast: dict[tuple[Any, ...], Instance] = {}  # type codes -> instance (hot path)
        self.key = _numba_args.make_fast_key()  # one argument's code (general path: it also keeps array types)
        self.patterns: dict[int, Callable[[Launcher, tuple[Any, ...], int], None]] = {}  # arity -> its hot path
        # What a launcher calls: a kernel of one arity (no defaulted parameters) has its hot path
        # called directly; another picks the arity's by the number of arguments.
        lo, hi = kernel._nargs
        self.run: Callable[[Launcher, tuple[Any, ...], int], None] = self._hot(lo) if lo == hi else self.run_any

    @staticmethod
    def arrays(args: Sequence[Any]) -> Sequence[Any]:
        """Every argument may name the launch's device."""
        return args

    def run_any(self, launcher: Launcher, args: tuple[Any, ...], ctx: int) -> None:
        """The hot path (:func:`hot_run`) of the arguments' arity, made on its first launch."""
        run = self.patterns.get(len(args))
        if run is None:
            run = self.patterns[len(args)] = self._hot(len(args))
        run(launcher, args, ctx)

    def _hot(self, arity: int) -> Callable[[Launcher, tuple[Any, ...], int], None]:
        return hot_run(arity)(self, _launch, launch, _error, driver_error)

    def call(self, launcher: Launcher, args: tuple[Any, ...]) -> None:
        """The general path: type every argument, find or build the instance, copy host arrays, launch."""
        kernel = self.kernel
        kernel._count("calls")
        described, unchanged = self.describe(args)
        inst = kernel._instance(tuple(d[0] for d in described))
        fn = inst.function()
        retr: list[Any] = []
        if kernel.extensions:  # they may map any argument on any launch: no hot path
            described = _extend(kernel.extensions, described, args, launcher, retr)
        elif unchanged:  # arguments the filler takes as they come (converted ones take this path each time)
            fast = tuple(map(self.key, args))
            if _numba_args.SLOW not in fast:
                self.fast[fast] = inst
        try:
            self._launch(launcher, inst, fn, described)
        finally:
            for write_back in retr:
                write_back()

    def describe(self, args: tuple[Any, ...]) -> tuple[list[tuple[Any, str, Any]], bool]:
        """``(described, unchanged)``: each argument as ``(Numba type, source kind, value)`` for the
        signature the launch runs (a declared one: the arguments converted to it); ``unchanged``:
        the values are the arguments themselves, each of exactly that type."""
        kernel = self.kernel
        kernel._check_count(args)
        if kernel.declared is None:
            return [_numba_args.classify(a, i) for i, a in enumerate(args)], True
        return _declared(kernel, kernel.declared, args)  # the signature numba-cuda would launch

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
def hot_run(arity: int) -> Callable[..., Callable[[Launcher, tuple[Any, ...], int], None]]:
    """``make(dispatcher, ...) -> run(launcher, args, ctx)``: the hot path for ``arity`` arguments,
    generated so that each argument's type code is read inline (a scalar's by its class, a device
    array's as the general path kept it on the array: :func:`_numba_args.make_fast_key`; an
    argument with neither has no code, None, and misses): the
    pattern's codes, one dict lookup, the instance's filler and one cuLaunchKernel. A miss, a
    wrong number of arguments, an instance not loaded in this context, a cooperative or
    debug=True kernel, or a value the filler refuses takes the general path or cuda.core."""
    names = [f"a{i}" for i in range(arity)]
    codes = "".join(f"_scalar({n}.__class__) or {n}.__dict__.get(_KEPT), " for n in names)
    src = (
        "def make(_self, _launch, _slow_launch, _error, _driver_error):\n"
        "    _fast = _self.fast.get\n"
        "    def run(launcher, args, ctx):\n"
        "        try:\n"
        f"            ({''.join(n + ', ' for n in names)}) = args\n"
        f"            inst = _fast(({codes}))\n"
        "        except (AttributeError, ValueError):  # no scalar class nor __dict__; another arity\n"
        "            inst = None\n"
        "        if inst is None:\n"
        "            return _self.call(launcher, args)\n"
        "        cufn = inst.cufunctions.get(ctx)\n"
        "        if cufn is None or inst.cooperative or inst.debug is not None:\n"
        "            return _slow_launch(launcher, inst, inst.function(), args)\n"
        "        params = inst.params\n"
        "        with params.lock:\n"
        "            try:\n"
        "                inst.fill(params.block, *args)\n"
        "            except Exception:  # the general path gives the precise error\n"
        "                return _self.call(launcher, args)\n"
        "            (err,) = _launch.launch_buffer(cufn, *launcher.buffer_config, params.extra)\n"
        "        if err:\n"
        "            raise _error(launcher, inst, _driver_error(err))\n"
        "    return run\n"
    )
    env: dict[str, Any] = {
        "_scalar": {cls: id(t) for cls, t in _numba_args.scalar_types().items()}.get,
        "_KEPT": KEPT_CODE,
    }
    exec(compile(src, "<lazykern hot path>", "exec"), env)  # noqa: S102 - built from argument positions only
    make: Callable[..., Callable[[Launcher, tuple[Any, ...], int], None]] = env["make"]
    return make


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


def _declared(kernel: Kernel, declared: Declared, args: tuple[Any, ...]) -> tuple[list[tuple[Any, str, Any]], bool]:
    """The arguments described as the declared signature numba-cuda would launch takes them; a
    launch numba-cuda refuses is refused in its words, naming the kernel."""
    try:
        types = declared.select(kernel.py_func, args)
    except TypeError as exc:  # numba's C dispatcher: "No matching definition for argument type(s) ..."
        raise LaunchTypeError(f"kernel {kernel.described}: {exc}") from None
    try:
        return declared.describe(types, args)
    except LaunchError as exc:
        sig = ", ".join(str(t) for t in types)
        raise LaunchTypeError(f"kernel {kernel.described} declared ({sig}): {exc}") from None


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
