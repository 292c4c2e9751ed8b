"""The benchmark suites: limits and timing math, correctness checks, writers, the CPU start-up run."""

from __future__ import annotations

import io
import json
import math
import os
import pathlib
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from lazykern import KernelFamily, LazykernError
from lazykern.tools.bench import _check, _report, _timing, gemm, limits, startup

from .conftest import FRAGMENTS

# -- limits and MAC/s math ---------------------------------------------------------------


def test_h100_issue_limits_match_the_design_figures():
    assert limits.issue_limit_tmacs("float32", (9, 0), 132, 1.98e9) == pytest.approx(16.73, abs=0.01)
    assert limits.issue_limit_tmacs("int32", (9, 0), 132, 1.98e9) == pytest.approx(16.73, abs=0.01)
    assert limits.issue_limit_tmacs("float64", (9, 0), 132, 1.98e9) == pytest.approx(8.36, abs=0.01)


def test_no_limit_where_there_is_no_honest_one():
    assert limits.issue_limit_tmacs("int64", (9, 0), 132, 1.98e9) is None
    assert limits.issue_limit_tmacs("float32", (7, 5), 40, 1.6e9) is None  # no lane table for sm_75
    assert limits.issue_limit_tmacs("float32", (9, 0), 132, None) is None  # clock unknown


def test_limit_scales_with_sms_and_clock():
    base = limits.issue_limit_tmacs("f32", (8, 0), 108, 1.41e9)
    assert base == pytest.approx(108 * 32 * 1.41e9 / 1e12)
    assert limits.issue_limit_tmacs("f32", (8, 0), 216, 1.41e9) == pytest.approx(2 * base)


def test_mac_rate_and_bandwidth_math():
    assert limits.tmacs(4096, 4096, 4096, 68.719476736e-3) == pytest.approx(1.0)
    assert limits.tmacs(64, 64, 64, 1e-6, batch=1024) == pytest.approx(64**3 * 1024 / 1e-6 / 1e12)
    assert limits.tmacs(2**21, 4, 4, 1e-3) == pytest.approx(2**25 / 1e-3 / 1e12)
    assert limits.gb_per_s(4 * 4096 * 4096 * 4, 1e-4) == pytest.approx(2684.35456)
    assert limits.percent(8.35, 16.7) == pytest.approx(50.0)
    assert limits.percent(None, 16.7) is None and limits.percent(1.0, 0) is None
    assert limits.mem_bandwidth_bytes_s(2_619_000, 5120) == pytest.approx(3.352e12, rel=1e-3)
    assert limits.mem_bandwidth_bytes_s(None, 5120) is None
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="seconds"):
            limits.tmacs(1, 1, 1, bad)


# -- timing --------------------------------------------------------------------------------


def test_median_and_empty_samples():
    assert _timing.median([5.0, 1.0, 3.0, 100.0, 2.0]) == 3.0
    with pytest.raises(ValueError, match="never measured"):
        _timing.median([])


def test_buffers_rotate_past_the_l2():
    l2 = 50 << 20
    assert _timing.buffers_for(3 * 4096 * 4096 * 4, l2) == 1  # big: DRAM anyway
    n = _timing.buffers_for(3 * 256 * 256 * 4, l2)
    assert n * 3 * 256 * 256 * 4 >= 3 * l2 and n <= 256
    with pytest.raises(ValueError):
        _timing.buffers_for(0, l2)


class VirtualGpu:
    """A fake clock: every call costs ``cost`` seconds of virtual GPU time; marks read that time."""

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.now = 0.0
        self.spins: list[float] = []
        self.waits = 0

    def call(self, i: int) -> None:
        self.indices.append(i)
        self.now += self.cost

    def mark(self) -> float:
        return self.now

    def seconds_between(self, start: float, end: float) -> float:
        return end - start

    def wait(self, mark: float) -> None:
        self.waits += 1

    def spin(self, seconds: float) -> None:
        self.spins.append(seconds)
        self.now += seconds


