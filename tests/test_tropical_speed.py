"""The tropical API's repeated-call path, stream-ordered memory and capture pools, on the CPU.

A fake driver stage (tests/_tropical_fakes.py) records launches, allocations and frees;
the kernels, plans and argument packing are the real ones.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from lazykern import graph
from lazykern.errors import CaptureError
from lazykern.launch import memory
from lazykern.tropical import _hot, api
from lazykern.tropical import plan as planner
from tests._tropical_fakes import FakeDeviceArray, stage


@pytest.fixture
def st(monkeypatch):
    return stage(monkeypatch)


def _count(monkeypatch, module, name):
    calls = []
    fn = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or fn(*a, **k))
    return calls


def test_a_repeated_call_is_a_cache_hit_that_plans_nothing(st, monkeypatch):
    A, B, C = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    api.matmul(A, B, out=C)
    plans = _count(monkeypatch, planner, "make_plan")
    reads = _count(monkeypatch, api._arrays, "as_operand")
    A2, B2, C2 = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    assert api.matmul(A2, B2, out=C2) is C2
    assert (plans, reads, len(_hot._entries)) == ([], [], 1)
    first, second = st.launches
    assert second[3][:4] == (A2.gpu_data.device_pointer, B2.gpu_data.device_pointer, C2.gpu_data.device_pointer, 0)
    assert second[3][4:] == first[3][4:] and second[1] is first[1]  # same scalars, same config


@pytest.mark.parametrize(
    "change",
    [
        lambda: (FakeDeviceArray((64, 32)), FakeDeviceArray((32, 64))),  # shape
        lambda: (FakeDeviceArray((64, 64)).T, FakeDeviceArray((64, 64))),  # strides (a transposed view)
        lambda: (FakeDeviceArray((64, 64), np.float64), FakeDeviceArray((64, 64), np.float64)),  # dtype
    ],
    ids=["shape", "strides", "dtype"],
)
def test_a_change_the_plan_depends_on_misses(st, change):
    api.matmul(FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64)))
    A, B = change()
    C = api.matmul(A, B)
    assert len(_hot._entries) == 2
    assert C.shape == (A.shape[0], B.shape[1]) and C.dtype == A.dtype
    assert st.launches[0][2] != st.launches[1][2] or st.launches[0][3][4:] != st.launches[1][3][4:]


def test_a_device_change_misses(monkeypatch):
    st = stage(monkeypatch, devices=2)
    api.matmul(FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64)))
    api.matmul(FakeDeviceArray((64, 64), device=1), FakeDeviceArray((64, 64), device=1))
    calls = list(_hot._entries.values())
    assert [c.device for c in calls] == [0, 1] and len(st.launches) == 2
    with pytest.raises(ValueError, match="device"):  # mixed devices: the general path refuses
        api.matmul(FakeDeviceArray((64, 64), device=0), FakeDeviceArray((64, 64), device=1))


def test_a_bad_out_still_raises_after_a_hit(st):
    A, B = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    api.matmul(A, B, out=FakeDeviceArray((64, 64)))
    with pytest.raises(ValueError, match="shape"):
        api.matmul(A, B, out=FakeDeviceArray((64, 65)))
    with pytest.raises(TypeError, match="dtype"):
        api.matmul(A, B, out=FakeDeviceArray((64, 64), np.float64))
    with pytest.raises(TypeError, match="argmax must be True or False"):
        api.matmul(A, B, argmax=1)


def test_outputs_are_stream_ordered_pool_buffers_freed_when_dropped(st):
    A, B = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 60))
    live = memory.stats()["live"]
    C, Ix = api.matmul(A, B, argmax=True, stream=7)  # C and argmax: one buffer, one allocate
    assert memory.stats()["live"] == live + 1 and len(st.allocs) == 1
    ((base, nbytes),) = st.allocs.items()
    c_bytes = 64 * 60 * 4
    ix_at = -(-c_bytes // 256) * 256  # argmax starts at the next 256-byte boundary
    assert (C.gpu_data.device_pointer, Ix.gpu_data.device_pointer) == (base, base + ix_at)
    assert nbytes == ix_at + 64 * 60 * 4 and st.launches[-1][3][2:4] == (base, base + ix_at)
    assert Ix.dtype == np.int32 and C.shape == Ix.shape == (64, 60) and C.dtype == np.float32
    keep = Ix.gpu_data  # what a view of argmax holds on to
    del C, Ix
    gc.collect()
    assert st.frees == []  # the view keeps the one buffer
    del keep
    gc.collect()
    assert st.frees == [base] and st.allocs == {} and memory.stats()["live"] == live


class _FakeStream:
    """A stream object whose handle dies with it (as Numba's and CuPy's do)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle


