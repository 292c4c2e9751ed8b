"""Graphed callables: a function of device arrays, captured per argument layout, then replayed.

Like PyTorch's ``make_graphed_callables``: one graph per layout of the
arguments (shapes, dtypes, strides, scalar values). Graphs store raw device
addresses, so a call with the same layout but other buffers re-captures and
applies the result as an update (``cuGraphExecUpdate``) of that layout's graph:
a replay never silently reads the buffers of an earlier call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CaptureError, LaunchError
from ..launch import _device
from ._device_scalar import DeviceScalar


def _address(value: Any) -> int:
    try:
        return _device.pointer(value)
    except TypeError:
        raise LaunchError(f"cannot find the device address of {type(value).__name__}") from None


def _is_device_array(value: Any) -> bool:
    return getattr(value, "__cuda_ndarray__", False) or hasattr(value, "__cuda_array_interface__")


def _describe(name: str, value: Any) -> tuple[Any, int | None]:
    """(cache key part, device address or None) of one argument of a graphed callable."""
    if isinstance(value, DeviceScalar):
        return ("scalar", name, value.dtype.str), _address(value.array)
    if isinstance(value, np.ndarray):
        raise CaptureError(
            f"argument {name} of a graphed function is a host (NumPy) array: graphs replay device work "
            "only; pass numba.cuda.to_device(a)"
        )
    if _is_device_array(value):
        cai = getattr(value, "__cuda_array_interface__", None)
        if cai is not None:
            layout = (tuple(cai["shape"]), cai["typestr"], cai.get("strides"))
        else:
            layout = (tuple(value.shape), np.dtype(value.dtype).str, tuple(value.strides))
        return ("array", name, *layout), _address(value)
    try:
        hash(value)
    except TypeError:
        raise LaunchError(
            f"argument {name} of a graphed function ({type(value).__name__}) is neither a device array nor a "
            "hashable value that could key its graph"
        ) from None
    return ("value", name, type(value).__name__, value), None


def _stream_device(stream: Any) -> int | None:
    return None if _device.simulating() else _device.resolve_or_current(_device.of_stream(stream))


class _Entry:
    __slots__ = ("graph", "addresses", "result")

    def __init__(self, graph: Any, addresses: tuple[int | None, ...], result: Any) -> None:
        self.graph = graph
        self.addresses = addresses
        self.result = result


class GraphedCallable:
    """A function of device arrays, captured per argument layout and replayed afterwards.

    One graph per (shapes, dtypes, strides, scalar values) of the arguments. A
    call with the same layout but other buffers re-captures and applies it as an
    update of that graph: a replay never reads the buffers of an earlier call.
    The first call of each layout captures and then replays (capture runs
    nothing), so Python side effects of ``fn`` happen at capture time only.
    """

    def __init__(self, fn: Callable[..., Any], stream: Any, make_graph: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.stream = stream
        self._make_graph = make_graph  # graph.Graph; passed in because graph.py imports this module
        self._entries: dict[tuple[Any, ...], _Entry] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        parts = [_describe(str(i), v) for i, v in enumerate(args)]
        parts += [_describe(k, kwargs[k]) for k in sorted(kwargs)]
        key = tuple(p[0] for p in parts)
        addresses = tuple(p[1] for p in parts)
        entry = self._entries.get(key)
        if entry is None or entry.addresses != addresses:  # a capture is coming: check before it
            self._check_devices(args, kwargs, entry.graph if entry is not None else None)
        if entry is None:
            graph = self._make_graph(self.stream)
            result = graph.update(lambda: self.fn(*args, **kwargs))
            entry = self._entries[key] = _Entry(graph, addresses, result)
        elif entry.addresses != addresses:
            entry.result = entry.graph.update(lambda: self.fn(*args, **kwargs))
            entry.addresses = addresses
        entry.graph.replay()
        return entry.result

    def _check_devices(self, args: tuple[Any, ...], kwargs: dict[str, Any], graph: Any) -> None:
        """Every device array on the stream's device: ValueError before anything is captured."""
        device = graph.device if graph is not None else _stream_device(self.stream)
        if device is None:  # simulated
            return
        named = [("the stream", device)]
        named += [(f"argument {i}", _device.of_array(v)) for i, v in enumerate(args)]
        named += [(f"argument {k}", _device.of_array(v)) for k, v in kwargs.items()]
        _device.common(named)

    @property
    def graphs(self) -> list[Any]:
        """One graph per argument layout seen so far."""
        return [e.graph for e in self._entries.values()]
