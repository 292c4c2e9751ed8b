"""The pytest plugin, driven through pytester: options, markers, fixtures, xdist, opt-out.

The plugin is loaded with ``-p lazykern.tools.pytest_plugin`` (its entry point exists only once
lazykern is installed). Runs that turn the simulator on go to a child process: this
process imported numba.cuda long ago, in device mode.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# Once lazykern is installed its entry point loads the plugin; -p would load it a second time.
INSTALLED = any(ep.name == "lazykern" for ep in importlib.metadata.entry_points(group="pytest11"))
PLUGIN = (() if INSTALLED else ("-p", "lazykern.tools.pytest_plugin")) + ("-p", "no:cacheprovider")

REPORT = """
import json, os
from numba.cuda import config  # imported at the top of a test module, as users do

def test_report():
    with open("report.json", "w") as fh:
        json.dump({"sim": bool(config.ENABLE_CUDASIM), "env": os.environ.get("NUMBA_ENABLE_CUDASIM")}, fh)
"""


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("NUMBA_ENABLE_CUDASIM", "LAZYKERN_PYTEST", "LAZYKERN_FAKE_GPUS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _report(pytester, *args: str) -> dict:
    pytester.makepyfile(test_report=REPORT)
    result = pytester.runpytest_subprocess(*PLUGIN, *args)
    result.assert_outcomes(passed=1)
    return json.loads((pytester.path / "report.json").read_text())


def test_entry_point_and_test_extra_are_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["entry-points"]["pytest11"] == {"lazykern": "lazykern.tools.pytest_plugin"}
    assert any(dep.startswith("pytest-xdist") for dep in meta["optional-dependencies"]["test"])


def test_the_plugin_imports_no_numba():
    code = "import sys, lazykern.tools.pytest_plugin; print(sorted(m for m in sys.modules if m.startswith('numba')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("gpus", "args", "ini", "preset", "sim"),
    [
        ("0", (), None, None, True),  # auto, no GPU: the simulator, seen by a module importing numba.cuda
        ("1", (), None, None, False),  # auto, a GPU: the device
        ("1", ("--lazykern-sim=on",), None, None, True),
        ("0", (), "on", None, True),  # the ini option
        ("0", ("--lazykern-sim=off",), "on", None, False),  # the command line beats the ini file
        ("0", (), None, "0", False),  # auto keeps what the environment already says
    ],
)
def test_sim_mode_is_decided_before_numba_is_imported(pytester, clean_env, gpus, args, ini, preset, sim):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", gpus)
    if preset is not None:
        clean_env.setenv("NUMBA_ENABLE_CUDASIM", preset)
    if ini is not None:
        pytester.makeini(f"[pytest]\nlazykern_sim = {ini}\n")
    # A rootdir conftest importing numba.cuda at its top is loaded after the decision too.
    pytester.makeconftest("import numba.cuda")
    report = _report(pytester, *args)
    assert report == {"sim": sim, "env": "1" if sim else "0"}


def test_a_bad_ini_value_is_a_usage_error(pytester, clean_env):
    pytester.makeini("[pytest]\nlazykern_sim = maybe\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*lazykern_sim must be one of*'maybe'*"])


MARKED = """
import pytest

@pytest.mark.gpu
def test_gpu(): pass

@pytest.mark.cudasim
def test_cudasim(): pass

@pytest.mark.no_cudasim
def test_no_cudasim(): pass

@pytest.mark.multi_gpu(2)
def test_two_gpus(): pass

@pytest.mark.multi_gpu(4)
def test_four_gpus(): pass

def test_gpu_or_sim(gpu_or_sim):
    assert gpu_or_sim == "gpu"
"""


def _outcomes(result) -> dict[str, str]:
    out = {}
    for line in result.outlines:
        for word in ("PASSED", "SKIPPED", "FAILED"):
            if f" {word}" in line and "::" in line:
                out[line.split("::")[1].split()[0]] = word
    return out


def test_markers_with_two_gpus_and_the_simulator_off(pytester, clean_env):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", "2")
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest(*PLUGIN, "--lazykern-sim=off", "--strict-markers", "-v", "-rs")
    assert _outcomes(result) == {
        "test_gpu": "PASSED",
        "test_cudasim": "SKIPPED",
        "test_no_cudasim": "PASSED",
        "test_two_gpus": "PASSED",
        "test_four_gpus": "SKIPPED",
        "test_gpu_or_sim": "PASSED",
    }
    result.stdout.fnmatch_lines(["*runs only under the CUDA simulator*", "*needs 4 CUDA GPUs; 2 usable here*"])
    result.stdout.fnmatch_lines(["lazykern: kernels run on the device (2 GPUs) (--lazykern-sim=off)"])


def test_markers_with_no_gpu_and_the_simulator_off(pytester, clean_env):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", "0")
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest(*PLUGIN, "--lazykern-sim=off", "--strict-markers", "-v", "-rs")
    outcomes = _outcomes(result)
    assert outcomes["test_gpu"] == outcomes["test_two_gpus"] == outcomes["test_gpu_or_sim"] == "SKIPPED"
    result.stdout.fnmatch_lines(["*test_marked.py:*: needs a CUDA GPU; none found; run it on a GPU machine"])
    result.stdout.fnmatch_lines(["*needs a CUDA GPU; none found and the simulator is off*"])
    # not "kernels run on the device (0 GPUs)"
    result.stdout.fnmatch_lines(["lazykern: no CUDA GPU here and the simulator is off (--lazykern-sim=off): *"])
    clean_env.setenv("NUMBA_ENABLE_CUDASIM", "0")  # set before pytest: auto keeps it
    preset = pytester.runpytest(*PLUGIN, "--co")
    preset.stdout.fnmatch_lines(
        ["lazykern: no CUDA GPU here and the simulator is off (NUMBA_ENABLE_CUDASIM=0 was set)*"]
    )


SIM_SESSION = r"""
import numpy as np
import pytest
from numba import cuda

