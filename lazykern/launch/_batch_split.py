"""A host-resident batch of products computed on several GPUs, chunk by chunk.

One thread per device takes a contiguous share of the batch; per device ``slots``
streams take turns on chunks through pinned staging buffers, so the copy engine
moves chunk ``j + 1`` in while chunk ``j`` computes (a single stream per device
would serialize copies and compute; two is the least that overlaps them). What
computes one chunk is a *backend* passed in: this module knows no kernel family,
so the tropical API (``tropical.bmm(devices=...)``) and :mod:`lazykern.multigpu`
both build on it without importing each other.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _exit, _fork
from ..errors import LaunchError
from . import _device
from ._threads import run_each

Backend = Callable[..., Any]
_CHUNKS_PER_DEVICE = 8  # enough for copy/compute overlap, few enough to keep launches large
_MAX_CHUNK_BYTES = 256 << 20  # staging per slot, A + B + C


def device_count() -> int:
    """Number of CUDA devices Numba sees (0 without a driver)."""
    from numba import cuda

    try:
        return len(cuda.gpus) if cuda.is_available() else 0
    except Exception:  # no driver: no devices
        return 0


def resolve_devices(devices: Iterable[int] | None) -> list[int]:
    count = device_count()
    if devices is None:
        if count == 0:
            raise LaunchError("bmm_multi needs a CUDA device and found none; use tropical.reference on a CPU")
        return list(range(count))
    wanted = [int(d) for d in devices]
    if not wanted:
        raise ValueError("devices must name at least one GPU, got an empty list")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"devices must be distinct, got {wanted}")
    bad = [d for d in wanted if not 0 <= d < count]
    if bad:
        raise LaunchError(f"devices {bad} do not exist: this machine has {count} GPU(s), ordinals 0..{count - 1}")
    return wanted


def split_batch(batch: int, parts: int, weights: Sequence[float] | None = None) -> list[tuple[int, int]]:
    """Contiguous ``(start, stop)`` shares of ``range(batch)``, proportional to ``weights``.

    >>> split_batch(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    w = [1.0] * parts if weights is None else [float(x) for x in weights]
    if len(w) != parts or any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError(f"weights must be {parts} non-negative numbers with a positive sum, got {weights!r}")
    total = sum(w)
    bounds = [0]
    acc = 0.0
    for x in w[:-1]:
        acc += x
        bounds.append(min(batch, math.ceil(batch * acc / total - 1e-9)))  # remainders go to the first devices
    bounds.append(batch)
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


def default_chunk(share: int, item_bytes: int) -> int:
    """Batch items per transfer: about 8 chunks per device, at most 256 MiB of staging per chunk."""
    by_count = math.ceil(share / _CHUNKS_PER_DEVICE) if share else 1
    by_bytes = max(1, _MAX_CHUNK_BYTES // max(1, item_bytes))
    return max(1, min(by_count, by_bytes))


@dataclass
class _Slot:
    """Pinned host staging and device buffers for one in-flight chunk."""

    stream: Any
    key: tuple[Any, ...] = ()
    host_a: Any = None
    host_b: Any = None
    host_c: Any = None
    host_k: Any = None
    dev_a: Any = None
    dev_b: Any = None
    dev_c: Any = None
    dev_k: Any = None
    pending: tuple[int, int] | None = None
    result: Any = None

    def ensure(
        self,
        chunk: int,
        a_item: tuple[Any, ...],
        b_item: tuple[Any, ...],
        c_item: tuple[Any, ...],
        dtype: np.dtype,
        argmax: bool,
    ) -> None:
        from numba import cuda

        key = (chunk, a_item, b_item, c_item, dtype.str, argmax)
        if key == self.key:
            return
        self.host_a = cuda.pinned_array((chunk, *a_item), dtype=dtype)
        self.host_b = cuda.pinned_array((chunk, *b_item), dtype=dtype)
        self.host_c = cuda.pinned_array((chunk, *c_item), dtype=dtype)
        self.dev_a = cuda.device_array((chunk, *a_item), dtype=dtype, stream=self.stream)
        self.dev_b = cuda.device_array((chunk, *b_item), dtype=dtype, stream=self.stream)
        self.dev_c = cuda.device_array((chunk, *c_item), dtype=dtype, stream=self.stream)
        self.host_k = cuda.pinned_array((chunk, *c_item), dtype=np.int32) if argmax else None
        self.dev_k = cuda.device_array((chunk, *c_item), dtype=np.int32, stream=self.stream) if argmax else None
        self.key = key


class _DeviceState:
    """Streams and staging kept per device between calls: pinning memory is slow."""

    def __init__(self) -> None:
        self.lock = _fork.lock()
        self.slots: list[_Slot] = []

    def slots_for(self, count: int) -> list[_Slot]:
        from numba import cuda

        while len(self.slots) < count:
            self.slots.append(_Slot(stream=cuda.stream()))
            _exit.install()
        return self.slots[:count]


_states: dict[int, _DeviceState] = {}
_states_lock = _fork.lock()


def _state(dev: int) -> _DeviceState:
    with _states_lock:
        return _states.setdefault(dev, _DeviceState())


@_exit.on_exit("streams")
def release_buffers() -> None:
    """Drop the pinned and device staging buffers :func:`bmm_multi` keeps between calls (and their
    streams: at exit before the modules are unloaded, so their destruction is flushed then)."""
    with _states_lock:
        states = list(_states.values())
        _states.clear()
    for st in states:
        with st.lock:
            st.slots.clear()


def takes_out(backend: Backend) -> bool:
    try:
        params = inspect.signature(backend).parameters
    except (TypeError, ValueError):
        return False
    return "out" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _check_operands(A: Any, B: Any) -> tuple[np.ndarray, np.ndarray]:
    for name, x in (("A", A), ("B", B)):
        if hasattr(x, "__cuda_array_interface__"):
            raise TypeError(
                f"bmm_multi takes host (NumPy) operands and {name} is a device array; "
                "for data already on one GPU call tropical.bmm on that device"
            )
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 3 or B.ndim != 3 or A.shape[0] != B.shape[0] or A.shape[2] != B.shape[1]:
        raise ValueError(f"bmm_multi needs A (b, m, k) and B (b, k, n), got A {A.shape} and B {B.shape}")
    if A.dtype != B.dtype:
        raise TypeError(f"A and B must share a dtype, got {A.dtype} and {B.dtype}: cast one of them first")
    return A, B


def _check_out(out: Any, argmax: bool, shape: tuple[int, int, int], dtype: np.dtype) -> tuple[Any, Any]:
    """(C, K) to write into: the caller's (checked, before any device work) or new NumPy arrays."""
    if out is None:
        return np.empty(shape, dtype=dtype), (np.empty(shape, dtype=np.int32) if argmax else None)
    if argmax and not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError("with argmax=True, out must be a (C, argmax) pair of NumPy arrays")
    if not argmax and isinstance(out, (tuple, list)):
        raise TypeError("out must be one NumPy array (a (C, argmax) pair only with argmax=True)")
    pairs = [(out[0], dtype, "out[0]"), (out[1], np.dtype(np.int32), "out[1]")] if argmax else [(out, dtype, "out")]
    for arr, want, name in pairs:
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"bmm_multi writes host results: {name} must be a NumPy array, got {type(arr).__name__}")
        if arr.shape != shape or arr.dtype != want:
            raise ValueError(f"{name} must have shape {shape} and dtype {want}, got {arr.shape} {arr.dtype}")
        if not arr.flags.writeable:
            raise ValueError(f"{name} is read-only")
    return (out[0], out[1]) if argmax else (out, None)


def run(
    A: Any,
    B: Any,
    *,
    semiring: str = "maxplus",
    devices: Iterable[int] | None = None,
    chunk: int | None = None,
    slots: int = 2,
    weights: Sequence[float] | None = None,
    backend: Backend,
    argmax: bool = False,
    out: Any = None,
) -> Any:
    """``C[b] = backend(A[b], B[b])`` for a host batch, split across ``devices`` and pipelined
    (see :func:`lazykern.multigpu.bmm_multi`, which documents the arguments)."""
    A, B = _check_operands(A, B)
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    devs = resolve_devices(devices)
    fn = backend
    pass_out = takes_out(fn)
    batch, m, _ = A.shape
    n = B.shape[2]
    C, Kx = _check_out(out, argmax, (batch, m, n), A.dtype)
    shares = [(d, s) for d, s in zip(devs, split_batch(batch, len(devs), weights)) if s[1] > s[0]]
    item_bytes = (A[0].size + B[0].size + m * n) * A.dtype.itemsize + (4 * m * n if argmax else 0) if batch else 0
    job = _Job(A, B, C, Kx, fn, semiring, argmax, pass_out)

    def run(dev: int, lo: int, hi: int) -> None:
        size = chunk or default_chunk(hi - lo, item_bytes)
        state = _state(dev)
        with _device.on(dev), state.lock:
            ring = state.slots_for(slots)
            for slot in ring:
                slot.ensure(size, A.shape[1:], B.shape[1:], (m, n), A.dtype, argmax)
            try:
                for j, start in enumerate(range(lo, hi, size)):
                    slot = ring[j % slots]
                    job.drain(slot)
                    job.enqueue(slot, start, min(start + size, hi))
                for slot in ring:
                    job.drain(slot)
            finally:
                for slot in ring:
                    slot.pending = slot.result = None

    if len(shares) == 1:
        run(shares[0][0], *shares[0][1])
    elif shares:
        run_each([functools.partial(run, dev, lo, hi) for dev, (lo, hi) in shares], "lazykern-gpu")
    return (C, Kx) if argmax else C


@dataclass
class _Job:
    """One bmm_multi call: the host operands and results and how to compute a chunk."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    K: np.ndarray | None
    fn: Backend
    semiring: str
    argmax: bool
    pass_out: bool

    def enqueue(self, slot: _Slot, start: int, stop: int) -> None:
        count = stop - start
        stream = slot.stream
        np.copyto(slot.host_a[:count], self.A[start:stop])
        np.copyto(slot.host_b[:count], self.B[start:stop])
        dev_a, dev_b = slot.dev_a[:count], slot.dev_b[:count]
        dev_a.copy_to_device(slot.host_a[:count], stream=stream)
        dev_b.copy_to_device(slot.host_b[:count], stream=stream)
        kwargs: dict[str, Any] = {"semiring": self.semiring, "stream": stream}
        if self.argmax:
            kwargs["argmax"] = True
        if self.pass_out:
            kwargs["out"] = (slot.dev_c[:count], slot.dev_k[:count]) if self.argmax else slot.dev_c[:count]
        result = self.fn(dev_a, dev_b, **kwargs)
        parts = tuple(result) if self.argmax else (result,)
        hosts = (slot.host_c, slot.host_k) if self.argmax else (slot.host_c,)
        for part, host in zip(parts, hosts, strict=True):
            if not hasattr(part, "copy_to_host"):
                from numba import cuda

                part = cuda.as_cuda_array(part)
            part.copy_to_host(host[:count], stream=stream)
        slot.pending = (start, stop)
        slot.result = parts  # keeps backend-allocated outputs alive until their copies are done

    def drain(self, slot: _Slot) -> None:
        if slot.pending is None:
            return
        slot.stream.synchronize()
        start, stop = slot.pending
        np.copyto(self.C[start:stop], slot.host_c[: stop - start])
        if self.K is not None:
            np.copyto(self.K[start:stop], slot.host_k[: stop - start])
        slot.pending = slot.result = None
