"""lazykern.tools.testing, KernelFamily twins and the counters they trust (CPU: NVRTC cubins, no launch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda, float32

from lazykern import KernelFamily, lazy_kernel, tropical
from lazykern.launch.kernel import Kernel
from lazykern.store import cache as cache_module
from lazykern.tools.testing import (
    assert_compiled,
    assert_matches_reference,
    assert_no_compile,
    every_backend,
    to_host,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE = 'extern "C" __global__ void neg(float *a, int n) { int i = threadIdx.x; if (i < n) a[i] = -a[i]; }'


def _neg(a, n):
    i = cuda.threadIdx.x
    if i < n:
        a[i] = -a[i]


def _saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@pytest.fixture
def fam(cache):
    f = KernelFamily("twins", "", cache=cache)
    f.add("neg", CODE, signature=["ptr", "int32"], twin=_neg)
    return f


# -- assert_compiled / assert_no_compile -----------------------------------------------
def test_assert_compiled_counts_a_family_and_the_process(fam, cache):
    with assert_compiled(fam, 1) as counted, assert_compiled(cache, 1), assert_compiled(None, 1):
        fam.warm(arch="sm_90")
    assert counted.count == 1
    with assert_no_compile(), assert_no_compile(fam):  # from the store now
        fam.warm(arch="sm_90")
    with pytest.raises(AssertionError, match=r"to compile 2 kernel\(s\) in this block; it compiled 1"):
        with assert_compiled(fam, 2):
            fam.warm(arch="sm_80")
    with pytest.raises(AssertionError, match="compiled 1"):
        with assert_no_compile():
            fam.warm(arch="sm_86")
    with pytest.raises(AssertionError, match="it compiled nothing"):
        with assert_compiled(fam):
            pass


def test_assert_compiled_refuses_what_it_cannot_count():
    with pytest.raises(TypeError, match="got int"):
        with assert_compiled(3, 1):
            pass


def test_a_lazy_kernel_counts_its_compiles_and_the_cache_its_lookups(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    sig = (float32, float32[::1], float32[::1], float32[::1])
    with assert_compiled(k, 1):
        k.warm([sig], arch="sm_90")
    with assert_no_compile(k):
        k.warm([sig], arch="sm_90")
    s = cache.stats()
    assert (s["lookups"], s["hits"], s["misses"], s["compiles"]) == (2, 1, 1, 1)


def test_a_second_process_reports_the_hit_of_a_warmed_lazy_kernel(tmp_path):
    code = textwrap.dedent(
        """
        import json
        from numba import float32
        from lazykern import default_cache, lazy_kernel
        from lazykern.tools.testing import assert_no_compile
        from tests.test_testing import _saxpy
        k = lazy_kernel(_saxpy)
        sig = (float32, float32[::1], float32[::1], float32[::1])
        {body}
        print("JSON:" + json.dumps(default_cache().stats()))
        """
    )
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, LAZYKERN_CACHE_DIR=str(tmp_path / "store"), PYTHONPATH=pythonpath)

    def run(body: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", code.format(body=body)], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.split("JSON:")[1])

    first = run('k.warm([sig], arch="sm_90")')
    assert (first["lookups"], first["misses"], first["compiles"]) == (1, 1, 1)
    second = run('with assert_no_compile():\n    k.warm([sig], arch="sm_90")')
    assert (second["lookups"], second["hits"], second["misses"], second["compiles"]) == (1, 1, 0, 0)


def test_an_any_layout_entry_serves_a_contiguous_lookup(cache):
    k = lazy_kernel(_saxpy, cache=cache)
    k.warm([(float32, float32[:], float32[:], float32[:])], arch="sm_90")
    entry, compiled = k._entry((float32, float32[::1], float32[::1], float32[::1]), "sm_90")
    assert compiled is False and entry.code[:4] == b"\x7fELF"
    assert cache.stats()["hits"] == 1 and cache.stats()["lookups"] == 2


def test_process_totals_add_up_every_cache(tmp_path):
    before = cache_module.process_totals()
    a, b = cache_module.KernelCache(tmp_path / "a"), cache_module.KernelCache(tmp_path / "b")
    for kc in (a, b):
        kc.get_or_compile("k", lambda: (b"code", {}))
    after = cache_module.process_totals()
    assert after["lookups"] - before["lookups"] == 2 and after["compiles"] - before["compiles"] == 2


# -- twins -----------------------------------------------------------------------------
def test_twins_are_checked_against_the_fragment_signature(cache):
    f = KernelFamily("t", "", cache=cache)
    with pytest.raises(TypeError, match=r"twin '_neg' of 'bad' takes 2 arguments, but the fragment's signature has 3"):
        f.add("bad", CODE, signature=["ptr", "int32", "int32"], twin=_neg)
    with pytest.raises(TypeError, match="must be a Python kernel function or a @lazy_kernel"):
        f.add("bad", CODE, signature=["ptr", "int32"], twin="neg")
    assert f.names() == []
    f.add("jitted", CODE, symbol="neg", signature=["ptr", "int32"], twin=cuda.jit(_neg))
    assert f.twin("jitted").py_func is _neg


def test_use_twins_picks_the_twin_or_the_fragment(fam):
    fam.use_twins = True
    assert fam["neg"] is fam.twin("neg") and fam.runs_twins()
    fam.use_twins = False
    assert isinstance(fam["neg"], Kernel) and fam.compiled() == ["neg"]
    assert fam.twins() == ["neg"]
    fam.add("neg", CODE, signature=["ptr", "int32"])  # re-added without a twin: it has none now
    assert fam.twins() == []


# -- assert_matches_reference ------------------------------------------------------------
def test_matches_reference_for_tropical_on_the_host():
    rng = np.random.default_rng(1)
    A, B = rng.integers(-50, 50, (7, 5)).astype(np.int32), rng.integers(-50, 50, (5, 3)).astype(np.int32)
    C, K = assert_matches_reference(
        tropical.matmul, tropical.reference.matmul, A, B, "minplus", argmax=True, device=False
    )
    assert C.dtype == np.int32 and K.shape == (7, 3)


def test_matches_reference_reports_what_differs():
    x = np.arange(4.0)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 4"):
        assert_matches_reference(lambda v: v + (v == 3), lambda v: v, x, device=False)
    with pytest.raises(AssertionError, match=r"result: device run gave float32\[4\], the reference float64\[4\]"):
        assert_matches_reference(lambda v: v.astype(np.float32), lambda v: v, x, device=False)
    with pytest.raises(AssertionError, match="the reference gave 2 results"):
        assert_matches_reference(lambda v: v, lambda v: (v, v), x, device=False)
    assert_matches_reference(lambda v: v * (1 + 1e-9), lambda v: v, x, rtol=1e-6, device=False)


def test_to_host_walks_tuples():
    got = to_host((np.ones(2), [np.zeros(1)]))
    assert isinstance(got, tuple) and isinstance(got[1], list) and got[1][0].shape == (1,)


def test_every_backend_parametrizes_both_backends():
    def test_body(lazykern_backend):
        pass

    marked = every_backend(test_body)
    (mark,) = [m for m in marked.pytestmark if m.name == "parametrize"]
    assert mark.args == ("lazykern_backend", ["device", "simulator"]) and mark.kwargs == {"indirect": True}


# -- on a GPU ----------------------------------------------------------------------------
@pytest.mark.gpu
def test_an_explicit_twin_runs_on_the_gpu(fam):
    fam.use_twins = True
    a = cuda.to_device(np.arange(8, dtype=np.float32))
    with assert_compiled(fam, 1):
        fam["neg"][1, 32](a, np.int32(8))
    fam.use_twins = False
    fam["neg"][1, 32](a, np.int32(8))  # the C++ fragment undoes it
    assert np.array_equal(a.copy_to_host(), np.arange(8, dtype=np.float32))


@pytest.mark.gpu
def test_a_second_process_reports_the_hit_of_a_launched_lazy_kernel(tmp_path):
    code = textwrap.dedent(
        """
        import json
        import numpy as np
        from lazykern import default_cache, lazy_kernel
        from lazykern.tools.testing import assert_compiled
        from tests.test_testing import _saxpy
        k = lazy_kernel(_saxpy)
        x = np.ones(32, np.float32)
        out = np.zeros(32, np.float32)
        with assert_compiled(None, {n}):
            k[1, 32](np.float32(2), x, x, out)
        assert (out == 3).all()
        print("JSON:" + json.dumps(default_cache().stats()))
        """
    )
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, LAZYKERN_CACHE_DIR=str(tmp_path / "store"), PYTHONPATH=pythonpath)
    stats = []
    for n in (1, 0):
        out = subprocess.run(
            [sys.executable, "-c", code.format(n=n)], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-3000:]
        stats.append(json.loads(out.stdout.split("JSON:")[1]))
    assert (stats[1]["lookups"], stats[1]["hits"], stats[1]["compiles"]) == (1, 1, 0)


@pytest.mark.gpu
def test_matches_reference_for_tropical_on_device_arrays():
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((40, 24)).astype(np.float32), rng.standard_normal((24, 10)).astype(np.float32)
    assert_matches_reference(tropical.matmul, tropical.reference.matmul, A, B, "maxplus", argmax=True)