import lazykern
from lazykern import KernelFamily
from lazykern.tools.testing import assert_compiled, assert_no_compile


@pytest.mark.gpu
def test_gpu(): pass

@pytest.mark.cudasim
def test_cudasim(): pass

@pytest.mark.no_cudasim
def test_no_cudasim(): pass

def test_fixtures(gpu_or_sim, lazykern_stream, lazykern_cache):
    assert gpu_or_sim == "sim"
    d = cuda.to_device(np.arange(4.0), stream=lazykern_stream)
    assert list(d.copy_to_host(stream=lazykern_stream)) == [0, 1, 2, 3]
    assert lazykern.default_cache() is lazykern_cache


def _twin(a, n):
    i = cuda.grid(1)
    if i < n:
        a[i] = 2 * a[i]


def test_a_fragment_runs_its_twin(lazykern_cache):
    fam = KernelFamily("t", "")
    fam.add("double", 'extern "C" __global__ void double_(float *a, int n) {}', symbol="double_",
            signature=["ptr", "int32"], twin=_twin)
    fam.add("lonely", 'extern "C" __global__ void lonely(float *a) {}', signature=["ptr"])
    a = cuda.to_device(np.arange(5, dtype=np.float32))
    with assert_compiled(fam, 1):
        fam["double"][1, 32](a, np.int32(5))
    with assert_no_compile():
        fam["double"][1, 32](a, np.int32(5))
    assert list(a.copy_to_host()) == [0, 4, 8, 12, 16]
    assert fam.compiled() == [] and fam.twins() == ["double"]
    with pytest.raises(lazykern.LazykernError, match=r"'lonely' of family 't' is CUDA C\+\+.* no twin"):
        fam["lonely"]


def test_tropical_falls_back_to_its_reference(gpu_or_sim):
    from lazykern import tropical
    from lazykern.tools.testing import assert_matches_reference

    with pytest.raises(lazykern.LazykernError, match="compute NumPy and simulator arrays with the NumPy reference"):
        tropical.family[tropical.core_names()[0]]
    A, B = np.arange(12.0).reshape(3, 4), np.eye(4)
    C, K = assert_matches_reference(tropical.matmul, tropical.reference.matmul, A, B, "maxplus", argmax=True)
    gC = cuda.to_device(np.ones((3, 4)))
    gA, gB = tropical.matmul_backward(gC, cuda.to_device(K), (3, 4), (4, 4))
    assert type(gA).__module__.startswith("numba.cuda.simulator") and gA.copy_to_host().sum() == 12
"""


def test_a_simulator_session(pytester, clean_env):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", "0")
    pytester.makepyfile(test_sim=SIM_SESSION)
    result = pytester.runpytest_subprocess(*PLUGIN, "-rs", "-v")
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines(["*needs a CUDA GPU; none found; run it on a GPU machine*"])
    result.stdout.fnmatch_lines(["*does not run under the CUDA simulator*"])
    result.stdout.fnmatch_lines(["lazykern: kernels run on the CUDA simulator (--lazykern-sim=auto)"])


CACHE_TESTS = """
import os
import lazykern
from lazykern import KernelFamily

SEEN = []


def _family():
    fam = KernelFamily("c", "")
    fam.add("k", 'extern "C" __global__ void k(int *a) { *a = 1; }', signature=["ptr"])
    return fam


def test_first(lazykern_cache):
    SEEN.append(lazykern_cache.directory)
    assert os.environ["LAZYKERN_CACHE_DIR"] == lazykern_cache.directory
    _family().warm(arch="sm_90")
    assert lazykern_cache.stats()["compiles"] == 1 and len(list(lazykern_cache.entries())) == 1


def test_second_gets_a_fresh_store(lazykern_cache):
    assert lazykern_cache.directory not in SEEN and list(lazykern_cache.entries()) == []
    _family().warm(arch="sm_90")
    assert lazykern_cache.stats()["compiles"] == 1


