from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

from lazykern.errors import CaptureError
from lazykern.graph import _capture_hooks
from lazykern.launch import _capture

ROOT = Path(__file__).resolve().parent.parent


# -- simulator: every scenario of tests/graph_sim_scenarios.py in one subprocess ----------------
@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    env = dict(
        os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    tmp = tmp_path_factory.mktemp("graph-sim")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.graph_sim_scenarios", str(tmp)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])

    def get(name):
        outcome = results[name]
        assert "ok" in outcome, outcome.get("failed")
        return outcome["ok"]

    return get


def test_sim_capture_records_then_replays_in_order(sim):
    r = sim("capture_order")
    assert r["after_capture"] == [0, 0, 0, 0]  # capturing runs nothing
    assert r["after_replay"] == [4, 6, 8, 10]  # (x + 1) * 2: add_one before double
    assert r["after_second_replay"] == [22, 22, 22, 22]  # a replay reads the buffers' current contents
    assert (r["kernel_count"], r["instantiations"], r["last_apply"]) == (2, 1, "instantiated")


def test_sim_device_scalar_updates_are_seen_by_replays(sim):
    r = sim("device_scalar")
    assert r["seen"] == [1, 3, 6]
    assert (r["value"], r["dtype"], r["with_dtype"]) == (3, "int32", 7)
    assert r["python_int_error"][0] == "ValueError" and "NumPy scalar" in r["python_int_error"][1]


def test_sim_exception_inside_capture_discards_it_and_leaves_stream_usable(sim):
    r = sim("exception_inside_capture")
    assert r["error"] == "boom"
    assert r["replay_error"][0] == "CaptureError" and "no successful capture" in r["replay_error"][1]
    assert r["eager_after"] == [2, 2]  # only the eager launch ran, not the discarded captured one
    assert r["recaptured_after"] == [4, 4]
    assert r["allocation_after"] == 3  # the capture's guards are gone
    assert r["instantiations"] == 0


def test_sim_forbidden_operations_raise_capture_error_naming_them(sim):
    r = sim("capture_errors")
    expect = {
        "host_array": "host (NumPy) array",
        "allocation": "device_array()",
        "to_device": "to_device()",
        "sync_copy": "copy_to_host() without stream=",
        "synchronize": "synchronize()",
        "scalar_set": "to_device()",
        "set_inside": "DeviceScalar.set()",
        "legacy_0": "legacy default stream",
        "legacy_none": "legacy default stream",
    }
    for name, words in expect.items():
        assert r[name] is not None and r[name][0] == "CaptureError", (name, r[name])
        assert words in r[name][1], (name, r[name][1])


def test_sim_update_same_topology_versus_other_kernels(sim):
    r = sim("updates")
    assert r["same_topology"] == [1, 1, "updated"]
    assert r["results"] == [[0, 0], [6, 7]]  # the update moved the replay onto the new buffers
    assert r["other_kernel"] == [2, 1, "reinstantiated"]
    assert r["failed_recapture"] == ["KeyError", "'no'"]
    assert r["after_failed"] == [2, 1, [12, 14]]  # the previous capture (double y2) still replays
    assert r["recapture_fn"] == [2, 2, [6, 8], [12, 14]]  # same kernel, other buffer: an update


def test_sim_graph_keeps_its_buffers_alive(sim):
    r = sim("keeps_references")
    assert r["alive_while_held"] and r["result"] == [2, 3]
    assert r["kept"] == 3  # x, y and the keep()-ed array
    assert r["freed_after_close"]


def test_sim_launches_on_other_streams_run_at_once(sim):
    r = sim("other_stream_runs_now")
    assert r == {"captured": [1, 1], "other": [2, 2], "kernels": 1}


def test_sim_graphed_callable(sim):
    r = sim("graphed_callable")
    assert r["first"] == [4, 6] and r["second"] == [8, 10]
    assert r["after_replay"] == [1, 1]  # second call replayed: fn ran (captured) once
    assert r["third"] == [22, 42]  # new buffers: recaptured as an update, never the old buffers
    assert r["after_new_buffers"] == [2, 1, 1, [8, 10]]
    assert r["wide"] == [4, 4, 4] and r["scaled"] == [16, 20]
    assert r["graphs"] == 3  # (2,) scale 1, (3,) scale 1, (2,) scale 2
    assert r["host_error"][0] == "CaptureError" and r["name"] == "step"


def test_sim_nested_capture_and_dot(sim):
    r = sim("nested_and_dot")
    assert r["nested"][0] == "CaptureError"
    assert "n0 -> n1" in r["dot"] and '"double"' in r["dot"] and '"add_one"' in r["dot"]
    assert "2 kernels" in r["repr"]


# -- CPU, no simulator: the registry, the hooks and the error translation ----------------------
def test_stream_handle_forms():
    class Holder:
        def __init__(self, handle):
            self.handle = handle

    class Ptr:
        value = 0x50

    assert _capture.stream_handle(None) == 0
    assert _capture.stream_handle(7) == 7
    assert _capture.stream_handle(Holder(9)) == 9
    assert _capture.stream_handle(Holder(Ptr())) == 0x50


def test_recorder_keeps_arrays_and_refuses_host_arrays():
    rec = _capture.Recorder("s", 5, simulate=False)
    dev = object()
    assert rec.on_launch(print, 5, (dev, 3, np.float32(1)), name="k") is False  # real captures never record
    assert list(rec.refs.values()) == [dev]  # scalars are not kept
    with pytest.raises(CaptureError, match="argument 1 of kernel 'k' is a host"):
        rec.on_launch(print, 5, (dev, np.zeros(2)), name="k")
    sim = _capture.Recorder("s", None, simulate=True)
    assert sim.on_launch(print, "s", (dev,), name="k") is True
    assert sim.on_launch(print, "other", (dev,), name="k") is False
    assert sim.launches == [(print, (dev,))]


def test_intercept_uses_the_innermost_capture_of_this_thread():
    assert _capture.current() is None
    rec = _capture.Recorder("s", None, simulate=True)
    _capture.push(rec)
    try:
        assert _capture.active >= 1 and _capture.current() is rec
        assert _capture.intercept(len, "s", ([1],), name="len") is True
    finally:
        _capture.pop(rec)
    assert _capture.current() is None and rec.launches == [(len, ([1],))]


def test_real_mode_hooks_guard_numba_and_come_off():
    from numba import cuda
    from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase
    from numba.cuda.dispatcher import CUDADispatcher

    originals = (cuda.device_array, DeviceNDArrayBase.__dict__["copy_to_host"], CUDADispatcher.__dict__["call"])
    rec = _capture.Recorder("s", 5, simulate=False)
    _capture_hooks.install()
    _capture.push(rec)
    try:
        with pytest.raises(CaptureError, match="device_array"):
            cuda.device_array(4)
        with pytest.raises(CaptureError, match="copy_to_host"):
            DeviceNDArrayBase.copy_to_host(object())

        class Dispatcher:
            py_func = test_real_mode_hooks_guard_numba_and_come_off

        class Config:
            stream = 5

        with pytest.raises(CaptureError, match="host"):
            CUDADispatcher.call(Dispatcher(), (np.zeros(2),), Config())
    finally:
        _capture.pop(rec)
        _capture_hooks.uninstall()
    assert (cuda.device_array, DeviceNDArrayBase.__dict__["copy_to_host"], CUDADispatcher.__dict__["call"]) == originals


def test_driver_capture_errors_are_translated():
    from numba.cuda.cudadrv.driver import CudaAPIError

    from lazykern.graph import _cugraph

    def raised(code, fn):
        try:
            try:
                raise CudaAPIError(code, f"Call to {fn} results in CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
            except CudaAPIError as inner:
                raise RuntimeError("wrapped") from inner
        except RuntimeError as exc:
            return _cugraph.capture_failure(exc)

    assert "an allocation or free (cuMemAlloc)" in str(raised(900, "cuMemAlloc"))
    assert "a synchronous copy (cuMemcpyHtoD)" in str(raised(900, "cuMemcpyHtoD"))
    assert "a synchronization (cuStreamSynchronize)" in str(raised(906, "cuStreamSynchronize"))
    assert _cugraph.capture_failure(ValueError("unrelated")) is None
    launch = RuntimeError("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: operation not permitted when stream is capturing")
    assert isinstance(_cugraph.capture_failure(launch), CaptureError)
    assert "invalidated" in str(_cugraph.end_failure(_cugraph.drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED))


def test_legacy_default_stream_is_refused_before_any_driver_call():
    from lazykern import graph

    for stream in (0, 1, None):
        with pytest.raises(CaptureError, match="legacy default stream"):
            graph.capture(stream)


# -- GPU ---------------------------------------------------------------------------------------
def _numba_kernels():
    from numba import cuda

    @cuda.jit
    def axpy_step(x, y, step):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = y[i] + x[i] * step[0]

    @cuda.jit
    def add_one(y):
        i = cuda.grid(1)
        if i < y.size:
            y[i] += 1

    return axpy_step, add_one


N = 1000
GRID, BLOCK = (N + 255) // 256, 256


@pytest.mark.gpu
def test_gpu_mixed_graph_replay_equals_eager(family):
    from numba import cuda

    from lazykern import graph

    axpy_step, add_one = _numba_kernels()
    scale = family["scale_f32"]
    stream = cuda.stream()
    x = cuda.to_device(np.arange(N, dtype=np.float32))
    y_eager = cuda.to_device(np.zeros(N, np.float32))
    y = cuda.to_device(np.zeros(N, np.float32))
    step = graph.DeviceScalar(np.float32(0), stream=stream)
    for i in range(3):  # eager reference (also compiles and loads every kernel before capturing)
        step.set(i)
        axpy_step[GRID, BLOCK, stream](x, y_eager, step)
        scale[GRID, BLOCK, stream](y_eager, np.int32(N))
        add_one[GRID, BLOCK, stream](y_eager)
    with graph.capture(stream) as g:
        axpy_step[GRID, BLOCK, stream](x, y, step)
        scale[GRID, BLOCK, stream](y, np.int32(N))
        add_one[GRID, BLOCK, stream](y)
    stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), 0)  # capture ran nothing
    g.upload()
    for i in range(3):
        step.set(i)
        g.replay()
    stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), y_eager.copy_to_host())
    assert g.kernel_count == 3 and g.instantiations == 1
    assert step.value == 2