@pytest.mark.parametrize("calls", [1, 2])  # the general path, then the repeated-call path
def test_outputs_keep_their_stream_object_alive_until_freed(st, calls):
    A, B = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    s = _FakeStream(11)
    alive = weakref.ref(s)
    for _ in range(calls):
        C = api.matmul(A, B, stream=s)
    _hot.clear()  # the call cache keys on the stream too: only C may keep it now
    del s
    gc.collect()
    assert alive() is not None  # C's stream-ordered free still needs the stream
    del C
    gc.collect()
    assert alive() is None


def test_splitk_workspace_is_allocated_and_freed_on_the_call_stream(st):
    A, B = FakeDeviceArray((64, 4096)), FakeDeviceArray((4096, 64))
    C = api.matmul(A, B, argmax=False, stream=5)
    (main, reduce) = st.launches
    assert "splitk" in main[2][1] and reduce[2][1].startswith("reduce")
    w = main[3][2]
    assert w in st.frees and reduce[3][0] == w  # the reduce read it, then it went back
    assert set(st.allocs) == {C.gpu_data.device_pointer}


def test_backward_is_cached_and_allocates_gradients(st, monkeypatch):
    g, ix = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64), np.int32)
    gA, gB = api.matmul_backward(g, ix, (64, 32), (32, 64))
    plans = _count(monkeypatch, planner, "backward_plan")
    gA2, gB2 = api.matmul_backward(g, ix, [64, 32], (32, 64))
    assert plans == [] and gA2.shape == (64, 32) and gB2.shape == (32, 64)
    assert len(st.allocs) == 2  # (grad_A, grad_B) of each call share one buffer
    assert gB2.gpu_data.device_pointer - gA2.gpu_data.device_pointer == 64 * 32 * 4
    outs = (FakeDeviceArray((64, 32)), FakeDeviceArray((32, 64)))
    assert api.matmul_backward(g, ix, (64, 32), (32, 64), out=outs) == outs
    assert st.launches[-1][3][2:4] == (outs[0].gpu_data.device_pointer, outs[1].gpu_data.device_pointer)


def _memsets(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "memset_zero", lambda ptr, nbytes, stream: calls.append((ptr, nbytes)))
    return calls


@pytest.mark.parametrize("n", [32, 64, 128])
def test_a_small_backward_is_one_launch_and_no_memset(st, monkeypatch, n):
    """Launch-bound shapes: both gradients stored once by one kernel (no atomic split to zero for)."""
    memsets = _memsets(monkeypatch)
    g, ix = FakeDeviceArray((n, n)), FakeDeviceArray((n, n), np.int32)
    outs = (FakeDeviceArray((n, n)), FakeDeviceArray((n, n)))
    for _ in range(2):  # the general path, then the cached call
        api.matmul_backward(g, ix, (n, n), (n, n), out=outs)
    assert memsets == [] and len(st.launches) == 2
    _, config, fn, args = st.launches[-1]
    ptrs = [x.gpu_data.device_pointer for x in (g, ix, *outs)]
    assert fn[1] == "backward_ab_f32" and list(args[:4]) == ptrs
    ga = planner.backward_plan("a", 4, 1, n, n, n, False, sms=132)
    gb = planner.backward_plan("b", 4, 1, n, n, n, False, sms=132)
    assert not ga[2] and not gb[2] and config.grid == (ga[1] + gb[1], 1, 1)


def test_a_backward_that_adds_zeroes_first_one_memset_for_its_own_buffer(st, monkeypatch):
    memsets = _memsets(monkeypatch)
    g, ix = FakeDeviceArray((3, 64, 48)), FakeDeviceArray((3, 64, 48), np.int32)
    (gA, gB) = api.matmul_backward(g, ix, (64, 700), (3, 700, 48))  # a broadcast A: grad_A sums the batch
    assert memsets == [(gA.gpu_data.device_pointer, 64 * 700 * 4)] and len(st.launches) == 1
    g, ix = FakeDeviceArray((20, 10)), FakeDeviceArray((20, 10), np.int32)  # short rows: atomics for both
    gA, gB = api.matmul_backward(g, ix, (20, 70), (70, 10))
    ((base, nbytes),) = ((p, n) for p, n in st.allocs.items() if p == gA.gpu_data.device_pointer)
    assert memsets[1:] == [(base, nbytes)]  # both zeroed: the whole buffer at once
    outs = (FakeDeviceArray((20, 70)), FakeDeviceArray((70, 10)))
    api.matmul_backward(g, ix, (20, 70), (70, 10), out=outs)
    assert memsets[2:] == [
        (outs[0].gpu_data.device_pointer, 20 * 70 * 4),
        (outs[1].gpu_data.device_pointer, 70 * 10 * 4),
    ]
    assert st.launches[-1][3][-1] == planner.backward_plan("a", 4, 1, 20, 10, 70, False, sms=132)[1]  # blocks_a


def test_an_empty_grad_c_launches_nothing_and_zeroes_the_gradients(st, monkeypatch):
    memsets = _memsets(monkeypatch)
    g, ix = FakeDeviceArray((0, 6), strides=(24, 4)), FakeDeviceArray((0, 6), np.int32, strides=(24, 4))
    gA, gB = api.matmul_backward(g, ix, (0, 5), (5, 6))
    assert st.launches == [] and gA.shape == (0, 5) and gB.shape == (5, 6)
    assert memsets == [(gA.gpu_data.device_pointer, 5 * 6 * 4)]  # grad_A is empty: the buffer is grad_B


