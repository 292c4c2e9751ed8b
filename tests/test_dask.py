from __future__ import annotations

import functools

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason='needs dask: pip install "dask[array,distributed]"')
distributed = pytest.importorskip("distributed", reason='needs distributed: pip install "dask[array,distributed]"')

import dask  # noqa: E402

from lazykern import tropical  # noqa: E402
from lazykern.scale import bundle  # noqa: E402
from lazykern.scale import dask as lkdask  # noqa: E402

SEMIRINGS = ("maxplus", "minplus", "maxmul")


def numpy_reference(A, B, semiring="maxplus", argmax=False):
    """The tropical contract in plain NumPy: NaN terms skipped, ties to the smallest k."""
    with np.errstate(invalid="ignore"):  # inf - inf and 0 * inf are NaN terms, skipped below
        terms = A[:, :, None] * B[None] if semiring == "maxmul" else A[:, :, None] + B[None]
    minimize = semiring == "minplus"
    terms = np.where(np.isnan(terms), np.inf if minimize else -np.inf, terms)
    C = terms.min(axis=1) if minimize else terms.max(axis=1)
    if not argmax:
        return C
    return C, terms.argmin(axis=1) if minimize else terms.argmax(axis=1)


def _reference():
    try:
        from lazykern.tropical import reference
    except ImportError:
        return numpy_reference
    return reference.matmul


@pytest.fixture(scope="module")
def reference():
    return _reference()


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _operands(m=7, k=13, n=5, seed=0, dtype=np.dtype(np.float32)):
    rng = np.random.default_rng(seed)
    A = rng.integers(-4, 5, (m, k)).astype(dtype)  # small integers: many ties across chunks
    B = rng.integers(-4, 5, (k, n)).astype(dtype)
    if dtype.kind == "f":
        A[0, :4] = np.nan
        A[1, :] = -np.inf
        A[2, 5] = np.inf
        B[3, :] = np.nan
        B[2, 1] = np.inf
        B[k - 1, 2 % n] = -np.inf
    return A, B


A_CHUNKS = ((3, 4), (2, 5, 1, 5))
B_CHUNKS = ((2, 5, 1, 5), (2, 3))


@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("argmax", [False, True])
def test_matches_reference_on_a_cluster(client, reference, semiring, argmax):
    A, B = _operands(dtype=np.dtype(np.float32))
    dA, dB = da.from_array(A, chunks=A_CHUNKS), da.from_array(B, chunks=B_CHUNKS)
    got = lkdask.matmul(dA, dB, semiring=semiring, argmax=argmax, backend=reference, split_every=2)
    want = reference(A, B, semiring=semiring, argmax=argmax)
    if argmax:
        C, K = client.compute(got, sync=True)
        np.testing.assert_array_equal(C, want[0])
        np.testing.assert_array_equal(K, want[1])
        assert got[0].chunks == got[1].chunks == ((3, 4), (2, 3))
    else:
        np.testing.assert_array_equal(client.compute(got, sync=True), want)
        assert got.chunks == ((3, 4), (2, 3))


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_any_scheduler_and_misaligned_k_chunks(reference, scheduler):
    A, B = _operands(m=9, k=21, n=6, seed=3, dtype=np.dtype(np.float64))
    dA = da.from_array(A, chunks=((4, 5), (1, 7, 6, 3, 4)))
    dB = da.from_array(B, chunks=((10, 11), (6,)))  # B's rows are re-chunked to A's columns
    C, K = lkdask.matmul(dA, dB, semiring="minplus", argmax=True, backend=reference)
    c, k = dask.compute(C, K, scheduler=scheduler)
    want_c, want_k = reference(A, B, semiring="minplus", argmax=True)
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(k, want_k)
    assert C.chunks == ((4, 5), (6,)) and K.dtype == np.int32 and k.dtype == np.int32


def test_ties_across_chunks_go_to_the_smallest_k(reference):
    A = np.zeros((2, 12), np.float32)
    B = np.zeros((12, 3), np.float32)
    B[[5, 9, 11], 1] = 1.0  # equal winners in the 2nd, 3rd and 4th k chunks
    B[:, 2] = -np.inf  # nothing finite: every k ties, k = 0 wins
    dA = da.from_array(A, chunks=(2, (3, 3, 4, 2)))
    dB = da.from_array(B, chunks=((3, 3, 4, 2), 3))
    for split_every in (2, 3, 8):
        C, K = dask.compute(
            *lkdask.matmul(dA, dB, argmax=True, backend=reference, split_every=split_every), scheduler="sync"
        )
        np.testing.assert_array_equal(K, [[0, 5, 0], [0, 5, 0]])
        np.testing.assert_array_equal(C, [[0, 1, -np.inf], [0, 1, -np.inf]])


