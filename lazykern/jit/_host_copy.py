"""NumPy (host) arguments of a ``@lazy_kernel`` launch: copied in before, out after, synchronously.

As Numba does: a host array or record is copied to the device on the launch stream, the kernel
runs on the copy, and a writeable array (a record always, as Numba writes into its buffer) gets
the result back before the call returns; ``cuda.In`` skips the copy back, ``cuda.Out`` the copy in;
arrays and records inside tuples are copied the same way. The copies are
synchronous, which a CUDA-graph capture forbids: there they are refused with a CaptureError.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from cuda.bindings import driver

from ..errors import CaptureError


def launch_with_copies(
    launch: Callable[[list[Any]], None],
    values: list[Any],
    hosts: Sequence[tuple[int, Any, str]],
    *,
    stream: Any,
    core_stream: Any,
    name: str,
) -> None:
    """``launch(values)`` with each ``(index, host array or record, direction)`` of ``hosts`` replaced
    by a device copy; the direction is "host" (copy in and out), "host-in", "host-out" or
    "host-nested" (a tuple whose arrays and records are copied in and out).

    ``stream`` is the launch stream as the user gave it, ``core_stream`` its cuda.core Stream.
    """
    from numba import cuda

    refuse_if_capturing(core_stream, hosts, name)
    nstream = numba_stream(stream)
    copies: list[tuple[Any, Any]] = []
    for i, host, direction in hosts:
        values[i] = _to_device(host, direction, nstream, copies)
    launch(values)
    for host, dev in copies:
        dev.copy_to_host(host, stream=nstream)
    if nstream:
        nstream.synchronize()
    else:
        cuda.synchronize()


def _to_device(host: Any, direction: str, nstream: Any, copies: list[tuple[Any, Any]]) -> Any:
    """The device copy of ``host`` (a tuple's arrays and records each copied: "host-nested");
    what must be copied back after the launch is appended to ``copies``."""
    from numba import cuda

    if direction == "host-nested":
        if not isinstance(host, tuple):
            return _to_device(host, "host", nstream, copies) if isinstance(host, (np.ndarray, np.void)) else host
        items = [_to_device(v, "host-nested", nstream, copies) for v in host]
        return type(host)(*items) if hasattr(host, "_fields") else tuple(items)  # namedtuples keep their class
    if direction == "host-out":
        dev = cuda.device_array_like(host, stream=nstream)
    else:
        dev = cuda.to_device(host, stream=nstream)
    # Numba writes a record's result into its buffer even where NumPy calls it read-only.
    if direction != "host-in" and (isinstance(host, np.void) or host.flags.writeable):
        copies.append((host, dev))
    return dev


def numba_stream(stream: Any) -> Any:
    """The launch stream as a Numba stream (or 0), for copying host arrays."""
    if stream is None or stream == 0:
        return 0
    if hasattr(stream, "handle"):
        return stream
    from numba import cuda

    return cuda.external_stream(int(stream))


def refuse_if_capturing(core_stream: Any, hosts: Sequence[tuple[int, Any, str]], name: str) -> None:
    """Host arrays need synchronous copies, which break CUDA-graph capture: refuse them there."""
    err, status = driver.cuStreamIsCapturing(driver.CUstream(int(core_stream.handle)))
    capturing = status != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
    if err == driver.CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT or (err == driver.CUresult.CUDA_SUCCESS and capturing):
        which = ", ".join(str(h[0]) for h in hosts)
        raise CaptureError(
            f"kernel {name!r} got NumPy (host) arrays as arguments {which} while a CUDA "
            "graph is being captured; copies to and from the host cannot be captured. Pass device arrays "
            "(numba.cuda.to_device(a), CuPy, torch) instead."
        )
