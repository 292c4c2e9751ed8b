"""A device value that captured kernels read and the host updates between replays.

A graph bakes its kernels' arguments in. To change a value per replay without
recapturing, kernels take a 1-element device array and read ``step[0]``;
the host writes it with an asynchronous 4/8-byte copy enqueued on the same
stream before each replay, so the copy and the replay stay in order.

The copy's source must stay untouched until the copy has run, but ``set()``
returns at once. So the host side is a small ring of pinned slots, each with an
event recorded after the copy that read it: ``set()`` writes the next slot and
only waits (on that slot's event) when the ring has wrapped around onto a copy
still in flight, i.e. when the host runs ``ring`` sets ahead of the stream.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from cuda.bindings import driver as drv

from ..errors import CaptureError
from ..launch import _capture, _device
from . import _capture_hooks, _cugraph

DEFAULT_RING = 8


def _destroy_events(events: list[Any]) -> None:
    for ev in events:
        drv.cuEventDestroy(ev)


class DeviceScalar:
    """One value in device memory, updatable asynchronously on ``stream``.

    Pass it to kernels like an array (it has ``__cuda_array_interface__``, and
    ``.array`` is the Numba device array itself); kernels read ``step[0]``.
    Replay the graphs that read it on the same ``stream``: that is what orders
    each ``set()`` before the replay that follows it. It lives on the stream's
    device (``device``; the current one for the default stream). Not thread-safe.

    >>> step = DeviceScalar(np.int32(0), stream=stream)   # doctest: +SKIP
    >>> step.set(5); step.value                          # doctest: +SKIP
    np.int32(5)
    """

    def __init__(self, value: Any, *, stream: Any = None, dtype: Any = None, ring: int = DEFAULT_RING) -> None:
        from numba import cuda

        if dtype is None and not isinstance(value, (np.generic, np.ndarray)):
            raise ValueError(
                f"DeviceScalar({value!r}): a Python {type(value).__name__} has no fixed C type; "
                "pass a NumPy scalar such as np.int32(0) or give dtype="
            )
        initial = np.asarray(value, dtype=dtype)
        if initial.shape != ():
            raise ValueError(f"DeviceScalar takes one scalar value, got shape {initial.shape}")
        if ring < 1:
            raise ValueError(f"ring must be at least 1, got {ring}")
        self.dtype = initial.dtype
        self.stream = stream
        self._simulated = _capture_hooks.simulated()
        if self._simulated:
            self.device = None
            self.array = cuda.to_device(initial.reshape(1))
            return
        self.device = _device.resolve_or_current(_device.of_stream(stream))
        self._drv = drv
        self._check = _cugraph.check
        self._hstream = drv.CUstream(_device.stream_handle(stream))
        with _device.on(self.device):  # the value, its events and the stream: one context
            self.array = cuda.to_device(initial.reshape(1))
            self._host = cuda.pinned_array(ring, dtype=self.dtype)
            flags = int(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            self._events = [_cugraph.check(drv.cuEventCreate(flags), "cuEventCreate") for _ in range(ring)]
        self._hptr = self._host.ctypes.data
        self._dptr = _device.pointer(self.array)
        self._pending = [False] * ring
        self._next = 0
        weakref.finalize(self, _destroy_events, list(self._events))

    def set(self, value: Any) -> None:
        """Enqueue ``value`` on the stream; returns without waiting for it."""
        if _capture.active:
            rec = _capture.current()
            if rec is not None and rec.captures(self.stream):
                raise CaptureError(
                    "DeviceScalar.set() inside a capture on its own stream would bake one pinned slot into the "
                    "graph: call set() before each replay, outside the capture"
                )
        if self._simulated:
            self.array[0] = value
            return
        i = self._next
        self._next = (i + 1) % len(self._events)
        drv, check, event = self._drv, self._check, self._events[i]
        if self._pending[i]:
            check(drv.cuEventSynchronize(event), "cuEventSynchronize")
        self._host[i] = value
        size = self.dtype.itemsize
        token = _device.enter(self.device) if _device.several() else None  # a default stream: the current one's
        try:
            check(drv.cuMemcpyHtoDAsync(self._dptr, self._hptr + i * size, size, self._hstream), "cuMemcpyHtoDAsync")
            check(drv.cuEventRecord(event, self._hstream), "cuEventRecord")
        finally:
            _device.leave(token)
        self._pending[i] = True

    @property
    def value(self) -> Any:
        """The device value, after everything enqueued on the stream so far (synchronizes)."""
        if self._simulated:
            return self.array.copy_to_host()[0]
        out = np.empty(1, dtype=self.dtype)
        with _device.on(self.device):
            self.array.copy_to_host(out, stream=0 if self.stream is None else self.stream)
            self._check(self._drv.cuStreamSynchronize(self._hstream), "cuStreamSynchronize")
        return out[0]

    # -- what kernels and launchers see -----------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self._simulated:
            raise AttributeError("the simulator has no device pointers")
        # No "stream" entry: Numba would synchronize on it when importing, which capture forbids.
        return {"shape": (1,), "strides": None, "typestr": self.dtype.str, "data": (self._dptr, False), "version": 3}

    @property
    def device_ctypes_pointer(self) -> Any:
        return self.array.device_ctypes_pointer

    @property
    def shape(self) -> tuple[int]:
        return (1,)

    def __getitem__(self, index: Any) -> Any:
        # The simulator hands kernels this object itself, so `step[0]` must work on it.
        return self.array[index]

    def __len__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return f"<lazykern DeviceScalar {self.dtype.name}>"