@pytest.mark.parametrize("cost", [2e-6, 3e-4, 0.02])
def test_measure_reports_the_per_call_time_and_batches_small_calls(cost):
    gpu = VirtualGpu(cost)
    gpu.indices = []
    meas = _timing.measure(gpu.call, gpu, warmup=2, min_samples=10, min_seconds=0.05, max_seconds=30)
    assert meas.median == pytest.approx(cost)  # spins are outside the events
    assert meas.batch == max(1, math.ceil(1e-3 / cost)) or meas.batch == 512
    assert len(meas.samples) >= 10 and sum(meas.samples) * meas.batch >= 0.05 - 1e-12
    assert meas.warmup == 2
    assert gpu.indices == list(range(len(gpu.indices)))  # each call gets the next buffer index
    assert all(0 < s <= 0.05 for s in gpu.spins)
    d = meas.as_dict()
    assert d["median_ms"] == pytest.approx(cost * 1e3) and d["samples"] == len(meas.samples)


def test_measure_stops_at_the_wall_clock_limit():
    gpu = VirtualGpu(1e-3)
    gpu.indices = []
    meas = _timing.measure(gpu.call, gpu, min_samples=10**9, min_seconds=1e9, max_seconds=0.0)
    assert len(meas.samples) == 3


# -- correctness spot checks ----------------------------------------------------------------


def reference_matmul(A, B, semiring="maxplus", argmax=False):
    """A plain NumPy tropical product with smallest-k ties, for the checker tests."""
    prod = A[:, :, None] * B[None, :, :] if semiring == "maxmul" else A[:, :, None] + B[None, :, :]
    K = prod.argmin(1) if semiring == "minplus" else prod.argmax(1)
    C = np.take_along_axis(prod, K[:, None, :], 1)[:, 0, :]
    return (C, K) if argmax else C


@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_check_accepts_right_and_rejects_wrong_results(semiring, dtype):
    rng = np.random.default_rng(1)
    A = rng.integers(-50, 50, (70, 30)).astype(dtype)
    B = rng.integers(-50, 50, (30, 90)).astype(dtype)
    C, K = reference_matmul(A, B, semiring, argmax=True)
    ok = _check.check_matmul(reference_matmul, A, B, C, K, semiring=semiring, rng=rng, count=16)
    assert ok.ok and ok.checked == 2 * 16 * 16 and ok.mismatches == 0
    bad = C.copy()
    bad[69, 89] += 1  # the last row and column are always sampled
    wrong = _check.check_matmul(reference_matmul, A, B, bad, semiring=semiring, rng=rng, count=16)
    assert not wrong.ok and wrong.mismatches == 1 and "C[15, 15]" in wrong.detail
    badk = K.copy()
    badk[0, 0] = (badk[0, 0] + 1) % 30
    assert not _check.check_matmul(reference_matmul, A, B, C, badk, semiring=semiring, rng=rng, count=16).ok


def test_check_batched_and_shape_mismatch():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((5, 8, 6), dtype=np.float32)
    B = rng.standard_normal((5, 6, 7), dtype=np.float32)
    C = np.stack([reference_matmul(a, b) for a, b in zip(A, B)])
    assert _check.check_matmul(reference_matmul, A, B, C, semiring="maxplus", rng=rng).ok
    C[4, 0, 0] = np.nan  # the last batch is always sampled
    assert not _check.check_matmul(reference_matmul, A, B, C, semiring="maxplus", rng=rng).ok
    short = reference_matmul(A[0], B[0])[:, :3]
    res = _check.check_matmul(reference_matmul, A[0], B[0], short, semiring="maxplus", rng=rng)
    assert not res.ok and "shape" in res.detail


