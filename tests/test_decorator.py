from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, float64, int32, types

from lazykern._numba import args as na
from lazykern.errors import LaunchError
from lazykern.jit.decorator import LazyKernel, lazy_kernel, normalize_signature

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAXPY_SIG = (float32, float32[::1], float32[::1], float32[::1])
ELF = b"\x7fELF"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(extra)
    return env


def _run(code: str, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=_env(**env), capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def _saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


# -- simulator (subprocess: NUMBA_ENABLE_CUDASIM must be set before numba.cuda is imported) ----
@pytest.fixture(scope="module")
def sim_report():
    out = _run("from tests._lazy_sim_check import main; main()", NUMBA_ENABLE_CUDASIM="1")
    line = next(li for li in out.splitlines() if li.startswith("JSON:"))
    return json.loads(line[5:])


def test_sim_kernels_give_correct_results(sim_report):
    for name in ("saxpy_host", "saxpy_device", "saxpy_f64", "add2d", "shifted", "mixed"):
        assert sim_report[name] is True, name


def test_sim_dispatch_one_signature_per_type_combination(sim_report):
    sigs = sim_report["saxpy_signatures"]
    assert len(sigs) == 2  # float32 (host and device arrays alike, called 3x) and float64
    assert sigs[0].startswith("float32") and sigs[1].startswith("float64")
    stats = sim_report["saxpy_stats"]
    assert stats["simulator"] is True
    assert stats["calls"] == 4 and stats["signatures"] == 2
    assert len(sim_report["mixed_signatures"]) == 2
    assert sim_report["mixed_signatures"][0].startswith("int32, float32, bool, int64")


def test_sim_errors_are_clear(sim_report):
    errors = sim_report["errors"]
    assert "Signature mismatch: 2 argument types given, but function takes 4 arguments" in errors["count"]
    assert (
        errors["twin_count"]
        == "kernel 'neg' of family 'mine' (run by its Numba-Python twin '_neg_twin'): Signature mismatch: 1 argument "
        "types given, but function takes 2 arguments"
    )
    assert "unsupported type str" in errors["type"]
    assert "launch configuration" in errors["config"]
    assert "grid" in errors["grid"]


# -- keys ----------------------------------------------------------------------------
def test_nothing_is_compiled_at_decoration(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    assert isinstance(k, LazyKernel)
    assert k.signatures == [] and k.stats()["compiles"] == 0
    assert cache.stats()["entries"] == 0


def test_key_is_stable_and_depends_on_signature_arch_and_options(cache):
    a = lazy_kernel(_saxpy, cache=cache)
    b = lazy_kernel(_saxpy, cache=cache)
    assert a.key(SAXPY_SIG, "sm_90") == b.key(SAXPY_SIG, "sm_90")
    assert a.key(SAXPY_SIG, "sm_90") != a.key(SAXPY_SIG, "sm_80")
    assert a.key(SAXPY_SIG, "sm_90") != a.key((float64, float32[::1], float32[::1], float32[::1]), "sm_90")
    assert a.key(SAXPY_SIG, "sm_90") != a.key((float32, float32[:], float32[:], float32[:]), "sm_90")
    for opts in ({"fastmath": True}, {"lineinfo": True}, {"max_registers": 32}, {"opt": False}):
        assert lazy_kernel(_saxpy, cache=cache, **opts).key(SAXPY_SIG, "sm_90") != a.key(SAXPY_SIG, "sm_90"), opts


def test_key_is_the_same_in_another_process(cache):
    here = lazy_kernel(_saxpy, cache=cache).key(SAXPY_SIG, "sm_90")
    there = _run(
        """
        from numba import float32
        from lazykern.jit.decorator import lazy_kernel
        from tests.test_decorator import _saxpy, SAXPY_SIG
        print(lazy_kernel(_saxpy).key(SAXPY_SIG, "sm_90"))
        """
    ).strip()
    assert here == there


def _write(path, text: str) -> None:
    """An edit a reload sees. Python checks a .pyc against the source's mtime in whole seconds and its size:
    a same-size edit within the second of the last import would run the old .pyc (Python's own behaviour;
    the key, made from the bytecode Numba compiles, then rightly stays). A person's edit comes later."""
    path.write_text(textwrap.dedent(text))
    Path(importlib.util.cache_from_source(str(path))).unlink(missing_ok=True)
    importlib.invalidate_caches()


def test_key_follows_device_functions_in_other_modules(tmp_path, monkeypatch, cache):
    monkeypatch.syspath_prepend(str(tmp_path))
    mod_file = tmp_path / "lzk_devmod.py"
    _write(
        mod_file,
        """
        from numba import cuda
        from lzk_inner import twice

        @cuda.jit(device=True)
        def f(v):
            return twice(v) + 1
        """,
    )
    inner_file = tmp_path / "lzk_inner.py"
    _write(inner_file, "from numba import cuda\n\n@cuda.jit(device=True)\ndef twice(v):\n    return v * 2\n")
    import lzk_devmod
    import lzk_inner

    def kern(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = lzk_devmod.f(x[i])

    kern.__globals__["lzk_devmod"] = lzk_devmod
    try:
        k = lazy_kernel(kern, cache=cache)
        sig = (float32[::1], float32[::1])
        k0 = k.key(sig, "sm_90")
        assert k.key(sig, "sm_90") == k0  # unchanged code: same key
        _write(inner_file, "from numba import cuda\n\n@cuda.jit(device=True)\ndef twice(v):\n    return v * 3.0\n")
        importlib.reload(lzk_inner)
        importlib.reload(lzk_devmod)  # picks up the new `twice`
        k1 = k.key(sig, "sm_90")
        assert k1 != k0  # an edit two modules away changes the key
        _write(
            mod_file,
            """
            from numba import cuda
            from lzk_inner import twice

            @cuda.jit(device=True)
            def f(v):
                return twice(v) + 2
            """,
        )
        importlib.reload(lzk_devmod)
        assert k.key(sig, "sm_90") not in (k0, k1)
    finally:
        del kern.__globals__["lzk_devmod"]
        sys.modules.pop("lzk_devmod", None)
        sys.modules.pop("lzk_inner", None)


SCALE = 2.0


def _scaled(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * SCALE


def test_key_includes_global_constant_values(cache, monkeypatch):
    k = lazy_kernel(_scaled, cache=cache)
    sig = (float32[::1], float32[::1])
    before = k.key(sig, "sm_90")
    monkeypatch.setitem(_scaled.__globals__, "SCALE", 3.0)
    assert k.key(sig, "sm_90") != before
    monkeypatch.setitem(_scaled.__globals__, "SCALE", 2.0)
    assert k.key(sig, "sm_90") == before


def test_key_includes_linked_cuda_source_contents(tmp_path, cache):
    cu = tmp_path / "quad.cu"
    cu.write_text('extern "C" __device__ int quad(float *r, float x) { *r = 4.0f * x; return 0; }')
    k = lazy_kernel(_saxpy, cache=cache, link=[str(cu)])
    before = k.key(SAXPY_SIG, "sm_90")
    cu.write_text('extern "C" __device__ int quad(float *r, float x) { *r = 5.0f * x; return 0; }')
    assert k.key(SAXPY_SIG, "sm_90") != before


# -- warm: real cubins with no GPU ---------------------------------------------------
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_warm_produces_real_cubins(cache, arch):
    k = lazy_kernel(_saxpy, cache=cache)
    (report,) = k.warm([SAXPY_SIG], arch=arch)
    assert report["compiled"] is True and report["arch"] == arch
    (entry,) = list(cache.entries())
    assert cache.lookup(entry["key"]).code[:4] == ELF
    assert entry["kind"] == "numba-kernel" and entry["arch"] == arch
    assert "saxpy" in entry["symbol"]
    assert [p["kind"] for p in entry["plan"]] == ["scalar", "array", "array", "array"]
    assert k.stats()["compiles"] == 1 and k.signatures == [
        "float32, array(float32, 1d, C), array(float32, 1d, C), array(float32, 1d, C)"
    ]
    assert k.warm([SAXPY_SIG], arch=arch)[0]["compiled"] is False  # second time: from the cache
    assert k.stats()["hits"] == 1


def _saxpy_twice(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * a * x[i] + y[i]


def test_an_entry_naming_another_kernel_is_never_served(cache):
    """A header that names another kernel (or another arch) under this key: recompiled, not served."""
    k, other = lazy_kernel(_saxpy, cache=cache), lazy_kernel(_saxpy_twice, cache=cache)
    k.warm([SAXPY_SIG], arch="sm_90")
    (entry,) = list(cache.entries())
    stored = cache.lookup(entry["key"])
    cache.store(other.key(SAXPY_SIG, "sm_90"), stored.code, dict(stored.meta))  # planted under the other's key
    (report,) = other.warm([SAXPY_SIG], arch="sm_90")
    assert report["compiled"] is True
    served = cache.lookup(other.key(SAXPY_SIG, "sm_90"))
    assert served.meta["name"] == _saxpy_twice.__qualname__ and served.code != stored.code


def test_warm_accepts_signature_strings(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    (report,) = k.warm(["void(float64, float64[:], float64[:], float64[:])"], arch="sm_90")
    assert report["signature"][1] == "array(float64, 1d, A)"
    with pytest.raises(TypeError, match="returns nothing"):
        normalize_signature("int32(int32)")


@pytest.mark.slow
def test_a_fresh_process_loads_warmed_cubins_without_compiling(tmp_path):
    cache_dir = str(tmp_path / "shared")
    code = """
        import json
        from lazykern import KernelCache
        from lazykern._numba import compile as _numba_compile
        from lazykern.jit.decorator import lazy_kernel
        from tests.test_decorator import _saxpy, SAXPY_SIG
        kc = KernelCache({d!r})
        k = lazy_kernel(_saxpy, cache=kc)
        {guard}
        print("JSON:" + json.dumps([k.warm([SAXPY_SIG], arch=a)[0]["compiled"] for a in ("sm_80", "sm_90")]
              + [kc.persistent_counters()["compiles"]]))
    """
    first = _run(code.format(d=cache_dir, guard=""))
    assert json.loads(first.split("JSON:")[1]) == [True, True, 2]
    guard = "_numba_compile.compile_kernel = None  # any compile attempt would now fail"
    second = _run(code.format(d=cache_dir, guard=guard))
    assert json.loads(second.split("JSON:")[1]) == [False, False, 2]


def test_any_layout_instantiation_serves_contiguous_calls(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    k.warm([(float32, float32[:], float32[:], float32[:])], arch="sm_90")
    entry, compiled = k._entry(SAXPY_SIG, "sm_90")
    assert compiled is False and entry.meta["signature"][1] == "array(float32, 1d, A)"


triple = cuda.declare_device(
    "lzk_triple",
    "float32(float32)",
    link=[cuda.CUSource('extern "C" __device__ int lzk_triple(float *r, float x) { *r = 3.0f * x; return 0; }')],
)


def _tripled(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = triple(x[i])


def test_cxx_linking_kernel_warms_into_the_cache(cache):
    k = lazy_kernel(_tripled, cache=cache)
    (report,) = k.warm([(float32[::1], float32[::1])], arch="sm_90")
    assert report["compiled"] is True
    (entry,) = list(cache.entries())
    assert cache.lookup(entry["key"]).code[:4] == ELF
    # The linked C++ is part of the key: Numba's registry gave us the CUSource behind declare_device.
    from lazykern._numba.key import fingerprint

    _, links = fingerprint(_tripled)
    assert len(links) == 1 and links[0][0].startswith("CUSource")


# -- argument plans and packing ------------------------------------------------------
def test_plan_matches_numba_kernel_abi():
    sig = (types.float32, types.float64[:, ::1], types.complex64, types.UniTuple(types.int32, 2), types.boolean)
    plan = na.plan_for(sig)
    assert [p["kind"] for p in plan] == ["scalar", "array", "complex", "tuple", "scalar"]
    assert na.param_count(plan) == 1 + (5 + 4) + 2 + 2 + 1
    json.dumps(plan)  # stored in the cache entry: must be JSON


def test_packer_expands_arrays_like_numba():
    class FakeDevArray:
        size, shape, strides = 6, (2, 3), (24, 8)

        class device_ctypes_pointer:  # as Numba's DeviceNDArray: a ctypes pointer with .value
            value = 0xABC0

    plan = na.plan_for(
        (types.float32, types.float64[:, ::1], types.complex64, types.UniTuple(types.int16, 2), types.boolean)
    )
    packed = na.make_packer(plan)(np.float32(1.5), FakeDevArray(), np.complex64(2 + 3j), (4, 5), True)
    assert len(packed) == na.param_count(plan)
    assert packed[0] == 1.5 and type(packed[0]) is np.float32  # NumPy scalars pass at their own width
    assert packed[1:10] == (0, 0, 6, 8, 0xABC0, 2, 3, 24, 8)  # meminfo, parent, nitems, itemsize, data, shape, strides
    assert packed[10:12] == (2.0, 3.0) and type(packed[10]) is np.float32  # complex64: two float32 parameters
    assert packed[12:14] == (4, 5)
    assert type(packed[14]) is np.bool_  # a Python bool would reach the kernel as an 8-byte integer


def test_unsupported_types_are_refused_clearly(cache):
    with pytest.raises(LaunchError, match="argument 1 has Numba type"):
        na.plan_for((types.float32, types.unicode_type))
    with pytest.raises(LaunchError, match="unsupported type dict"):
        na.classify({}, 3)
    with pytest.raises(LaunchError, match="cannot pass"):
        lazy_kernel(_saxpy, cache=cache).warm([(types.unicode_type, float32[:], float32[:], float32[:])], "sm_90")


def test_cuda_array_interface_objects_are_typed_like_numba():
    class Cai:
        def __init__(self, shape, strides, typestr="<f4"):
            self.__cuda_array_interface__ = {
                "shape": shape,
                "strides": strides,
                "typestr": typestr,
                "data": (0x1000, False),
                "version": 3,
            }

    t, kind, view = na.classify(Cai((4, 5), None), 0)
    assert (str(t), kind) == ("array(float32, 2d, C)", na.CAI) and view.strides == (20, 4)
    assert str(na.classify(Cai((4, 5), (4, 16)), 0)[0]) == "array(float32, 2d, F)"
    assert str(na.classify(Cai((4, 5), (40, 8)), 0)[0]) == "array(float32, 2d, A)"
    assert str(na.classify(Cai((4, 5), (0, 4)), 0)[0]) == "array(float32, 2d, A)"  # broadcast


def test_decorator_options_are_checked():
    with pytest.raises(TypeError, match="unknown options"):
        lazy_kernel(fastmaths=True)
    with pytest.raises(TypeError, match="decorates a Python function"):
        lazy_kernel(42)


def test_repr_html_lists_signatures(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    k.warm([SAXPY_SIG], arch="sm_90")
    html = k._repr_html_()
    assert "_saxpy" in html and "array(float32, 1d, C)" in html and "compiles 1" in html


# -- GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_kernels_correct():
    from tests._lazy_kernels import add2d, mixed, saxpy, shifted

    x = np.arange(1000, dtype=np.float32)
    dx, dy, do = cuda.to_device(x), cuda.to_device(np.ones_like(x)), cuda.device_array_like(x)
    stream = cuda.stream()
    for _ in range(3):  # first: general path; then the fast path
        saxpy[8, 128, stream](np.float32(2), dx, dy, do)
    stream.synchronize()
    np.testing.assert_allclose(do.copy_to_host(), 2 * x + 1)
    saxpy[8, 128](2.5, dx, dy, do)  # Python float: a float64 instantiation
    np.testing.assert_allclose(do.copy_to_host(), 2.5 * x + 1)
    assert len(saxpy.signatures) == 2

    a = np.arange(12 * 7, dtype=np.float64).reshape(12, 7)
    d2 = cuda.device_array_like(a)
    add2d[(2, 1), (8, 8)](cuda.to_device(a), cuda.to_device(np.ones_like(a)), d2)
    np.testing.assert_allclose(d2.copy_to_host(), a + 2)
    fa = np.asfortranarray(a)
    add2d[(2, 1), (8, 8)](cuda.to_device(fa), cuda.to_device(fa), d2)  # F layout: a new signature
    np.testing.assert_allclose(d2.copy_to_host(), 3 * a)

    o = cuda.device_array_like(x)
    shifted[8, 128](dx, o)
    np.testing.assert_allclose(o.copy_to_host(), x + 0.5)

    m = cuda.to_device(np.arange(10, dtype=np.float64))
    mixed[1, 32](np.int32(8), np.float32(2), True, 1, m)
    expect = np.arange(10, dtype=np.float64)
    expect[:8] = expect[:8] * 2 + 1
    np.testing.assert_allclose(m.copy_to_host(), expect)
    m2 = cuda.to_device(np.arange(4, dtype=np.float64))
    mixed[1, 32](np.int64(4), 0.5, np.bool_(False), np.int16(3), m2)
    np.testing.assert_allclose(m2.copy_to_host(), -(np.arange(4) * 0.5 + 3))


@pytest.mark.gpu
def test_gpu_host_arrays_are_copied_in_and_out(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    x = np.arange(300, dtype=np.float32)
    out = np.zeros_like(x)
    k[3, 128](np.float32(2), x, x, out)
    np.testing.assert_allclose(out, 3 * x)


@pytest.mark.gpu
def test_gpu_host_arrays_refused_during_capture(cache):
    from cuda.bindings import driver

    from lazykern.errors import CaptureError

    k = lazy_kernel(_saxpy, cache=cache)
    x = cuda.to_device(np.ones(64, np.float32))
    stream = cuda.stream()
    k[1, 64, stream](np.float32(1), x, x, x)  # instantiate outside capture
    handle = driver.CUstream(int(stream.handle.value if hasattr(stream.handle, "value") else stream.handle))
    (err,) = driver.cuStreamBeginCapture(handle, driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    assert err == driver.CUresult.CUDA_SUCCESS
    try:
        with pytest.raises(CaptureError, match="device arrays"):
            k[1, 64, stream](np.float32(1), np.ones(64, np.float32), x, x)
        k[1, 64, stream](np.float32(1), x, x, x)  # device arrays are fine while capturing
    finally:
        err, graph = driver.cuStreamEndCapture(handle)
    assert err == driver.CUresult.CUDA_SUCCESS


@pytest.mark.gpu
def test_gpu_cupy_and_torch_arrays():
    from tests._lazy_kernels import saxpy

    for mod in ("cupy", "torch"):
        try:
            lib = importlib.import_module(mod)
        except ImportError:
            continue
        if mod == "cupy":
            x = lib.arange(256, dtype=lib.float32)
            out = lib.zeros_like(x)
        else:
            x = lib.arange(256, dtype=lib.float32, device="cuda")
            out = lib.zeros_like(x)
        saxpy[2, 128](np.float32(2), x, x, out)
        cuda.synchronize()
        got = out.get() if mod == "cupy" else out.cpu().numpy()
        np.testing.assert_allclose(got, 3 * np.arange(256, dtype=np.float32))


@pytest.mark.gpu
def test_gpu_cxx_linking_kernel_round_trip_through_the_cache(tmp_path):
    code = """
        import json
        import numpy as np
        from numba import cuda
        from lazykern import KernelCache
        from lazykern.jit.decorator import lazy_kernel
        from tests.test_decorator import _tripled
        kc = KernelCache({d!r})
        k = lazy_kernel(_tripled, cache=kc)
        x = np.arange(100, dtype=np.float32)
        out = cuda.device_array_like(x)
        k[1, 128](cuda.to_device(x), out)
        ok = bool(np.allclose(out.copy_to_host(), 3 * x))
        print("JSON:" + json.dumps([ok, k.stats()["compiles"], k.stats()["hits"]]))
    """.format(d=str(tmp_path / "cxx"))
    assert json.loads(_run(code).split("JSON:")[1]) == [True, 1, 0]
    assert json.loads(_run(code).split("JSON:")[1]) == [True, 0, 1]  # fresh process: loaded, not compiled


@pytest.mark.gpu
def test_gpu_fresh_process_launches_from_the_cache_alone(tmp_path):
    code = """
        import json
        import numpy as np
        from numba import cuda
        from lazykern import KernelCache
        from lazykern._numba import compile as _numba_compile
        from lazykern.jit.decorator import lazy_kernel
        from tests.test_decorator import _saxpy
        {guard}
        k = lazy_kernel(_saxpy, cache=KernelCache({d!r}))
        x = cuda.to_device(np.arange(64, dtype=np.float32))
        out = cuda.device_array(64, np.float32)
        k[1, 64](np.float32(2), x, x, out)
        print("JSON:" + json.dumps([bool(np.allclose(out.copy_to_host(), 3 * np.arange(64))), k.stats()["compiles"]]))
    """
    d = str(tmp_path / "c")
    assert json.loads(_run(code.format(d=d, guard="")).split("JSON:")[1]) == [True, 1]
    guard = "_numba_compile.compile_kernel = None"
    assert json.loads(_run(code.format(d=d, guard=guard)).split("JSON:")[1]) == [True, 0]


@pytest.mark.gpu
def test_gpu_wrong_arguments_raise_launch_errors(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    x = cuda.to_device(np.ones(8, np.float32))
    with pytest.raises(LaunchError, match="takes 4 arguments"):
        k[1, 8](np.float32(1), x)
    with pytest.raises(LaunchError, match="unsupported type"):
        k[1, 8](np.float32(1), x, x, object())
    with pytest.raises(LaunchError, match="unsupported type str"):
        k[1, 8](1, x, x, "no")


def test_int32_signature_types():
    assert normalize_signature((int32, float32[:])) == (int32, float32[:])


def test_parameter_block_matches_the_packed_values():
    """The struct-packed block handed to cuLaunchKernel holds exactly the packer's values, C-aligned."""
    import struct

    from numba.core import types

    from lazykern._numba import args as na

    class FakeDevArray:
        size, shape, strides = 6, (2, 3), (24, 8)

        class device_ctypes_pointer:
            value = 0xABC0

    plan = na.plan_for((types.int32, types.float64[:, ::1], types.float32, types.boolean, types.int64))
    size, fill = na.make_buffer_filler(plan)
    import ctypes

    block = (ctypes.c_char * size)()
    fill(block, np.int32(-7), FakeDevArray(), np.float32(1.5), True, 2**40)
    fmt = na.struct_format(plan)
    assert fmt == "@i" + "q" * 9 + "f?q" and size == struct.calcsize(fmt)
    values = struct.unpack(fmt, bytes(block))
    assert values == (-7, 0, 0, 6, 8, 0xABC0, 2, 3, 24, 8, 1.5, True, 2**40)
    assert struct.calcsize("@i") == 4 and struct.calcsize("@iq") == 16  # the int64 after an int32 is 8-aligned


def test_a_tuple_of_arrays_packed_one_value_per_array_keeps_the_c_layout():
    """Each array is written as one packed byte string (8-aligned): the block is byte for byte the
    one-int-per-parameter layout, an array inside a tuple after an int32 included."""
    import ctypes
    import struct

    from numba.core import types

    from lazykern._numba import args as na

    class FakeDevArray:
        size, shape, strides = 4, (4,), (2,)

        class device_ctypes_pointer:
            value = 0xBEE0

    plan = na.plan_for((types.Tuple((types.int32, types.int16[::1])), types.int8, types.int16[::1]))
    size, fill = na.make_buffer_filler(plan)
    fmt = na.struct_format(plan)
    assert size == struct.calcsize(fmt) == struct.calcsize(na.struct_format(plan, packed_arrays=True))
    block = (ctypes.c_char * size)()
    fill(block, (np.int32(5), FakeDevArray()), np.int8(-1), FakeDevArray())
    array = (0, 0, 4, 2, 0xBEE0, 4, 2)
    assert struct.unpack(fmt, bytes(block)) == (5, *array, -1, *array)


# -- what @cuda.jit accepts, @lazy_kernel accepts (issue 38) ------------------------------------
_REC = np.dtype([("a", np.int32), ("b", np.float64, (3,))], align=True)


class _Color(__import__("enum").IntEnum):
    RED = 1
    GREEN = 2


class _Shape(__import__("enum").Enum):
    SQUARE = 3.5
    ROUND = 4.5


def _rec_kernel(out, rec, c, s):
    out[0] = rec.a + rec.b[1] + (c == _Color.GREEN) + s.value
    rec.a = 7


def _f16_kernel(r, x, y):
    i = cuda.grid(1)
    if i < r.size:
        r[i] = cuda.fp16.hsin(cuda.fp16.hadd(x[i], y))


def test_records_enums_and_datetimes_plan_as_numba_passes_them():
    from numba.cuda.np.numpy_support import from_dtype

    rec = from_dtype(_REC)
    sig = (rec, na.classify(_Color.GREEN, 1)[0], na.classify(_Shape.ROUND, 2)[0], types.NPDatetime("D"))
    plan = na.plan_for(sig)
    assert [p["kind"] for p in plan] == ["record", "enum", "enum", "datetime"]
    assert na.param_count(plan) == 4 and na.struct_format(plan) == "@qqdq"  # a record: one pointer
    packed = na.make_packer(plan)(0, _Color.GREEN, _Shape.ROUND, np.datetime64("1970-01-03"))
    assert packed[1:] == (2, 4.5, 2) and type(packed[1]) is np.int64 and type(packed[2]) is np.float64
    host = np.zeros(1, _REC)[0]
    assert na.classify(host, 0)[1] == na.HOST  # copied to the device, its result copied back


def test_cuda_in_out_wrappers_are_host_arrays_with_a_direction():
    a = np.zeros(4, np.float32)
    assert [na.classify(w(a), 0)[1] for w in (cuda.In, cuda.Out, cuda.InOut)] == [na.HOST_IN, na.HOST_OUT, na.HOST]
    assert str(na.classify(cuda.In(a), 0)[0]) == "array(float32, 1d, C)"


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_80"])  # tests/test_cudapy_corpus.py compiles them for sm_90 too
def test_float16_records_and_enums_compile_and_are_served_in_a_new_process(tmp_path, arch):
    code = f"""
        import numpy as np
        from numba import cuda
        from numba.cuda import types
        from lazykern import KernelCache, lazy_kernel
        from lazykern._numba import args as na
        from tests.test_decorator import _REC, _Color, _Shape, _f16_kernel, _rec_kernel
        cache = KernelCache({str(tmp_path)!r})
        f16 = lazy_kernel(_f16_kernel, cache=cache).warm([(types.float16[::1],) * 2 + (types.float16,)], {arch!r})
        values = [np.zeros(1), np.zeros(1, _REC)[0], _Color.RED, _Shape.SQUARE]
        sig = tuple(na.classify(v, i)[0] for i, v in enumerate(values))
        rec = lazy_kernel(_rec_kernel, cache=cache).warm([sig], {arch!r})
        print(f16[0]["compiled"], rec[0]["compiled"])
    """
    assert _run(code).split() == ["True", "True"]
    assert _run(code).split() == ["False", "False"]  # the fp16 shim is linked in: nothing needs Numba's loader


def test_cuda_jit_options_are_accepted_and_enter_the_key(cache):
    base = lazy_kernel(_saxpy, cache=cache)
    variants = [
        lazy_kernel(_saxpy, cache=cache, debug=True, opt=False),
        lazy_kernel(_saxpy, cache=cache, shared_memory_carveout="MaxL1"),
        lazy_kernel(_saxpy, cache=cache, inline="always"),
        lazy_kernel(_saxpy, cache=cache, forceinline=True),
        lazy_kernel(_saxpy, cache=cache, fastmath={"nsz", "arcp"}),
    ]
    keys = {k.key(SAXPY_SIG, "sm_90") for k in [base, *variants]}
    assert len(keys) == 1 + len(variants)
    # a set of fastmath flags keys the same in any order; cache=True (cuda.jit's switch) changes nothing
    assert lazy_kernel(_saxpy, cache=cache, fastmath={"arcp", "nsz"}).key(SAXPY_SIG, "sm_90") in keys
    assert lazy_kernel(_saxpy, cache=True).options == base.options
    with pytest.raises(ValueError, match="shared_memory_carveout"):
        lazy_kernel(_saxpy, shared_memory_carveout="most")
    with pytest.raises(TypeError, match="device function takes"):
        lazy_kernel(_saxpy, device=True, max_registers=32)  # a kernel's option
    from numba.cuda.core.errors import NumbaInvalidConfigWarning

    with pytest.warns(NumbaInvalidConfigWarning, match="debug=True with opt=True"):
        lazy_kernel(_saxpy, cache=cache, debug=True)  # as cuda.jit warns: opt defaults to on
    deco = lazy_kernel("void(float32, float32[::1], float32[::1], float32[::1])", cache=cache)
    assert deco(_saxpy).signatures == []  # as cuda.jit(sig) takes it; compiled on first use


def test_debug_kernels_compile_with_debug_info_and_their_exception_table(cache):
    def raising(out):
        i = cuda.grid(1)
        if i > 2:
            raise ValueError("too far")
        out[i] = 1

    plain = lazy_kernel(raising, cache=cache).warm([(int32[::1],)], "sm_90")[0]["bytes"]
    k = lazy_kernel(raising, cache=cache, debug=True, opt=False)
    (report,) = k.warm([(int32[::1],)], "sm_90")
    assert report["bytes"] > 2 * plain  # DWARF sections: the compile passed debug=True
    entry, _ = k._entry((int32[::1],), "sm_90")
    (exc,) = entry.meta["exceptions"].values()
    assert exc["class"] == "builtins:ValueError" and exc["args"] == ["too far"] and "memory_only" not in entry.meta


def test_extensions_map_arguments_as_numba_does():
    """extensions= run last-added first on each argument's (type, value); what they return is packed as the
    compiled type: numba-cuda's DefaultIn turns a host array into cuda.In (copied in, never back)."""
    import types as pytypes

    from lazykern.jit import _lazy_launch

    order = []

    class DefaultIn:
        def prepare_args(self, ty, val, **kwargs):
            order.append("in")
            return ty, cuda.In(val) if isinstance(val, np.ndarray) else val

    class Doubled:
        def prepare_args(self, ty, val, **kwargs):
            order.append("double")
            return ty, val * 2 if isinstance(val, float) else val

    class ToInt:
        def prepare_args(self, ty, val, **kwargs):
            return (int32, 1) if isinstance(val, float) else (ty, val)

    host = np.zeros(3, np.float32)
    args = (1.5, host)
    described = [na.classify(a, i) for i, a in enumerate(args)]
    launcher = pytypes.SimpleNamespace(user_stream=0)
    mapped = _lazy_launch._extend([DefaultIn(), Doubled()], described, args, launcher, [])
    assert order == ["double", "in", "double", "in"]  # the last added runs first, as in numba-cuda
    assert mapped[0] == (float64, na.VALUE, 3.0) and mapped[1][:2] == (described[1][0], na.HOST_IN)
    with pytest.raises(LaunchError, match="mapped float64 to int32"):
        _lazy_launch._extend([ToInt()], described, args, launcher, [])
    k = lazy_kernel(_saxpy, extensions=[DefaultIn()])
    assert k._compile_options["extensions"] == [f"{DefaultIn.__module__}.{DefaultIn.__qualname__}"]


@pytest.mark.gpu
def test_gpu_records_enums_float16_and_debug_exceptions_run_as_cuda_jit(cache):
    rec = np.zeros(2, _REC)
    rec[0]["a"], rec[0]["b"][1] = 3, 0.5
    for make in (cuda.jit, lambda f: lazy_kernel(f, cache=cache)):
        r, out = rec.copy(), np.zeros(1)
        make(_rec_kernel)[1, 1](out, r[0], _Color.GREEN, _Shape.ROUND)
        assert out[0] == 3 + 0.5 + 1 + 4.5 and r[0]["a"] == 7  # the record is written back, as Numba does
    x = np.array([0.5, 1.0, 2.0], np.float16)
    expect, got = np.zeros(3, np.float16), np.zeros(3, np.float16)
    cuda.jit(_f16_kernel)[1, 4](expect, x, np.float16(0.25))
    lazy_kernel(_f16_kernel, cache=cache)[1, 4](got, x, np.float16(0.25))
    assert got.tobytes() == expect.tobytes()

    def raising(out):
        i = cuda.grid(1)
        if i > 2:
            raise ValueError("too far")
        out[i] = 1

    out = cuda.device_array(8, np.int32)
    with pytest.raises(ValueError, match=r"tid=\[0, 0, 3\] ctaid=\[0, 0, 0\]: too far"):
        lazy_kernel(raising, cache=cache, debug=True, opt=False)[1, 4](out)
    lazy_kernel(raising, cache=cache, debug=True, opt=False)[1, 3](out)  # no exception: the code was reset
    k = lazy_kernel(_saxpy, cache=cache, shared_memory_carveout="MaxShared")
    y = cuda.to_device(np.ones(8, np.float32))
    k[1, 8](np.float32(2), y, y, y)
    assert np.allclose(y.copy_to_host(), 3)
