"""Host cost of launching the same small 3-array kernel three ways, and start-up times.

Steady state (one process, interleaved, median of repeats of N launches, no
sync inside the timed loop):

* ``lazy_kernel``        lazykern's decorator over a Numba-Python kernel
* ``numba.cuda.jit``     the same Python kernel through Numba's dispatcher
* ``lazykern Kernel``    the same kernel as CUDA C++ in a KernelFamily
* ``cuda.core.launch``   that kernel's cuda.core function, arguments packed once (cuda.core's floor)
* ``CuPy RawKernel``     the same C++ through CuPy, on CuPy views of the same memory (when CuPy is installed)

Start-up (subprocesses, fresh cache directories): time from the first call to
a finished launch (call + synchronize; imports and CUDA context creation are
excluded), cold (empty cache), warm in process (second call) and in a fresh
process that finds a warm cache (for numba.cuda.jit: its own ``cache=True``
in a fresh NUMBA_CACHE_DIR).

    python benchmarks/launch_overhead.py --out launch_overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from numba import cuda

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CXX = (
    'extern "C" __global__ void add3(const float *x, const float *y, float *out, int n) {'
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = x[i] + y[i]; }"
)


def add3(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def _launchers(n: int, cache_dir: str, numba_cache: bool = False):
    """The three launch routes over the same device arrays, each a zero-argument callable."""
    from lazykern import KernelCache, KernelFamily, lazy_kernel

    kc = KernelCache(cache_dir)
    x = cuda.to_device(np.arange(n, dtype=np.float32))
    y = cuda.to_device(np.ones(n, np.float32))
    out = cuda.device_array(n, np.float32)
    stream = cuda.stream()
    threads = 128
    blocks = (n + threads - 1) // threads
    lazy = lazy_kernel(add3, cache=kc)
    numba_k = cuda.jit(add3, cache=numba_cache)
    fam = KernelFamily("bench", cache=kc)
    fam.add("add3", CXX, signature=["ptr", "ptr", "ptr", "int32"])
    n32 = np.int32(n)

    def run_lazy():
        lazy[blocks, threads, stream](x, y, out)

    def run_numba():
        numba_k[blocks, threads, stream](x, y, out)

    loaded: dict = {}

    def run_family():
        # fam["add3"] resolves the current arch (a device query): look it up once, on the first call,
        # which thereby pays the compile or cache load as the other routes' first calls do.
        k = loaded.get("k")
        if k is None:
            k = loaded["k"] = fam["add3"]
        k[blocks, threads, stream](x, y, out, n32)

    routes = {"lazy_kernel": run_lazy, "numba.cuda.jit": run_numba, "lazykern Kernel": run_family}
    routes.update(_peer_routes(fam, (x, y, out), n32, blocks, threads, stream))
    return routes, stream, out


def _peer_routes(fam, arrays, n32, blocks: int, threads: int, stream) -> dict:
    """cuda.core.launch of the family's loaded kernel (arguments packed once) and CuPy's RawKernel of
    the same source (skipped without CuPy): the peers the Kernel route is measured against, same run."""
    from cuda.core import LaunchConfig, Stream, launch

    handle = int(stream.handle.value if hasattr(stream.handle, "value") else stream.handle)
    core_stream = Stream.from_handle(handle)
    config = LaunchConfig(grid=(blocks,), block=(threads,))
    loaded: dict = {}

    def run_core():
        fn = loaded.get("fn")
        if fn is None:
            fn = loaded["fn"] = fam["add3"].function()
            loaded["args"] = [np.intp(a.device_ctypes_pointer.value) for a in arrays] + [n32]
        launch(core_stream, config, fn, *loaded["args"])

    routes = {"cuda.core.launch": run_core}
    try:
        import cupy
    except ImportError:
        return routes
    raw = cupy.RawKernel(CXX, "add3")
    cupy_stream = cupy.cuda.ExternalStream(handle)
    views = [cupy.asarray(a) for a in arrays]  # CAI views of the Numba arrays: same memory

    def run_cupy():
        raw((blocks,), (threads,), (*views, n32), stream=cupy_stream)

    routes["CuPy RawKernel"] = run_cupy
    return routes


def steady_state(n: int, launches: int, repeats: int) -> dict:
    routes, stream, out = _launchers(n, tempfile.mkdtemp(prefix="lzk-bench-"))
    for fn in routes.values():  # instantiate, load, warm every path
        for _ in range(10):
            fn()
    stream.synchronize()
    np.testing.assert_allclose(out.copy_to_host(), np.arange(n) + 1)
    samples: dict[str, list[float]] = {name: [] for name in routes}
    for _ in range(repeats):
        for name, fn in routes.items():
            t0 = time.perf_counter()
            for _ in range(launches):
                fn()
            t1 = time.perf_counter()
            stream.synchronize()
            samples[name].append((t1 - t0) / launches * 1e6)
    return {
        name: {"median_us": statistics.median(s), "min_us": min(s), "max_us": max(s), "samples_us": s}
        for name, s in samples.items()
    }


def child(route: str, n: int, cache_dir: str) -> dict:
    """One start-up measurement in this (fresh) process."""
    routes, stream, out = _launchers(n, cache_dir, numba_cache=True)
    cuda.synchronize()
    fn = routes[route]
    t0 = time.perf_counter()
    fn()
    stream.synchronize()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    fn()
    stream.synchronize()
    second = time.perf_counter() - t0
    np.testing.assert_allclose(out.copy_to_host(), np.arange(n) + 1)
    return {"first_s": first, "second_s": second}


def _spawn(route: str, n: int, cache_dir: str, numba_dir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), NUMBA_CACHE_DIR=numba_dir)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", route, "--n", str(n), "--cache", cache_dir],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {route} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def startup(n: int) -> dict:
    out = {}
    for route in ("lazy_kernel", "numba.cuda.jit", "lazykern Kernel"):
        cache_dir = tempfile.mkdtemp(prefix="lzk-start-")
        numba_dir = tempfile.mkdtemp(prefix="numba-cache-")
        cold = _spawn(route, n, cache_dir, numba_dir)
        fresh = _spawn(route, n, cache_dir, numba_dir)
        out[route] = {
            "cold_s": cold["first_s"],
            "warm_in_process_s": cold["second_s"],
            "fresh_process_s": fresh["first_s"],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="launch_overhead.json")
    ap.add_argument("--n", type=int, default=4096, help="elements per array")
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.n, args.cache)))
        return

    dev = cuda.get_current_device()
    steady = steady_state(args.n, args.launches, args.repeats)
    start = startup(args.n)
    from lazykern.tools.bench.device import environment

    result = {
        **environment(),
        "device": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
        "n": args.n,
        "launches": args.launches,
        "repeats": args.repeats,
        "steady_state": steady,
        "startup": start,
    }
    print(f"{'route':<18}{'host us/launch':>16}{'cold s':>10}{'warm-in-proc ms':>17}{'fresh-proc ms':>15}")
    for route in steady:
        s, st = steady[route], start.get(route)
        times = (
            ""
            if st is None
            else (f"{st['cold_s']:>10.3f}{st['warm_in_process_s'] * 1e3:>17.3f}{st['fresh_process_s'] * 1e3:>15.3f}")
        )
        print(f"{route:<18}{s['median_us']:>16.2f}{times}")
    floor = steady["lazykern Kernel"]["median_us"]
    ratios = {"lazy_kernel / Kernel": steady["lazy_kernel"]["median_us"] / floor}
    if "CuPy RawKernel" in steady:
        ratios["Kernel / CuPy RawKernel"] = floor / steady["CuPy RawKernel"]["median_us"]
    result["ratios"] = ratios
    print(
        "  ".join(f"{k}: {v:.2f}x" for k, v in ratios.items()),
        "(targets: lazy_kernel <= 1.15x Kernel, Kernel <= 0.7x CuPy)",
    )
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