def test_check_backward():
    rng = np.random.default_rng(3)
    m, k, n = 40, 25, 30
    grad_c = rng.standard_normal((m, n), dtype=np.float32)
    K = rng.integers(0, k, (m, n))
    grad_a = np.zeros((m, k), np.float32)
    grad_b = np.zeros((k, n), np.float32)
    for i in range(m):
        for j in range(n):
            grad_a[i, K[i, j]] += grad_c[i, j]
            grad_b[K[i, j], j] += grad_c[i, j]
    assert _check.check_backward(grad_c, K, grad_a, grad_b, rng=rng, count=10).ok
    grad_b[K[0, n - 1], n - 1] += 1.0
    res = _check.check_backward(grad_c, K, grad_a, grad_b, rng=rng, count=10)
    assert not res.ok and "grad_B column" in res.detail


# -- the shape matrix ------------------------------------------------------------------------


def test_full_matrix_covers_every_semiring_dtype_and_argmax():
    full = gemm.cases(quick=False)
    at_4096 = {(c.semiring, c.dtype) for c in full if c.m == c.k == c.n == 4096 and c.op == "matmul"}
    assert at_4096 == {(s, d) for s in gemm.SEMIRINGS for d in gemm.DTYPES}
    argmax = {(c.semiring, c.dtype) for c in full if c.argmax}
    assert argmax == at_4096
    shapes = {c.shape for c in full}
    assert {"8192x8192x8192", "2097152x4x4", "4096x64x4096", "64x4096x64", "256x256x256", "1024 x 64x64x64"} <= shapes
    assert any(c.op == "backward" for c in full)
    assert {c.shape for c in full if c.torch} >= {"1024x1024x1024", "4096x4096x4096", "2097152x4x4"}
    assert len({c.label for c in full}) == len(full)


def test_quick_matrix_is_small_and_has_one_of_each_kind():
    quick = gemm.cases(quick=True)
    assert len(quick) < len(gemm.cases(quick=False)) / 2
    assert max(c.macs for c in quick) == 4096**3  # nothing of 8192^3
    assert {c.semiring for c in quick} == set(gemm.SEMIRINGS) and {c.dtype for c in quick} == set(gemm.DTYPES)
    assert {c.op for c in quick} == {"matmul", "bmm", "backward"} and any(c.argmax for c in quick)


def test_torch_baseline_matches_the_reference_when_chunked():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    A = rng.standard_normal((33, 20), dtype=np.float32)
    B = rng.standard_normal((20, 17), dtype=np.float32)
    for semiring in gemm.SEMIRINGS:
        out = torch.empty((33, 17))
        # 17 floats per row: 200 bytes allow 2 rows x 1 k at a time, so both loops chunk
        gemm.torch_tropical(torch.from_numpy(A), torch.from_numpy(B), out, semiring, chunk_bytes=200)
        np.testing.assert_array_equal(out.numpy(), reference_matmul(A, B, semiring))


# -- writers and tables ------------------------------------------------------------------------


def fake_gemm_result() -> dict:
    def case(impl, shape, macs, tmacs, dtype="float32", op="matmul", **extra):
        return {
            "impl": impl,
            "op": op,
            "semiring": "maxplus",
            "dtype": dtype,
            "argmax": False,
            "shape": shape,
            "macs": macs,
            "tmacs": tmacs,
            "pct_limit": None if tmacs is None else tmacs / 16.7 * 100,
            "ms": 1.5,
            "check": {"ok": tmacs is not None, "checked": 10, "mismatches": 0, "detail": ""},
            "error": None,
            **extra,
        }

    return {
        "suite": "gemm",
        "mode": "quick",
        "device": {"name": "Fake GPU"},
        "limits": {"float32": 16.7, "float64": 8.4, "int32": 16.7, "int64": None},
        "cases": [
            case("lazykern", "256x256x256", 256**3, 2.0),
            case("lazykern", "4096x4096x4096", 4096**3, 10.1),
            case("torch", "4096x4096x4096", 4096**3, 0.26),
            case("lazykern", "4096x4096x4096", 4096**3, None, dtype="int64"),
            case("lazykern", "4096x4096x4096", 4096**3, None, op="backward", gb_s=2500.0),
            {**case("torch", "256x256x256", 256**3, None), "error": "RuntimeError: out of memory"},
        ],
        "laziness": {"compiled": ["a", "b"], "compiled_count": 2, "fragments": 31, "compile_calls": 2},
        "speed": float("nan"),
    }