def test_integer_operands(reference):
    A, B = _operands(m=5, k=9, n=4, seed=5, dtype=np.dtype(np.int32))
    got = lkdask.matmul(da.from_array(A, chunks=(2, 4)), da.from_array(B, chunks=(4, 3)), backend=reference)
    np.testing.assert_array_equal(got.compute(scheduler="sync"), reference(A, B, semiring="maxplus"))


def test_combine_prefers_a_number_to_nan():
    c1 = np.array([np.nan, 1.0, 2.0], np.float32)
    c2 = np.array([3.0, np.nan, 2.0], np.float32)
    k1, k2 = np.array([0, 1, 2]), np.array([7, 8, 9])
    C, K = lkdask._combine((c1, k1), (c2, k2), minimize=False, argmax=True)
    np.testing.assert_array_equal(C, [3.0, 1.0, 2.0])
    np.testing.assert_array_equal(K, [7, 1, 2])
    np.testing.assert_array_equal(lkdask._combine(c1, c2, minimize=True, argmax=False), [3.0, 1.0, 2.0])


def test_empty_and_zero_width_k_chunks(reference):
    A, B = _operands(m=4, k=6, n=3, seed=2, dtype=np.dtype(np.float32))
    dA = da.from_array(A, chunks=(4, (3, 0, 3)))  # a zero-width chunk in the middle
    C, K = lkdask.matmul(dA, da.from_array(B, chunks=(2, 3)), argmax=True, backend=reference)
    want_c, want_k = reference(A, B, semiring="maxplus", argmax=True)
    np.testing.assert_array_equal(C.compute(scheduler="sync"), want_c)
    np.testing.assert_array_equal(K.compute(scheduler="sync"), want_k)

    E = da.zeros((3, 0), dtype=np.float32, chunks=(2, 1))
    F = da.zeros((0, 4), dtype=np.float32, chunks=(1, 2))
    C, K = lkdask.matmul(E, F, semiring="minplus", argmax=True, backend=reference)
    np.testing.assert_array_equal(C.compute(scheduler="sync"), np.full((3, 4), np.inf, np.float32))
    np.testing.assert_array_equal(K.compute(scheduler="sync"), np.zeros((3, 4)))


