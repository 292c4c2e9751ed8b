"""numba-cuda's documentation examples through ``@lazy_kernel`` (tests/_doc_corpus.py), and what they use:
``forall``, declared signatures (converted as ``cuda.jit(sig)`` converts), ``CPointer`` / ``voidptr``
parameters, ``overloads`` / ``inspect_*`` / ``specialize``, ``device=True``, numba's error words.

CPU: every example's kernels compile for sm_90 and a second process is served each one from the
store; under the simulator ``@lazy_kernel`` and ``@cuda.jit`` give the same outputs. GPU: the same
outputs on the device, launched from the store the CPU step filled (nothing compiled again but a
kernel that captures a device array, as numba-cuda recompiles it).
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda
from numba.cuda import types

from lazykern import LazyKernel, lazy_kernel
from lazykern._numba.compile import _target_cc
from lazykern._numba.declared import pointer_value
from lazykern.errors import DriverError, LaunchError
from tests import _doc_corpus as corpus

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)


def _steps(*argvs: tuple[str, ...], **env: str) -> dict:
    """Corpus steps in parallel child processes; their reports merged."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-W", "ignore", "-m", "tests._doc_corpus", *argv],
            env=_env(**env), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for argv in argvs
    ]  # fmt: skip
    merged: dict = {}
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-4000:]
        merged.update(json.loads(out.strip().splitlines()[-1]))
    return merged


def _step(*argv: str, **env: str) -> dict:
    return _steps(argv, **env)


# Under the simulator, the examples that draw random numbers pay for Numba compiling the state set-up
# on the CPU: they run in a process of their own, beside the others.
RANDOM = ("montecarlo", "random_3d", "random_pi")