def _render(table) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    console.print(table)
    return console.file.getvalue()


def test_json_png_and_table_from_a_fake_gemm_result(tmp_path):
    result = _report.clean(fake_gemm_result())
    path = _report.write_json(result, tmp_path / "sub" / "gemm.json")
    back = json.loads(pathlib.Path(path).read_text())
    assert back["speed"] is None and back["cases"][1]["tmacs"] == 10.1
    png = _report.write_gemm_png(result, tmp_path / "gemm.png")
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    text = _render(_report.gemm_table(result))
    assert "10.100" in text and "WRONG" in text and "error: RuntimeError" in text
    assert "used 2 of 31 fragments" in text and "29 were never compiled" in text


def test_no_plot_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    assert _report.write_png(_report.write_gemm_png, fake_gemm_result(), str(tmp_path / "g.png")) is None
    assert list(tmp_path.iterdir()) == []


def test_json_refuses_nan_left_in_a_result(tmp_path):
    with pytest.raises(ValueError):
        _report.write_json({"x": float("nan")}, tmp_path / "r.json")
    assert list(tmp_path.iterdir()) == []  # no half-written or temporary file left behind


def test_startup_png_and_table_from_a_fake_result(tmp_path):
    rows = [
        {"scenario": "cold: compile", "import_seconds": 0.5, "setup_seconds": None, "seconds": 2.0, "compile_calls": 2},
        {"scenario": "warm: load", "import_seconds": 0.5, "seconds": 0.01, "compile_calls": 0},
        {"scenario": "eager: all", "seconds": 13.6, "compile_calls": 1},
        {"scenario": "lazy: 2", "seconds": None},
    ]
    result = {"mode": "compile-only", "repeats": 3, "rows": rows}
    png = _report.write_startup_png(result, tmp_path / "s.png")
    with open(png, "rb") as fh:
        assert fh.read(4) == b"\x89PNG"
    text = _render(_report.startup_table(result))
    assert "2.500" in text and "13.600" in text and "eager: all" in text


# -- start-up -----------------------------------------------------------------------------------


def tiny_family() -> KernelFamily:
    """What the start-up children import by ``tests.test_bench:tiny_family`` (default cache: the child's)."""
    preamble = "#define SCALE 3\ntemplate <typename T> __device__ T scaled(T x) { return x * SCALE; }"
    fam = KernelFamily("tiny_bench", preamble)
    for name in ("scale_f32", "scale_i32"):
        fam.add(name, FRAGMENTS[name])
    return fam


def test_guess_finds_forward_argmax_and_backward():
    names = [
        "maxplus_f32",
        "maxplus_f32_argmax",
        "minplus_f32_argmax",
        "maxplus_f64_argmax",
        "backward_f64",
        "backward_f32",
        "bmm_maxplus_f32",
    ]
    assert startup.guess_fwd_bwd_names(names) == ["maxplus_f32_argmax", "backward_f32"]
    assert startup.guess_fwd_bwd_names(["a", "b"]) == ["a"]


def test_failing_child_reports_its_error(tmp_path):
    cfg = {"mode": "get", "family": "no_such_module_xyz:fam", "arch": "sm_80", "names": []}
    with pytest.raises(LazykernError, match="no_such_module_xyz"):
        startup.run_child(cfg, str(tmp_path))


def test_gpu_scenarios_need_the_tropical_family():
    with pytest.raises(ValueError, match="gpu=False"):
        startup.run(family="tests.test_bench:tiny_family", gpu=True)


