"""Stream-ordered device memory for everything lazykern allocates.

Memory is allocated on the stream that will use it and freed on that stream when
its Python owner is dropped, so a buffer is reused only after the work queued
before the free has run. No host synchronization anywhere. Three tiers:

* a free list per (device, stream, size): a freed buffer waits there and the next
  allocation of that size on that stream pops it (no driver call: allocation at
  launch speed). Reuse on the freeing stream is ordered after the free, which is
  the rule the driver's pools follow too;
* the first allocations of a process (up to :data:`PLAIN_BUDGET` bytes) are plain
  ``cuMemAlloc`` blocks of their own size: nothing is reserved up front (creating a
  pool and its first allocation cost 8-13 ms on an H100, more than the whole
  first product). They are never handed back to the driver before exit (a
  ``cuMemFree`` could synchronize), only reused through the free list;
* past that budget, the driver's memory pools (``cuMemAllocFromPoolAsync`` /
  ``cuMemFreeAsync``): one pool per device, owned by lazykern, made on first need,
  that keeps freed memory cached (release threshold: never). Buffers the free list
  does not keep (larger than :data:`KEEP_MAX`, or over :data:`CACHE_BYTES`) go back to it.

Inside a lazykern capture (:func:`lazykern.graph.capture`) the same call
becomes a graph allocation node (``cuMemAllocAsync`` on the capturing stream)
booked in the capture's :class:`~lazykern.graph.CapturePool`; a buffer dropped
inside the capture becomes a free node. Buffers that outlive the capture are
the graph's outputs: each replay writes them at the same address (graphs are
instantiated with auto-free-on-launch, so replays do not accumulate memory).

A capture begun by someone else (torch.cuda.graph, a raw cuStreamBeginCapture) gets
allocation nodes too (``cuMemAllocFromPoolAsync`` on a capturing stream makes one), without a
pool's book.

Results are handed back as the caller's array kind: :func:`numba_arrays`,
:func:`cupy_arrays`, :func:`torch_tensors` put all the outputs of a call in one :class:`Allocation`
(one allocate, one free). Outside a capture, where the call runs on CuPy's or torch's current
stream, :func:`cupy_arrays_own` and :func:`torch_tensors_own` take the library's own caching
allocator instead (its pool orders reuse on that stream); on any other stream the pool path keeps
the buffer's reuse ordered after the call's work.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from cuda.bindings import driver as _drv

from .. import _exit, _fork
from .._numba import internals
from ..errors import CaptureError, DriverError
from . import _device

log = logging.getLogger("lazykern")

_RELEASE_NEVER = 2**64 - 1
_pools: dict[int, Any] = {}  # device ordinal -> CUmemoryPool
_pool_lock = _fork.lock()
_captures: dict[int, Any] = {}  # capturing stream handle -> CapturePool of that capture
# frees of memory from before a capture, on a capturing stream: (ptr, stream, nbytes, owner, device)
_deferred: list[tuple[int, int, int, Any, int]] = []
_graph_outputs: set[int] = set()  # allocated inside a capture that ended: backed only once the graph ran

PLAIN_BUDGET = 32 << 20  # bytes of plain cuMemAlloc blocks before a pool is made (0: always the pool)
CACHE_BYTES = 64 << 20  # bytes of pool buffers the free lists may hold (0: every free goes to the driver)
KEEP_MAX = 1 << 20  # larger pool buffers go back to the pool: their calls are not launch-bound, and a
# buffer kept for one size cannot serve another (the pool can), so keeping them would raise the peak
_PER_SIZE = 64  # buffers kept per (device, stream, size)
_free_lists: dict[tuple[int, int, int], list[tuple[int, Any]]] = {}  # -> [(address, stream owner)]
_held = {"plain": 0, "cached": 0}  # bytes of plain blocks made, bytes of pool buffers in free lists
_plain: set[int] = set()  # addresses of plain blocks: always kept, never freed before exit
_foreign_nodes: set[int] = set()  # allocated while someone else captured the stream: graph memory


@_fork.on_child
def _forget_parent_pools() -> None:
    # These handles and addresses belong to the parent's CUDA context, never valid in a forked child.
    _pools.clear()
    _captures.clear()
    _deferred.clear()
    _graph_outputs.clear()
    _free_lists.clear()
    _plain.clear()
    _foreign_nodes.clear()
    _held.update(plain=0, cached=0)


# live = allocations - frees, live bytes = allocated - freed: two counts per call, not four
_stats = {"allocations": 0, "frees": 0, "allocated": 0, "freed": 0, "reused": 0}


# -- driver calls (tests replace these with fakes) ---------------------------------------
def _pool_create(device: int) -> Any:
    props = _drv.CUmemPoolProps()
    props.allocType = _drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    props.location.type = _drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    props.location.id = device
    err, pool = _drv.cuMemPoolCreate(props)
    _check(err, f"cuMemPoolCreate on device {device}")
    attr = _drv.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
    (err,) = _drv.cuMemPoolSetAttribute(pool, attr, _drv.cuuint64_t(_RELEASE_NEVER))
    _check(err, f"cuMemPoolSetAttribute(RELEASE_THRESHOLD) on device {device}")
    peers = _peers(device)
    if peers:
        # Pool memory is mapped only for its own device unless told otherwise, unlike cuMemAlloc's:
        # a copy issued from another device's context (Numba's copy_to_host with GPU 0 current, a
        # peer kernel) would fail with CUDA_ERROR_INVALID_VALUE. Map it for every peer that can.
        descs = []
        for peer in peers:
            desc = _drv.CUmemAccessDesc()
            desc.location.type = _drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            desc.location.id = peer
            desc.flags = _drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
            descs.append(desc)
        (err,) = _drv.cuMemPoolSetAccess(pool, descs, len(descs))
        _check(err, f"cuMemPoolSetAccess for devices {peers} on device {device}'s pool")
    return pool


def _peers(device: int) -> list[int]:
    """The other devices that can map ``device``'s memory (peer access)."""
    err, count = _drv.cuDeviceGetCount()
    if int(err) != 0 or count < 2:
        return []
    err, owner = _drv.cuDeviceGet(device)
    _check(err, f"cuDeviceGet({device})")
    out = []
    for peer in range(count):
        if peer == device:
            continue
        err, dev = _drv.cuDeviceGet(peer)
        if int(err) != 0:
            continue
        err, can = _drv.cuDeviceCanAccessPeer(dev, owner)
        if int(err) == 0 and can:
            out.append(peer)
    return out


