"""lazykern.launch.arrays: device arrays from the stream-ordered pool, usable inside a capture."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from lazykern import graph
from lazykern.launch import _device, arrays, memory
from tests._tropical_fakes import stage
from tests.test_graph import sim  # noqa: F401  (the simulator scenarios' fixture)


@pytest.fixture
def st(monkeypatch):
    st = stage(monkeypatch)
    monkeypatch.setattr(_device, "current", lambda: 0)
    monkeypatch.setattr(_device, "simulating", lambda: False)
    return st


def test_empty_is_a_numba_array_of_the_pool_freed_on_its_stream(st):
    a = arrays.empty((3, 5), np.int32, stream=7)
    assert (a.shape, a.dtype, a.strides) == ((3, 5), np.dtype(np.int32), (20, 4))
    ptr = a.device_ctypes_pointer.value
    assert st.allocs == {ptr: 60} and st.graph_allocs == []
    del a
    gc.collect()
    assert st.frees == [ptr] and st.allocs == {}


def test_inside_a_capture_arrays_are_graph_nodes_booked_in_its_pool(st, monkeypatch):
    zeroed = []
    monkeypatch.setattr(memory, "memset_zero", lambda ptr, n, stream: zeroed.append((ptr, n, stream)))
    pool = graph.CapturePool()
    memory.begin_capture(9, pool)
    try:
        tmp = arrays.zeros(100, np.float64, stream=9)
        out = arrays.empty((2, 2), stream=9)
        assert st.graph_allocs == [tmp.device_ctypes_pointer.value, out.device_ctypes_pointer.value]
        assert zeroed == [(tmp.device_ctypes_pointer.value, 800, 9)]
        assert (pool.allocations, pool.bytes) == (2, 816)
        del tmp  # dropped inside the capture: a free node of the graph
        gc.collect()
        assert pool.bytes == 16 and pool.outputs == 1
        pool.seal()
        with pytest.raises(graph.CaptureError, match="sealed"):
            arrays.empty(1, stream=9)
    finally:
        memory.end_capture(9)


def test_bad_arguments_say_what_to_pass(st):
    with pytest.raises(ValueError, match="like must be one of numba, cupy, torch"):
        arrays.empty(3, like="jax")
    with pytest.raises(ValueError, match="non-negative"):
        arrays.empty((2, -1))
    with pytest.raises(ValueError, match="non-negative"):
        arrays.empty((2.5,))
    with pytest.raises(TypeError, match="an int or a tuple of ints"):
        arrays.empty(None)
    with pytest.raises(TypeError, match="numeric dtype"):
        arrays.empty(3, object)
    with pytest.raises(TypeError, match="not a NumPy dtype"):
        arrays.empty(3, "no-such-dtype")
    assert st.allocs == {}  # nothing allocated by a refused call


def test_simulator_capture_reuses_the_arrays_made_inside_it(sim):  # noqa: F811
    r = sim("arrays_in_capture")
    assert r["first"] == [3, 4, 5, 6] and r["second"] == [12, 12, 12, 12]
    assert r["zeros"] == [[0, 0, 0], [0, 0, 0]]
    assert r["empty"] == [[2, 3], "float32"]
    assert r["like_cupy"][0] == "ValueError" and "simulator" in r["like_cupy"][1]