@pytest.mark.slow
def test_startup_compile_only_quick_run_end_to_end(tmp_path):
    result = startup.run(
        str(tmp_path),
        quick=True,
        family="tests.test_bench:tiny_family",
        gpu=False,
        arch="sm_80",
        lazy_names=["scale_f32"],
    )
    rows = {r["scenario"].split(":")[0]: r for r in result["rows"]}
    assert list(rows) == ["cold", "warm", "in-process", "eager", "lazy"]
    assert rows["cold"]["compile_calls"] == 1 and rows["cold"]["runs"][0]["kernels"][0]["compiled_now"]
    assert rows["warm"]["compile_calls"] == 0  # a new process loaded what the cold one stored
    assert not rows["warm"]["runs"][0]["kernels"][0]["compiled_now"]
    assert rows["eager"]["seconds"] > 0 and rows["lazy"]["seconds"] > 0
    assert all(r["import_seconds"] > 0 for r in (rows["cold"], rows["warm"]))
    assert result["fragments"] == 2 and result["mode"] == "compile-only quick"
    saved = json.loads(pathlib.Path(result["files"]["json"]).read_text())
    assert saved["rows"][0]["scenario"] == "cold: compile"
    with open(result["files"]["png"], "rb") as fh:
        assert fh.read(4) == b"\x89PNG"


# -- the GEMM suite on the Numba simulator (fake library, host clock) --------------------------------


class HostClock:
    """perf_counter marks: what the GEMM suite times with where there are no CUDA events."""

    def mark(self) -> float:
        return time.perf_counter()

    def seconds_between(self, start: float, end: float) -> float:
        return end - start

    def wait(self, mark: float) -> None:
        pass

    def spin(self, seconds: float) -> None:
        pass


class FakeTropical:
    """A NumPy stand-in for ``lazykern.tropical`` on simulator arrays; ``wrong`` corrupts C[-1, -1]."""

    def __init__(self, wrong: bool = False) -> None:
        self.wrong = wrong
        self.family = tiny_family()
        self.reference = types.SimpleNamespace(matmul=reference_matmul)

    def matmul(self, A, B, semiring="maxplus", argmax=False, out=None, stream=0):
        from numba import cuda

        C, K = reference_matmul(A.copy_to_host(), B.copy_to_host(), semiring, argmax=True)
        if self.wrong:
            C[-1, -1] += 1
        if out is not None:
            out.copy_to_device(C)
        dC = out if out is not None else cuda.to_device(C)
        return (dC, cuda.to_device(K.astype(np.int32))) if argmax else dC

    def bmm(self, A, B, semiring="maxplus", stream=0):
        from numba import cuda

        pairs = zip(A.copy_to_host(), B.copy_to_host())
        return cuda.to_device(np.stack([reference_matmul(a, b, semiring) for a, b in pairs]))

    def matmul_backward(self, grad_c, K, a_shape, b_shape, stream=0):
        from numba import cuda

        g, k = grad_c.copy_to_host(), K.copy_to_host()
        rows, cols = np.indices(k.shape)
        grad_a, grad_b = np.zeros(a_shape, g.dtype), np.zeros(b_shape, g.dtype)
        np.add.at(grad_a, (rows, k), g)
        np.add.at(grad_b, (k, cols), g)
        return cuda.to_device(grad_a), cuda.to_device(grad_b)


_SIM_SCRIPT = """
import json, sys
from lazykern.tools.bench import device, gemm
from tests.test_bench import FakeTropical, HostClock
spec = device.DeviceSpec("Fake GPU", (9, 0), 132, 1.98e9, 1 << 20, 3.35e12)
cases = [
    gemm.Case("square", "maxplus", "float32", 64, 48, 40, torch=True),
    gemm.Case("argmax", "minplus", "int64", 33, 20, 17, argmax=True),
    gemm.Case("batched", "maxmul", "float64", 9, 7, 5, batch=6, op="bmm"),
    gemm.Case("backward", "maxplus", "float32", 30, 20, 25, op="backward"),
]
kw = dict(clock=HostClock(), spec=spec, torch=False, progress=print)
good = gemm.run(True, sys.argv[1], selected=cases, tropical=FakeTropical(), **kw)
bad = gemm.run(True, None, selected=cases[:2], tropical=FakeTropical(wrong=True), **kw)
print("RESULT " + json.dumps({"good": good, "bad": bad}))
"""


