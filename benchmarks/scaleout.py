"""Scale-out benchmarks: several GPUs in one process, Dask on GPUs, cluster warm-up.

    python benchmarks/scaleout.py multigpu --batch 64 --size 1024 --out mg.json
    python benchmarks/scaleout.py dask-gpu --size 8192 --chunk 4096 --out dask.json
    python benchmarks/scaleout.py warmup --synthetic 6 --arch sm_90 --out warm.json   # CPU is enough

Every subcommand prints one JSON document and writes it to --out when given.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np
from numba import cuda  # a global, so kernels below resolve it (and the simulator can swap it)


def _emit(result: dict[str, Any], out: str | None) -> None:
    result.setdefault("python", platform.python_version())
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")


def _median_time(fn, repeat: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def _same_block(block, run):
    return block


# -- multigpu -------------------------------------------------------------------
def _backend(name: str):
    if name == "numba-naive":
        from lazykern.multigpu import numba_maxplus_backend

        return numba_maxplus_backend()
    from lazykern import tropical

    return tropical.bmm


def _drop_out(backend, a, b, *, semiring, stream, out):
    return backend(a, b, semiring=semiring, stream=stream)


def _resident(A, B, devices, backend, semiring: str, repeat: int) -> tuple[float, list[float]]:
    """Compute only: each device's share already on it, all devices launched at once."""
    from lazykern._batch_split import split_batch, takes_out

    if not takes_out(backend):
        backend = functools.partial(_drop_out, backend)

    shares = split_batch(A.shape[0], len(devices))
    staged = []
    for dev, (lo, hi) in zip(devices, shares):
        with cuda.gpus[dev]:
            stream = cuda.stream()
            a, b = cuda.to_device(A[lo:hi], stream=stream), cuda.to_device(B[lo:hi], stream=stream)
            c = cuda.device_array((hi - lo, A.shape[1], B.shape[2]), dtype=A.dtype, stream=stream)
            backend(a, b, semiring=semiring, stream=stream, out=c)  # warm: load kernels
            stream.synchronize()
            staged.append((dev, stream, a, b, c))

    def one(dev, stream, a, b, c, barrier):
        with cuda.gpus[dev]:
            barrier.wait()
            backend(a, b, semiring=semiring, stream=stream, out=c)
            stream.synchronize()

    def run():
        barrier = threading.Barrier(len(staged))
        threads = [threading.Thread(target=one, args=(*s, barrier)) for s in staged]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return _median_time(run, repeat)


def bench_multigpu(args) -> dict[str, Any]:
    from lazykern.multigpu import bmm_multi, device_count, release_buffers

    count = device_count()
    devices = [int(d) for d in args.devices.split(",")] if args.devices else list(range(count))
    dtype = np.dtype(args.dtype)
    rng = np.random.default_rng(0)
    shape_a = (args.batch, args.size, args.size)
    A = rng.standard_normal(shape_a, dtype=np.float32).astype(dtype)
    B = rng.standard_normal(shape_a, dtype=np.float32).astype(dtype)
    backend = _backend(args.backend)
    macs = args.batch * args.size**3
    rows = []
    reference = None
    counts = sorted({n for n in (1, 2, 4, 8) if n <= len(devices)} | {len(devices)})
    for n in counts:
        devs = devices[:n]

        def run(devs=devs):
            return bmm_multi(A, B, semiring=args.semiring, devices=devs, chunk=args.chunk, backend=backend)

        first = run()  # warm: compiles/loads kernels, pins staging
        if reference is None:
            reference = first
        host_s, host_all = _median_time(run, args.repeat)
        res_s, res_all = _resident(A, B, devs, backend, args.semiring, args.repeat)
        rows.append(
            {
                "devices": devs,
                "host_to_host_s": host_s,
                "host_to_host_runs": host_all,
                "host_to_host_tmacs": macs / host_s / 1e12,
                "resident_compute_s": res_s,
                "resident_compute_runs": res_all,
                "resident_tmacs": macs / res_s / 1e12,
                "matches_one_gpu": bool(np.array_equal(first, reference)),
            }
        )
        release_buffers()
    base = rows[0]
    for row in rows:
        row["host_to_host_speedup"] = base["host_to_host_s"] / row["host_to_host_s"]
        row["resident_speedup"] = base["resident_compute_s"] / row["resident_compute_s"]
    side_by_side = {
        f"{len(r['devices'])} GPU": {"host_to_host": round(r["host_to_host_speedup"], 3),
                                     "device_resident": round(r["resident_speedup"], 3)}
        for r in rows
    }  # fmt: skip
    return {
        "benchmark": "multigpu.bmm_multi",
        "device_count": count,
        "batch": args.batch,
        "size": args.size,
        "dtype": dtype.name,
        "semiring": args.semiring,
        "backend": args.backend,
        "chunk": args.chunk,
        "target": ">= 1.8x on 2 GPUs",
        "speedups": side_by_side,
        "rows": rows,
    }


