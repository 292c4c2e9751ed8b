"""Foundation figures on a GPU: compile routes, cold compile, fresh-process load, launch overhead.

Run: python -m benchmarks.foundation --out DIR   (writes foundation-<date>.json there)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

GEMM = r"""
#define TILE 64
#define TM 4
extern "C" __global__ void __launch_bounds__(256) mp_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[8][TILE];
  __shared__ float Bs[8][TILE];
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
  float acc[TM][TM];
  #pragma unroll
  for (int i = 0; i < TM; ++i)
    #pragma unroll
    for (int j = 0; j < TM; ++j) acc[i][j] = -__int_as_float(0x7f800000);
  for (int k0 = 0; k0 < K; k0 += 8) {
    for (int t = threadIdx.x; t < 8 * TILE; t += 256) {
      int kk = t / TILE, mm = t % TILE;
      int r = row0 + mm, c = k0 + kk;
      As[kk][mm] = (r < M && c < K) ? A[(size_t)r * K + c] : -__int_as_float(0x7f800000);
      int br = k0 + kk, bc = col0 + mm;
      Bs[kk][mm] = (br < K && bc < N) ? B[(size_t)br * N + bc] : -__int_as_float(0x7f800000);
    }
    __syncthreads();
    #pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      float a[TM], b[TM];
      #pragma unroll
      for (int i = 0; i < TM; ++i) { a[i] = As[kk][ty * TM + i]; b[i] = Bs[kk][tx * TM + i]; }
      #pragma unroll
      for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TM; ++j) acc[i][j] = fmaxf(acc[i][j], a[i] + b[j]);
    }
    __syncthreads();
  }
  #pragma unroll
  for (int i = 0; i < TM; ++i)
    #pragma unroll
    for (int j = 0; j < TM; ++j) {
      int r = row0 + ty * TM + i, c = col0 + tx * TM + j;
      if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
    }
}
"""

AXPY = r"""
extern "C" __global__ void axpy(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * x[i] + y[i];
}
"""

CHILD = textwrap.dedent(
    """
    import time, json, sys
    t0 = time.perf_counter()
    from numba import cuda
    cuda.current_context()
    t1 = time.perf_counter()
    import lazykern
    from lazykern import KernelFamily
    t2 = time.perf_counter()
    fam = KernelFamily("bench", "", options=["-std=c++17"])
    fam.add("mp_gemm", sys.argv[1], signature=["ptr", "ptr", "ptr", "int32", "int32", "int32"])
    t3 = time.perf_counter()
    k = fam["mp_gemm"]
    k.function()
    t4 = time.perf_counter()
    print(json.dumps({"context_s": t1 - t0, "import_s": t2 - t1, "usable_s": t4 - t3,
                      "compiles": fam.compile_calls}))
    """
)


def _child(cache_dir: str) -> dict:
    env = dict(os.environ, LAZYKERN_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", CHILD, GEMM], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def startup(repeats: int = 3) -> dict:
    cold, warm = [], []
    for _ in range(repeats):
        d = tempfile.mkdtemp(prefix="lk-bench-")
        cold.append(_child(d))
        warm.append(_child(d))
    return {
        "cold_usable_s": statistics.median(r["usable_s"] for r in cold),
        "warm_fresh_process_usable_s": statistics.median(r["usable_s"] for r in warm),
        "warm_compiles": sum(r["compiles"] for r in warm),
        "context_s": statistics.median(r["context_s"] for r in warm),
        "import_s": statistics.median(r["import_s"] for r in warm),
        "raw": {"cold": cold, "warm": warm},
    }


def routes() -> dict:
    from numba import cuda

    from lazykern.compiler import compile_source, current_arch
    from lazykern.kernel import Kernel

    arch = current_arch()
    m = n = k = 2048
    a = cuda.to_device(np.random.rand(m, k).astype(np.float32))
    b = cuda.to_device(np.random.rand(k, n).astype(np.float32))
    c = cuda.device_array((m, n), np.float32)
    ref = None
    out = {}
    for route in ("nvrtc", "lto"):
        secs = []
        for _ in range(3):
            res = compile_source(GEMM, name="mp_gemm", arch=arch, route=route)
            secs.append(res.seconds)
        kern = Kernel("mp_gemm", "mp_gemm", res.code, arch=arch, signature=["ptr"] * 3 + ["int32"] * 3)
        launch = kern[(n // 64, m // 64), 256]
        launch(a, b, c, m, n, k)
        cuda.synchronize()
        got = c.copy_to_host()
        ref = got if ref is None else ref
        times = []
        for _ in range(10):
            e0, e1 = cuda.event(), cuda.event()
            e0.record()
            launch(a, b, c, m, n, k)
            e1.record()
            e1.synchronize()
            times.append(cuda.event_elapsed_time(e0, e1))
        ms = statistics.median(times)
        out[route] = {
            "compile_s_median": statistics.median(secs),
            "kernel_ms_median": ms,
            "tmacs": m * n * k / (ms / 1e3) / 1e12,
            "matches_first_route": bool(np.array_equal(got, ref)),
            "cubin_bytes": len(res.code),
        }
    sample = np.max(a.copy_to_host()[:4, :, None] + b.copy_to_host()[None, :, :4], axis=1)
    out["correct"] = bool(np.allclose(ref[:4, :4], sample))
    return out


def launch_overhead(launches: int = 5000, repeats: int = 7) -> dict:
    from numba import cuda

    from lazykern.compiler import compile_source, current_arch
    from lazykern.kernel import Kernel

    @cuda.jit
    def axpy_numba(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 2.0 * x[i] + y[i]

    n = 1024
    x = cuda.to_device(np.ones(n, np.float32))
    y = cuda.to_device(np.ones(n, np.float32))
    o = cuda.device_array(n, np.float32)
    stream = cuda.stream()
    code = compile_source(AXPY, name="axpy", arch=current_arch()).code
    kern = Kernel("axpy", "axpy", code, arch=current_arch(), signature=["ptr", "ptr", "ptr", "int32"])

    def run_lazy():
        launch = kern[4, 256, stream]
        t = time.perf_counter()
        for _ in range(launches):
            launch(x, y, o, n)
        return (time.perf_counter() - t) / launches

    def run_lazy_getitem():
        t = time.perf_counter()
        for _ in range(launches):
            kern[4, 256, stream](x, y, o, n)
        return (time.perf_counter() - t) / launches

    def run_numba():
        t = time.perf_counter()
        for _ in range(launches):
            axpy_numba[4, 256, stream](x, y, o)
        return (time.perf_counter() - t) / launches

    result = {}
    for name, fn in (
        ("lazykern_kernel", run_lazy),
        ("lazykern_kernel_getitem", run_lazy_getitem),
        ("numba_jit", run_numba),
    ):
        fn()
        stream.synchronize()
        samples = []
        for _ in range(repeats):
            samples.append(fn())
            stream.synchronize()
        result[name + "_us"] = statistics.median(samples) * 1e6
    np.testing.assert_allclose(o.copy_to_host(), 3.0)
    result["ratio_numba_over_lazykern"] = result["numba_jit_us"] / result["lazykern_kernel_getitem_us"]
    return result


def environment() -> dict:
    import importlib.metadata as md

    import numba
    from numba import cuda

    import lazykern

    dev = cuda.get_current_device()
    drv = cuda.cudadrv.driver.driver.get_version()
    numba_cuda = md.version("numba-cuda")
    return {
        "device": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
        "compute_capability": list(dev.compute_capability),
        "driver_cuda_version": list(drv),
        "numba": numba.__version__,
        "numba_cuda": numba_cuda,
        "cuda_core": md.version("cuda-core"),
        "nvrtc": list(lazykern.nvrtc_version()),
        "numpy": np.__version__,
        "python": sys.version.split()[0],
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args(argv)
    result = {
        "benchmark": "foundation",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "command": "python -m benchmarks.foundation " + " ".join(argv or sys.argv[1:]),
        "environment": environment(),
        "routes": routes(),
        "launch_overhead": launch_overhead(),
        "startup": startup(),
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"foundation-{datetime.date.today()}.json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=2)
    print(json.dumps({k: v for k, v in result.items() if k != "startup"}, indent=2))
    print(json.dumps({k: v for k, v in result["startup"].items() if k != "raw"}, indent=2))
    return result


if __name__ == "__main__":
    main()