def test_the_default_is_restored_after_each_test():
    assert lazykern.default_cache().directory not in SEEN
"""


def test_lazykern_cache_isolates_each_test(pytester, clean_env):
    pytester.makepyfile(test_cache=CACHE_TESTS)
    result = pytester.runpytest(*PLUGIN, "--lazykern-sim=off")
    result.assert_outcomes(passed=3)


XDIST_TESTS = """
import json, os
import pytest
from lazykern import KernelFamily


@pytest.mark.parametrize("i", range(6))
def test_warm(lazykern_session_cache, i):
    fam = KernelFamily("x", "")
    fam.add("k", 'extern "C" __global__ void k(int *a) { *a = 7; }', signature=["ptr"])
    fam.warm(arch="sm_90")
    record = {"dir": lazykern_session_cache.directory, "worker": os.environ.get("PYTEST_XDIST_WORKER")}
    with open(f"seen-{i}.json", "w") as fh:
        json.dump(record, fh)
"""


@pytest.mark.slow
def test_xdist_workers_share_one_session_store(pytester, clean_env):
    pytest.importorskip("xdist", reason="pytest-xdist is in the test extra")
    pytester.makepyfile(test_xdist=XDIST_TESTS)
    result = pytester.runpytest_subprocess(*PLUGIN, "--lazykern-sim=off", "-n", "2")
    result.assert_outcomes(passed=6)
    seen = [json.loads((pytester.path / f"seen-{i}.json").read_text()) for i in range(6)]
    assert len({s["worker"] for s in seen}) == 2, "both workers ran tests"
    (directory,) = {s["dir"] for s in seen}
    from lazykern import KernelCache

    store = KernelCache(directory)
    counters = store.persistent_counters()
    assert len(list(store.entries())) == 1
    assert counters["compiles"] == 1 and counters["lookups"] == 6 and counters["hits"] == 5


OPTED_OUT = """
import os
import pytest

@pytest.mark.gpu
def test_gpu_marker_left_alone():
    assert "NUMBA_ENABLE_CUDASIM" not in os.environ
"""


def test_opt_out_by_environment(pytester, clean_env):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", "0")
    clean_env.setenv("LAZYKERN_PYTEST", "0")
    pytester.makeini("[pytest]\nmarkers = gpu: mine\n")
    pytester.makepyfile(test_off=OPTED_OUT)
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["lazykern: plugin off (LAZYKERN_PYTEST=0)"])


def test_opt_out_by_blocking_the_plugin(pytester, clean_env):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", "0")
    pytester.makeini("[pytest]\nmarkers = gpu: mine\n")
    pytester.makepyfile(test_off=OPTED_OUT)
    # Installed, the plugin is named "lazykern" (-p no:lazykern); loaded by module here, it is blocked by module.
    result = pytester.runpytest_subprocess("-p", "no:lazykern.tools.pytest_plugin", "-p", "no:lazykern")
    result.assert_outcomes(passed=1)


EVERY_BACKEND = """
from lazykern.tools.testing import backend, every_backend


@every_backend
def test_body(lazykern_backend):
    assert backend() == lazykern_backend
    with open(f"ran-{lazykern_backend}", "w") as fh:
        fh.write(backend())
"""


def test_every_backend_runs_the_simulator_in_a_child_on_a_device_machine(pytester, clean_env):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", "1")  # a "GPU" machine: this process runs in device mode
    pytester.makepyfile(test_backends=EVERY_BACKEND)
    result = pytester.runpytest_subprocess(*PLUGIN, "-v")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "ran-device").read_text() == "device"
    assert (pytester.path / "ran-simulator").read_text() == "simulator"


def test_every_backend_skips_the_device_run_where_there_is_no_gpu(pytester, clean_env):
    clean_env.setenv("LAZYKERN_FAKE_GPUS", "0")
    pytester.makepyfile(test_backends=EVERY_BACKEND)
    result = pytester.runpytest_subprocess(*PLUGIN, "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert not (pytester.path / "ran-device").exists()
    assert (pytester.path / "ran-simulator").read_text() == "simulator"


def test_an_exported_simulator_switch_cannot_beat_the_ini_through_a_numba_warning_filter(pytester, clean_env):
    """A filterwarnings entry naming a numba class makes pytest import numba (which reads NUMBA_ENABLE_CUDASIM)
    before the plugin decides: the plugin says so instead of letting a user's exported =1 silently win."""
    clean_env.setenv("NUMBA_ENABLE_CUDASIM", "1")
    pytester.makeini("[pytest]\nlazykern_sim = off\nfilterwarnings = ignore::numba.core.errors.NumbaWarning\n")
    pytester.makepyfile(test_report=REPORT)
    result = pytester.runpytest_subprocess(*PLUGIN, "-W", "always::pytest.PytestConfigWarning")
    result.stdout.fnmatch_lines(["*numba was imported before the pytest plugin could set NUMBA_ENABLE_CUDASIM=0*"])