# -- dask on GPUs -----------------------------------------------------------------
def bench_dask_gpu(args) -> dict[str, Any]:
    import cupy
    import dask.array as da
    import distributed
    from dask_cuda import LocalCUDACluster

    from lazykern import dask as lkdask
    from lazykern import tropical

    rng = np.random.default_rng(0)
    A = rng.standard_normal((args.size, args.size), dtype=np.float32)
    B = rng.standard_normal((args.size, args.size), dtype=np.float32)
    macs = args.size**3

    gA, gB = cupy.asarray(A), cupy.asarray(B)
    tropical.matmul(gA, gB, semiring=args.semiring)  # warm

    def one_gpu():
        tropical.matmul(gA, gB, semiring=args.semiring)
        cupy.cuda.Device().synchronize()

    single_s, single_all = _median_time(one_gpu, args.repeat)
    want = cupy.asnumpy(tropical.matmul(gA, gB, semiring=args.semiring))

    workers = args.workers or cupy.cuda.runtime.getDeviceCount()
    start = time.perf_counter()
    with LocalCUDACluster(n_workers=workers) as cluster, distributed.Client(cluster) as client:
        cluster_s = time.perf_counter() - start
        meta = cupy.empty((0, 0), dtype=np.float32)
        dA = da.from_array(A, chunks=args.chunk).map_blocks(cupy.asarray, meta=meta).persist()
        dB = da.from_array(B, chunks=args.chunk).map_blocks(cupy.asarray, meta=meta).persist()
        distributed.wait([dA, dB])

        runs = iter(range(1 << 30))

        def on_cluster():
            # a no-op map_blocks with a new run number renames the whole graph, so a
            # result still held (or not yet released) on the cluster is never reused
            run = next(runs)
            a = dA.map_blocks(_same_block, run, dtype=dA.dtype, meta=meta)
            C = lkdask.matmul(a, dB, semiring=args.semiring).persist()
            distributed.wait(C)
            # a task returns once its kernels are queued: wait for the GPUs themselves
            client.run(lambda: cupy.cuda.runtime.deviceSynchronize())
            return C

        C = on_cluster()  # warm: every worker compiles or loads its kernels
        got = cupy.asnumpy(C.compute())
        persist_s, persist_all = _median_time(on_cluster, args.repeat)
        gather_s, gather_all = _median_time(lambda: on_cluster().compute(), args.repeat)
    return {
        "benchmark": "dask.matmul on LocalCUDACluster",
        "size": args.size,
        "chunk": args.chunk,
        "semiring": args.semiring,
        "workers": workers,
        "one_gpu_s": single_s,
        "one_gpu_runs": single_all,
        "one_gpu_tmacs": macs / single_s / 1e12,
        "cluster_start_s": cluster_s,
        "dask_persist_s": persist_s,
        "dask_persist_runs": persist_all,
        "dask_persist_tmacs": macs / persist_s / 1e12,
        "dask_gather_s": gather_s,
        "dask_gather_runs": gather_all,
        "speedup_persist": single_s / persist_s,
        "matches_one_gpu": bool(np.array_equal(got, want)),
    }


# -- cluster warm-up ----------------------------------------------------------------
SYNTH_PREAMBLE = (
    "#include <cuda/std/limits>\ntemplate <typename T> __device__ T best(T a, T b) { return a > b ? a : b; }\n"
)


def synthetic_family(count: int):
    """``count`` small kernels over a header-using preamble (about NVRTC's per-kernel cost)."""
    from lazykern import KernelFamily

    fam = KernelFamily("synthetic-warmup", SYNTH_PREAMBLE)
    for i in range(count):
        fam.add(
            f"k{i}",
            f'extern "C" __global__ void k{i}(float *a, int n) {{ int j = blockIdx.x * blockDim.x + threadIdx.x;'
            f" if (j < n) a[j] = best(a[j], cuda::std::numeric_limits<float>::lowest() + {i}.0f); }}",
            signature=["ptr", "int32"],
        )
    return fam


def _resolve(spec):
    from lazykern.dask import _resolve_family

    return _resolve_family(spec)