def _alloc_from_pool(nbytes: int, pool: Any, stream: int) -> int:
    err, ptr = _drv.cuMemAllocFromPoolAsync(nbytes, pool, stream)
    if err:
        _check(err, f"cuMemAllocFromPoolAsync of {nbytes} bytes on stream {stream:#x}")
    return int(ptr)


def _alloc_in_graph(nbytes: int, stream: int) -> int:
    err, ptr = _drv.cuMemAllocAsync(nbytes, stream)
    if err:
        _check(err, f"cuMemAllocAsync of {nbytes} bytes inside the capture of stream {stream:#x}")
    return int(ptr)


def _free_async(ptr: int, stream: int) -> int:
    return int(_drv.cuMemFreeAsync(ptr, stream)[0])


def _alloc_plain(nbytes: int) -> int:
    # cuMemAlloc is an unsafe call while another thread captures in global mode: this thread
    # relaxes its mode for the call (it touches no stream), as kernel loading does.
    relaxed = _drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    swapped, previous = _drv.cuThreadExchangeStreamCaptureMode(relaxed)
    try:
        err, ptr = _drv.cuMemAlloc(nbytes)
    finally:
        if int(swapped) == 0:
            _drv.cuThreadExchangeStreamCaptureMode(previous)
    if err:
        _check(err, f"cuMemAlloc of {nbytes} bytes")
    return int(ptr)


