"""Tropical GEMM tile sweep: compile candidate kernels, check them, time them (T tropical MAC/s).

    python benchmarks/tile_sweep.py --out tile_sweep.json [--all | --only f32,argmax] [--repeats 10] [--jobs 8]

Each candidate is one kernel built from ``sweep_variants.cuh`` (the switches of
experimental code paths) and ``preamble.cu`` with its own tile
(``lk::Tile<BM, BN, BK, TM, TN, G>``, ``__launch_bounds__`` min blocks) and
``-D`` options, compiled with NVRTC for the current GPU (in parallel threads)
and launched through ``lazykern.kernel.Kernel`` outside the family and its
cache. Before timing, every candidate must reproduce ``tropical.reference`` on a
small adversarial problem (ties, infinities, NaN, ragged edges) and on a sampled
64 x 64 block of the timed problem; a candidate that fails is reported, not timed.
Groups:

* ``f32`` / ``i32`` / ``f64`` / ``i64`` / ``argmax``: max-plus 4096^3 (the smoke-test
  cases), ``base`` marks the tile the library uses today (argmax: one per dtype).
* ``rows``: the one-thread-per-row kernels on (2^21 x 4) x (4 x 4) and on a batch
  of 2^21 4x4x4 products, with KMAX 4 and 8.
* ``shapes``: the library itself (``tropical.matmul`` / ``bmm``) on skinny, batched
  and long-K shapes, once per tile class it could pick (``auto`` = ``choose_tile``;
  ``splitk`` = split-K plus its reduce launch). Times include the host-side launch.

Prints one table per group, fastest first, and writes everything to ``--out``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import pathlib
import statistics
import sys
import time
from typing import Any

import numpy as np

from lazykern.tropical import fragments, reference
from lazykern.tropical.fragments import Spec, TileShape

T = TileShape
SWEEP_VARIANTS = pathlib.Path(__file__).with_name("sweep_variants.cuh")
BIG = (4096, 4096, 4096)  # M, K, N


@dataclasses.dataclass
class Candidate:
    group: str
    label: str
    semiring: str
    dtype: str  # f32, f64, i32, i64
    argmax: bool
    shape: TileShape | None  # None: a rows kernel
    defines: tuple[str, ...] = ()
    kmax: int = 8
    problem: tuple[int, ...] = BIG  # (M, K, N) or (batch, M, K, N) for rows bmm
    code: bytes | None = None
    regs: str = ""
    compile_s: float = 0.0
    result: dict[str, Any] = dataclasses.field(default_factory=dict)


def gemm_candidates() -> list[Candidate]:
    """Round 3: argmax. The plain groups keep their top two (``base`` = the library's tile).

    New: integer argmax on the fast ring, tiled in place (``per-k`` is round 2's
    loop, ``-DLK_ARG_TILED=0``), per-dtype argmax tiles, BK 32 and 4x8 / 8x4
    thread tiles (fewer bookkeeping instructions per product).
    """
    c = []
    f32 = [("base 128x128x16 8x8 mb1", T(128, 128, 16, 8, 8, 1)), ("128x128x16 8x8 mb2", T(128, 128, 16, 8, 8, 2))]
    c += [Candidate("f32", lab, "maxplus", "f32", False, s) for lab, s in f32]
    i32 = [
        ("base 128x128x16 8x8 mb2 g8", T(128, 128, 16, 8, 8, 2, 8)),
        ("128x128x16 8x8 mb2", T(128, 128, 16, 8, 8, 2)),
    ]
    c += [Candidate("i32", lab, "maxplus", "i32", False, s) for lab, s in i32]
    f64 = [("base 64x64x16 4x4 mb2", T(64, 64, 16, 4, 4, 2)), ("64x32x16 4x4 mb4", T(64, 32, 16, 4, 4, 4))]
    c += [Candidate("f64", lab, "maxplus", "f64", False, s) for lab, s in f64]
    i64 = [("base 64x64x16 4x4 mb2", T(64, 64, 16, 4, 4, 2)), ("32x64x16 4x4 mb4", T(32, 64, 16, 4, 4, 4))]
    c += [Candidate("i64", lab, "maxplus", "i64", False, s) for lab, s in i64]
    per_k = ("-DLK_ARG_TILED=0",)
    arg = [
        ("base f32 64x64x16 4x4 mb2", "f32", T(64, 64, 16, 4, 4, 2), ()),
        ("f32 round-2 64x64x8 4x4 mb2", "f32", T(64, 64, 8, 4, 4, 2), ()),
        ("f32 64x64x32 4x4 mb2", "f32", T(64, 64, 32, 4, 4, 2), ()),
        ("f32 64x128x16 4x8 mb1", "f32", T(64, 128, 16, 4, 8, 1), ()),
        ("f32 32x64x16 4x4 mb4", "f32", T(32, 64, 16, 4, 4, 4), ()),
        ("base i32 64x64x16 4x4 mb2", "i32", T(64, 64, 16, 4, 4, 2), ()),
        ("i32 per-k 64x64x8 4x4 mb2", "i32", T(64, 64, 8, 4, 4, 2), per_k),
        ("i32 64x64x32 4x4 mb2", "i32", T(64, 64, 32, 4, 4, 2), ()),
        ("i32 128x64x16 8x4 mb1", "i32", T(128, 64, 16, 8, 4, 1), ()),
        ("i32 64x128x16 4x8 mb1", "i32", T(64, 128, 16, 4, 8, 1), ()),
        ("base f64 32x64x8 4x4 mb4", "f64", T(32, 64, 8, 4, 4, 4), ()),
        ("f64 64x64x16 4x4 mb2", "f64", T(64, 64, 16, 4, 4, 2), ()),
        ("f64 64x64x8 4x4 mb2", "f64", T(64, 64, 8, 4, 4, 2), ()),
        ("base i64 32x64x8 4x4 mb4", "i64", T(32, 64, 8, 4, 4, 4), ()),
        ("i64 per-k 32x64x8 4x4 mb4", "i64", T(32, 64, 8, 4, 4, 4), per_k),
        ("i64 64x64x16 4x4 mb2", "i64", T(64, 64, 16, 4, 4, 2), ()),
        ("i64 64x64x16 4x4 mb1", "i64", T(64, 64, 16, 4, 4, 1), ()),
    ]
    c += [Candidate("argmax", lab, "maxplus", dt, True, s, d) for lab, dt, s, d in arg]
    c += round4_candidates()
    c += f32peak_candidates()
    c += round6_candidates()
    c += round7_candidates()
    for kmax in (4, 8):
        c.append(Candidate("rows", f"(2^21x4)x(4x4) KMAX {kmax}", "maxplus", "f32", False, None, (), kmax,
                           (1, 2**21, 4, 4)))  # fmt: skip
        c.append(Candidate("rows", f"bmm 2^21 x 4x4x4 KMAX {kmax}", "maxplus", "f32", False, None, (), kmax,
                           (2**21, 4, 4, 4)))  # fmt: skip
    return c


def round4_candidates() -> list[Candidate]:
    """Round 4 (the default groups): i32 argmax and integer max-times on their new fast paths.

    Both now check operands at the shared-memory store (after the K tile's products)
    instead of right after their global loads; max-times has a fast ring (IMAD + IMNMX)
    for blocks of small finite operands. ``base`` = the library's tile today.
    """
    i32arg = [
        ("base 64x64x16 4x4 mb2", T(64, 64, 16, 4, 4, 2)),
        ("32x64x16 4x4 mb4", T(32, 64, 16, 4, 4, 4)),
        ("64x64x32 4x4 mb2", T(64, 64, 32, 4, 4, 2)),
        ("64x64x16 4x4 mb2 g8", T(64, 64, 16, 4, 4, 2, 8)),
        ("64x128x16 4x8 mb1", T(64, 128, 16, 4, 8, 1)),
    ]
    c = [Candidate("argmax4", f"i32 {lab}", "maxplus", "i32", True, s) for lab, s in i32arg]
    c.append(Candidate("argmax4", "i32 maxmul 64x64x16 4x4 mb2", "maxmul", "i32", True, T(64, 64, 16, 4, 4, 2)))
    mul = [
        ("base i32 128x128x16 8x8 mb2 g8", "i32", T(128, 128, 16, 8, 8, 2, 8)),
        ("i32 128x128x16 8x8 mb1", "i32", T(128, 128, 16, 8, 8, 1)),
        ("i32 64x64x16 4x4 mb2", "i32", T(64, 64, 16, 4, 4, 2)),
        ("base i64 64x64x16 4x4 mb2", "i64", T(64, 64, 16, 4, 4, 2)),
        ("i64 64x64x8 4x4 mb2", "i64", T(64, 64, 8, 4, 4, 2)),
        ("i64 32x64x16 4x4 mb4", "i64", T(32, 64, 16, 4, 4, 4)),
    ]
    c += [Candidate("maxmul", lab, "maxmul", dt, False, s) for lab, dt, s in mul]
    return c


def f32peak_candidates() -> list[Candidate]:
    """Round 5 (the default group): f32 max-plus toward 13.4 T (80% of the H100's issue limit).

    Compile-time variants of the 128x128x16 8x8 tile (``base``, 1 block/SM, register
    prefetch): ``warpxy`` (-DLK_WARP_XY=1: 8 x 4 threads per warp, B fragments one
    wavefront), ``pipe`` (-DLK_FRAG_PIPE=1: step kk + 1's fragments loaded during step
    kk), ``cpasync`` (-DLK_CP_ASYNC=1, LK_STAGES: global -> shared without registers),
    and 128-thread 64x128 / 128x64 tiles at 2 blocks/SM. BK 32 and 3-stage 128x128x16
    need more than the 48 KB of static shared memory, so they are not candidates.
    """
    base = T(128, 128, 16, 8, 8, 1)
    wide, tall = T(64, 128, 16, 8, 8, 2), T(128, 64, 16, 8, 8, 2)
    xy, pipe, cp2, cp3 = "-DLK_WARP_XY=1", "-DLK_FRAG_PIPE=1", "-DLK_CP_ASYNC=1", "-DLK_CP_ASYNC=1 -DLK_STAGES=3"
    variants = [
        ("base 128x128x16 8x8 mb1", base, ()),
        ("warpxy", base, (xy,)),
        ("pipe", base, (pipe,)),
        ("warpxy pipe", base, (xy, pipe)),
        ("cpasync2", base, (cp2,)),
        ("cpasync2 warpxy", base, (cp2, xy)),
        ("cpasync2 warpxy pipe", base, (cp2, xy, pipe)),
        ("64x128x16 mb2", wide, ()),
        ("64x128x16 mb2 warpxy", wide, (xy,)),
        ("64x128x16 mb2 cpasync3 warpxy", wide, (*cp3.split(), xy)),
        ("64x128x16 mb3", T(64, 128, 16, 8, 8, 3), ()),
        ("64x128x16 mb3 cpasync3 warpxy", T(64, 128, 16, 8, 8, 3), (*cp3.split(), xy)),
        ("128x64x16 mb2", tall, ()),
        ("128x64x16 mb2 cpasync3 warpxy", tall, (*cp3.split(), xy)),
    ]
    c = [Candidate("f32peak", lab, "maxplus", "f32", False, s, d) for lab, s, d in variants]
    big = (8192, 8192, 8192)
    for lab, s, d in variants[:1] + variants[4:6]:
        c.append(Candidate("f32peak8k", f"8192^3 {lab}", "maxplus", "f32", False, s, d, problem=big))
    for semiring in ("minplus", "maxmul"):
        for lab, s, d in variants[:1] + variants[5:6]:
            c.append(Candidate("f32peakrings", f"{semiring} {lab}", semiring, "f32", False, s, d))
    return c


def round6_candidates() -> list[Candidate]:
    """Round 6: packed i32 argmax (``argmax6``), thread tiles of 16 x 8 for f32 (``f32r6``), f64 tiles (``f64r6``).

    ``argmax6``: the winning k rides in the accumulator's low bits (``IntPackRing``), one
    VIADDMNMX per product, bookkeeping once per span of ``-DLK_PACK_SPAN`` K tiles;
    ``nopack`` is round 4's tiled fast ring (the library before). ``f32r6``: 128-thread
    blocks with 16 x 8 / 8 x 16 outputs per thread at 2 blocks/SM (a barrier of one block
    is hidden by the other), and 512-thread 4 x 8 / 8 x 4 blocks (more warps per SM).
    """
    nopack, span = "-DLK_ARG_PACK=0", lambda n: (f"-DLK_PACK_SPAN={n}",)
    arg = [
        ("nopack base 64x64x16 4x4 mb2 g8", T(64, 64, 16, 4, 4, 2, 8), (nopack,)),
        ("64x64x16 4x4 mb2 g8", T(64, 64, 16, 4, 4, 2, 8), ()),
        ("64x64x16 4x4 mb2 g8 span2", T(64, 64, 16, 4, 4, 2, 8), span(2)),
        ("64x64x16 4x4 mb2 g8 span4", T(64, 64, 16, 4, 4, 2, 8), span(4)),
        ("64x64x32 4x4 mb2 g8 span2", T(64, 64, 32, 4, 4, 2, 8), span(2)),
        ("128x64x16 8x4 mb2 g8 span4", T(128, 64, 16, 8, 4, 2, 8), span(4)),
        ("64x128x16 4x8 mb2 g8 span4", T(64, 128, 16, 4, 8, 2, 8), span(4)),
        ("128x64x16 8x4 mb2 g8", T(128, 64, 16, 8, 4, 2, 8), ()),
        ("128x128x16 8x8 mb1 g8 span4", T(128, 128, 16, 8, 8, 1, 8), span(4)),
        ("64x128x16 8x8 mb2 g8 span4", T(64, 128, 16, 8, 8, 2, 8), span(4)),
    ]
    c = [Candidate("argmax6", f"i32 {lab}", "maxplus", "i32", True, s, d) for lab, s, d in arg]
    arg.append(("128x128x16 8x8 mb1 g8", T(128, 128, 16, 8, 8, 1, 8), ()))
    for semiring in ("minplus", "maxmul"):
        for lab, s, d in (arg[0], arg[1], arg[3], arg[5], arg[7], arg[8], arg[10]):
            d = () if semiring == "maxmul" and d != (nopack,) else d  # max-times: one tile per span
            c.append(Candidate("argmax6", f"i32 {semiring} {lab}", semiring, "i32", True, s, d))
    f32 = [
        ("base 128x128x16 8x8 mb1", T(128, 128, 16, 8, 8, 1)),
        ("128x128x16 16x8 mb2", T(128, 128, 16, 16, 8, 2)),
        ("128x128x16 8x16 mb2", T(128, 128, 16, 8, 16, 2)),
        ("128x128x8 16x8 mb2", T(128, 128, 8, 16, 8, 2)),
        ("256x128x8 16x8 mb1", T(256, 128, 8, 16, 8, 1)),
        ("128x256x8 8x16 mb1", T(128, 256, 8, 8, 16, 1)),
        ("128x128x16 4x8 mb1", T(128, 128, 16, 4, 8, 1)),
        ("128x128x16 8x4 mb1", T(128, 128, 16, 8, 4, 1)),
        ("128x128x16 8x8 mb1 g8", T(128, 128, 16, 8, 8, 1, 8)),
        ("128x128x16 16x8 mb2 g8", T(128, 128, 16, 16, 8, 2, 8)),
    ]
    c += [Candidate("f32r6", lab, "maxplus", "f32", False, s) for lab, s in f32]
    base = f32[0][1]
    for n in (4, 8):  # a smaller unrolled body (ncu: 0.09 of 2.46 cycles per instruction wait for instructions)
        c.append(Candidate("f32r6", f"base unroll {n}", "maxplus", "f32", False, base, (f"-DLK_KUNROLL={n}",)))
    c.append(Candidate("f32r6", "128x128x8 8x8 mb1", "maxplus", "f32", False, T(128, 128, 8, 8, 8, 1)))
    f64 = [
        ("base 64x64x16 4x4 mb2", T(64, 64, 16, 4, 4, 2)),
        ("64x64x16 8x4 mb3", T(64, 64, 16, 8, 4, 3)),
        ("64x64x16 8x4 mb2", T(64, 64, 16, 8, 4, 2)),
        ("128x64x8 8x4 mb2", T(128, 64, 8, 8, 4, 2)),
        ("64x128x8 4x8 mb2", T(64, 128, 8, 4, 8, 2)),
        ("64x64x8 4x4 mb3", T(64, 64, 8, 4, 4, 3)),
        ("64x64x16 4x4 mb2 g8", T(64, 64, 16, 4, 4, 2, 8)),
        ("128x64x8 8x8 mb2", T(128, 64, 8, 8, 8, 2)),
    ]
    c += [Candidate("f64r6", lab, "maxplus", "f64", False, s) for lab, s in f64]
    return c


def round7_candidates() -> list[Candidate]:
    """Round 7 (``tall16``, ``tall8``): the "t" tile's products, N = 16 and N = 8 columns over a long M (a
    3-regular graph's contraction steps). ``base`` is the library's 128 x 16 x 4 tile of 4 x 2 outputs a
    thread; the others hold more outputs a thread (up to a whole row of 16) and a deeper K tile."""
    c = []
    for group, N, shapes in (
        ("tall16", 16, [("base 128x16x4 4x2", T(128, 16, 4, 4, 2)), ("128x16x8 4x2", T(128, 16, 8, 4, 2)),
                        ("256x16x8 8x2", T(256, 16, 8, 8, 2)), ("256x16x8 4x4", T(256, 16, 8, 4, 4)),
                        ("256x16x16 4x4", T(256, 16, 16, 4, 4)),
                        ("128x16x8 2x4 mb2", T(128, 16, 8, 2, 4, 2))]),
        ("tall8", 8, [("base 128x16x4 4x2", T(128, 16, 4, 4, 2)), ("256x8x8 4x2", T(256, 8, 8, 4, 2)),
                      ("256x8x16 4x2", T(256, 8, 16, 4, 2))]),
    ):  # fmt: skip
        for K, M in ((256, 1 << 18), (4096, 1 << 16)):
            c += [Candidate(group, f"K {K} {lab}", "maxplus", "f32", False, s, problem=(M, K, N)) for lab, s in shapes]
    return c


def sweep_source(code: str) -> str:
    """The variants' switches (sweep_variants.cuh, off unless a -D turns one on), the preamble, ``code``."""
    from lazykern import tropical

    return SWEEP_VARIANTS.read_text(encoding="utf-8") + "\n" + tropical.family.source.preamble + "\n" + code


def source_of(c: Candidate) -> str:
    if c.shape is None:
        code = fragments.rows_code(c.semiring, c.dtype, c.argmax, kmax=c.kmax, name="cand")
    else:
        code = fragments.gemm_code(Spec(c.semiring, c.dtype, c.argmax), shape=c.shape, name="cand")
    return sweep_source(code)


def compile_one(c: Candidate, arch: str) -> Candidate:
    from lazykern import tropical
    from lazykern.compiler import compile_source

    t0 = time.perf_counter()
    options = (*tropical.family.source.options, *c.defines)
    c.code = compile_source(source_of(c), name="cand", arch=arch, options=options).code
    c.compile_s = time.perf_counter() - t0
    return c


def res_usage(code: bytes) -> str:
    import re
    import shutil
    import subprocess
    import tempfile

    if shutil.which("cuobjdump") is None:
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(code)
        fh.flush()
        out = subprocess.run(["cuobjdump", "-res-usage", fh.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", out)
    return f"{m.group(1)}r/{m.group(2)}s" if m else ""


# ----------------------------------------------------------------- data --
def adversarial(rng, shape, dtype: str) -> np.ndarray:
    dt = np.dtype(fragments.NUMPY_DTYPES[dtype])
    X = rng.integers(-4, 5, size=shape).astype(dt)
    if dt.kind == "f":
        specials = np.array([np.inf, -np.inf, np.nan], dt)
    else:
        specials = np.array([np.iinfo(dt).min, np.iinfo(dt).max], dt)
    mask = rng.random(shape) < 0.08
    X[mask] = rng.choice(specials, size=int(mask.sum()))
    return X


def ties(rng, shape, dtype: str) -> np.ndarray:
    """Small finite values (many ties, no infinities); integers also hold +-4095 (within every fast bound)."""
    X = rng.integers(-4, 5, size=shape).astype(fragments.NUMPY_DTYPES[dtype])
    if X.dtype.kind == "i":
        mask = rng.random(shape) < 0.05
        X[mask] = rng.choice(np.array([-4095, 4095], X.dtype), size=int(mask.sum()))
    return X


INT_RANGE = 1000  # timed integer operands lie in [-INT_RANGE, INT_RANGE) (--int-range)


def timing_data(rng, shape, dtype: str) -> np.ndarray:
    dt = np.dtype(fragments.NUMPY_DTYPES[dtype])
    if dt.kind == "f":
        return rng.standard_normal(shape, dtype=np.float32).astype(dt)
    return rng.integers(-INT_RANGE, INT_RANGE, shape).astype(dt)


# ---------------------------------------------------------------- launch --
class Runner:
    """Launches one candidate on device arrays; (C, I) out."""

    def __init__(self, c: Candidate, arch: str) -> None:
        from lazykern.kernel import Kernel

        self.c = c
        sig = fragments.ROWS_SIGNATURE if c.shape is None else fragments.GEMM_SIGNATURE
        self.kernel = Kernel("cand", "cand", c.code, arch=arch, signature=sig)

    def __call__(self, A, B, C, Ix, stream, batch: int = 1) -> None:
        c = self.c
        if c.shape is None:
            M, K = A.shape[-2:]
            N = B.shape[-1]
            blocks = min(-(-batch * M // fragments.ROWS_THREADS), 132 * 64)
            sA, sB = (M * K, K * N) if batch > 1 else (0, 0)
            self.kernel[(blocks,), (fragments.ROWS_THREADS,), stream](
                A, B, C, Ix, M, N, K, K, 1, N, 1, N, batch, sA, sB, M * N if batch > 1 else 0
            )
            return
        M, K = A.shape
        N = B.shape[1]
        s = c.shape
        blocks = -(-M // s.bm) * -(-N // s.bn)
        self.kernel[(blocks, 1), (s.threads,), stream](A, B, C, Ix, M, N, K, K, N, N)


def outputs(cuda, shape, dtype: str, argmax: bool):
    dt = np.dtype(fragments.NUMPY_DTYPES[dtype])
    return cuda.device_array(shape, dt), cuda.device_array(shape if argmax else (1,), np.int32)


def compare(got_c, got_i, A, B, semiring, argmax, batched=False) -> str | None:
    fn = reference.bmm if batched else reference.matmul
    want = fn(A, B, semiring, argmax)
    wc, wi = want if argmax else (want, None)
    same = got_c == wc
    if got_c.dtype.kind == "f":
        same |= np.isnan(got_c) & np.isnan(wc)
    if not same.all():
        return f"{int((~same).sum())} of {same.size} values differ"
    if argmax and not np.array_equal(got_i, wi):
        return f"{int((got_i != wi).sum())} of {wi.size} argmax indices differ"
    return None


def check_and_time(cuda, c: Candidate, arch: str, repeats: int, rng) -> None:
    run = Runner(c, arch)
    stream = cuda.stream()
    batched = c.shape is None and c.problem[0] > 1
    # 1. Adversarial small problem, checked whole.
    if c.shape is None:
        b, M, K, N = (7, 133, c.problem[2], c.problem[3]) if batched else (1, 1000, c.problem[2], c.problem[3])
        a_shape, b_shape = ((b, M, K), (b, K, N)) if batched else ((M, K), (K, N))
    else:
        a_shape, b_shape = (197, 77), (77, 211)
    # 1b. Finite ties only (the fast paths: integer rings, packed i32 argmax), K over several tiles.
    checks = [("adversarial", adversarial, a_shape, b_shape)]
    if c.shape is not None:
        checks.append(("ties", ties, a_shape[:-1] + (150,), (150,) + b_shape[-1:]))
    for kind, make, sa, sb in checks:
        A, B = make(rng, sa, c.dtype), make(rng, sb, c.dtype)
        C, Ix = outputs(cuda, sa[:-1] + sb[-1:], c.dtype, c.argmax)
        run(cuda.to_device(A), cuda.to_device(B), C, Ix, stream, batch=sa[0] if batched else 1)
        stream.synchronize()
        err = compare(C.copy_to_host(), Ix.copy_to_host() if c.argmax else None, A, B, c.semiring, c.argmax, batched)
        if err:
            c.result = {"error": f"{kind} check: {err}"}
            return
    # 2. The timed problem; a sampled block checked.
    if batched:
        b, M, K, N = c.problem
        a_shape, b_shape, out_shape = (b, M, K), (b, K, N), (b, M, N)
    else:
        M, K, N = c.problem[-3:]
        a_shape, b_shape, out_shape = (M, K), (K, N), (M, N)
    hA, hB = timing_data(rng, a_shape, c.dtype), timing_data(rng, b_shape, c.dtype)
    A, B = cuda.to_device(hA), cuda.to_device(hB)
    C, Ix = outputs(cuda, out_shape, c.dtype, c.argmax)
    nb = b if batched else 1
    run(A, B, C, Ix, stream, batch=nb)
    stream.synchronize()
    gc, gi = C.copy_to_host(), (Ix.copy_to_host() if c.argmax else None)
    if batched:
        sel = rng.choice(nb, size=min(nb, 256), replace=False)
        err = compare(gc[sel], gi[sel] if c.argmax else None, hA[sel], hB[sel], c.semiring, c.argmax, True)
    else:
        rows = np.sort(rng.choice(M, size=min(M, 64), replace=False))
        cols = np.sort(rng.choice(N, size=min(N, 64), replace=False))
        sub = np.ix_(rows, cols)
        err = compare(gc[sub], gi[sub] if c.argmax else None, hA[rows], hB[:, cols], c.semiring, c.argmax)
    if err:
        c.result = {"error": f"timed-problem check: {err}"}
        return
    for _ in range(2):
        run(A, B, C, Ix, stream, batch=nb)
    times = []
    for _ in range(repeats):
        start, end = cuda.event(), cuda.event()
        start.record(stream)
        run(A, B, C, Ix, stream, batch=nb)
        end.record(stream)
        end.synchronize()
        times.append(cuda.event_elapsed_time(start, end) / 1e3)
    med = statistics.median(times)
    macs = nb * M * N * K
    c.result = {"median_s": med, "min_s": min(times), "tmacs": macs / med / 1e12, "macs": macs}


# ----------------------------------------------------------- library shapes --
SHAPES = [  # (label, batch or None, M, K, N)
    ("4096x64x4096", None, 4096, 64, 4096),
    ("64x4096x64", None, 64, 4096, 64),
    ("256^3", None, 256, 256, 256),
    ("1024 x 64^3", 1024, 64, 64, 64),
    ("2^21x16x16", None, 2**21, 16, 16),
    ("4096x1024x16", None, 4096, 1024, 16),
    ("2^21x4x4", None, 2**21, 4, 4),
]


def library_shapes(cuda, repeats: int, rng) -> list[dict[str, Any]]:
    from lazykern import tropical
    from lazykern.tropical.tuning import forced_tile

    rows = []
    for label, batch, M, K, N in SHAPES:
        a_shape = (M, K) if batch is None else (batch, M, K)
        b_shape = (K, N) if batch is None else (batch, K, N)
        hA, hB = timing_data(rng, a_shape, "f32"), timing_data(rng, b_shape, "f32")
        A, B = cuda.to_device(hA), cuda.to_device(hB)
        fn = tropical.matmul if batch is None else tropical.bmm
        auto = tropical.choose_tile("f32", False, batch or 1, M, N, K)
        tiles = ["", "s"] + (["t"] if N <= 16 else []) + (["r"] if K <= 8 and N <= 8 else [])
        tiles += (["r4"] if K <= 4 and N <= 4 else []) + (["splitk"] if K >= 128 else [])
        for tile in tiles:
            stream = cuda.stream()
            with forced_tile(tile):
                out = fn(A, B, "maxplus", stream=stream)
                stream.synchronize()
                for _ in range(2):
                    fn(A, B, "maxplus", out=out, stream=stream)
                times = []
                for _ in range(repeats):
                    start, end = cuda.event(), cuda.event()
                    start.record(stream)
                    fn(A, B, "maxplus", out=out, stream=stream)
                    end.record(stream)
                    end.synchronize()
                    times.append(cuda.event_elapsed_time(start, end) / 1e3)
            med = statistics.median(times)
            macs = (batch or 1) * M * N * K
            rows.append({"shape": label, "tile": tile or "(large)", "auto": tile == auto, "median_s": med,
                         "tmacs": macs / med / 1e12})  # fmt: skip
    return rows


# ------------------------------------------------------------------- main --
def main() -> None:
    global INT_RANGE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument(
        "--only",
        help="comma-separated groups: argmax6,f32r6,f64r6 (the default), "
        "f32peak,f32peak8k,f32peakrings,argmax4,maxmul,f32,i32,f64,i64,argmax,rows,shapes",
    )
    parser.add_argument("--all", action="store_true", help="every group (rounds 1-3 too: several minutes)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=8, help="parallel NVRTC compiles")
    parser.add_argument("--int-range", type=int, default=INT_RANGE, help="timed integer operands' range (fallbacks)")
    parser.add_argument("--compile-only", metavar="ARCH", help="compile for ARCH (e.g. sm_90), print registers, stop")
    args = parser.parse_args()
    INT_RANGE = args.int_range
    groups = {"argmax6", "f32r6", "f64r6"}
    if args.all:
        groups |= {"f32peak", "f32peak8k", "f32peakrings", "argmax4", "maxmul", "f32", "i32", "f64", "i64", "argmax",
                   "rows", "shapes", "tall16", "tall8"}  # fmt: skip
    elif args.only:
        groups = set(args.only.split(","))

    if args.compile_only:
        arch = args.compile_only
    else:
        from lazykern.compiler import current_arch

        arch = current_arch()
    cands = [c for c in gemm_candidates() if c.group in groups]
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(compile_one, c, arch): c for c in cands}
        for fut in concurrent.futures.as_completed(futures):
            c = futures[fut]
            try:
                fut.result()
                c.regs = res_usage(c.code)
            except Exception as exc:  # a candidate that does not compile is a result, not a crash
                c.result = {"error": f"compile: {str(exc).splitlines()[0]}"}
    print(f"compiled {len(cands)} candidates in {time.perf_counter() - t0:.1f} s for {arch}", file=sys.stderr)
    if args.compile_only:
        for c in cands:
            print(f"  {c.group:12s} {c.label:34s} {c.regs:10s} {c.result.get('error', '')}")
        return

    from numba import cuda

    rng = np.random.default_rng(0)
    for c in cands:
        if c.code is not None:
            check_and_time(cuda, c, arch, args.repeats, rng)
    dev = cuda.get_current_device()
    results: dict[str, Any] = {"device": str(dev.name.decode() if isinstance(dev.name, bytes) else dev.name),
                               "arch": arch, "candidates": []}  # fmt: skip
    for group in ("argmax6", "f32r6", "f64r6", "f32peak", "f32peak8k", "f32peakrings", "f32", "i32", "f64", "i64",
                  "argmax", "argmax4", "maxmul", "rows", "tall16", "tall8"):  # fmt: skip
        rows = [c for c in cands if c.group == group]
        if not rows:
            continue
        rows.sort(key=lambda c: -c.result.get("tmacs", -1.0))
        print(f"\n== {group} ({'x'.join(map(str, rows[0].problem))})")
        for c in rows:
            r = c.result
            perf = f"{r['tmacs']:8.3f} T MAC/s {r['median_s'] * 1e3:9.3f} ms" if "tmacs" in r else r.get("error", "")
            print(f"  {c.label:34s} {c.regs:10s} {perf}")
            results["candidates"].append(
                {
                    "group": group,
                    "label": c.label,
                    "tile": dataclasses.asdict(c.shape) if c.shape else None,
                    "defines": list(c.defines),
                    "kmax": c.kmax,
                    "problem": list(c.problem),
                    "regs": c.regs,
                    "compile_s": c.compile_s,
                    **r,
                }  # fmt: skip
            )
    if "shapes" in groups:
        results["shapes"] = library_shapes(cuda, args.repeats, rng)
        print("\n== library shapes (maxplus f32; * = choose_tile's pick)")
        for r in sorted(results["shapes"], key=lambda r: (r["shape"], -r["tmacs"])):
            print(f"  {r['shape']:14s} {r['tile']:8s}{'*' if r['auto'] else ' '} {r['tmacs']:8.3f} T MAC/s "
                  f"{r['median_s'] * 1e3:9.3f} ms")  # fmt: skip
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