def test_bmm_is_cached(st):
    A, B = FakeDeviceArray((4, 64, 64)), FakeDeviceArray((64, 64))
    api.bmm(A, B)
    C = api.bmm(A, B)
    assert C.shape == (4, 64, 64) and len(_hot._entries) == 1 and len(st.launches) == 2


# -- pool bookkeeping and capture pools --------------------------------------------------------
def test_capture_pool_books_allocation_nodes_and_frees_inside_the_capture(st):
    pool = graph.CapturePool()
    memory.begin_capture(9, pool)
    try:
        inner = memory.Allocation(100, 0, 9)
        out = memory.Allocation(50, 0, 9)
        older_ptr = memory.allocate(10, 0, 3)  # another stream: an ordinary pool allocation
        assert st.graph_allocs == [inner.ptr, out.ptr] and pool.allocations == 2 and pool.bytes == 150
        del inner  # dropped inside the capture: its free is part of the graph
        assert pool.bytes == 50 and pool.outputs == 1
        memory.free(older_ptr, 10, 9)  # memory from outside the capture: deferred to its end
        assert older_ptr in st.allocs
    finally:
        memory.end_capture(9)
    assert older_ptr not in st.allocs and pool.outputs == 1
    with pytest.raises(CaptureError, match="already has a capture pool"):
        memory.begin_capture(9, pool)
        memory.begin_capture(9, pool)
    memory.end_capture(9)


def test_a_sealed_capture_pool_refuses_memory():
    pool = graph.CapturePool(max_bytes=100)
    pool.take(100)
    with pytest.raises(CaptureError, match="max_bytes=100"):
        pool.booked(1, 60)
        pool.take(60)
    pool.seal()
    with pytest.raises(CaptureError, match="sealed.*unseal"):
        pool.take(1)
    pool.unseal()
    pool.take(1)
    with pytest.raises(ValueError):
        graph.CapturePool(max_bytes=-1)


def test_the_api_allocates_inside_a_capture_from_its_pool(st):
    A, B = FakeDeviceArray((64, 4096)), FakeDeviceArray((4096, 64))
    pool = graph.CapturePool()
    memory.begin_capture(4, pool)
    try:
        C, Ix = api.matmul(A, B, argmax=True, stream=4)  # split-K: workspace + outputs, all graph nodes
    finally:
        memory.end_capture(4)
    assert pool.allocations == 2 and pool.outputs == 1 and len(st.graph_allocs) == 2  # (C, argmax) share one
    assert Ix.gpu_data.device_pointer - C.gpu_data.device_pointer == 64 * 64 * 4
    pool.seal()
    memory.begin_capture(4, pool)
    try:
        with pytest.raises(CaptureError, match="sealed"):
            api.matmul(A, B, stream=4)
    finally:
        memory.end_capture(4)


def test_streams_that_cannot_key_a_call_take_the_general_path(monkeypatch):
    class Unhashable:
        __hash__ = None
        handle = 11

    st = stage(monkeypatch, devices=2)
    A, B = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    monkeypatch.setattr(api._device, "of_stream", lambda s: None)
    for stream in (5, 5, Unhashable(), Unhashable()):
        api.matmul(A, B, stream=stream)
    assert _hot._entries == {} and [launch[0] for launch in st.launches] == [("stream", h) for h in (5, 5, 11, 11)]


def test_a_pool_is_mapped_for_every_peer_device(monkeypatch):
    """Pool memory is visible to other devices' contexts only where mapped (copy_to_host with GPU 0
    current on an output of GPU 1 failed on 2 H200s): each peer that can access it gets a mapping."""
    drv = memory._drv
    seen: dict[str, object] = {}
    monkeypatch.setattr(drv, "cuMemPoolCreate", lambda props: (0, "pool"))
    monkeypatch.setattr(drv, "cuMemPoolSetAttribute", lambda *a: (0,))
    monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (0, 3))
    monkeypatch.setattr(drv, "cuDeviceGet", lambda ordinal: (0, ordinal))
    monkeypatch.setattr(drv, "cuDeviceCanAccessPeer", lambda dev, owner: (0, int(dev != 2)))  # 2: no peer path
    monkeypatch.setattr(drv, "cuMemPoolSetAccess", lambda pool, descs, n: seen.update(descs=descs, n=n) or (0,))
    assert memory._pool_create(0) == "pool"
    assert seen["n"] == 1 and [d.location.id for d in seen["descs"]] == [1]
    assert all(d.flags == drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE for d in seen["descs"])
    monkeypatch.setattr(drv, "cuDeviceGetCount", lambda: (0, 1))
    seen.clear()
    memory._pool_create(0)
    assert seen == {}  # one GPU: nothing to map
