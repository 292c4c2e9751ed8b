"""The tropical GEMM kernels (preamble + fragment) on the CPU through :mod:`tests._cuda_emulator`'s g++
stand-ins: launched as :mod:`lazykern.tropical.api` launches them (the plan's kernel, grid and threads;
split-K's product into a workspace, then its reduce, or of one slice into C), so the CUDA C++ a GPU would
run is checked against :mod:`lazykern.tropical.reference` with no GPU. A 2-D grid, blocks one after another."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from lazykern.tropical import make_family
from lazykern.tropical import plan as planner
from lazykern.tropical.fragments import NUMPY_DTYPES, Spec

from ._cuda_emulator import HEAD

# main(): argv = input, output; the input: gx, gy, threads, |A|, |B|, |C|, scalars, their values, then A,
# B (int32 for a reduce's argmax workspace), C and I (int32, -777: an unwritten entry shows).
MAIN = r"""
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb");
    long long h[7];
    if (fread(h, 8, 7, f) != 7) return 2;
    const long long gx = h[0], gy = h[1], threads = h[2], nA = h[3], nB = h[4], nC = h[5], ns = h[6];
    std::vector<long long> s(ns);
    if (fread(s.data(), 8, ns, f) != (size_t)ns) return 2;
    std::vector<WORD> A(nA ? nA : 1), C(nC ? nC : 1);
    std::vector<BWORD> B(nB ? nB : 1);
    std::vector<int> I(nC ? nC : 1);
    if (fread(A.data(), sizeof(WORD), nA, f) != (size_t)nA) return 3;
    if (fread(B.data(), sizeof(BWORD), nB, f) != (size_t)nB) return 3;
    if (fread(C.data(), sizeof(WORD), nC, f) != (size_t)nC) return 3;
    if (fread(I.data(), sizeof(int), nC, f) != (size_t)nC) return 3;
    fclose(f);
    blockDim.x = (unsigned)threads; blockDim.y = blockDim.z = 1;
    gridDim.x = (unsigned)gx; gridDim.y = (unsigned)gy; gridDim.z = 1;
    for (long long by = 0; by < gy; ++by)
    for (long long bx = 0; bx < gx; ++bx) {
        std::barrier<LkDone> bar((std::ptrdiff_t)threads);
        lk_barrier = &bar;
        std::vector<std::thread> team;
        for (long long t = 0; t < threads; ++t) team.emplace_back([&, bx, by, t] {
            blockIdx.x = (unsigned)bx; blockIdx.y = (unsigned)by; threadIdx.x = (unsigned)t;
            CALL;
        });
        for (auto &th : team) th.join();
    }
    f = fopen(argv[2], "wb");
    fwrite(C.data(), sizeof(WORD), nC, f);
    fwrite(I.data(), sizeof(int), nC, f);
    fclose(f);
    return 0;
}
"""

_WORDS = {"f32": "float", "f64": "double", "i32": "int", "i64": "long long"}


class Emulator:
    """Builds each kernel once into ``where`` (g++ -O1) and runs it."""

    def __init__(self, where: Path) -> None:
        self.where, self.family, self.built = where, make_family(), {}

    def _build(self, name: str, reduce: bool) -> tuple[Path, Spec]:
        if name in self.built:
            return self.built[name]
        spec = Spec.parse(name)
        word = _WORDS[spec.dtype]
        if reduce:  # W, IW, C, I, mn, batch, splits, kslice
            call = f"{name}(A.data(), B.data(), C.data(), I.data(), (long long)s[0], (int)s[1], (int)s[2], (int)s[3])"
            bword = "int"
        else:
            args = ["A.data()", "B.data()", "C.data()", "I.data()"]
            args += [f"({'int' if k == 'int32' else 'long long'})s[{i}]" for i, k in enumerate(spec.signature[4:])]
            call, bword = f"{name}({', '.join(args)})", word
        main = MAIN.replace("BWORD", bword).replace("WORD", word).replace("CALL", call)
        cpp, binary = self.where / f"{name}.cpp", self.where / name
        cpp.write_text(HEAD + self.family.source.translation_unit(name) + main)
        flags = ["-std=c++20", "-O1", "-fno-strict-aliasing", "-w", "-pthread"]
        subprocess.run(["g++", *flags, str(cpp), "-o", str(binary)], check=True, capture_output=True)
        self.built[name] = (binary, spec)
        return self.built[name]

    def _run(self, name, grid, threads, A, B, n_out, scalars, reduce=False):
        binary, spec = self._build(name, reduce)
        dt = np.dtype(NUMPY_DTYPES[spec.dtype])
        A = np.ascontiguousarray(A, dt).ravel()
        B = np.ascontiguousarray(B, np.int32 if reduce else dt).ravel()
        head = np.array([grid[0], grid[1], threads, A.size, B.size, n_out, len(scalars), *scalars], np.int64)
        given, got = self.where / "in.bin", self.where / "out.bin"
        with open(given, "wb") as fh:
            for part in (
                head,
                A,
                B,
                np.frombuffer(b"\x5a" * (n_out * dt.itemsize), dt),
                np.full(n_out, -777, np.int32),
            ):
                fh.write(part.tobytes())
        subprocess.run([str(binary), str(given), str(got)], check=True, capture_output=True, timeout=600)
        raw = got.read_bytes()
        return np.frombuffer(raw[: n_out * dt.itemsize], dt).copy(), np.frombuffer(raw[n_out * dt.itemsize :], np.int32)

    def product(self, semiring: str, A: np.ndarray, B: np.ndarray, argmax: bool, tile: str | None = None):
        """(plan, C, argmax) of the 2-D product ``A (x) B`` (C-contiguous, layout nn), launched as the API does."""
        dtype = {np.float32: "f32", np.float64: "f64", np.int32: "i32", np.int64: "i64"}[A.dtype.type]
        (M, K), N = A.shape, B.shape[1]
        p = planner.make_plan(semiring, dtype, argmax, "nn", 1, M, N, K, False, sms=132, tile=tile)
        lda, ldb = max(K, 1), max(N, 1)
        if p.kind == "rows":
            scalars = [M, N, K, lda, 1, ldb, 1, N, 1, 0, 0, M * N]
            C, index = self._run(p.name, p.grid, p.threads, A, B, M * N, scalars)
        elif p.kind == "gemm":
            C, index = self._run(p.name, p.grid, p.threads, A, B, M * N, [M, N, K, lda, ldb, N])
        elif not p.reduce:  # split-K of one slice: the product writes C itself
            scalars = [M, N, K, lda, ldb, N, 1, 0, 0, M * N, p.splits, p.kslice]
            C, index = self._run(p.name, p.grid, p.threads, A, B, M * N, scalars)
        else:  # split-K: the product into a workspace, then the reduce
            scalars = [M, N, K, lda, ldb, N, 1, 0, 0, M * N, p.splits, p.kslice]
            W, IW = self._run(p.name, p.grid, p.threads, A, B, p.splits * M * N, scalars)
            C, index = self._run(
                p.reduce, (p.reduce_blocks, 1), 256, W, IW, M * N, [M * N, 1, p.splits, p.kslice], True
            )
        return p, C.reshape(M, N), index.reshape(M, N)
