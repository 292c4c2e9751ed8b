"""Hooks into Numba that are in place only while some capture is open.

Numba's own launch path does not know about lazykern's captures, so while any
capture is open (in any thread) a few Numba entry points are wrapped (the adapter
``lazykern._numba.internals`` names them and applies the patches):

- ``CUDADispatcher.call`` (every ``kern[grid, block, stream](...)`` of a
  ``@cuda.jit`` kernel): the capture keeps the arguments alive and refuses
  host arrays, whose synchronous copy would break the capture.
- Under the simulator, ``FakeCUDAKernel.__getitem__``: the simulator drops the
  stream of ``kern[grid, block, stream]``, so the wrapper returns a small
  launch object that remembers it, and a launch on the captured stream is
  recorded instead of run.
- ``numba.cuda.to_device``/``device_array``/... and ``numba.cuda.synchronize``:
  they allocate or wait, which capture forbids; they raise ``CaptureError``
  naming themselves before the driver invalidates the capture.
- ``copy_to_host``/``copy_to_device`` without ``stream=``: synchronous copies.

Every wrapper asks the thread-local registry first and behaves exactly like
the original in threads that are not capturing. Code that bound a function
before the capture (``from numba.cuda import to_device``) bypasses these
guards; the driver's refusal is then translated by ``graph.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import _fork
from .._numba import internals
from ..errors import CaptureError
from ..launch import _capture

_lock = _fork.lock()
_installed = 0
_saved: list[tuple[Any, str, Any]] = []


def simulated() -> bool:
    """Whether Numba runs on its CPU simulator (NUMBA_ENABLE_CUDASIM=1)."""
    return internals.simulating()


def _capturing() -> bool:
    return bool(_capture.active) and _capture.current() is not None


def _guard_allocator(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _capturing():
            raise CaptureError(
                f"numba.cuda.{name}() allocates memory, which is not allowed while a CUDA graph is being "
                "captured on this thread: allocate the buffers before the capture and reuse them, or inside it with "
                "lazykern.arrays.empty(shape, dtype, stream=<the captured stream>) (a graph allocation node)"
            )
        return original(*args, **kwargs)

    return guarded


def _guard_synchronize(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _capturing():
            raise CaptureError(
                "numba.cuda.synchronize() waits for the device, which is not allowed while a CUDA graph is "
                "being captured on this thread: synchronize after the capture"
            )
        return original(*args, **kwargs)

    return guarded


def _guard_copy(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def guarded(self: Any, ary: Any = None, stream: Any = 0) -> Any:
        if not stream and _capturing():
            raise CaptureError(
                f"device array .{name}() without stream= is a synchronous copy, which is not allowed while "
                "a CUDA graph is being captured: pass stream=<the captured stream> with a pinned host buffer, "
                "or copy outside the capture"
            )
        return original(self, ary, stream)

    return guarded


def _guard_dispatcher_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(self: Any, args: Any, launch_config: Any) -> Any:
        if _capture.active:
            _capture.intercept(self, launch_config.stream, args, name=self.py_func.__name__)
        return original(self, args, launch_config)

    return call


class _SimKernelCall:
    """A configured simulator kernel, runnable later (a replay)."""

    __slots__ = ("kernel", "configuration", "getitem")

    def __init__(self, kernel: Any, configuration: tuple[Any, ...], getitem: Callable[..., Any]) -> None:
        self.kernel = kernel
        self.configuration = configuration
        self.getitem = getitem

    def __call__(self, *args: Any) -> Any:
        return self.getitem(self.kernel, self.configuration)(*args)


class _SimLaunch:
    """What ``kern[grid, block, stream]`` returns under the simulator while capturing."""

    __slots__ = ("call", "stream", "key")

    def __init__(self, call: _SimKernelCall) -> None:
        config = call.configuration
        self.call = call
        self.stream = config[2] if len(config) > 2 else 0
        self.key = (call.kernel, tuple(config[:2]) + tuple(config[3:]))

    def __call__(self, *args: Any) -> Any:
        kernel = self.call.kernel
        name = getattr(getattr(kernel, "py_func", None), "__name__", repr(kernel))
        if _capture.active and _capture.intercept(self.call, self.stream, args, name=name, key=self.key):
            return None
        return self.call(*args)


def _sim_getitem(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def getitem(self: Any, configuration: Any) -> Any:
        kernel = original(self, configuration)
        if not _capturing():
            return kernel
        return _SimLaunch(_SimKernelCall(kernel, tuple(configuration), original))

    return getitem


def _patches() -> list[tuple[Any, str, Callable[[Any], Any]]]:
    targets = internals.capture_patch_targets()
    patches: list[tuple[Any, str, Callable[[Any], Any]]] = [
        (owner, name, functools.partial(_guard_allocator, name)) for owner, name in targets["allocators"]
    ]
    patches += [(owner, name, _guard_synchronize) for owner, name in targets["synchronize"]]
    patches += [(owner, name, _sim_getitem) for owner, name in targets["sim_getitem"]]
    patches += [(owner, name, _guard_dispatcher_call) for owner, name in targets["launch"]]
    patches += [(owner, name, functools.partial(_guard_copy, name)) for owner, name in targets["copies"]]
    return patches


def install() -> None:
    """Put the wrappers in place (counted: nested and concurrent captures share them)."""
    global _installed
    with _lock:
        if _installed == 0:
            for owner, name, wrap in _patches():
                _saved.append(internals.patch(owner, name, wrap))
        _installed += 1


def uninstall() -> None:
    """Undo :func:`install` once the last open capture has ended."""
    global _installed
    with _lock:
        _installed -= 1
        if _installed == 0:
            while _saved:
                internals.unpatch(_saved.pop())
