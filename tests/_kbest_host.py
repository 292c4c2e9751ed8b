"""The ``tn_kbest`` kernels run on the CPU: their CUDA source built with the host's C++ compiler under a
small emulation of the CUDA model (each block's threads are OS threads meeting at a real barrier for
``__syncthreads``, ``__shared__`` arrays one per block as the blocks run one after another), so a test
without a GPU checks the kernels' own indexing, staging and merging against the NumPy product.
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from lazykern.tn._backend import Backend
from lazykern.tn.algebras import _kbest_kernels

SHIM = r"""
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
struct lk_dim3 { unsigned x = 0, y = 0, z = 0; };
thread_local lk_dim3 threadIdx, blockIdx;
lk_dim3 blockDim, gridDim;
std::barrier<> *lk_barrier = nullptr;
using std::fma;  // CUDA's fma has float and double overloads, as std::fma does
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
inline void __syncthreads() { lk_barrier->arrive_and_wait(); }
inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
#define __host__
#define __align__(n) __attribute__((aligned(n)))
std::atomic<int> lk_and{1};
inline int __syncthreads_and(int p) {  // every thread's p, and-ed: counting.cu's preamble uses it
    lk_barrier->arrive_and_wait();
    if (!p) lk_and.store(0);
    lk_barrier->arrive_and_wait();
    const int all = lk_and.load();
    lk_barrier->arrive_and_wait();
    if (threadIdx.x == 0) lk_and.store(1);
    lk_barrier->arrive_and_wait();
    return all;
}
"""

PARAMS = (
    "void **p, long long total, int M, int N, int K, long long sa, long long ars, long long acs, long long sb, "
    "long long brs, long long bcs, long long sc, long long ldc, unsigned long long mod"
)


def _runner(name: str) -> str:
    pointers = ", ".join(
        f"({'' if g[0] == 'c' else 'const '}{'V' if g[1] == 'v' else 'CT'} *)p[{i * _kbest_kernels.KB_MAX + q}]"
        for i, g in enumerate(("av", "ac", "bv", "bc", "cv", "cc"))
        for q in range(_kbest_kernels.KB_MAX)
    )
    return runner(name, PARAMS, f"{pointers}, total, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, mod")


def runner(name: str, params: str, call: str) -> str:
    """``extern "C" void run_<name>(int blocks, int threads, <params>)``: the blocks one after another, each
    block's threads OS threads meeting at a barrier, every thread calling ``name(<call>)``."""
    return (
        f'extern "C" void run_{name}(int blocks, int threads, {params}) {{\n'
        "    gridDim.x = blocks; blockDim.x = threads;\n"
        "    for (int b = 0; b < blocks; ++b) {\n"
        "        std::barrier<> bar(threads); lk_barrier = &bar;\n"
        "        std::vector<std::thread> team;\n"
        "        for (int t = 0; t < threads; ++t) team.emplace_back([&, b, t] {\n"
        "            blockIdx.x = b; threadIdx.x = t;\n"
        f"            {name}({call});\n"
        "        });\n"
        "        for (auto &th : team) th.join();\n"
        "    }\n}\n"
    )


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("clang++")


def build(kernels: dict[str, str], where: Path) -> ctypes.CDLL:
    """A shared library of the kernels (name -> its ``extern "C"`` source), each with a ``run_<name>``."""
    parts = [SHIM, _kbest_kernels.preamble()]
    for name, source in kernels.items():
        value = "double" if "_f64_" in name else "float"
        counts = {"f8": "double", "f4": "float"}.get(name.split("_")[2], "long long")  # float-count rings
        parts += [source, f"#define V {value}", f"#define CT {counts}", _runner(name), "#undef V", "#undef CT"]
    return library("\n".join(parts), where, "kbest")


def library(text: str, where: Path, stem: str) -> ctypes.CDLL:
    """``text`` (the SHIM, kernels and their runners) built by the host's C++ compiler and loaded."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    src, lib = where / f"{stem}_{digest}.cpp", where / f"{stem}_{digest}.so"
    src.write_text(text)
    cmd = [compiler() or "g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-unknown-pragmas"]
    subprocess.run([*cmd, str(src), "-o", str(lib)], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


class HostBackend(Backend):
    """NumPy arrays whose addresses the kernels read (``Backend.pointer`` is for device arrays)."""

    def pointer(self, x: Any) -> int:
        return int(x.ctypes.data)


HOST = HostBackend("numpy", np)


def product(
    lib: ctypes.CDLL,
    A: tuple[Any, ...],
    B: tuple[Any, ...],
    k: int,
    counts: bool,
    modulus: int,
    paired: bool = False,
    floats: int = 0,
) -> tuple[str, tuple[Any, ...]]:
    """(kernel name, result parts) of :func:`_kbest_kernels.launch`'s launch, run on the CPU by ``lib``."""
    out, call = _kbest_kernels.arguments(HOST, A, B, k, counts, modulus, paired, floats=floats)
    assert call is not None
    name, blocks, args = call
    pointers = (ctypes.c_void_p * len(args[:-13]))(*args[:-13])
    total, M, N, K, *strides, mod = args[-13:]
    run = getattr(lib, f"run_{name}")
    run(
        ctypes.c_int(blocks),
        ctypes.c_int(_kbest_kernels.THREADS),
        pointers,
        ctypes.c_longlong(total),
        *(ctypes.c_int(x) for x in (M, N, K)),
        *(ctypes.c_longlong(x) for x in strides),
        ctypes.c_ulonglong(int(mod)),
    )
    return name, out


def exact_product(
    A: tuple[Any, ...], B: tuple[Any, ...], k: int
) -> dict[tuple[int, int, int], list[tuple[float, int]]]:
    """(b, i, j) -> [(value, count)], the k-best product with exact Python-int counts: every pairwise sum
    of every term, the k largest distinct values of each output, their counts summed (nothing saturates,
    nothing wraps). Operands may be device arrays (read through ``numpy.asarray`` / ``.get()``)."""
    A, B = (tuple(x.get() if hasattr(x, "get") else np.asarray(x) for x in X) for X in (A, B))
    av, ac, bv, bc = A[:k], A[k:], B[:k], B[k:]
    batch = max(av[0].shape[0], bv[0].shape[0])
    M, K, N = av[0].shape[1], av[0].shape[2], bv[0].shape[2]
    out: dict[tuple[int, int, int], list[tuple[float, int]]] = {}
    for b, i, j in np.ndindex(batch, M, N):
        ba, bb = (b if av[0].shape[0] > 1 else 0), (b if bv[0].shape[0] > 1 else 0)
        found: dict[float, int] = {}
        for kk in range(K):
            for u in range(k):
                for w in range(k):
                    x, y = av[u][ba, i, kk], bv[w][bb, kk, j]
                    if np.isfinite(x) and np.isfinite(y):
                        v = float(x + y)
                        found[v] = found.get(v, 0) + int(ac[u][ba, i, kk]) * int(bc[w][bb, kk, j])
        out[b, i, j] = sorted(found.items(), reverse=True)[:k]
    return out