def _run(code: str, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=_env(**env), cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


# -- the corpus ----------------------------------------------------------------------------------
def test_corpus_covers_numba_cudas_documentation_examples():
    names = {c.name for c in corpus.CASES}
    assert len(names) == len(corpus.CASES) >= 20
    for name in ("vecadd", "laplace", "sessionize", "cpu_gpu_compat", "montecarlo", "matmul", "reduction", "ufunc",
                 "random_3d", "cg", "ffi_linking_cu", "ffi_from_buffer", "cpointer", "device_function"):  # fmt: skip
        assert name in names, name
    package = Path(cuda.__file__).parent
    for c in corpus.CASES:
        if c.origin.startswith("numba/cuda/"):
            assert (package / c.origin.removeprefix("numba/cuda/")).is_file(), c.origin
        else:
            assert c.origin.startswith("docs/source/user/") and c.origin.endswith(".rst"), c.origin


@pytest.mark.slow
def test_every_example_compiles_for_sm90_with_no_gpu_and_a_new_process_is_served(tmp_path):
    first = _step("compile", str(tmp_path))
    expected = {c.name for c in corpus.CASES if c.cpu and corpus.available(c)}
    assert set(first) == expected
    failed = {
        n: r for n, r in first.items() if any(v not in ("compiled", "served") for k, v in r.items() if k != "origin")
    }
    assert not failed, failed
    second = _step("compile", str(tmp_path))
    recompiled = {n: r for n, r in second.items() if any(v != "served" for k, v in r.items() if k != "origin")}
    assert not recompiled, f"not served from the store in a new process: {recompiled}"


@pytest.mark.slow
def test_every_example_gives_cuda_jits_outputs_under_the_simulator():
    others = tuple(c.name for c in corpus.CASES if c.sim and c.name not in RANDOM)
    report = _steps(("sim", *RANDOM), ("sim", *others), NUMBA_ENABLE_CUDASIM="1")
    assert sorted(report) == sorted(c.name for c in corpus.CASES if c.sim and corpus.available(c))
    different = {n: r for n, r in report.items() if not r["equal"]}
    assert not different, different


@pytest.mark.gpu
def test_every_example_gives_cuda_jits_outputs_on_the_gpu_from_the_store(tmp_path):
    compiled = _step("compile", str(tmp_path))
    failed = {
        n: r for n, r in compiled.items() if any(v not in ("compiled", "served") for k, v in r.items() if k != "origin")
    }
    assert not failed, failed
    report = _step("gpu", str(tmp_path))
    assert sorted(report) == sorted(c.name for c in corpus.CASES if corpus.available(c))
    different = {n: r for n, r in report.items() if not r["equal"]}
    assert not different, different
    recompiled = {
        n: r["compiled"]
        for n, r in report.items()
        if any(v for k, v in r["compiled"].items() if k not in r["memory_only"])
    }
    assert not recompiled, f"compiled again on the GPU after the CPU step filled the store: {recompiled}"


# -- declared signatures -------------------------------------------------------------------------
def _add_one(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] += 1


def _fill(x, n):
    i = cuda.grid(1)
    if i < n:
        x[i] = 1


POINTER_SIG = types.void(types.CPointer(types.uint8), types.uint32)


def test_a_declared_signature_is_the_key_and_arguments_are_converted_as_cuda_jit_sig_converts(cache):
    k = lazy_kernel(POINTER_SIG, cache=cache)(_add_one)
    assert k.specialized and list(k.overloads) == [(types.CPointer(types.uint8), types.uint32)]
    (report,) = k.warm(arch="sm_90")  # the declared signature
    assert report["signature"] == ["uint8*", "uint32"] and report["compiled"]
    assert k.key(POINTER_SIG, "sm_90") != lazy_kernel(_add_one, cache=cache).key((types.int64, types.int64), "sm_90")
    described, unchanged = k._dispatch.describe((0x1000, 7))
    assert [d[0] for d in described] == [types.CPointer(types.uint8), types.uint32] and not unchanged
    assert described[0][2] == 0x1000 and type(described[1][2]) is np.uint32 and described[1][2] == 7
    with pytest.raises(LaunchError, match=r"'_add_one' declared \(uint8\*, uint32\).*argument 1 \(float64\)"):
        k._dispatch.describe((0x1000, 2.5))  # ctypes.c_uint32(2.5) refuses a float, as numba-cuda's launch does
    floats = lazy_kernel("void(float32[::1], float32)", cache=cache)(_fill)
    described, _ = floats._dispatch.describe((np.zeros(3, np.float32), 3))
    assert type(described[1][2]) is np.float32 and described[1][2] == 3.0  # an int to a float32 parameter
    with pytest.raises(LaunchError, match="declared type array\\(float32, 1d, C\\) cannot take"):
        floats._dispatch.describe((np.zeros(3, np.float64), 3))  # numba-cuda would read float64 data as float32


def test_a_list_of_signatures_launches_the_one_numbas_dispatcher_picks(cache):
    k = lazy_kernel(["void(float32[::1], int32)", "void(float64[::1], int64)"], cache=cache)(_fill)
    assert not k.specialized and len(k.overloads) == 2
    described, unchanged = k._dispatch.describe((np.zeros(3, np.float64), 3))
    assert [d[0] for d in described] == [
        types.float64[::1],
        types.int64,
    ] and unchanged  # exact: the hot path may serve it
    described, unchanged = k._dispatch.describe((np.zeros(3, np.float32), 3))
    assert [d[0] for d in described] == [types.float32[::1], types.int32] and not unchanged
    with pytest.raises(LaunchError, match=r"'_fill': No matching definition for argument type\(s\) array\(int8"):
        k._dispatch.describe((np.zeros(3, np.int8), 3))


def test_pointer_parameters_take_ints_ctypes_pointers_and_device_arrays():
    buf = (ctypes.c_uint8 * 4)()
    assert pointer_value(0xDEAD, 0) == 0xDEAD and pointer_value(np.uint64(5), 0) == 5
    assert pointer_value(-1, 0) == 2**64 - 1  # intptr_t, as cuda.core passes a Python int
    assert pointer_value(ctypes.c_void_p(0x1234), 0) == 0x1234 and pointer_value(ctypes.c_void_p(None), 0) == 0
    assert pointer_value(ctypes.pointer(buf), 0) == ctypes.addressof(buf)

    class Foreign:
        __cuda_array_interface__ = {"data": (0xABC000, False), "shape": (4,), "typestr": "|u1", "version": 3}

    assert pointer_value(Foreign(), 0) == 0xABC000
    with pytest.raises(LaunchError, match="argument 2 \\(str\\) cannot be passed to a pointer parameter"):
        pointer_value("0x10", 2)


def test_a_voidptr_parameter_compiles(cache):
    def touch(p, n):
        pass

    (report,) = lazy_kernel("void(voidptr, int32)", cache=cache)(touch).warm(arch="sm_90")
    assert report["signature"] == ["void*", "int32"] and report["bytes"] > 0


# -- overloads, inspection, specialize ---------------------------------------------------------------
def test_overloads_inspect_what_numba_compiles(cache):
    k = lazy_kernel("void(float32[::1], int32)", cache=cache)(_fill)
    sig = (types.float32[::1], types.int32)
    o = k.overloads[sig]
    assert k.overloads["void(float32[::1], int32)"].argument_types == sig  # a signature string keys it too
    with pytest.raises(KeyError):
        k.overloads[(types.float64[::1], types.int32)]
    ptx = o.inspect_asm("sm_90")
    assert ".target sm_90" in ptx and ".entry" in ptx and "_fill" in ptx
    assert "define" in o.inspect_llvm("sm_90")
    out = io.StringIO()
    o.inspect_types(file=out, arch="sm_90")
    text = out.getvalue()
    assert text.splitlines()[1] == "-" * 80 and "(Array(float32, 1, 'C'" in text.splitlines()[0] and "x[i] = 1" in text
    assert k.definition.argument_types == sig and dict(k.definitions).keys() == {sig}
    try:
        sass = o.inspect_sass("sm_90")  # the stored cubin, through numba-cuda's nvdisasm call
    except RuntimeError as exc:
        assert "nvdisasm" in str(exc)  # numba-cuda's own words where the toolkit has no nvdisasm
    else:
        assert "_fill" in sass


def test_specialize_makes_a_kernel_of_one_declared_signature(cache):
    k = lazy_kernel(_fill, cache=cache)
    s = k.specialize(np.zeros(4, np.float32), np.int32(4))
    assert isinstance(s, LazyKernel) and s.specialized and not k.specialized
    assert s.declared.signatures == ((types.float32[::1], types.int32),)
    assert k.specialize(np.zeros(9, np.float32), np.int32(1)) is s  # kept per signature
    with pytest.raises(RuntimeError, match="Dispatcher already specialized"):
        s.specialize(np.zeros(4, np.float32), np.int32(4))


# -- forall, errors ------------------------------------------------------------------------------
def test_forall_refuses_negative_counts_and_launches_nothing_for_zero(cache):
    k = lazy_kernel(_fill, cache=cache)
    with pytest.raises(ValueError, match="Can't create ForAll with negative task count: -1"):
        k.forall(-1)
    assert k.forall(0)(np.zeros(3, np.float32), 3) is None and k.stats()["calls"] == 0


def test_forall_launches_ceil_ntasks_over_tpb_blocks_of_the_kernels_block_size(monkeypatch):
    from types import SimpleNamespace

    from lazykern.jit import _forall

    launched = []

    class Owner:  # a kernel whose launches are recorded
        def __getitem__(self, config):
            return lambda *args: launched.append((config, args))

        def _instance_for(self, args):
            return SimpleNamespace(function=lambda: None, cufunctions={7: "cufn"})

    monkeypatch.setattr(_forall, "current_context", lambda: 7)
    monkeypatch.setattr(_forall._occupancy, "forall_block_size", {"cufn": 256}.get)
    _forall.ForAll(Owner(), 1000)(1, 2)
    _forall.ForAll(Owner(), 1000, tpb=64, stream="s", sharedmem=8)(3)
    assert launched == [((4, 256, 0, 0), (1, 2)), ((16, 64, "s", 8), (3,))]


def test_occupancy_reads_what_numba_cuda_reads(monkeypatch):
    """Asked of the context's CUfunction of the loaded CUkernel (the kernel handle cast to CUfunction is
    refused by the attribute queries: CUDA_ERROR_INVALID_HANDLE on the H100)."""
    from cuda.bindings import driver

    from lazykern.jit import _occupancy

    ok = driver.CUresult.CUDA_SUCCESS
    asked = []
    attrs = {driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 768}
    monkeypatch.setattr(driver, "cuKernelGetFunction", lambda k: (ok, ("function of", int(k))))
    monkeypatch.setattr(driver, "cuFuncGetAttribute", lambda attr, fn: asked.append(fn) or (ok, attrs[attr]))
    monkeypatch.setattr(
        driver, "cuOccupancyMaxActiveBlocksPerMultiprocessor", lambda fn, n, smem: asked.append(fn) or (ok, 2048 // n)
    )
    monkeypatch.setattr(_occupancy, "_sm_count", lambda device: 132)
    assert _occupancy.forall_block_size(0x1234) == 768  # the kernel's most threads per block, as ForAll gets it
    assert _occupancy.max_cooperative_grid_blocks(0x1234, 0, (16, 8)) == 16 * 132  # a block's threads: 16 * 8
    assert asked == [("function of", 0x1234)] * 2
    monkeypatch.setattr(driver, "cuFuncGetAttribute", lambda attr, fn: (driver.CUresult.CUDA_ERROR_INVALID_HANDLE, 0))
    with pytest.raises(
        DriverError, match="cuFuncGetAttribute\\(MAX_THREADS_PER_BLOCK\\) failed: CUDA_ERROR_INVALID_HANDLE"
    ):
        _occupancy.forall_block_size(0x1234)


def test_a_launch_without_configuration_gets_numbas_words_naming_the_kernel():
    with pytest.raises(LaunchError, match="kernel '_fill': Kernel launch configuration was not specified"):
        lazy_kernel(_fill)(np.zeros(3), 3)


# -- device functions ----------------------------------------------------------------------------
def test_a_lazy_device_function_is_numbas_and_is_called_from_cuda_jit_and_lazy_kernels(cache):
    @lazy_kernel(device=True)
    def twice(v):
        return v * 2

    def kern(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = twice(x[i])

    assert type(twice).__name__ == "CUDADispatcher" and twice.targetoptions["device"]
    (report,) = lazy_kernel(kern, cache=cache).warm([(types.float32[::1],)], arch="sm_90")
    assert report["compiled"]
    with _target_cc((9, 0)):  # numba compiles device functions for the current device's: none here
        ptx = cuda.compile_ptx(kern, (types.float32[::1],), cc=(9, 0))[0]  # a plain numba kernel calls it too
    assert ".entry" in ptx
    with pytest.raises(ValueError, match="link keyword invalid for device function"):
        lazy_kernel(device=True, link=["x.cu"])


def test_editing_a_lazy_device_function_changes_its_callers_key_in_a_new_process(tmp_path):
    (tmp_path / "lzk_devfn.py").write_text(
        "from lazykern import lazy_kernel\n\n@lazy_kernel(device=True)\ndef twice(v):\n    return v * 2\n"
    )
    code = f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from numba import cuda
        from numba.cuda import types
        from lazykern import lazy_kernel
        from lzk_devfn import twice

        def kern(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] = twice(x[i])

        print(lazy_kernel(kern).key((types.float32[::1],), "sm_90"))
    """
    keys = [_run(code).strip() for _ in range(2)]
    assert keys[0] == keys[1]  # the same code: the same key, process after process
    (tmp_path / "lzk_devfn.py").write_text(
        "from lazykern import lazy_kernel\n\n@lazy_kernel(device=True)\ndef twice(v):\n    return v * 3\n"
    )
    assert _run(code).strip() != keys[0]


# -- GPU ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_forall_block_size_and_cooperative_grid_are_numbas():
    from numba.cuda.dispatcher import ForAll

    def coop(x):
        g = cuda.cg.this_grid()
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1
        g.sync()

    x = cuda.to_device(np.zeros(5000, np.float32))
    jit, lazy = cuda.jit(coop), lazy_kernel(coop)
    spec = jit.specialize(x)
    assert lazy.forall(len(x))._block_size((x,)) == ForAll(jit, len(x), 0, 0, 0)._compute_thread_per_block(spec)
    sig = (types.float32[::1],)
    assert lazy.overloads[sig].max_cooperative_grid_blocks(128) == spec.overloads[sig].max_cooperative_grid_blocks(128)
    assert lazy.get_regs_per_thread(sig) == spec.get_regs_per_thread()
    assert lazy.get_max_threads_per_block() == {sig: spec.get_max_threads_per_block()}
    assert lazy.get_shared_mem_per_block(sig) == spec.get_shared_mem_per_block()
    lazy.forall(len(x))(x)
    jit.forall(len(x))(x)
    assert (x.copy_to_host() == 2).all()


@pytest.mark.parametrize(
    "launch, numba_raises",
    [
        (lambda k, x: k(x), ValueError),  # no configuration: numba-cuda's missing_launch_config_msg
        (lambda k, x: k[(1.5, 1), 1](x), TypeError),  # not an Integral: numba-cuda refuses, never rounds
        (lambda k, x: k[1.5, 1](x), TypeError),
        (lambda k, x: k[(1, 1, 1, 1), 1](x), ValueError),  # more than 3 dimensions
    ],
)
def test_launch_configuration_errors_are_the_exception_classes_numba_cuda_raises(launch, numba_raises):
    """`except ValueError` / `except TypeError` written around a @cuda.jit launch catches lazykern's too."""
    with pytest.raises(numba_raises) as caught:
        launch(lazy_kernel(_fill), np.zeros(4, np.float32))
    assert isinstance(caught.value, LaunchError)