@pytest.mark.slow
def test_gemm_suite_end_to_end_on_the_simulator(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.getcwd())
    proc = subprocess.run(
        [sys.executable, "-c", _SIM_SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1][len("RESULT ") :])
    good, bad = out["good"], out["bad"]
    assert [c["error"] for c in good["cases"]] == [None] * 4
    assert all(c["check"]["ok"] for c in good["cases"])
    square, argmax, bmm, backward = good["cases"]
    assert square["tmacs"] == pytest.approx(64 * 48 * 40 / (square["ms"] / 1e3) / 1e12)
    assert square["pct_limit"] == pytest.approx(100 * square["tmacs"] / good["limits"]["float32"])
    assert square["buffers"] > 1  # 30 KB per call against a 1 MiB "L2": rotated
    assert argmax["limit_tmacs"] is None and argmax["pct_limit"] is None  # int64: reported only
    assert bmm["shape"] == "6 x 9x7x5" and bmm["tmacs"] > 0
    assert backward["bytes"] == 30 * 25 * 4 + 30 * 25 * 4 + 30 * 20 * 4 + 20 * 25 * 4 and backward["gb_s"] > 0
    assert good["laziness"]["fragments"] == 2 and good["device"]["name"] == "Fake GPU"
    assert good["reference_figures"]["note"].startswith("reference figures measured earlier")
    assert os.path.exists(good["files"]["json"]) and os.path.exists(good["files"]["png"])
    assert [c["check"]["ok"] for c in bad["cases"]] == [False, False]  # C[-1, -1] is always sampled
    assert [c["tmacs"] for c in bad["cases"]] == [None, None]  # a wrong kernel gets no figure
    assert "WRONG" in _render(gemm.table(bad))


