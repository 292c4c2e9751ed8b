"""Numba kernel signatures: spelled by the user, relaxed to any layout, counted from the function."""

from __future__ import annotations

from types import FunctionType
from typing import Any

from . import internals


def normalize_signature(sig: Any) -> tuple[Any, ...]:
    """A tuple of Numba types, a ``"void(float32, ...)"`` string or a Numba signature -> argument types."""
    try:
        args, ret = internals.normalize_signature(sig)
    except Exception as exc:
        raise TypeError(f"not a kernel signature: {sig!r} ({exc})") from None
    if ret is not None and str(ret) != "none":
        raise TypeError(f"a kernel returns nothing, but signature {sig!r} declares {ret}")
    return tuple(args)


def is_signature(value: Any) -> bool:
    """Whether ``value`` is a signature or a list of them, as ``cuda.jit(value)`` reads it."""
    if isinstance(value, list):
        return all(internals.is_signature(v) for v in value)
    return internals.is_signature(value)


def relaxed(types: tuple[Any, ...]) -> tuple[Any, ...]:
    """The same signature with every array typed as any-layout ('A')."""
    from numba.cuda import types as nt

    return tuple(t.copy(layout="A") if isinstance(t, nt.Array) and t.layout != "A" else t for t in types)


def arg_range(fn: FunctionType) -> tuple[int, int]:
    """(fewest, most) arguments ``fn`` takes; TypeError for ``*args``, which kernels cannot take."""
    code = fn.__code__
    if code.co_flags & 0x04:  # *args
        raise TypeError(f"kernel {fn.__name__!r} takes *args, which Numba kernels cannot")
    n = code.co_argcount
    return n - len(fn.__defaults__ or ()), n
