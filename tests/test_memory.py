"""lazykern/launch/memory.py: free lists per (device, stream, size), plain first blocks, the pool after.

On the fake driver stage (tests/_tropical_fakes.py) with reuse on: every driver allocation and
free is recorded, so what a call costs is counted, not timed.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from lazykern.launch import memory
from tests._tropical_fakes import stage


@pytest.fixture
def st(monkeypatch):
    st = stage(monkeypatch, reuse=True)
    made = []
    monkeypatch.setattr(memory, "_pool_create", lambda device: made.append(device) or ("pool", device))
    st.pools_made = made
    return st


def test_the_first_allocation_reserves_no_pool(st):
    ptr = memory.allocate(4096, 0, 7)
    assert st.allocs == {ptr: 4096} and st.pools_made == [] and memory._pools == {}
    assert memory.stats()["plain_bytes"] == 4096


def test_a_freed_buffer_is_popped_by_the_next_allocation_of_its_size_on_its_stream(st):
    ptr = memory.allocate(4096, 0, 7)
    memory.free(ptr, 4096, 7)
    assert st.frees == []  # kept: a plain block never goes back before exit
    assert memory.allocate(4096, 0, 9) != ptr  # another stream: not ordered after the free
    assert memory.allocate(1000, 0, 7) != ptr  # another size
    reused = memory.stats()["reused"]
    assert memory.allocate(4096, 0, 7) == ptr and memory.stats()["reused"] == reused + 1
    assert len(st.allocs) == 3  # the pop asked the driver for nothing


def test_past_the_plain_budget_the_pool_is_made_and_its_buffers_are_kept_too(st, monkeypatch):
    monkeypatch.setattr(memory, "PLAIN_BUDGET", 8192)
    plain = [memory.allocate(4096, 0, 7) for _ in range(2)]
    assert st.pools_made == []
    pooled = memory.allocate(4096, 0, 7)
    assert st.pools_made == [0] and pooled not in plain
    memory.free(pooled, 4096, 7)
    assert st.frees == [] and memory.stats()["cached_bytes"] == 4096
    assert memory.allocate(4096, 0, 7) == pooled and memory.stats()["cached_bytes"] == 0


def test_pool_buffers_over_the_cache_limit_go_back_to_the_driver(st, monkeypatch):
    monkeypatch.setattr(memory, "PLAIN_BUDGET", 0)
    monkeypatch.setattr(memory, "CACHE_BYTES", 6000)
    a, b = memory.allocate(4096, 0, 7), memory.allocate(4096, 0, 7)
    memory.free(a, 4096, 7)
    memory.free(b, 4096, 7)
    assert st.frees == [b] and memory.stats()["cached_bytes"] == 4096


def test_a_stream_someone_else_captures_gets_graph_memory_never_a_kept_buffer(st, monkeypatch):
    monkeypatch.setattr(memory, "PLAIN_BUDGET", 0)
    kept = memory.allocate(4096, 0, 7)
    memory.free(kept, 4096, 7)
    st.capturing.add(7)  # torch.cuda.graph or a raw cuStreamBeginCapture
    node = memory.allocate(4096, 0, 7)
    assert node != kept  # a pool allocation on the capturing stream: the driver makes it a graph node
    memory.free(node, 4096, 7)
    assert st.frees == [node]  # graph memory is never handed out again by a free list
    st.capturing.discard(7)
    assert memory.allocate(4096, 0, 7) == kept


def test_a_capture_ignores_the_free_lists_plain_blocks_are_never_graph_memory(st, monkeypatch):
    from lazykern.graph import CapturePool

    ptr = memory.allocate(4096, 0, 7)
    memory.free(ptr, 4096, 7)
    memory.begin_capture(7, CapturePool())
    try:
        inside = memory.allocate(4096, 0, 7)
    finally:
        memory.end_capture(7)
    assert inside != ptr and inside in st.graph_allocs


class _Stream:
    handle = 7


def test_a_kept_buffer_keeps_its_stream_object_alive(st):
    s = _Stream()
    alive = weakref.ref(s)
    a = memory.Allocation(4096, 0, 7, s)
    del s, a
    gc.collect()
    assert alive() is not None  # the buffer waits for reuse on that stream: the stream must not die
    memory.allocate(4096, 0, 7)  # popped: the list lets go of it
    gc.collect()
    assert alive() is None


def test_memory_freed_inside_its_capture_is_a_free_node_never_a_kept_buffer(st):
    from lazykern.graph import CapturePool

    memory.begin_capture(7, CapturePool())
    try:
        node = memory.allocate(4096, 0, 7)
        memory.free(node, 4096, 7)  # inside the capture: the graph's free node
    finally:
        memory.end_capture(7)
    assert st.frees == [node]  # a graph address is mapped only while the graph runs: reuse would fault
    assert memory.allocate(4096, 0, 7) != node and memory.stats()["cached_bytes"] == 0


def test_large_pool_buffers_go_back_to_the_pool_which_can_reuse_them_for_any_size(st, monkeypatch):
    monkeypatch.setattr(memory, "PLAIN_BUDGET", 0)
    big = memory.allocate(memory.KEEP_MAX + 1, 0, 7)
    memory.free(big, memory.KEEP_MAX + 1, 7)
    assert st.frees == [big] and memory.stats()["cached_bytes"] == 0


def test_numba_outputs_share_one_buffer_freed_once_after_the_last_array_or_view(st):
    """The first array's pointer owns the buffer, the second's borrows it (views, which need a
    driver, are checked on the GPU: test_tropical_speed_gpu.py)."""
    parts = (((4, 4), np.dtype("float32")), ((4, 4), np.dtype("int32")))
    offsets, nbytes = memory.layout(parts)
    templates = [
        (memory.numba_template(*p), o, memory.numba_template(*p)["alloc_size"]) for p, o in zip(parts, offsets)
    ]
    outs = memory.NumbaOutputs(templates, nbytes, 0)
    stream_object = object()
    (C, Ix), base, second = outs.new(0, 5, False, None, lambda: stream_object)
    assert C.device_ctypes_pointer.value == base and Ix.device_ctypes_pointer.value == second == base + offsets[1]
    assert C.shape == Ix.shape == (4, 4) and str(Ix._numba_type_) == "array(int32, 2d, C)"
    assert C.__dict__["_lazykern_device"] == 0
    frees = memory.stats()["frees"]
    del C
    gc.collect()
    assert memory.stats()["frees"] == frees  # Ix still uses the buffer
    del Ix
    gc.collect()
    assert memory.stats()["frees"] == frees + 1  # freed once, into the free list of stream 5
    assert memory._free_lists[(0, 5, nbytes)][-1] == (base, stream_object)