def _import_lazykern() -> str:
    import lazykern

    return lazykern.__version__


def _job(spec, names, arch) -> dict[str, Any]:
    """What the first task on a worker pays to get its kernels."""
    start = time.perf_counter()
    fam = _resolve(spec)
    before = fam.compile_calls
    fam.warm(names, arch)
    return {"compiled": fam.compile_calls - before, "seconds": time.perf_counter() - start}


def bench_warmup(args) -> dict[str, Any]:
    import distributed

    from lazykern import dask as lkdask

    root = tempfile.mkdtemp(prefix="lazykern-warmup-")
    os.environ["LAZYKERN_CACHE_DIR"] = os.path.join(root, "client")  # before any default_cache()
    if args.synthetic:
        spec = functools.partial(synthetic_family, args.synthetic)
    else:
        spec = args.family
    family = _resolve(spec)
    names = args.kernels.split(",") if args.kernels else family.names()[: args.count]
    arch = args.arch

    bundle_path = None
    modes = ["cold", "kernels"]
    try:
        from lazykern import bundle

        family.warm(names, arch)
        bundle_path = os.path.join(root, "kernels.tar")
        bundle.export_bundle(cache=family.cache, path=bundle_path)
        modes.append("bundle")
    except ImportError:
        pass

    rows = []
    for mode in modes:
        env = {"LAZYKERN_CACHE_DIR": os.path.join(root, f"workers-{mode}")}
        start = time.perf_counter()
        with (
            distributed.LocalCluster(
                n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0", env=env
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            client.wait_for_workers(args.workers)
            cluster_s = time.perf_counter() - start
            client.run(_import_lazykern)  # untimed: every mode pays the same import
            t0 = time.perf_counter()
            report = None
            if mode == "kernels":
                report = lkdask.warm_workers(client, kernels=names, arch=arch, family=spec)
            elif mode == "bundle":
                report = lkdask.warm_workers(client, bundle=bundle_path)
            warm_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            jobs = client.run(_job, spec, names, arch)
            job_s = time.perf_counter() - t1
        rows.append(
            {
                "mode": mode,
                "cluster_start_s": cluster_s,
                "warm_s": warm_s,
                "first_job_s": job_s,
                "ready_s": warm_s + job_s,
                "job_compiles_per_worker": {w: j["compiled"] for w, j in jobs.items()},
                "warm_report": report,
            }
        )
    return {
        "benchmark": "dask.warm_workers",
        "workers": args.workers,
        "kernels": names,
        "arch": arch,
        "family": "synthetic" if args.synthetic else args.family,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)

    mg = sub.add_parser("multigpu", help="bmm_multi on 1, 2, 4 ... GPUs up to all (or --devices), side by side")
    mg.add_argument("--batch", type=int, default=64)
    mg.add_argument("--size", type=int, default=1024)
    mg.add_argument("--dtype", default="float32")
    mg.add_argument("--semiring", default="maxplus")
    mg.add_argument("--devices", default="", help="e.g. 0,1 (default: all)")
    mg.add_argument("--chunk", type=int, default=None)
    mg.add_argument("--backend", choices=["tropical", "numba-naive"], default="tropical")
    mg.add_argument("--repeat", type=int, default=5)

    dg = sub.add_parser("dask-gpu", help="dask.matmul on LocalCUDACluster vs tropical.matmul on one GPU")
    dg.add_argument("--size", type=int, default=8192)
    dg.add_argument("--chunk", type=int, default=4096)
    dg.add_argument("--semiring", default="maxplus")
    dg.add_argument("--workers", type=int, default=0, help="default: one per GPU")
    dg.add_argument("--repeat", type=int, default=3)

    wu = sub.add_parser("warmup", help="time to kernels-ready on fresh Dask workers: cold, kernels=, bundle=")
    wu.add_argument("--workers", type=int, default=2)
    wu.add_argument("--family", default="lazykern.tropical:family")
    wu.add_argument("--synthetic", type=int, default=0, help="use N synthetic kernels instead of --family")
    wu.add_argument("--kernels", default="", help="comma-separated names (default: the first --count)")
    wu.add_argument("--count", type=int, default=5)
    wu.add_argument("--arch", default=None, help="default: each worker's GPU")

    for p in (mg, dg, wu):
        p.add_argument("--out", default=None, help="write the JSON here too")
    args = parser.parse_args(argv)
    bench = {"multigpu": bench_multigpu, "dask-gpu": bench_dask_gpu, "warmup": bench_warmup}[args.what]
    _emit(bench(args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