@pytest.mark.gpu
def test_gpu_update_without_reinstantiation(family):
    from numba import cuda

    from lazykern import graph

    _, add_one = _numba_kernels()
    scale = family["scale_f32"]
    stream = cuda.stream()
    a, b = (cuda.to_device(np.ones(N, np.float32)) for _ in range(2))
    add_one[GRID, BLOCK, stream](a)
    scale[GRID, BLOCK, stream](a, np.int32(N))
    with graph.capture(stream) as g:
        add_one[GRID, BLOCK, stream](a)
        scale[GRID, BLOCK, stream](a, np.int32(N))

    def on_b():
        add_one[GRID, BLOCK, stream](b)
        scale[GRID, BLOCK, stream](b, np.int32(N))

    g.update(on_b)
    assert (g.instantiations, g.updates, g.last_apply) == (1, 1, "updated")
    g.replay()
    stream.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), 6)  # eager warm-up only: (1 + 1) * 3
    np.testing.assert_array_equal(b.copy_to_host(), 6)
    g.update(lambda: add_one[GRID, BLOCK, stream](b))  # other topology: refused, instantiated anew
    assert (g.instantiations, g.last_apply) == (2, "reinstantiated")
    g.replay()
    stream.synchronize()
    np.testing.assert_array_equal(b.copy_to_host(), 7)