# -- on the GPU ------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_cuda_event_timer_measures_a_kernel():
    from numba import cuda

    from lazykern.tools.bench import device

    @cuda.jit
    def add_one(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1

    spec = device.device_spec()
    assert spec.sm_count > 0 and spec.l2_bytes > 0
    s = cuda.stream()
    a = cuda.to_device(np.zeros(1 << 22, np.float32), stream=s)
    clock = _timing.CudaEventClock(s, spec.clock_hz)
    meas = _timing.measure(lambda i: add_one[(1 << 22) // 256, 256, s](a), clock, min_samples=5, min_seconds=0.01)
    assert 0 < meas.median < 0.01  # 16 MiB read + written: microseconds, not launch overhead-sized
    assert a.copy_to_host()[0] == meas.warmup + 2 + meas.batch * len(meas.samples)


@pytest.mark.gpu
@pytest.mark.slow
def test_gemm_run_on_small_cases(tmp_path):
    selected = [
        gemm.Case("square", "maxplus", "float32", 256, 256, 256, torch=True),
        gemm.Case("argmax", "minplus", "int32", 128, 96, 64, argmax=True),
        gemm.Case("batched", "maxmul", "float64", 32, 16, 8, batch=4, op="bmm"),
        gemm.Case("backward", "maxplus", "float32", 128, 64, 96, op="backward"),
    ]
    result = gemm.run(True, str(tmp_path), selected=selected)
    lk = [c for c in result["cases"] if c["impl"] == "lazykern"]
    assert [c["error"] for c in lk] == [None] * 4
    assert all(c["check"]["ok"] for c in lk)
    assert lk[0]["tmacs"] > 0 and lk[0]["pct_limit"] is not None and lk[3]["gb_s"] > 0
    lazy = result["laziness"]
    assert 0 < lazy["compiled_count"] < lazy["fragments"]  # only what these cases needed
    assert json.loads(pathlib.Path(result["files"]["json"]).read_text())["device"]["sm_count"] > 0


@pytest.mark.gpu
@pytest.mark.slow
def test_startup_gpu_quick_run(tmp_path):
    result = startup.run(str(tmp_path), quick=True, eager=False, size=256)
    rows = {r["scenario"].split(":")[0]: r for r in result["rows"]}
    assert rows["cold"]["compile_calls"] >= 1 and rows["warm"]["compile_calls"] == 0
    assert 1 <= rows["lazy"]["compile_calls"] < result["fragments"] and rows["lazy"]["seconds"] > 0


def test_eager_failure_is_reported_not_raised(tmp_path):
    class FailingRunner:
        def fresh_dir(self) -> str:
            return str(tmp_path)

        def __call__(self, mode: str, cache_dir: str, **cfg):
            raise LazykernError("redefinition of 'helper'")

    row = startup._eager_row(FailingRunner(), 3, [f"k{i}" for i in range(31)])
    assert row["seconds"] is None and "redefinition" in row["error"] and "31 fragments" in row["scenario"]
    text = _render(_report.startup_table({"mode": "gpu", "repeats": 3, "rows": [row]}))
    assert "failed: redefinition" in text


def test_gpu_rows_from_canned_children():
    """The GPU scenarios' bookkeeping (which cache each child gets, which figure each row takes)."""

    class CannedRunner:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []
            self.dirs = 0

        def fresh_dir(self) -> str:
            self.dirs += 1
            return f"cache-{self.dirs}"

        def __call__(self, mode: str, cache_dir: str, **cfg):
            self.calls.append((mode, cache_dir))
            cold = len([c for c in self.calls if c[1] == cache_dir]) == 1
            kernels = [{"name": n, "compile_seconds": 0.4, "compiled_now": cold} for n in ("fwd_argmax", "bwd")]
            return {
                "import_seconds": 1.0,
                "setup_seconds": 0.2,
                "seconds": 0.9 if cold else 0.01,
                "second_seconds": 0.001,
                "compile_calls": 2 if cold else 0,
                "kernels": kernels if mode == "fwd_bwd" else kernels[:1],
            }

    runner = CannedRunner()
    rows, lazy = startup._gpu_rows(runner, 3, 1024)
    rows.append(lazy)
    by = {r["scenario"].split(":")[0]: r for r in rows}
    assert by["cold"]["seconds"] == 0.9 and by["warm"]["seconds"] == 0.01  # warm reuses the last cold cache
    assert by["in-process"]["seconds"] == 0.001 and by["in-process"]["import_seconds"] is None
    assert by["lazy"]["seconds"] == pytest.approx(0.8) and "fwd_argmax, bwd" in by["lazy"]["what"]
    assert [m for m, _ in runner.calls] == ["first_call"] * 6 + ["fwd_bwd"] * 3
    assert startup._summary(rows)["cold_over_warm"] == pytest.approx(90.0)


def test_tables_show_external_text_as_written_not_as_markup():
    case = {"impl": "lazykern", "op": "matmul", "semiring": "maxplus", "dtype": "float32", "shape": "8x8x8"}
    gemm = {"device": {"name": "GPU [bold]0[/bold]"}, "mode": "quick", "cases": [{**case, "error": "a[i] = x[/]"}]}
    text = _render(_report.gemm_table(gemm))
    assert "GPU [bold]0[/bold]" in text and "error: a[i] = x[/]" in text
    row = {"scenario": "lazy: k[0]", "what": "NVRTC of [red]k[/red]", "seconds": 0.5, "compile_calls": 1}
    text = _render(_report.startup_table({"mode": "quick", "repeats": 1, "rows": [row]}))
    assert "lazy: k[0]" in text and "NVRTC of [red]k[/red]" in text
