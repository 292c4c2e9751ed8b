"""Which graph capture, if any, the current thread is recording.

Launch sites (the launch layer ``_launch.py``, the Numba hooks of ``_capture_hooks.py``) call
:func:`intercept` before launching. It lets the open capture keep the launch's
arguments alive (a replayed graph must never read freed buffers), refuse host
arrays, and, under the simulator, record the launch instead of running it.

This module sits below ``_launch.py`` and ``graph.py`` and imports neither, so
both can reach the registry without an upward import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _fork
from ..errors import CaptureError
from ._device import stream_handle

#: Captures open in any thread. Launch sites test this plain integer first, so
#: the thread-local lookup costs nothing while nobody captures.
active = 0

_lock = _fork.lock()
_local = threading.local()

_SCALARS = (bool, int, float, complex, str, bytes, np.generic)


class Recorder:
    """What one open capture collects: kept arguments and, simulated, the launches.

    ``stream`` is the stream being captured (a Numba stream, or the simulator's
    stand-in); ``handle`` its driver handle, or None under the simulator, where
    streams are matched by identity.
    """

    def __init__(self, stream: Any, handle: int | None, *, simulate: bool) -> None:
        self.stream = stream
        self.handle = handle
        self.simulate = simulate
        self.refs: dict[int, Any] = {}
        self.launches: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.topology: list[Any] = []

    def captures(self, stream: Any) -> bool:
        """Whether a launch on ``stream`` lands in this capture."""
        if self.handle is None:
            return stream is self.stream
        return stream_handle(stream) == self.handle

    def keep(self, objs: Sequence[Any]) -> None:
        for obj in objs:
            if obj is not None and not isinstance(obj, _SCALARS):
                self.refs[id(obj)] = obj

    def on_launch(
        self, fn: Callable[..., Any], stream: Any, args: Sequence[Any], *, name: str, key: Any = None
    ) -> bool:
        """Vet one launch; True when it was recorded and must not run now."""
        for i, arg in enumerate(args):
            if isinstance(arg, np.ndarray):
                raise CaptureError(
                    f"argument {i} of kernel {name!r} is a host (NumPy) array while a graph is being captured: "
                    "Numba would copy it synchronously, which capture forbids. Copy it to the device before "
                    "the capture (numba.cuda.to_device) and pass the device array"
                )
        # Refs from every launch of the thread: keeping too much is harmless, too little is a use-after-free.
        self.keep(args)
        if not (self.simulate and self.captures(stream)):
            return False
        self.launches.append((fn, tuple(args)))
        self.topology.append(key if key is not None else fn)
        return True


def current() -> Recorder | None:
    """The innermost capture open in this thread, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def push(rec: Recorder) -> None:
    global active
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(rec)
    with _lock:
        active += 1


def pop(rec: Recorder) -> None:
    global active
    stack = _local.stack
    stack.remove(rec)
    with _lock:
        active -= 1


def intercept(fn: Callable[..., Any], stream: Any, args: Sequence[Any], *, name: str, key: Any = None) -> bool:
    """Called by launch sites while ``active``; True means "recorded, do not launch"."""
    rec = current()
    return rec is not None and rec.on_launch(fn, stream, args, name=name, key=key)