@pytest.mark.gpu
def test_gpu_failed_captures_leave_the_stream_usable():
    from cuda.bindings import driver as drv
    from numba import cuda

    from lazykern import graph
    from lazykern.graph import _cugraph

    _, add_one = _numba_kernels()
    stream = cuda.stream()
    y = cuda.to_device(np.zeros(N, np.float32))
    add_one[GRID, BLOCK, stream](y)
    hstream = drv.CUstream(int(stream.handle))
    ctx = cuda.current_context()

    def boom():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        with graph.capture(stream):
            add_one[GRID, BLOCK, stream](y)
            boom()
    assert not _cugraph.is_capturing(hstream)
    failures = {
        "host": lambda: add_one[GRID, BLOCK, stream](np.zeros(N, np.float32)),
        "device_array": lambda: cuda.device_array(4),
        "copy_to_host": lambda: y.copy_to_host(),
        "allocation": lambda: ctx.memalloc(64),  # bypasses the guards: the driver refuses, graph.py translates
    }
    for words, body in failures.items():
        with pytest.raises(CaptureError, match=words):
            with graph.capture(stream):
                add_one[GRID, BLOCK, stream](y)
                body()
        assert not _cugraph.is_capturing(hstream)
    add_one[GRID, BLOCK, stream](y)
    stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), 2)  # only the two eager launches ran
    with graph.capture(stream) as g:
        add_one[GRID, BLOCK, stream](y)
    g.replay()
    stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), 3)