_CAPTURE_NONE = _drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def _capturing(stream: int) -> bool:
    """Whether someone (torch.cuda.graph, a raw cuStreamBeginCapture) captures ``stream``: then an
    allocation must be a graph node, never a buffer of the free list."""
    err, status = _drv.cuStreamIsCapturing(stream)
    return int(err) == 0 and status != _CAPTURE_NONE


def _check(err: Any, what: str) -> None:
    if int(err) != 0:
        raise DriverError(f"{what} failed: {err}; the device may be out of memory or the stream invalid")


# -- allocate / free -------------------------------------------------------------------
def pool(device: int) -> Any:
    """lazykern's memory pool of ``device`` (created on first use, with ``device`` current)."""
    p = _pools.get(device)
    if p is None:
        with _pool_lock:
            p = _pools.get(device)
            if p is None:
                p = _pools[device] = _pool_create(device)
                _exit.install()
    return p


def _freed_with_the_process(ptr: int, stream: int) -> int:
    return 0


@_exit.on_exit("memory")
def destroy_pools() -> None:
    """Trim and destroy lazykern's pools, each after its device's queued work; buffers whose owners
    die later (interpreter teardown) are not freed one by one: they go with the process."""
    global _free_async
    with _pool_lock:
        pools = dict(_pools)
        _pools.clear()
    _free_async = _freed_with_the_process
    _free_lists.clear()  # their buffers (and plain blocks) go with the process
    for device, p in pools.items():
        try:
            with _device.on(device):
                _check(_drv.cuCtxSynchronize()[0], f"cuCtxSynchronize on device {device}")
                _check(_drv.cuMemPoolTrimTo(p, 0)[0], f"cuMemPoolTrimTo on device {device}")
                _check(_drv.cuMemPoolDestroy(p)[0], f"cuMemPoolDestroy on device {device}")
        except Exception as exc:  # at exit: the next device still gets its turn
            log.debug("lazykern exit: pool of device %d: %s", device, exc)


def allocate(nbytes: int, device: int, stream: int) -> int:
    """A device address of ``nbytes`` (at least 1) usable by work queued on ``stream`` from now on.

    Inside a lazykern capture of ``stream`` this is an allocation node of the graph, booked in
    its CapturePool (CaptureError when that pool is sealed). Free it with :func:`free` on the
    same stream, or let an :class:`Allocation` do it.
    """
    if nbytes.__class__ is not int or nbytes < 1:
        nbytes = max(int(nbytes), 1)
    cap = _captures.get(stream) if _captures else None
    if cap is not None:
        cap.take(nbytes)
        ptr = _alloc_in_graph(nbytes, stream)
        cap.booked(ptr, nbytes)
    else:
        kept = _free_lists.get((device, stream, nbytes))
        capturing = _capturing(stream)
        ptr = 0
        if kept and not capturing:
            try:
                ptr = kept.pop()[0]
            except IndexError:  # another thread took the last one since the check
                pass
            else:
                if ptr not in _plain:
                    _held["cached"] -= nbytes
                _stats["reused"] += 1
        if not ptr:
            ptr = _new(nbytes, device, stream, capturing)
    st = _stats
    st["allocations"] += 1
    st["allocated"] += nbytes
    return ptr


def _new(nbytes: int, device: int, stream: int, capturing: bool) -> int:
    """A buffer no free list had: a plain block while the budget lasts and no pool exists, else
    the device's pool (a graph node while someone else captures ``stream``)."""
    p = _pools.get(device)
    if p is None and not capturing and _held["plain"] + nbytes <= PLAIN_BUDGET:
        ptr = _alloc_plain(nbytes)
        _plain.add(ptr)
        _held["plain"] += nbytes
        return ptr
    ptr = _alloc_from_pool(nbytes, p if p is not None else pool(device), stream)
    if capturing:
        _foreign_nodes.add(ptr)
    return ptr


