"""Graph scenarios run under Numba's CUDA simulator, in one subprocess for all of them.

``tests/test_graph.py`` starts ``python -m tests.graph_sim_scenarios`` with
NUMBA_ENABLE_CUDASIM=1 (it must be set before Numba is imported, hence the
subprocess) and asserts on the JSON this prints: each scenario returns what it
observed, or the error it hit.
"""

from __future__ import annotations

import gc
import json
import traceback
import weakref

import numpy as np
from numba import cuda

from lazykern import graph
from lazykern.launch import arrays


@cuda.jit
def add_one(x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = x[i] + 1


@cuda.jit
def double(y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] *= 2


@cuda.jit
def add_step(y, step):
    i = cuda.grid(1)
    if i < y.size:
        y[i] += step[0]


def _dev(values, dtype=np.float32):
    return cuda.to_device(np.asarray(values, dtype=dtype))


def _error(fn):
    try:
        fn()
    except Exception as exc:
        return [type(exc).__name__, str(exc)]
    return None


def capture_order():
    s = cuda.stream()
    x, y = _dev([1, 2, 3, 4]), _dev([0, 0, 0, 0])
    with graph.capture(s) as g:
        add_one[1, 4, s](x, y)
        double[1, 4, s](y)
    after_capture = y.copy_to_host().tolist()
    g.replay()
    after_replay = y.copy_to_host().tolist()
    x.copy_to_device(np.full(4, 10, np.float32))
    g.replay()
    return {
        "after_capture": after_capture,
        "after_replay": after_replay,
        "after_second_replay": y.copy_to_host().tolist(),
        "kernel_count": g.kernel_count,
        "instantiations": g.instantiations,
        "last_apply": g.last_apply,
    }


def device_scalar():
    s = cuda.stream()
    y = _dev([0, 0], dtype=np.int32)
    step = graph.DeviceScalar(np.int32(0), stream=s)
    with graph.capture(s) as g:
        add_step[1, 2, s](y, step)
    seen = []
    for i in range(1, 4):
        step.set(i)
        g.replay()
        seen.append(int(y.copy_to_host()[0]))
    return {
        "seen": seen,
        "value": int(step.value),
        "dtype": str(step.dtype),
        "python_int_error": _error(lambda: graph.DeviceScalar(3)),
        "with_dtype": int(graph.DeviceScalar(7, dtype=np.int64).value),
    }


def exception_inside_capture():
    s = cuda.stream()
    y = _dev([1, 1])
    g = graph.Graph(s)
    err = None
    try:
        with g.recapture():
            double[1, 2, s](y)
            raise ValueError("boom")
    except ValueError as exc:
        err = str(exc)
    double[1, 2, s](y)  # eager launch on the same stream still runs
    eager = y.copy_to_host().tolist()
    with graph.capture(s) as g2:
        double[1, 2, s](y)
    g2.replay()
    return {
        "error": err,
        "replay_error": _error(g.replay),
        "eager_after": eager,
        "recaptured_after": y.copy_to_host().tolist(),
        "allocation_after": cuda.device_array(3).shape[0],
        "instantiations": g.instantiations,
    }


def capture_errors():
    s = cuda.stream()
    y = _dev([1, 2])
    out = {}
    bodies = {
        "host_array": lambda: add_one[1, 2, s](np.zeros(2, np.float32), y),
        "allocation": lambda: cuda.device_array(2),
        "to_device": lambda: cuda.to_device(np.zeros(2)),
        "sync_copy": lambda: y.copy_to_host(),
        "synchronize": lambda: cuda.synchronize(),
        "scalar_set": lambda: graph.DeviceScalar(np.int32(0), stream=s),
    }
    for name, body in bodies.items():

        def run(body=body):
            with graph.capture(s):
                body()

        out[name] = _error(run)
    step = graph.DeviceScalar(np.int32(0), stream=s)

    def set_inside():
        with graph.capture(s):
            step.set(1)

    out["set_inside"] = _error(set_inside)
    out["legacy_0"] = _error(lambda: graph.capture(0))
    out["legacy_none"] = _error(lambda: graph.capture(None))
    return out


def updates():
    s = cuda.stream()
    x, y = _dev([1, 2]), _dev([0, 0])
    x2, y2 = _dev([5, 6]), _dev([0, 0])
    with graph.capture(s) as g:
        add_one[1, 2, s](x, y)
    g.update(lambda: add_one[1, 2, s](x2, y2))
    same = [g.instantiations, g.updates, g.last_apply]
    g.replay()
    results = [y.copy_to_host().tolist(), y2.copy_to_host().tolist()]
    g.update(lambda: double[1, 2, s](y2))
    other = [g.instantiations, g.updates, g.last_apply]

    def failing():
        with g.recapture():
            add_one[1, 2, s](x, y)
            raise KeyError("no")

    failed = _error(failing)
    g.replay()
    after_failed = [g.instantiations, g.updates, y2.copy_to_host().tolist()]
    y.copy_to_device(np.array([3, 4], np.float32))
    g.recapture(lambda: double[1, 2, s](y))
    g.replay()
    return {
        "same_topology": same,
        "results": results,
        "other_kernel": other,
        "failed_recapture": failed,
        "after_failed": after_failed,
        "recapture_fn": [g.instantiations, g.updates, y.copy_to_host().tolist(), y2.copy_to_host().tolist()],
    }


def keeps_references():
    s = cuda.stream()

    def build():
        x, y = _dev([1, 2]), _dev([0, 0])
        with graph.capture(s) as g:
            add_one[1, 2, s](x, y)
        return g, weakref.ref(y)

    g, y_ref = build()
    gc.collect()
    alive = y_ref() is not None
    g.replay()
    result = y_ref().copy_to_host().tolist()
    extra = _dev([0])
    g.keep(extra)
    kept = len(g.kept)
    g.close()
    gc.collect()
    return {"alive_while_held": alive, "result": result, "kept": kept, "freed_after_close": y_ref() is None}


def other_stream_runs_now():
    s, other = cuda.stream(), cuda.stream()
    y, z = _dev([1, 1]), _dev([1, 1])
    with graph.capture(s) as g:
        double[1, 2, s](y)
        double[1, 2, other](z)
    return {"captured": y.copy_to_host().tolist(), "other": z.copy_to_host().tolist(), "kernels": g.kernel_count}


def graphed_callable():
    s = cuda.stream()
    calls = []

    @graph.graphed(stream=s)
    def step(x, y, scale):
        calls.append(scale)
        add_one[1, x.size, s](x, y)
        for _ in range(scale):
            double[1, y.size, s](y)
        return y

    x, y = _dev([1, 2]), _dev([0, 0])
    first = step(x, y, 1).copy_to_host().tolist()
    x.copy_to_device(np.array([3, 4], np.float32))
    second = step(x, y, 1).copy_to_host().tolist()
    after_replay = [len(calls), len(step.graphs)]
    x2, y2 = _dev([10, 20]), _dev([0, 0])
    third = step(x2, y2, 1).copy_to_host().tolist()
    g = step.graphs[0]
    after_new_buffers = [len(calls), g.instantiations, g.updates, y.copy_to_host().tolist()]
    wide = step(_dev([1, 1, 1]), _dev([0, 0, 0]), 1).copy_to_host().tolist()
    scaled = step(x, y, 2).copy_to_host().tolist()
    return {
        "first": first,
        "second": second,
        "after_replay": after_replay,
        "third": third,
        "after_new_buffers": after_new_buffers,
        "wide": wide,
        "scaled": scaled,
        "graphs": len(step.graphs),
        "host_error": _error(lambda: step(np.zeros(2, np.float32), y, 1)),
        "name": step.__name__,
    }


def nested_and_dot(tmp_dir):
    s = cuda.stream()
    y = _dev([1])
    g = graph.Graph(s)

    def nested():
        with g.recapture():
            with g.recapture():
                pass

    err = _error(nested)
    with g.recapture():
        double[1, 1, s](y)
        add_one[1, 1, s](y, y)
    path = g.debug_dot(f"{tmp_dir}/g.dot")
    return {"nested": err, "dot": path.read_text(), "repr": repr(g)}


def arrays_in_capture():
    """Scratch arrays made inside the capture (lazykern.launch.arrays) are reused by every replay."""
    s = cuda.stream()
    x, out = _dev([1, 2, 3, 4]), _dev([0, 0, 0, 0])
    with graph.capture(s) as g:
        tmp = arrays.zeros(4, np.float32, stream=s)
        add_one[1, 4, s](x, tmp)
        add_one[1, 4, s](tmp, out)
    g.replay()
    first = out.copy_to_host().tolist()
    x.copy_to_device(np.full(4, 10, np.float32))
    g.replay()
    z = arrays.zeros((2, 3), np.int32)
    return {
        "first": first,
        "second": out.copy_to_host().tolist(),
        "zeros": z.copy_to_host().tolist(),
        "empty": [list(arrays.empty((2, 3), "float64").shape), str(arrays.empty(5).dtype)],
        "like_cupy": _error(lambda: arrays.empty(3, like="cupy")),
    }


SCENARIOS = {
    "capture_order": capture_order,
    "device_scalar": device_scalar,
    "exception_inside_capture": exception_inside_capture,
    "capture_errors": capture_errors,
    "updates": updates,
    "keeps_references": keeps_references,
    "other_stream_runs_now": other_stream_runs_now,
    "graphed_callable": graphed_callable,
    "arrays_in_capture": arrays_in_capture,
}


def main(tmp_dir: str) -> None:
    results = {}
    for name, fn in SCENARIOS.items():
        try:
            results[name] = {"ok": fn()}
        except Exception:
            results[name] = {"failed": traceback.format_exc()}
    try:
        results["nested_and_dot"] = {"ok": nested_and_dot(tmp_dir)}
    except Exception:
        results["nested_and_dot"] = {"failed": traceback.format_exc()}
    print(json.dumps(results))


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
