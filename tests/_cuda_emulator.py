"""Run a CUDA C++ kernel of lazykern's on the CPU: g++ (C++20), one std::thread per CUDA thread, a
std::barrier for ``__syncthreads``, blocks one after another (so ``__shared__`` becomes a static).

Good for kernels whose only CUDA are thread and block indices, shared memory, block barriers (with
``__syncthreads_and`` / ``_or``) and a few intrinsics given stand-ins below (the tiled bit-permutation copy, the
tropical GEMM kernels: ``tests/_tropical_emulator.py``): it checks the kernel's own indexing and
synchronization on a machine with no GPU. Not a model of warps, timing or the memory model beyond the
barrier.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

HEAD = r"""
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
struct lk_dim3 { unsigned x = 0, y = 0, z = 0; };
thread_local lk_dim3 threadIdx, blockIdx;
lk_dim3 blockDim, gridDim;
std::atomic<int> lk_fail{0}, lk_some{0};
int lk_and_result = 1, lk_or_result = 0;
struct LkDone {
    void operator()() noexcept {
        lk_and_result = lk_fail.load() == 0, lk_or_result = lk_some.load() != 0;
        lk_fail.store(0), lk_some.store(0);
    }
};
std::barrier<LkDone> *lk_barrier;
#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __syncthreads() lk_barrier->arrive_and_wait()
static inline int __syncthreads_and(int p) {
    if (!p) lk_fail.fetch_add(1);
    lk_barrier->arrive_and_wait();
    return lk_and_result;
}
static inline int __syncthreads_or(int p) {
    if (p) lk_some.fetch_add(1);
    lk_barrier->arrive_and_wait();
    return lk_or_result;
}
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
static inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
static inline double __longlong_as_double(long long v) { double f; memcpy(&f, &v, 8); return f; }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * (__int128)b) >> 64); }
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }
template <class T> static inline T max(T a, T b) { return a > b ? a : b; }
template <class T> static inline T atomicAdd(T *p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
"""

# main(): argv = input file, output file; the input holds int64 words: grid, threads, the output's
# word count, the source's word count, the kernel's argument words, then the source words. Pointer
# arguments are written as -1 - k for "the source at word k" and -(2^62) for "the output".
MAIN = r"""
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    long long head[4];
    if (fread(head, 8, 4, f) != 4) return 2;
    const long long grid = head[0], threads = head[1], out_words = head[2], src_words = head[3];
    std::vector<long long> args(NARGS);
    if (fread(args.data(), 8, NARGS, f) != (size_t)NARGS) return 2;
    std::vector<WORD> src(src_words), dst(out_words);
    if (fread(src.data(), sizeof(WORD), src_words, f) != (size_t)src_words) return 2;
    fclose(f);
    blockDim.x = (unsigned)threads, gridDim.x = (unsigned)grid;
    for (long long b = 0; b < grid; ++b) {
        std::barrier<LkDone> bar((std::ptrdiff_t)threads);
        lk_barrier = &bar;
        std::vector<std::thread> team;
        for (long long t = 0; t < threads; ++t) team.emplace_back([&, b, t] {
            blockIdx.x = (unsigned)b, threadIdx.x = (unsigned)t;
            CALL;
        });
        for (auto &th : team) th.join();
    }
    f = fopen(argv[2], "wb");
    fwrite(dst.data(), sizeof(WORD), dst.size(), f);
    fclose(f);
    return 0;
}
"""

OUTPUT = -(1 << 62)


def available() -> bool:
    """Whether g++ is here and builds C++20's std::barrier."""
    return shutil.which("g++") is not None


class Emulated:
    """One kernel compiled for the CPU: ``kernel`` of ``source`` (a whole translation unit), whose
    parameters are ``kinds`` ("ptr", "int32", "int64" in order), moving words of ``word``."""

    def __init__(self, source: str, kernel: str, kinds: list[str], word: str, where: Path) -> None:
        self.kinds, self.where = kinds, where
        self.dtype = np.dtype({"unsigned short": np.uint16, "unsigned int": np.uint32}.get(word, np.uint64))
        args = []
        for i, kind in enumerate(kinds):
            if kind == "ptr":
                args.append(f"(args[{i}] == {OUTPUT}LL ? dst.data() : src.data() + (-1 - args[{i}]))")
            else:
                args.append(f"({'int' if kind == 'int32' else 'long long'})args[{i}]")
        main = MAIN.replace("NARGS", str(len(kinds))).replace("WORD", word)
        main = main.replace("CALL", f"{kernel}({', '.join(args)})")
        cpp = where / f"{kernel}.cpp"
        cpp.write_text(HEAD + source + main)
        self.binary = where / kernel
        subprocess.run(
            ["g++", "-std=c++20", "-O1", "-w", "-pthread", str(cpp), "-o", str(self.binary)],
            check=True,
            capture_output=True,
        )

    def __call__(self, grid: int, threads: int, src: np.ndarray, out_words: int, args: list) -> np.ndarray:
        """Run on ``grid`` blocks of ``threads``; ``args`` as the kernel takes them, a pointer given as
        ``("src", k)`` (word k of ``src``) or ``"out"``."""
        words = []
        for kind, a in zip(self.kinds, args, strict=True):
            if kind == "ptr":
                words.append(OUTPUT if a == "out" else -1 - int(a[1]))
            else:
                words.append(int(a))
        head = np.array([grid, threads, out_words, src.size, *words], dtype=np.int64)
        given, got = self.where / "in.bin", self.where / "out.bin"
        with open(given, "wb") as fh:
            fh.write(head.tobytes())
            fh.write(np.ascontiguousarray(src).view(self.dtype).tobytes())
        subprocess.run([str(self.binary), str(given), str(got)], check=True, capture_output=True)
        return np.fromfile(got, dtype=self.dtype)