def free(ptr: int, nbytes: int, stream: int, owner: Any = None, device: int = 0) -> None:
    """Give ``ptr`` back, ordered after the work queued so far on ``stream`` (its allocating stream):
    into the free list of (``device``, ``stream``, size), whose next allocation reuses it, or to the
    driver (``owner``: the stream's object, kept alive while the buffer waits in a free list).

    During a capture of ``stream``: memory allocated inside it becomes a free node of the graph;
    older memory is freed once the capture ends (a free node of outside memory is not allowed).
    """
    captured = False  # a graph node of this stream's capture: its free is a free node, never kept
    if _captures:
        cap = _captures.get(stream)
        if cap is not None:
            if not cap.released(ptr):
                _deferred.append((ptr, stream, nbytes, owner, device))
                return
            captured = True
    size = nbytes if nbytes.__class__ is int and nbytes > 0 else max(int(nbytes), 1)
    st = _stats
    st["frees"] += 1
    st["freed"] += size
    if not captured:
        if ptr in _plain:  # a plain block always waits in its free list (the common case: inline)
            key = (device, stream, size)
            kept = _free_lists.get(key)
            if kept is None:
                kept = _free_lists.setdefault(key, [])
            kept.append((ptr, owner))
            return
        if _keep(ptr, size, stream, owner, device):
            return
    err = _free_async(ptr, stream)
    if _graph_outputs and ptr in _graph_outputs:
        _graph_outputs.discard(ptr)
        if err:  # the graph never ran (or the capture failed): the address was never backed
            log.debug("graph output %#x dropped before its graph ran (CUresult %d)", ptr, err)
        return
    if err:  # from a finalizer: nobody to raise to
        log.warning("cuMemFreeAsync of %#x on stream %#x failed with CUresult %d", ptr, stream, err)


def _keep(ptr: int, size: int, stream: int, owner: Any, device: int) -> bool:
    """Put pool buffer ``ptr`` in its free list when it may wait there (up to :data:`KEEP_MAX`
    within :data:`CACHE_BYTES`; graph memory never); False: the driver frees it."""
    if (_foreign_nodes and ptr in _foreign_nodes) or (_graph_outputs and ptr in _graph_outputs):
        _foreign_nodes.discard(ptr)
        return False
    if size > KEEP_MAX or _held["cached"] + size > CACHE_BYTES:
        return False
    kept = _free_lists.setdefault((device, stream, size), [])
    if len(kept) >= _PER_SIZE:
        return False
    kept.append((ptr, owner))
    _held["cached"] += size
    return True


def memset_zero(ptr: int, nbytes: int, stream: int) -> None:
    """Zero ``nbytes`` at ``ptr``, ordered on ``stream`` (no host synchronization; a memset node
    inside a capture)."""
    if nbytes == 0:
        return
    (err,) = _drv.cuMemsetD8Async(ptr, 0, nbytes, stream)
    if int(err) != 0:
        raise DriverError(f"cuMemsetD8Async of {nbytes} bytes at {ptr:#x} failed: {err}")


def begin_capture(stream: int, capture_pool: Any) -> None:
    """Route allocations on ``stream`` to ``capture_pool`` until :func:`end_capture`."""
    if stream in _captures:
        raise CaptureError(f"stream {stream:#x} already has a capture pool: end that capture first")
    _captures[stream] = capture_pool


def end_capture(stream: int) -> None:
    """Stop routing ``stream``'s allocations to its capture pool; run the frees it deferred."""
    cap = _captures.pop(stream, None)
    if cap is not None:
        _graph_outputs.update(cap.live_addresses())
    keep = [d for d in _deferred if d[1] in _captures]
    todo = [d for d in _deferred if d[1] not in _captures]
    _deferred[:] = keep
    for ptr, s, nbytes, owner, device in todo:
        free(ptr, nbytes, s, owner, device)


def stats() -> dict[str, int]:
    """Counters of lazykern's allocations: ``allocations``, ``frees``, ``live``, ``live_bytes``,
    ``reused`` (allocations a free list served), and the bytes held: ``plain_bytes`` (plain
    blocks made), ``cached_bytes`` (pool buffers waiting in free lists)."""
    st = _stats
    return {
        "allocations": st["allocations"],
        "frees": st["frees"],
        "live": st["allocations"] - st["frees"],
        "live_bytes": st["allocated"] - st["freed"],
        "reused": st["reused"],
        "plain_bytes": _held["plain"],
        "cached_bytes": _held["cached"],
    }