def test_bad_arguments(reference):
    a = da.zeros((3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="semiring must be one of"):
        lkdask.matmul(a, a.T, semiring="plustimes", backend=reference)
    with pytest.raises(ValueError, match=r"A \(m, k\) and B \(k, n\)"):
        lkdask.matmul(a, a, backend=reference)
    with pytest.raises(TypeError, match="share a dtype"):
        lkdask.matmul(a, a.T.astype(np.float64), backend=reference)
    with pytest.raises(ValueError, match="split_every"):
        lkdask.matmul(a, a.T, split_every=1, backend=reference)


def test_default_backend_is_tropical_matmul():
    A, B = _operands(m=6, k=10, n=4, seed=9, dtype=np.dtype(np.float32))
    C, K = lkdask.matmul(da.from_array(A, chunks=(3, 4)), da.from_array(B, chunks=(4, 2)), argmax=True)
    c, k = dask.compute(C, K, scheduler="sync")
    want_c, want_k = tropical.reference.matmul(A, B, semiring="maxplus", argmax=True)
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(k, want_k)


# -- warm-up -------------------------------------------------------------------
TINY_PREAMBLE = "template <typename T> __device__ T twice(T x) { return x + x; }\n"
TINY_FRAGMENTS = {
    f"twice_{t}": f'extern "C" __global__ void twice_{t}({c} *a, int n) {{'
    f" int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = twice(a[i]); }}"
    for t, c in (("f32", "float"), ("i32", "int"))
}
NAMES = list(TINY_FRAGMENTS)


def tiny_family(cache_dir: str):
    """A small real family (no headers: quick NVRTC), built on the worker: families do not pickle."""
    from lazykern import KernelCache, KernelFamily

    fam = KernelFamily("tiny-dask", TINY_PREAMBLE, cache=KernelCache(cache_dir))
    for name, code in TINY_FRAGMENTS.items():
        fam.add(name, code, signature=["ptr", "int32"])
    return fam


def job_compiles(factory, names, arch) -> int:
    """What a task at job time pays: NVRTC calls to get its kernels."""
    fam = factory()
    fam.warm(names, arch)
    return fam.compile_calls


def test_warm_workers_compiles_before_the_job(client, tmp_path):
    factory = functools.partial(tiny_family, str(tmp_path / "cold"))
    assert client.submit(job_compiles, factory, NAMES[:1], "sm_90", pure=False).result() == 1

    factory = functools.partial(tiny_family, str(tmp_path / "warmed"))
    report = lkdask.warm_workers(client, kernels=NAMES, arch="sm_90", family=factory)
    assert set(report) == set(client.scheduler_info()["workers"])
    assert all(r["kernels"] == len(NAMES) and r["mode"] == "kernels" for r in report.values())
    # Workers share the directory: each kernel is compiled once in all, under the cache's file lock.
    assert sum(r["compiled"] for r in report.values()) == len(NAMES)
    assert client.submit(job_compiles, factory, NAMES, "sm_90", pure=False).result() == 0


def test_warm_workers_ships_a_bundle(client, tmp_path):
    source = tiny_family(str(tmp_path / "source"))
    source.warm(NAMES, "sm_90")
    path = tmp_path / "kernels.tar"
    bundle.export_bundle(cache=source.cache, path=path)
    target = str(tmp_path / "worker-cache")
    report = lkdask.warm_workers(client, bundle=path, cache_dir=target)
    assert all(r["mode"] == "bundle" and r["cache"] == target for r in report.values())
    assert job_compiles(functools.partial(tiny_family, target), NAMES, "sm_90") == 0


def test_warm_workers_arguments(client, tmp_path):
    with pytest.raises(ValueError, match="exactly one of"):
        lkdask.warm_workers(client)
    with pytest.raises(ValueError, match="exactly one of"):
        lkdask.warm_workers(client, bundle=tmp_path / "b.tar", kernels=["x"])
    with pytest.raises(ValueError, match="arch= applies to kernels="):
        lkdask.warm_workers(client, bundle=tmp_path / "b.tar", arch="sm_90")
    with pytest.raises(ValueError, match="module:attribute"):
        lkdask._warm_from_family("lazykern.tropical", ["x"], None)


@pytest.mark.slow
def test_worker_processes(reference):
    A, B = _operands(m=8, k=11, n=6, seed=4, dtype=np.dtype(np.float32))
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cl,
        distributed.Client(cl) as c,
    ):
        C, K = lkdask.matmul(
            da.from_array(A, chunks=(3, (4, 4, 3))),
            da.from_array(B, chunks=((4, 4, 3), 4)),
            semiring="maxmul",
            argmax=True,
            backend=reference,
        )
        c_got, k_got = c.compute([C, K], sync=True)
    want_c, want_k = reference(A, B, semiring="maxmul", argmax=True)
    np.testing.assert_array_equal(c_got, want_c)
    np.testing.assert_array_equal(k_got, want_k)


# -- GPU: two workers, one GPU each --------------------------------------------
@pytest.mark.gpu
def test_local_cuda_cluster_matches_one_gpu():
    from lazykern.scale.multigpu import device_count

    if device_count() < 2:
        pytest.skip(f"needs 2 GPUs, found {device_count()}")
    dask_cuda = pytest.importorskip("dask_cuda", reason="needs dask-cuda (pip install dask-cuda)")
    cupy = pytest.importorskip("cupy", reason="needs CuPy for GPU chunks")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((1024, 1536), dtype=np.float32)
    B = rng.standard_normal((1536, 768), dtype=np.float32)
    want_c, want_k = tropical.matmul(cupy.asarray(A), cupy.asarray(B), semiring="maxplus", argmax=True)
    gpu_meta = cupy.empty((0, 0), dtype=np.float32)
    with (
        dask_cuda.LocalCUDACluster(n_workers=2, CUDA_VISIBLE_DEVICES="0,1") as cluster,
        distributed.Client(cluster) as c,
    ):
        # NumPy chunks travel to the workers, which move them to their own GPU.
        dA = da.from_array(A, chunks=(512, (512, 700, 324))).map_blocks(cupy.asarray, meta=gpu_meta)
        dB = da.from_array(B, chunks=((512, 700, 324), 384)).map_blocks(cupy.asarray, meta=gpu_meta)
        C, K = lkdask.matmul(dA, dB, semiring="maxplus", argmax=True)
        c_got, k_got = c.compute([C, K], sync=True)
    assert isinstance(c_got, cupy.ndarray)
    cupy.testing.assert_array_equal(c_got, want_c)
    cupy.testing.assert_array_equal(k_got, want_k)


def test_a_worker_that_never_answers_costs_the_timeout_not_a_hang(client):
    import time

    from lazykern.errors import LazykernError

    start = time.monotonic()
    with pytest.raises(LazykernError, match="no answer within 0.5 s"):
        lkdask.on_each_worker(client, None, 0.5, time.sleep, 4)  # threads cannot be killed: a short "hang"
    assert time.monotonic() - start < 3