@pytest.mark.gpu
def test_gpu_legacy_default_stream_capture_error():
    from numba import cuda

    from lazykern import graph

    for stream in (0, cuda.default_stream(), cuda.legacy_default_stream()):
        with pytest.raises(CaptureError, match="legacy default stream"):
            with graph.capture(stream):
                pass


@pytest.mark.gpu
def test_gpu_graph_holds_its_buffers(family):
    from numba import cuda

    from lazykern import graph

    _, add_one = _numba_kernels()
    scale = family["scale_f32"]
    stream = cuda.stream()

    def build():
        y = cuda.to_device(np.ones(N, np.float32))
        z = cuda.to_device(np.ones(N, np.float32))
        add_one[GRID, BLOCK, stream](y)
        scale[GRID, BLOCK, stream](z, np.int32(N))
        stream.synchronize()
        with graph.capture(stream) as g:
            add_one[GRID, BLOCK, stream](y)  # Numba launch: kept through the dispatcher hook
            scale[GRID, BLOCK, stream](z, np.int32(N))  # lazykern launch: kept through kernel.py's hook
        return g, weakref.ref(y), weakref.ref(z)

    g, y_ref, z_ref = build()
    gc.collect()
    junk = [cuda.to_device(np.full(N, -1, np.float32)) for _ in range(8)]  # would reuse freed memory
    assert y_ref() is not None and z_ref() is not None
    g.replay()
    stream.synchronize()
    np.testing.assert_array_equal(y_ref().copy_to_host(), 3)
    np.testing.assert_array_equal(z_ref().copy_to_host(), 9)
    assert all((j.copy_to_host() == -1).all() for j in junk)
    g.close()
    gc.collect()
    assert y_ref() is None and z_ref() is None


@pytest.mark.gpu
def test_gpu_device_scalar_ring_wraps_safely():
    from numba import cuda

    from lazykern import graph

    axpy_step, _ = _numba_kernels()
    stream = cuda.stream()
    x = cuda.to_device(np.ones(N, np.float32))
    y = cuda.to_device(np.zeros(N, np.float32))
    step = graph.DeviceScalar(np.float32(0), stream=stream, ring=2)
    axpy_step[GRID, BLOCK, stream](x, y, step)
    with graph.capture(stream) as g:
        axpy_step[GRID, BLOCK, stream](x, y, step)
    for i in range(50):
        step.set(i)
        g.replay()
    stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), sum(range(50)))


@pytest.mark.gpu
def test_gpu_graphed_new_buffers_update(tmp_path):
    from numba import cuda

    from lazykern import graph

    _, add_one = _numba_kernels()
    stream = cuda.stream()

    @graph.graphed(stream=stream)
    def twice(y):
        add_one[GRID, BLOCK, stream](y)
        add_one[GRID, BLOCK, stream](y)
        return y

    a, b = (cuda.to_device(np.zeros(N, np.float32)) for _ in range(2))
    add_one[GRID, BLOCK, stream](a)
    twice(a)
    twice(a)
    twice(b)
    stream.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), 5)
    np.testing.assert_array_equal(b.copy_to_host(), 2)
    (g,) = twice.graphs
    assert (g.instantiations, g.updates) == (1, 1)
    dot = g.debug_dot(tmp_path / "g.dot").read_text()
    assert "digraph" in dot


def test_a_graph_dropped_while_capturing_is_destroyed_after_the_capture(monkeypatch):
    """`with capture(s) as g:` rebinds `g` at the start of a capture: the old graph dies inside it,
    and destroying a graph there invalidates the capture on a GPU. Its driver objects wait for the end."""
    import lazykern.graph as graph_mod
    from lazykern.graph import _cugraph
    from lazykern.launch import _capture

    destroyed = []
    monkeypatch.setattr(_cugraph, "destroy_exec", lambda h: destroyed.append(("exec", h)))
    monkeypatch.setattr(_cugraph, "destroy_graph", lambda h: destroyed.append(("graph", h)))
    old = graph_mod._Handles()
    old.exec, old.graph = "E", "G"
    rec = _capture.Recorder(None, None, simulate=True)
    _capture.push(rec)
    try:
        old.release()
        assert destroyed == []  # not while this thread captures
    finally:
        _capture.pop(rec)
    graph_mod._release_dropped()
    assert destroyed == [("exec", "E"), ("graph", "G")]
    old.release()  # once only
    assert len(destroyed) == 2