class Allocation:
    """Owns one stream-ordered buffer; dropping it frees the buffer on its stream."""

    __slots__ = ("ptr", "nbytes", "stream", "device", "owner", "__weakref__")

    def __init__(self, nbytes: int, device: int, stream: int, owner: Any = None) -> None:
        self.ptr = allocate(nbytes, device, stream)
        self.nbytes = nbytes
        self.stream = stream
        self.device = device
        # The stream's Python object (Numba, CuPy, torch, cuda.core): kept alive so the free below
        # never runs on a destroyed stream (a segfault in the driver), whatever order objects die in.
        self.owner = owner

    def __del__(self) -> None:
        try:
            ptr = self.ptr
        except AttributeError:  # allocate() raised in __init__: nothing to free
            return
        if ptr:
            self.ptr = 0
            try:
                free(ptr, self.nbytes, self.stream, self.owner, self.device)
            except Exception as exc:  # interpreter shutdown or a dead context: nothing to raise to
                log.debug("freeing %#x failed: %s", ptr, exc)


# -- the caller's array kinds ------------------------------------------------------------
Parts = tuple[tuple[tuple[int, ...], np.dtype], ...]  # (shape, dtype) of each array of one buffer


def layout(parts: Parts) -> tuple[tuple[int, ...], int]:
    """(offsets, total bytes) of ``parts`` in one buffer, each array at a 256-byte boundary (as
    cudaMalloc aligns): the outputs of a call share one allocation, so one allocate and one free."""
    offsets, end = [], 0
    for shape, dtype in parts:
        end = -(-end // 256) * 256
        offsets.append(end)
        end += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return tuple(offsets), end


def numba_template(shape: tuple[int, ...], dtype: np.dtype) -> dict[str, Any]:
    """The attributes of an empty C-contiguous Numba device array of ``shape``, made once per
    launch plan; :func:`numba_arrays` copies them (3 us of DeviceNDArray set-up becomes 0.3 us)."""
    dtype = np.dtype(dtype)
    strides, step = [], dtype.itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return internals.device_array_template(tuple(shape), tuple(reversed(strides)), dtype.itemsize, dtype)


class NumbaOutputs:
    """Numba device arrays of fixed ``parts`` (:func:`numba_template`, :func:`layout`: (template,
    offset, size) each; one or two) in one new stream-ordered buffer per :meth:`new`, at launch
    speed: the first array's pointer owns the buffer and frees it (:func:`free`, stream-ordered)
    when the last array or view over the buffer goes; how they are built is made once per stream."""

    __slots__ = ("parts", "nbytes", "device", "_made")

    def __init__(self, parts: Sequence[tuple[dict[str, Any], int, int]], nbytes: int, device: int) -> None:
        self.parts = [(dict(t, _lazykern_device=device), o, s) for t, o, s in parts]
        self.nbytes = nbytes
        self.device = device
        self._made: tuple[int, Any, Any] | None = None  # (stream, context, the arrays' maker)

    def new(self, device: int, stream: int, current: bool, context: Any, owner: Any) -> tuple[Any, int, int]:
        """(the array or the pair, the buffer's address, the second's or 0) for work on ``stream``
        (of :attr:`device`, whatever ``device`` says; ``current`` is not used: Numba has no
        allocator of its own), ``context`` being Numba's context of the device and ``owner()`` the
        object of ``stream``, kept alive as long as the buffer. The signature is ``Outs.new``'s."""
        made = self._made
        if made is None or made[0] != stream or made[1] is not context:
            nbytes, device = self.nbytes, self.device
            take = functools.partial(allocate, nbytes, device, stream)  # a C call: no Python frame
            make = internals.device_array_maker(self.parts, context, take, free, (nbytes, stream, owner(), device))
            made = self._made = (stream, context, make)
        return made[2]()


def numba_arrays(parts: Sequence[tuple[dict[str, Any], int, int]], nbytes: int, device: int, stream: int,
                 context: Any, owner: Any = None) -> tuple[list[Any], int]:  # fmt: skip
    """(arrays, address of the buffer): Numba device arrays, one per (template, offset, size) of
    ``parts`` (:func:`numba_template`, :func:`layout`; one or two), in one new stream-ordered
    buffer of ``nbytes``; ``context`` is Numba's context of ``device``, ``owner`` the object of
    ``stream`` (kept alive as long as the buffer). The buffer is freed when the last view of any
    array in it goes. A one-off: a call made again and again keeps a :class:`NumbaOutputs`."""
    made, address, _ = NumbaOutputs(parts, nbytes, device).new(device, stream, False, context, lambda: owner)
    return (list(made) if len(parts) == 2 else [made]), address


def on_library_stream(stream: int, current: bool) -> bool:
    """Whether outputs for work on ``stream`` may come from CuPy's or torch's own allocator:
    only where ``stream`` is that library's ``current`` stream of the device (its pool reuses a
    freed buffer for later work on that stream, so after ours; on another stream the buffer could
    be handed out again while our kernel still writes it), and not inside a lazykern capture
    (allocations there are graph nodes booked in its pool)."""
    return current and stream not in _captures


def cupy_arrays(parts: Parts, offsets: Sequence[int], nbytes: int, device: int, stream: int,
                owner: Any = None) -> tuple[list[Any], list[int]]:  # fmt: skip
    """(arrays, addresses): CuPy arrays of ``parts`` in one new stream-ordered buffer."""
    import cupy

    alloc = Allocation(nbytes, device, stream, owner)
    mem = cupy.cuda.UnownedMemory(alloc.ptr, max(nbytes, 1), alloc, device)
    arrays = [cupy.ndarray(s, d, cupy.cuda.MemoryPointer(mem, o)) for (s, d), o in zip(parts, offsets)]
    return arrays, [alloc.ptr + o for o in offsets]


def cupy_arrays_own(parts: Parts, offsets: Sequence[int], nbytes: int) -> tuple[list[Any], list[int]]:
    """(arrays, addresses): CuPy arrays of ``parts`` in one buffer from CuPy's allocator, on the
    current device and stream (:func:`on_library_stream` says when that is right)."""
    import cupy

    mem = cupy.cuda.alloc(nbytes)
    arrays = [cupy.ndarray(s, d, mem if o == 0 else mem + o) for (s, d), o in zip(parts, offsets)]
    base = mem.ptr
    return arrays, [base + o for o in offsets]


class _CudaArray:
    """A ``__cuda_array_interface__`` view into an Allocation, for torch.as_tensor."""

    __slots__ = ("__cuda_array_interface__", "alloc")

    def __init__(self, alloc: Allocation, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.alloc = alloc
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": np.dtype(dtype).str,
            "data": (alloc.ptr + offset, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }


def torch_tensors(parts: Parts, offsets: Sequence[int], nbytes: int, device: int, stream: int,
                  owner: Any = None) -> tuple[list[Any], list[int]]:  # fmt: skip
    """(tensors, addresses): torch tensors of ``parts`` in one new stream-ordered buffer (a graph
    allocation inside a capture), shared with torch through the CUDA Array Interface."""
    import torch

    alloc = Allocation(nbytes, device, stream, owner)
    where = f"cuda:{device}"
    tensors = [torch.as_tensor(_CudaArray(alloc, o, s, d), device=where) for (s, d), o in zip(parts, offsets)]
    return tensors, [alloc.ptr + o for o in offsets]


def torch_tensors_own(parts: Sequence[tuple[tuple[int, ...], Any]], device: Any) -> tuple[list[Any], list[int]]:
    """(tensors, addresses) from torch's caching allocator on its current stream (:func:`on_library_stream`
    says when that is right); ``parts`` carry torch dtypes, ``device`` is a torch.device."""
    import torch

    tensors = [torch.empty(s, dtype=d, device=device) for s, d in parts]
    return tensors, [t.data_ptr() for t in tensors]
