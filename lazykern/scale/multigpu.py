"""Several GPUs in one process: per-device kernels and a batch split across devices.

A :class:`~lazykern.Kernel` keeps one loaded function per device ordinal, while
its cache key names only the arch: two GPUs of one arch share a cubin (one
NVRTC compile, one module load each), and a mixed-arch machine gets one
entry per arch because :meth:`KernelFamily.get` keys by arch.
:func:`load_on_devices` does those loads ahead of a timed loop.

:func:`bmm_multi` runs a host-resident batch of tropical products on several
GPUs: one thread per device, contiguous shares of the batch, and per device
``slots`` streams that take turns on chunks (the pipeline is
:mod:`lazykern.launch._batch_split`, which ``tropical.bmm(devices=...)`` uses too).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import tropical
from ..families.family import KernelFamily
from ..launch import _device
from ..launch._batch_split import (
    Backend,
    default_chunk,
    device_count,
    release_buffers,
    resolve_devices,
    run,
    split_batch,
)
from ..launch.kernel import Kernel

__all__ = [
    "bmm_multi", "default_chunk", "device_count", "load_on_devices", "release_buffers",
    "split_batch",
]  # fmt: skip


def load_on_devices(
    family: KernelFamily, names: Iterable[str] | None = None, devices: Iterable[int] | None = None
) -> dict[int, list[Kernel]]:
    """Get (compiling at most once per arch) and load ``names`` on every device.

    Loading a cubin costs about 0.2 ms per kernel and device; doing it here
    keeps that out of the first timed launch on each GPU.
    """
    wanted = family.names() if names is None else list(names)
    loaded: dict[int, list[Kernel]] = {}
    for dev in resolve_devices(devices):
        with _device.on(dev):
            kernels = [family.get(name) for name in wanted]
            for kernel in kernels:
                kernel.function()
            loaded[dev] = kernels
    return loaded


def bmm_multi(A: Any, B: Any, *, backend: Backend | None = None, **options: Any) -> Any:
    """Batched tropical product ``C[b] = A[b] (x) B[b]`` split across GPUs; NumPy in, NumPy out.

    ``devices`` (default: all) get contiguous shares of the batch (``weights``
    skews them, e.g. for unequal GPUs). Each device stages ``chunk`` batch items
    at a time through pinned buffers on ``slots`` streams. ``argmax=True``
    returns ``(C, K)``; ``out`` is C (or the ``(C, K)`` pair), NumPy arrays
    written in place. ``backend(a, b, semiring=, stream=[, argmax=True][, out=])``
    computes one chunk on the current device and defaults to
    ``lazykern.tropical.bmm``; it receives ``out=`` when it accepts it.

    Keyword options, as for :func:`lazykern.launch._batch_split.run`: ``semiring="maxplus"``,
    ``devices=None``, ``chunk=None``, ``slots=2``, ``weights=None``, ``argmax=False``, ``out=None``.
    """
    return run(A, B, backend=backend if backend is not None else tropical.bmm, **options)
