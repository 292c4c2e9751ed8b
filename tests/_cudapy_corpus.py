"""numba-cuda 0.30.4's own test kernels (``numba/cuda/tests/cudapy/``), as a ``@lazy_kernel`` user meets them.

Each kernel below is copied from the file its case names (BSD-2-Clause, Copyright (c) 2025 NVIDIA
CORPORATION & AFFILIATES; numba-cuda's test modules import ``filecheck`` and its test harness,
so they are not imported but copied), with the arguments its test launches it with. A case is
``(name, origin, kernel, args, grid, block, options)``; ``args()`` builds fresh host arguments.

:func:`main` runs one step in a fresh process (``python -m tests._cudapy_corpus STEP STORE``):

- ``compile``: every case through ``@lazy_kernel(...).warm`` for sm_80 and sm_90 (or the arches
  named; one process per arch runs in parallel), and with
  ``--baseline`` through numba-cuda's own compile for the same signature; prints per case whether
  each compiled, whether the store served it (a second process must be served), and the error.
- ``sim`` (under ``NUMBA_ENABLE_CUDASIM=1``) / ``gpu``: every case launched by ``@cuda.jit`` and by
  ``@lazy_kernel`` on copies of the same arguments; prints whether the outputs are equal and, on
  the GPU, the host time of a launch of each.
"""

from __future__ import annotations

import cmath
import copy
import enum
import json
import math
import sys
import time
import warnings
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda
from numba.cuda import types
from numba.cuda.tests.cudapy.extensions_usecases import MyStruct, struct_model_type

ARCHES = ("sm_80", "sm_90")


def _simulating() -> bool:
    from lazykern._numba.internals import simulating

    return simulating()


@dataclass
class Case:
    name: str
    origin: str  # numba-cuda's tests/cudapy/ file the kernel is copied from
    kernel: Callable[..., None]
    args: Callable[[], list[Any]]
    grid: Any = 1
    block: Any = 1
    options: dict[str, Any] = field(default_factory=dict)
    sim: bool = True  # whether numba's simulator runs it (it lacks warp intrinsics and grid sync)
    shared: int = 0  # dynamic shared memory bytes


CASES: list[Case] = []


def kernel_case(
    origin: str,
    args: Callable[[], list[Any]],
    grid: Any = 1,
    block: Any = 1,
    *,
    name: str = "",
    sim: bool = True,
    shared: int = 0,
    **options: Any,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        CASES.append(Case(name or fn.__name__, origin, fn, args, grid, block, options, sim, shared))
        return fn

    return register


def z(n: Any, dtype: Any = np.float64, order: str = "C") -> np.ndarray:
    return np.zeros(n, dtype=dtype, order=order)


def ar(n: int, dtype: Any = np.float64) -> np.ndarray:
    return np.arange(n).astype(dtype)


# -- tests/cudapy/test_intrinsics.py -------------------------------------------------------
INTR = "tests/cudapy/test_intrinsics.py"


@kernel_case(INTR, lambda: [z(1, np.int32)], 1, 3)
def simple_threadidx(ary):
    i = cuda.threadIdx.x
    ary[0] = i


@kernel_case(INTR, lambda: [z(10, np.int32)], 1, 10)
def fill_threadidx(ary):
    i = cuda.threadIdx.x
    ary[i] = i


@kernel_case(INTR, lambda: [z((2, 3, 4), np.int32)], 1, (2, 3, 4))
def fill3d_threadidx(ary):
    i = cuda.threadIdx.x
    j = cuda.threadIdx.y
    k = cuda.threadIdx.z
    ary[i, j, k] = (i + 1) * (j + 1) * (k + 1)


@kernel_case(INTR, lambda: [z(24, np.int32)], 3, 8)
def simple_grid1d(ary):
    i = cuda.grid(1)
    ary[i] = i


@kernel_case(INTR, lambda: [z((4, 6), np.int32)], (2, 2), (2, 3))
def simple_grid2d(ary):
    i, j = cuda.grid(2)
    ary[i, j] = i + j


@kernel_case(INTR, lambda: [z(1, np.int32)], 3, 4)
def simple_gridsize1d(ary):
    i = cuda.grid(1)
    x = cuda.gridsize(1)
    if i == 0:
        ary[0] = x


@kernel_case(INTR, lambda: [z(2, np.int32)], (2, 3), (2, 2))
def simple_gridsize2d(ary):
    i, j = cuda.grid(2)
    x, y = cuda.gridsize(2)
    if i == 0 and j == 0:
        ary[0] = x
        ary[1] = y


@kernel_case(INTR, lambda: [z((5, 7), np.float32)], (1, 1), (2, 2))
def intrinsic_forloop_step(c):
    startX, startY = cuda.grid(2)
    gridX = cuda.gridDim.x * cuda.blockDim.x
    gridY = cuda.gridDim.y * cuda.blockDim.y
    height, width = c.shape

    for x in range(startX, width, gridX):
        for y in range(startY, height, gridY):
            c[y, x] = x + y


@kernel_case(INTR, lambda: [z(1, np.int32), np.uint32(0xF00F00FF)])
def simple_popc(ary, c):
    ary[0] = cuda.popc(c)


@kernel_case(INTR, lambda: [z(1, np.uint32), np.uint32(0x00F0000F)])
def simple_brev(ary, c):
    ary[0] = cuda.brev(c)


@kernel_case(INTR, lambda: [z(1, np.int32), np.int64(0x0F0)])
def simple_clz(ary, c):
    ary[0] = cuda.clz(c)


@kernel_case(INTR, lambda: [z(1, np.int32), np.int32(0x100)])
def simple_ffs(ary, c):
    ary[0] = cuda.ffs(c)


@kernel_case(INTR, lambda: [z(1, np.float32), np.float32(2.0), np.float32(3.0), np.float32(4.0)])
def simple_fma(ary, a, b, c):
    ary[0] = cuda.fma(a, b, c)


@kernel_case(INTR, lambda: [z(1, np.float64), 27.0])
def simple_cbrt(ary, a):
    ary[0] = cuda.cbrt(a)


@kernel_case(INTR, lambda: [z(1, np.int64), True, np.int64(3), np.int64(4)])
def simple_selp(ary, c, a, b):
    ary[0] = cuda.selp(c, a, b)


@kernel_case(INTR, lambda: [z(1, np.int32), np.int32(16)], 1, 5)
def simple_laneid(ary, n):
    i = cuda.threadIdx.x
    if i == 4:
        ary[0] = cuda.laneid + n


@kernel_case(INTR, lambda: [z(1, np.int32)], 1, 1)
def simple_warpsize(ary):
    ary[0] = cuda.warpsize


@kernel_case(INTR, lambda: [z(2, np.float64), 2.5, 3.5])
def simple_round(ary, a, b):
    ary[0] = round(a)
    ary[1] = round(b, 0)


# -- float16 (tests/cudapy/test_intrinsics.py) ----------------------------------------------
def f16(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float16)


@kernel_case(INTR, lambda: [f16(0), f16(1.5), f16(2.25)])
def simple_hadd(ary, a, b):
    ary[0] = cuda.fp16.hadd(a[0], b[0])


@kernel_case(INTR, lambda: [f16(0), np.float16(1.5), np.float16(2.25)])
def simple_hadd_scalar(ary, a, b):
    ary[0] = cuda.fp16.hadd(a, b)


@kernel_case(INTR, lambda: [f16(0), f16(1.5), f16(2.0), f16(0.25)])
def simple_hfma(ary, a, b, c):
    ary[0] = cuda.fp16.hfma(a[0], b[0], c[0])


@kernel_case(INTR, lambda: [f16(0), np.float16(1.5), np.float16(2.0), np.float16(0.25)])
def simple_hfma_scalar(ary, a, b, c):
    ary[0] = cuda.fp16.hfma(a, b, c)


@kernel_case(INTR, lambda: [f16(0), f16(3.0), f16(1.25)])
def simple_hsub(ary, a, b):
    ary[0] = cuda.fp16.hsub(a[0], b[0])


@kernel_case(INTR, lambda: [f16(0), f16(3.0), f16(1.25)])
def simple_hmul(ary, a, b):
    ary[0] = cuda.fp16.hmul(a[0], b[0])


@kernel_case(INTR, lambda: [f16(0), np.float16(3.0), np.float16(1.5)])
def simple_hdiv_scalar(ary, a, b):
    ary[0] = cuda.fp16.hdiv(a, b)


@kernel_case(INTR, lambda: [f16(0), f16(3.0)])
def simple_hneg(ary, a):
    ary[0] = cuda.fp16.hneg(a[0])


@kernel_case(INTR, lambda: [f16(0), np.float16(-3.0)])
def simple_habs_scalar(ary, a):
    ary[0] = cuda.fp16.habs(a)


@kernel_case(INTR, lambda: [z(1, np.bool_), np.float16(3.0), np.float16(4.0)])
def simple_hlt_scalar(ary, a, b):
    ary[0] = cuda.fp16.hlt(a, b)


@kernel_case(INTR, lambda: [z(1, np.bool_), np.float16(3.0), np.float16(3.0)])
def simple_heq_scalar(ary, a, b):
    ary[0] = cuda.fp16.heq(a, b)


@cuda.jit(device=True)
def hlt_func_1(x, y):
    return cuda.fp16.hlt(x, y)


@kernel_case(INTR, lambda: [z(1, np.bool_), np.float16(1), np.float16(2), np.float16(3)])
def multiple_hcmp_3(r, a, b, c):
    # Different float16 predicates used in the caller and callee
    r[0] = hlt_func_1(a, b) and cuda.fp16.hge(c, b)


@kernel_case(INTR, lambda: [f16(0), np.float16(1.0), np.float16(2.0)])
def simple_hmax_scalar(ary, a, b):
    ary[0] = cuda.fp16.hmax(a, b)


@kernel_case(INTR, lambda: [f16(0, 0, 0), f16(0.5, 1.0, 2.0)], 1, 3)
def simple_hsin(r, x):
    i = cuda.grid(1)
    if i < len(r):
        r[i] = cuda.fp16.hsin(x[i])


@kernel_case(INTR, lambda: [f16(0, 0, 0), f16(0.5, 1.0, 2.0)], 1, 3)
def simple_hexp(r, x):
    i = cuda.grid(1)
    if i < len(r):
        r[i] = cuda.fp16.hexp(x[i])


@kernel_case(INTR, lambda: [f16(0, 0, 0), f16(0.5, 1.0, 2.0)], 1, 3)
def simple_hlog2(r, x):
    i = cuda.grid(1)
    if i < len(r):
        r[i] = cuda.fp16.hlog2(x[i])


@kernel_case(INTR, lambda: [f16(0, 0, 0), f16(0.25, 1.0, 4.0)], 1, 3)
def simple_hsqrt(r, x):
    i = cuda.grid(1)
    if i < len(r):
        r[i] = cuda.fp16.hsqrt(x[i])


@kernel_case("tests/cudapy/test_operator.py", lambda: [f16(0, 0), f16(1.5, 2.0), f16(0.5, 4.0)], 1, 2)
def float16_arith(r, a, b):
    i = cuda.grid(1)
    r[i] = a[i] * b[i] + a[i] - b[i]


@kernel_case("tests/cudapy/test_casting.py", lambda: [z(2, np.float32), f16(1.5, -2.25)], 1, 2)
def float16_to_float32(r, x):
    i = cuda.grid(1)
    r[i] = np.float32(x[i])


# -- tests/cudapy/test_sync.py: shared memory, fences, warps --------------------------------
SYNC = "tests/cudapy/test_sync.py"


@kernel_case(SYNC, lambda: [z(20, np.int32)], 2, 10)
def useless_syncthreads(ary):
    i = cuda.grid(1)
    cuda.syncthreads()
    ary[i] = i


@kernel_case(SYNC, lambda: [z(16, np.int32)], 1, 16, sim=False)
def useless_syncwarp(ary):
    i = cuda.grid(1)
    cuda.syncwarp()
    ary[i] = i


@kernel_case(SYNC, lambda: [z(1, np.int32)], 1, 32, sim=False)
def coop_syncwarp(res):
    sm = cuda.shared.array(32, np.int32)
    i = cuda.grid(1)
    sm[i] = i
    cuda.syncwarp()
    if i < 16:
        sm[i] = sm[i] + sm[i + 16]
        cuda.syncwarp(0xFFFF)
    if i < 8:
        sm[i] = sm[i] + sm[i + 8]
        cuda.syncwarp(0xFF)
    if i < 4:
        sm[i] = sm[i] + sm[i + 4]
        cuda.syncwarp(0xF)
    if i < 2:
        sm[i] = sm[i] + sm[i + 2]
        cuda.syncwarp(0x3)
    if i == 0:
        res[0] = sm[0] + sm[1]


@kernel_case(SYNC, lambda: [z(32, np.int32)], 1, 32)
def simple_smem(ary):
    N = 100
    sm = cuda.shared.array(N, np.int32)
    i = cuda.grid(1)
    if i == 0:
        for j in range(N):
            sm[j] = j
    cuda.syncthreads()
    ary[i] = sm[i]


@kernel_case(SYNC, lambda: [z((2, 4), np.float32)], (1, 1), (2, 4))
def coop_smem2d(ary):
    i, j = cuda.grid(2)
    sm = cuda.shared.array((10, 20), np.float32)
    sm[i, j] = (i + 1) / (j + 1)
    cuda.syncthreads()
    ary[i, j] = sm[i, j]


@kernel_case(SYNC, lambda: [z(16, np.float32)], 1, 16, shared=64, sim=False)
def dyn_shared_memory(ary):
    i = cuda.grid(1)
    sm = cuda.shared.array(0, np.float32)
    sm[i] = i * 2
    cuda.syncthreads()
    ary[i] = sm[i]


@kernel_case(SYNC, lambda: [z(1, np.int32)])
def use_threadfence(ary):
    ary[0] += 123
    cuda.threadfence()
    ary[0] += 321


@kernel_case(SYNC, lambda: [z(1, np.int32)])
def use_threadfence_block(ary):
    ary[0] += 123
    cuda.threadfence_block()
    ary[0] += 321


@kernel_case(SYNC, lambda: [z(1, np.int32)])
def use_threadfence_system(ary):
    ary[0] += 123
    cuda.threadfence_system()
    ary[0] += 321


@kernel_case(SYNC, lambda: [z(8, np.int32), np.arange(8, dtype=np.int32) % 3], 1, 8)
def use_syncthreads_count(ary_out, ary_in):
    i = cuda.grid(1)
    ary_out[i] = cuda.syncthreads_count(ary_in[i])


@kernel_case(SYNC, lambda: [z(8, np.int32), np.arange(8, dtype=np.int32) % 3], 1, 8)
def use_syncthreads_and(ary_out, ary_in):
    i = cuda.grid(1)
    ary_out[i] = cuda.syncthreads_and(ary_in[i])


@kernel_case(SYNC, lambda: [z(8, np.int32), np.arange(8, dtype=np.int32) % 3], 1, 8)
def use_syncthreads_or(ary_out, ary_in):
    i = cuda.grid(1)
    ary_out[i] = cuda.syncthreads_or(ary_in[i])


# -- tests/cudapy/test_warp_ops.py -----------------------------------------------------------
WARP = "tests/cudapy/test_warp_ops.py"


@kernel_case(WARP, lambda: [z(32, np.int32)], 1, 32, sim=False)
def useful_syncwarp(ary):
    i = cuda.grid(1)
    if i == 0:
        ary[0] = 42
    cuda.syncwarp(0xFFFFFFFF)
    ary[i] = ary[0]


@kernel_case(WARP, lambda: [z(32, np.int32), np.int32(4)], 1, 32, sim=False)
def use_shfl_sync_idx(ary, idx):
    i = cuda.grid(1)
    val = cuda.shfl_sync(0xFFFFFFFF, i, idx)
    ary[i] = val


@kernel_case(WARP, lambda: [z(32, np.int32), np.int32(5)], 1, 32, sim=False)
def use_shfl_sync_up(ary, delta):
    i = cuda.grid(1)
    val = cuda.shfl_up_sync(0xFFFFFFFF, i, delta)
    ary[i] = val


@kernel_case(WARP, lambda: [z(32, np.int32), np.int32(5)], 1, 32, sim=False)
def use_shfl_sync_down(ary, delta):
    i = cuda.grid(1)
    val = cuda.shfl_down_sync(0xFFFFFFFF, i, delta)
    ary[i] = val


@kernel_case(WARP, lambda: [z(32, np.int32), np.int32(16)], 1, 32, sim=False)
def use_shfl_sync_xor(ary, xor):
    i = cuda.grid(1)
    val = cuda.shfl_xor_sync(0xFFFFFFFF, i, xor)
    ary[i] = val


@kernel_case(WARP, lambda: [z(32, np.float64), 3.5], 1, 32, sim=False)
def use_shfl_sync_with_val(ary, into):
    i = cuda.grid(1)
    val = cuda.shfl_sync(0xFFFFFFFF, into, 0)
    ary[i] = val


@kernel_case(WARP, lambda: [np.ones(32, np.int32), z(32, np.int32)], 1, 32, sim=False)
def use_vote_sync_all(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.all_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


@kernel_case(WARP, lambda: [np.arange(32, dtype=np.int32) % 2, z(32, np.int32)], 1, 32, sim=False)
def use_vote_sync_any(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.any_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


@kernel_case(WARP, lambda: [np.arange(32, dtype=np.int32) % 2, z(32, np.int32)], 1, 32, sim=False)
def use_vote_sync_eq(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.eq_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


@kernel_case(WARP, lambda: [z(32, np.uint32)], 1, 32, sim=False)
def use_vote_sync_ballot(ary):
    i = cuda.threadIdx.x
    ballot = cuda.ballot_sync(0xFFFFFFFF, True)
    ary[i] = ballot


@kernel_case(WARP, lambda: [np.arange(32, dtype=np.int32) % 4, z(32, np.uint32)], 1, 32, sim=False)
def use_match_any_sync(ary_in, ary_out):
    i = cuda.grid(1)
    ballot = cuda.match_any_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = ballot


@kernel_case(WARP, lambda: [np.full(32, 7, np.int32), z(32, np.uint32)], 1, 32, sim=False)
def use_match_all_sync(ary_in, ary_out):
    i = cuda.grid(1)
    ballot, pred = cuda.match_all_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = ballot if pred else 0


@kernel_case(WARP, lambda: [z(32, np.uint32)], 1, 32, sim=False)
def use_independent_scheduling(arr):
    i = cuda.threadIdx.x
    if i % 4 == 0:
        ballot = cuda.ballot_sync(0x11111111, True)
    elif i % 4 == 1:
        ballot = cuda.ballot_sync(0x22222222, True)
    elif i % 4 == 2:
        ballot = cuda.ballot_sync(0x44444444, True)
    elif i % 4 == 3:
        ballot = cuda.ballot_sync(0x88888888, True)
    arr[i] = ballot


@kernel_case(WARP, lambda: [z(32, np.uint32)], 1, 32, sim=False)
def use_activemask(ary):
    i = cuda.threadIdx.x
    ary[i] = cuda.activemask()


@kernel_case(WARP, lambda: [z(32, np.uint32)], 1, 32, sim=False)
def use_lanemask_lt(ary):
    i = cuda.threadIdx.x
    ary[i] = cuda.lanemask_lt()


# -- tests/cudapy/test_constmem.py ------------------------------------------------------------
CONST = "tests/cudapy/test_constmem.py"
CONST1D = np.arange(10, dtype=np.float64) / 2.0
CONST2D = np.asfortranarray(np.arange(100, dtype=np.int32).reshape(10, 10))
CONST3D = (np.arange(5 * 5 * 5, dtype=np.complex64).reshape(5, 5, 5) + 1j) / 2j
CONST3BYTES = np.arange(3, dtype=np.uint8)
CONST_RECORD = np.array([(1.0, 2), (3.0, 4)], dtype=[("x", float), ("y", int)])
CONST_RECORD_ALIGN = np.array(
    [(1, 2, 3, 0xDEADBEEF, 8), (4, 5, 6, 0xBEEFDEAD, 10)],
    dtype=np.dtype(
        dtype=[("a", np.uint8), ("b", np.uint8), ("x", np.uint8), ("y", np.uint32), ("z", np.uint8)], align=True
    ),
)


@kernel_case(CONST, lambda: [z(10)], 1, 10)
def cuconst(A):
    C = cuda.const.array_like(CONST1D)
    i = cuda.grid(1)
    # +1 or it'll be loaded & stored as a u32
    A[i] = C[i] + 1.0


@kernel_case(CONST, lambda: [z((10, 10), np.int32)], (2, 2), (5, 5))
def cuconst2d(A):
    C = cuda.const.array_like(CONST2D)
    i, j = cuda.grid(2)
    A[i, j] = C[i, j]


@kernel_case(CONST, lambda: [z((5, 5, 5), np.complex64)], 1, (5, 5, 5))
def cuconst3d(A):
    C = cuda.const.array_like(CONST3D)
    i = cuda.threadIdx.x
    j = cuda.threadIdx.y
    k = cuda.threadIdx.z
    A[i, j, k] = C[i, j, k]


@kernel_case(CONST, lambda: [z(3, np.uint8)], 1, 3)
def cuconst3bytes(A):
    C = cuda.const.array_like(CONST3BYTES)
    i = cuda.grid(1)
    A[i] = C[i]


@kernel_case(CONST, lambda: [z(2), z(2, np.int64)], 1, 2)
def cuconstRec(A, B):
    C = cuda.const.array_like(CONST_RECORD)
    i = cuda.grid(1)
    A[i] = C[i]["x"]
    B[i] = C[i]["y"]


@kernel_case(CONST, lambda: [z(2, np.uint8), z(2, np.uint8), z(2, np.uint8), z(2, np.uint32), z(2, np.uint8)], 1, 2)
def cuconstRecAlign(A, B, C, D, E):
    Z = cuda.const.array_like(CONST_RECORD_ALIGN)
    i = cuda.grid(1)
    A[i] = Z[i]["a"]
    B[i] = Z[i]["b"]
    C[i] = Z[i]["x"]
    D[i] = Z[i]["y"]
    E[i] = Z[i]["z"]


# -- tests/cudapy/test_localmem.py -------------------------------------------------------------
LOCAL = "tests/cudapy/test_localmem.py"


@kernel_case(LOCAL, lambda: [ar(1000, np.int32), z(1000, np.int32)])
def culocal(A, B):
    C = cuda.local.array(1000, dtype=np.int32)
    for i in range(C.shape[0]):
        C[i] = A[i]
    for i in range(C.shape[0]):
        B[i] = C[i]


@kernel_case(LOCAL, lambda: [ar(100, np.complex128), z(100, np.complex128)])
def culocalcomplex(A, B):
    C = cuda.local.array(100, dtype=np.complex128)
    for i in range(C.shape[0]):
        C[i] = A[i]
    for i in range(C.shape[0]):
        B[i] = C[i]


@kernel_case(LOCAL, lambda: [ar(5, np.float32), z(5, np.float32)])
def culocal1tuple(A, B):
    C = cuda.local.array((5,), dtype=np.float32)
    for i in range(C.shape[0]):
        C[i] = A[i]
    for i in range(C.shape[0]):
        B[i] = C[i]


@kernel_case(LOCAL, lambda: [z((3, 4), np.int64)], 1, 1)
def culocal2d(A):
    C = cuda.local.array((3, 4), dtype=np.int64)
    for i in range(3):
        for j in range(4):
            C[i, j] = i * 10 + j
    for i in range(3):
        for j in range(4):
            A[i, j] = C[i, j]


# -- tests/cudapy/test_atomics.py ---------------------------------------------------------------
ATOM = "tests/cudapy/test_atomics.py"


@kernel_case(ATOM, lambda: [np.zeros(32, np.uint32)], 1, 32)
def atomic_add(ary):
    tid = cuda.threadIdx.x
    sm = cuda.shared.array(32, np.uint32)
    sm[tid] = 0
    cuda.syncthreads()
    bin = ary[tid] % 32
    cuda.atomic.add(sm, bin, 1)
    cuda.syncthreads()
    ary[tid] = sm[tid]


@kernel_case(ATOM, lambda: [np.zeros((4, 8), np.uint32)], 1, (4, 8))
def atomic_add2(ary):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sm = cuda.shared.array((4, 8), np.uint32)
    sm[tx, ty] = ary[tx, ty]
    cuda.syncthreads()
    cuda.atomic.add(sm, (tx, ty), 1)
    cuda.syncthreads()
    ary[tx, ty] = sm[tx, ty]


@kernel_case(ATOM, lambda: [np.zeros(1, np.float64)], 1, 32)
def atomic_add_double_global(ary):
    cuda.atomic.add(ary, 0, 1.5)


@kernel_case(ATOM, lambda: [np.zeros(1, np.int64)], 1, 32)
def atomic_sub_global(ary):
    cuda.atomic.sub(ary, 0, 3)


@kernel_case(ATOM, lambda: [np.full(1, 0xFF, np.uint32), np.uint32(0x0F)], 1, 8)
def atomic_and_global(ary, op2):
    cuda.atomic.and_(ary, 0, op2)


@kernel_case(ATOM, lambda: [np.zeros(1, np.uint64), np.uint64(0xF0)], 1, 8)
def atomic_or_global(ary, op2):
    cuda.atomic.or_(ary, 0, op2)


@kernel_case(ATOM, lambda: [np.zeros(1, np.int32), np.int32(5)], 1, 8)
def atomic_xor_global(ary, op2):
    cuda.atomic.xor(ary, 0, op2)


@kernel_case(ATOM, lambda: [np.zeros(1, np.float32), ar(32, np.float32)], 1, 32)
def atomic_max(res, ary):
    tx = cuda.threadIdx.x
    cuda.atomic.max(res, 0, ary[tx])


@kernel_case(ATOM, lambda: [np.full(1, 100, np.int64), ar(32, np.int64)], 1, 32)
def atomic_min(res, ary):
    tx = cuda.threadIdx.x
    cuda.atomic.min(res, 0, ary[tx])


@kernel_case(ATOM, lambda: [np.zeros(1, np.float64), ar(32, np.float64)], 1, 32)
def atomic_nanmax(res, ary):
    tx = cuda.threadIdx.x
    cuda.atomic.nanmax(res, 0, ary[tx])


@kernel_case(ATOM, lambda: [np.zeros(1, np.uint32), np.uint32(10)], 1, 32)
def atomic_inc32(ary, rconst):
    cuda.atomic.inc(ary, 0, rconst)


@kernel_case(ATOM, lambda: [np.full(1, 50, np.uint64), np.uint64(100)], 1, 32)
def atomic_dec64(ary, rconst):
    cuda.atomic.dec(ary, 0, rconst)


@kernel_case(ATOM, lambda: [np.zeros(1, np.int32), np.int32(7)], 1, 1)
def atomic_exch(ary, fill_val):
    cuda.atomic.exch(ary, 0, fill_val)


@kernel_case(ATOM, lambda: [np.arange(8, dtype=np.int32) % 2, z(8, np.int32), np.int32(1), np.int32(9)], 1, 8)
def atomic_compare_and_swap(res, old, fill, val):
    gid = cuda.grid(1)
    if gid < res.size:
        old[gid] = cuda.atomic.compare_and_swap(res[gid:], fill, val)


@kernel_case(ATOM, lambda: [np.arange(8, dtype=np.int64) % 2, z(8, np.int64), np.int64(1), np.int64(9)], 1, 8)
def atomic_cas(res, old, fill, val):
    gid = cuda.grid(1)
    if gid < res.size:
        old[gid] = cuda.atomic.cas(res, gid, fill, val)


# -- tests/cudapy/test_record_dtype.py -----------------------------------------------------------
REC = "tests/cudapy/test_record_dtype.py"
recordtype = np.dtype(
    [("a", np.float64), ("b", np.int32), ("c", np.complex64), ("d", (np.uint8, 5))],
    align=True,
)
recordwitharray = np.dtype([("g", np.int32), ("h", np.float32, 2)], align=True)
recordwith2darray = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])
nested_array1_dtype = np.dtype([("array1", np.int16, (3,))], align=True)


def sample1d() -> np.ndarray:
    ary = np.zeros(3, dtype=recordtype)
    for i in range(ary.size):
        x = i + 1
        ary[i]["a"] = x / 2
        ary[i]["b"] = x
        ary[i]["c"] = x * 1j
        ary[i]["d"] = x
    return ary


@kernel_case(REC, lambda: [sample1d(), 1, 2.5])
def set_a(ary, i, v):
    ary[i].a = v


@kernel_case(REC, lambda: [sample1d(), 2, np.int32(9)])
def set_b(ary, i, v):
    ary[i].b = v


@kernel_case(REC, lambda: [sample1d(), 0, np.complex64(3 + 4j)])
def set_c(ary, i, v):
    ary[i].c = v


@kernel_case(REC, lambda: [sample1d(), 0, 2], sim=False)
def set_record(ary, i, j):
    ary[i] = ary[j]


@kernel_case(REC, lambda: [sample1d()[1], 7.25])
def record_set_a(r, v):
    r.a = v


@kernel_case(REC, lambda: [sample1d()[2], np.int32(-4)])
def record_set_b(r, v):
    r.b = v


@kernel_case(REC, lambda: [sample1d()[2], 1.5 - 2j])
def record_set_c(r, v):
    r.c = v


@kernel_case(REC, lambda: [sample1d()[1], z(1)])
def record_read_a(r, arr):
    arr[0] = r.a


@kernel_case(REC, lambda: [sample1d()[2], z(1, np.int32)])
def record_read_b(r, arr):
    arr[0] = r.b


@kernel_case(REC, lambda: [sample1d()[2], z(1, np.complex64)])
def record_read_c(r, arr):
    arr[0] = r.c


@kernel_case(REC, lambda: [np.zeros(1, dtype=recordwitharray)[0]])
def record_write_array(r):
    r.g = 2
    r.h[0] = 3.0
    r.h[1] = 4.0


@kernel_case(REC, lambda: [np.zeros(1, dtype=recordwith2darray)[0]])
def record_write_2d_array(r):
    r.i = 3
    r.j[0, 0] = 5.0
    r.j[0, 1] = 6.0
    r.j[1, 0] = 7.0
    r.j[1, 1] = 8.0
    r.j[2, 0] = 9.0
    r.j[2, 1] = 10.0


def _rec_with_array() -> np.void:
    r = np.zeros(1, dtype=recordwitharray)[0]
    r["h"] = (1.5, 2.5)
    return r


@kernel_case(REC, lambda: [_rec_with_array(), z(2, np.float32)])
def record_read_array(r, a):
    a[0] = r.h[0]
    a[1] = r.h[1]


@kernel_case(REC, lambda: [np.zeros(2, dtype=recordwith2darray), sample_2d_rec()], sim=False)
def recarray_set_record(ary, rec):
    ary[0] = rec


def sample_2d_rec() -> np.void:
    r = np.zeros(1, dtype=recordwith2darray)[0]
    r["i"] = 4
    r["j"] = np.arange(6, dtype=np.float32).reshape(3, 2)
    return r


@kernel_case(REC, lambda: [sample_2d_rec(), np.zeros(1, dtype=recordwith2darray)[0]])
def record_setitem_array(rec_source, rec_dest):
    rec_dest["j"] = rec_source["j"]


@kernel_case(REC, lambda: [np.zeros(1, dtype=nested_array1_dtype)[0], np.array([1, 2, 3], np.int16)])
def assign_array_to_nested(dest, src):
    dest["array1"] = src


@kernel_case(REC, lambda: [np.zeros(2, dtype=recordwith2darray)])
def recarray_write_array_of_nestedarray_broadcast(ary):
    ary.j[:, :, :] = 1


# -- tests/cudapy/test_enums.py (enum_usecases.py) -------------------------------------------------
ENUMS = "tests/cudapy/test_enums.py"


class Color(enum.Enum):
    red = 1
    green = 2
    blue = 3


class Shake(enum.Enum):
    vanilla = 7
    chocolate = 4
    cookies = 9
    mint = 3


class Shape(enum.IntEnum):
    circle = 2
    square = 500


class RequestError(enum.IntEnum):
    dummy = 2
    not_found = 404
    internal_error = 500


@kernel_case(ENUMS, lambda: [z(3, np.bool_), Color.red, Color.green])
def compare_enums(out, a, b):
    out[0] = a == b
    out[1] = a != b
    out[2] = a is Color.red


@kernel_case(ENUMS, lambda: [z(1, np.bool_), Color.blue, Shake.mint])
def compare_different_enums(out, a, b):
    out[0] = a.value == b.value


@kernel_case(ENUMS, lambda: [z(2, np.int64), Shape.square])
def intenum_value(out, x):
    out[0] = x
    out[1] = x.value + 1


@kernel_case(ENUMS, lambda: [z(2, np.int64), RequestError.not_found])
def intenum_as_index(out, x):
    out[0] = x == RequestError.not_found
    out[1] = RequestError.internal_error


@kernel_case(ENUMS, lambda: [z(3, np.int32), np.array([2, 404, 500], np.int32)], 1, 3)
def vectorize_like_intenum(out, x):
    i = cuda.grid(1)
    out[i] = x[i] == RequestError.not_found


@kernel_case(ENUMS, lambda: [z(1, np.int64)])
def enum_global(out):
    out[0] = Shake.cookies.value


# -- tests/cudapy/test_complex.py / test_complex_kernel.py / complex_usecases.py ------------------
CPLX = "tests/cudapy/test_complex.py"


def cvals(dtype: Any) -> np.ndarray:
    return np.array([1 + 2j, -0.5 + 0.25j, 3 - 1j], dtype=dtype)


@kernel_case("tests/cudapy/test_complex_kernel.py", lambda: [cvals(np.complex64), z(3, np.complex64)], 1, 3)
def complex_kernel_mul(x, out):
    i = cuda.grid(1)
    out[i] = x[i] * x[i] + 1j


@kernel_case(CPLX, lambda: [cvals(np.complex128), z(3, np.complex128)], 1, 3)
def complex_sqrt_exp(x, out):
    i = cuda.grid(1)
    out[i] = cmath.sqrt(x[i]) + cmath.exp(x[i] / 4)


@kernel_case(CPLX, lambda: [cvals(np.complex128), z(3), z(3)], 1, 3)
def complex_abs_phase(x, r, p):
    i = cuda.grid(1)
    r[i] = abs(x[i])
    p[i] = cmath.phase(x[i])


@kernel_case(CPLX, lambda: [z(2), 1.5 - 2.5j])
def complex_scalar_arg(out, c):
    out[0] = c.real
    out[1] = c.imag


@kernel_case(CPLX, lambda: [z(2, np.float32), np.complex64(0.5 + 1.5j)])
def complex64_scalar_arg(out, c):
    out[0] = c.real * 2
    out[1] = c.conjugate().imag


# -- tests/cudapy/test_math.py ---------------------------------------------------------------------
MATH = "tests/cudapy/test_math.py"


def mvals(dtype: Any = np.float64) -> np.ndarray:
    return np.array([0.25, 0.5, 1.0, 2.0], dtype=dtype)


@kernel_case(MATH, lambda: [mvals(), z(4)], 1, 4)
def math_sin(A, B):
    i = cuda.grid(1)
    B[i] = math.sin(A[i])


@kernel_case(MATH, lambda: [mvals(np.float32), z(4, np.float32)], 1, 4)
def math_cos_f32(A, B):
    i = cuda.grid(1)
    B[i] = math.cos(A[i])


@kernel_case(MATH, lambda: [mvals(), z(4)], 1, 4)
def math_exp_log(A, B):
    i = cuda.grid(1)
    B[i] = math.exp(A[i]) + math.log(A[i]) + math.log1p(A[i]) + math.expm1(A[i])


@kernel_case(MATH, lambda: [mvals(), z(4)], 1, 4)
def math_sqrt_hypot(A, B):
    i = cuda.grid(1)
    B[i] = math.sqrt(A[i]) + math.hypot(A[i], 2.0)


@kernel_case(MATH, lambda: [mvals(), z(4)], 1, 4)
def math_pow(A, B):
    i = cuda.grid(1)
    B[i] = math.pow(A[i], 2.5) + A[i] ** 3


@kernel_case(MATH, lambda: [mvals(np.float32), z(4, np.float32)], 1, 4)
def math_atan2(A, B):
    i = cuda.grid(1)
    B[i] = math.atan2(A[i], 1.5) + math.tanh(A[i])


@kernel_case(MATH, lambda: [mvals(), z(4, np.int64)], 1, 4)
def math_floor_ceil(A, B):
    i = cuda.grid(1)
    B[i] = math.floor(A[i] * 3) + math.ceil(A[i] * 3)


@kernel_case(MATH, lambda: [mvals(), z(4)], 1, 4)
def math_erf_gamma(A, B):
    i = cuda.grid(1)
    B[i] = math.erf(A[i]) + math.erfc(A[i]) + math.lgamma(A[i] + 1) + math.gamma(A[i] + 1)


@kernel_case(MATH, lambda: [np.array([0.0, np.inf, np.nan, 1.0]), z(4, np.int32)], 1, 4)
def math_isnan_isinf(A, B):
    i = cuda.grid(1)
    B[i] = math.isnan(A[i]) * 1 + math.isinf(A[i]) * 2 + math.isfinite(A[i]) * 4


@kernel_case(MATH, lambda: [mvals(), z(4)], 1, 4)
def math_copysign_fmod(A, B):
    i = cuda.grid(1)
    B[i] = math.copysign(A[i], -1.0) + math.fmod(A[i] * 7, 1.5)


@kernel_case("tests/cudapy/test_frexp_ldexp.py", lambda: [mvals(), z(4), z(4, np.int32)], 1, 4)
def math_frexp(A, M, E):
    i = cuda.grid(1)
    m, e = math.frexp(A[i])
    M[i] = m
    E[i] = e


@kernel_case("tests/cudapy/test_powi.py", lambda: [mvals(), z(4)], 1, 4)
def cu_mat_power(A, B):
    i = cuda.grid(1)
    B[i] = A[i] ** 4


@kernel_case("tests/cudapy/test_minmax.py", lambda: [mvals(np.float32), z(4, np.float32)], 1, 4)
def builtin_minmax(A, B):
    i = cuda.grid(1)
    B[i] = max(A[i], 0.75) - min(A[i], 0.75)


@kernel_case("tests/cudapy/test_idiv.py", lambda: [np.arange(1, 5, dtype=np.int32), z(4, np.int32), z(4)], 1, 4)
def div_ops(A, Q, F):
    i = cuda.grid(1)
    Q[i] = 17 // A[i] + 17 % A[i]
    F[i] = 17 / A[i]


@kernel_case(
    "tests/cudapy/test_py2_div_issue.py",
    lambda: [np.ones(4, np.float32), np.full(4, 2, np.float32), z(4, np.float32)],
    1,
    4,
)
def py2_div(x, y, z_):
    i = cuda.grid(1)
    z_[i] = x[i] / y[i]


# -- tests/cudapy/test_device_func.py / test_inline.py ---------------------------------------------
DEVF = "tests/cudapy/test_device_func.py"


@cuda.jit(device=True)
def add2f(a, b):
    return a + b


@cuda.jit(device=True)
def indirect_add(a, b):
    return add2f(a, b)


@kernel_case(DEVF, lambda: [ar(8, np.float32), z(8, np.float32)], 1, 8)
def use_add2f(ary, out):
    i = cuda.grid(1)
    out[i] = add2f(ary[i], ary[i])


@kernel_case(DEVF, lambda: [ar(8, np.float32), z(8, np.float32)], 1, 8)
def indirect_add_kernel(ary, out):
    i = cuda.grid(1)
    out[i] = indirect_add(ary[i], 1.5)


@cuda.jit(device=True)
def rgba_tuple(x):
    return x, x + 1, x + 2


@kernel_case(DEVF, lambda: [z(3, np.int64), np.int64(5)])
def device_returns_tuple(out, x):
    a, b, c = rgba_tuple(x)
    out[0] = a
    out[1] = b
    out[2] = c


@cuda.jit(device=True, inline="always")
def inlined_mul(a, b):
    return a * b


@kernel_case("tests/cudapy/test_inline.py", lambda: [ar(4), z(4)], 1, 4)
def inline_always_kernel(x, out):
    i = cuda.grid(1)
    out[i] = inlined_mul(x[i], 3.0)


@kernel_case("tests/cudapy/test_inline.py", lambda: [ar(4), z(4)], 1, 4, name="inline_option_kernel", inline="always")
def inline_option_kernel(x, out):
    i = cuda.grid(1)
    out[i] = inlined_mul(x[i], 5.0)


@kernel_case("tests/cudapy/test_inline.py", lambda: [ar(4), z(4)], 1, 4, forceinline=True)
def forceinline_kernel(x, out):
    i = cuda.grid(1)
    out[i] = add2f(x[i], 0.5)


# -- closures, globals, freevars (test_freevar.py, test_globals.py, test_lang.py) ------------------
GLOBAL_ARRAY = np.arange(8, dtype=np.float32) * 1.5
GLOBAL_TUPLE = (3, 4.5)
SCALE = 2.5
Point = namedtuple("Point", ["x", "y"])
GLOBAL_POINT = Point(2, 7)


def make_closure(k: float) -> Callable[..., None]:
    def closure_kernel(out, x):
        i = cuda.grid(1)
        out[i] = x[i] * k

    return closure_kernel


kernel_case("tests/cudapy/test_freevar.py", lambda: [z(4), ar(4)], 1, 4, name="closure_scalar")(make_closure(1.25))


def make_closure_array() -> Callable[..., None]:
    captured = np.array([10.0, 20.0, 30.0, 40.0])

    def closure_array(out):
        i = cuda.grid(1)
        c = cuda.const.array_like(captured)
        out[i] = c[i]

    return closure_array


kernel_case("tests/cudapy/test_freevar.py", lambda: [z(4)], 1, 4, name="closure_const_array")(make_closure_array())


@kernel_case("tests/cudapy/test_globals.py", lambda: [z(8, np.float32)], 1, 8)
def global_array_read(out):
    i = cuda.grid(1)
    out[i] = GLOBAL_ARRAY[i] + SCALE


@kernel_case("tests/cudapy/test_globals.py", lambda: [z(2)])
def global_tuple_read(out):
    out[0] = GLOBAL_TUPLE[0]
    out[1] = GLOBAL_TUPLE[1]


@kernel_case("tests/cudapy/test_lang.py", lambda: [z(2, np.int64)])
def global_namedtuple(out):
    out[0] = GLOBAL_POINT.x
    out[1] = GLOBAL_POINT.y


@kernel_case("tests/cudapy/test_lang.py", lambda: [z(3, np.int64), (1, 2, 3)])
def tuple_arg(out, t):
    for i in range(3):
        out[i] = t[i] * 2


@kernel_case("tests/cudapy/test_lang.py", lambda: [z(2), (np.int32(3), 2.5)])
def hetero_tuple_arg(out, t):
    out[0] = t[0]
    out[1] = t[1]


@kernel_case("tests/cudapy/test_lang.py", lambda: [z(4, np.int64), ((1, 2), (3, 4))])
def nested_tuple_arg(out, t):
    out[0] = t[0][0]
    out[1] = t[0][1]
    out[2] = t[1][0]
    out[3] = t[1][1]


@kernel_case("tests/cudapy/test_lang.py", lambda: [z(2, np.int64), Point(5, 6)])
def namedtuple_arg(out, p):
    out[0] = p.x
    out[1] = p.y


@kernel_case("tests/cudapy/test_lang.py", lambda: [z(4, np.int32)], 1, 1)
def enumerate_and_zip(out):
    for i, v in enumerate((4, 5, 6, 7)):
        out[i] = v + i


@kernel_case("tests/cudapy/test_lang.py", lambda: [z(1, np.int64), ar(6, np.int64)])
def loop_with_else(out, x):
    s = 0
    for v in x:
        if v > 100:
            break
        s += v
    else:
        s += 1000
    out[0] = s


# -- flow control and operators (test_flow_control.py, test_operator.py, test_boolean.py) --------
@kernel_case("tests/cudapy/test_flow_control.py", lambda: [z(10, np.int32), ar(10, np.int32)], 1, 10)
def while_loop(out, x):
    i = cuda.grid(1)
    n = x[i]
    c = 0
    while n > 1:
        n = n // 2
        c += 1
    out[i] = c


@kernel_case("tests/cudapy/test_boolean.py", lambda: [z(2, np.bool_), True, False])
def boolean_func(A, vertial, horizontal):
    A[0] = vertial and not horizontal
    A[1] = vertial or horizontal


@kernel_case("tests/cudapy/test_operator.py", lambda: [z(6, np.int64), np.int64(13), np.int64(5)])
def int_operators(out, a, b):
    out[0] = a & b
    out[1] = a | b
    out[2] = a ^ b
    out[3] = a << 2
    out[4] = a >> 1
    out[5] = -a


@kernel_case("tests/cudapy/test_operator.py", lambda: [ar(4, np.int16), ar(4, np.int16), z(4, np.int16)], 1, 4)
def int16_add(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


# -- arrays of every dtype and layout (test_array_args.py, test_array.py, test_slicing.py) --------
ARGS = "tests/cudapy/test_array_args.py"


def copy_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = src[i] + 1


for _dt in (
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bool_",
):

    def _copy_args(dt: str = _dt) -> list[Any]:
        src = np.arange(6).astype(getattr(np, dt)) if dt != "bool_" else np.array([0, 1] * 3, np.bool_)
        return [src, np.zeros_like(src, dtype=src.dtype if dt != "bool_" else np.int8)]

    kernel_case(ARGS, _copy_args, 1, 8, name=f"copy_{_dt}")(copy_kernel)


def copy2d(src, dst):
    i, j = cuda.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        dst[i, j] = src[i, j] * 2


kernel_case(ARGS, lambda: [np.arange(12.0).reshape(3, 4), z((3, 4))], 1, (4, 4), name="copy2d_C")(copy2d)
kernel_case(
    ARGS, lambda: [np.asfortranarray(np.arange(12.0).reshape(3, 4)), z((3, 4), order="F")], 1, (4, 4), name="copy2d_F"
)(copy2d)
kernel_case(ARGS, lambda: [np.arange(24.0).reshape(3, 8)[:, ::2], z((3, 4))], 1, (4, 4), name="copy2d_A")(copy2d)
kernel_case(
    ARGS,
    lambda: [np.arange(12, dtype=np.int32).reshape(3, 4).T, z((4, 3), np.int32)],
    1,
    (4, 4),
    name="copy2d_transposed",
)(copy2d)
kernel_case(ARGS, lambda: [np.arange(12.0, dtype=np.float32)[::3], z(4, np.float32)], 1, 8, name="copy_strided")(
    copy_kernel
)


@kernel_case(ARGS, lambda: [np.ones(1, np.int64), ()])
def empty_tuple(r, x):
    r[0] = len(x)


@kernel_case(ARGS, lambda: [np.ones(2, np.int64), ((), (), ())])
def tuple_of_empty_tuples(r, x):
    r[0] = len(x)
    r[1] = len(x[0])


@kernel_case(ARGS, lambda: [np.ones(9, np.int64), ((), (5, 6), (8, 9, 10))])
def tuple_of_tuples(r, x):
    r[0] = len(x)
    r[1] = len(x[0])
    r[2] = len(x[1])
    r[3] = len(x[2])
    r[4] = x[1][0]
    r[5] = x[1][1]
    r[6] = x[2][0]
    r[7] = x[2][1]
    r[8] = x[2][2]


@kernel_case(ARGS, lambda: [np.ones(9, np.int64), ((6, 5, 4), 7)])
def tuple_of_tuples_and_scalars(r, x):
    r[0] = len(x)
    r[1] = len(x[0])
    r[2] = x[0][0]
    r[3] = x[0][1]
    r[4] = x[0][2]
    r[5] = x[1]


@kernel_case(ARGS, lambda: [(np.zeros(10), np.ones(10), np.full(10, 3.0))], 1, 10)
def tuple_of_arrays(x):
    i = cuda.grid(1)
    if i < len(x[0]):
        x[0][i] = x[1][i] + x[2][i]


@kernel_case(ARGS, lambda: [np.zeros(5, np.int64), (2 * np.arange(2, dtype=np.int64), 10, (4, 3))])
def tuple_of_array_scalar_tuple(r, x):
    r[0] = x[0][0]
    r[1] = x[0][1]
    r[2] = x[1]
    r[3] = x[2][0]
    r[4] = x[2][1]


@kernel_case("tests/cudapy/test_array.py", lambda: [np.arange(24.0).reshape(2, 3, 4), z(3)], 1, 1)
def array_3d_shape_strides(a, out):
    out[0] = a.shape[0] * a.shape[1] * a.shape[2]
    out[1] = a.strides[0] // a.itemsize
    out[2] = a.ndim + a.size


@kernel_case("tests/cudapy/test_slicing.py", lambda: [np.arange(10.0), z(5)], 1, 1)
def slicing_copy(a, out):
    b = a[2:7]
    for i in range(b.size):
        out[i] = b[i]


@kernel_case("tests/cudapy/test_array_methods.py", lambda: [np.arange(6.0).reshape(2, 3), z(6)], 1, 1)
def reshape_in_kernel(a, out):
    b = a.reshape(6)
    for i in range(6):
        out[i] = b[i]


@kernel_case("tests/cudapy/test_array.py", lambda: [z(4), np.arange(4.0)], 1, 1)
def array_iteration(out, a):
    i = 0
    for v in a:
        out[i] = v * v
        i += 1


@kernel_case("tests/cudapy/test_array_reductions.py", lambda: [z(2), np.arange(1.0, 7.0)], 1, 1)
def array_reductions(out, a):
    out[0] = a.sum()
    out[1] = a.prod()


@kernel_case(
    "tests/cudapy/test_datetime.py",
    lambda: [z(3, "datetime64[D]"), np.datetime64("2020-01-05"), np.timedelta64(3, "D")],
    1,
    1,
)
def datetime_arith(out, d, delta):
    out[0] = d
    out[1] = d + delta
    out[2] = d - delta


@kernel_case(
    "tests/cudapy/test_datetime.py",
    lambda: [np.array(["2020-01-01", "2021-06-01"], "datetime64[D]"), z(2, "timedelta64[D]")],
    1,
    2,
)
def datetime_diff(a, out):
    i = cuda.grid(1)
    out[i] = a[i] - a[0]


# -- tests/cudapy/test_fastmath.py ---------------------------------------------------------------
FAST = "tests/cudapy/test_fastmath.py"


@kernel_case(FAST, lambda: [mvals(np.float32), z(4, np.float32)], 1, 4, fastmath=True)
def fastmath_div_sqrt(x, out):
    i = cuda.grid(1)
    out[i] = math.sqrt(x[i]) / (x[i] + 1.0)


@kernel_case(FAST, lambda: [mvals(np.float32), z(4, np.float32)], 1, 4, name="fastmath_flags", fastmath={"arcp", "nsz"})
def fastmath_flags(x, out):
    i = cuda.grid(1)
    out[i] = x[i] / 3.0


@kernel_case(FAST, lambda: [mvals(np.float32), z(4, np.float32)], 1, 4, fastmath=True)
def fastmath_cos_exp(x, out):
    i = cuda.grid(1)
    out[i] = math.cos(x[i]) + math.exp(x[i])


# -- tests/cudapy/test_debug.py / test_debuginfo.py / test_lineinfo.py -----------------------------
@kernel_case("tests/cudapy/test_debuginfo.py", lambda: [z(4)], 1, 4, debug=True, opt=False)
def debuginfo_kernel(out):
    i = cuda.grid(1)
    out[i] = i * 0.5


@kernel_case("tests/cudapy/test_debug.py", lambda: [z(4, np.int32), ar(4, np.int32)], 1, 4, debug=True, opt=False)
def debug_with_branches(out, x):
    i = cuda.grid(1)
    if x[i] % 2:
        out[i] = x[i] * 3
    else:
        out[i] = x[i] // 2


@kernel_case("tests/cudapy/test_lineinfo.py", lambda: [z(4)], 1, 4, lineinfo=True)
def lineinfo_kernel(out):
    i = cuda.grid(1)
    out[i] = math.sqrt(i + 1.0)


@kernel_case("tests/cudapy/test_optimization.py", lambda: [z(4)], 1, 4, opt=False)
def no_opt_kernel(out):
    i = cuda.grid(1)
    out[i] = i * 2.0


@kernel_case("tests/cudapy/test_compiler.py", lambda: [z(8, np.float32), ar(8, np.float32)], 1, 8, max_registers=32)
def max_registers_kernel(out, x):
    i = cuda.grid(1)
    out[i] = x[i] * x[i]


@kernel_case(
    "tests/cudapy/test_dispatcher.py", lambda: [z(8, np.float32), ar(8, np.float32)], 1, 8, launch_bounds=(128,)
)
def launch_bounds_kernel(out, x):
    i = cuda.grid(1)
    out[i] = x[i] + 1


@kernel_case(
    "tests/cudapy/test_dispatcher.py",
    lambda: [z(8, np.float32), ar(8, np.float32)],
    1,
    8,
    shared_memory_carveout="MaxShared",
)
def carveout_kernel(out, x):
    i = cuda.grid(1)
    sm = cuda.shared.array(8, np.float32)
    sm[i] = x[i]
    cuda.syncthreads()
    out[i] = sm[7 - i]


# -- tests/cudapy/test_cooperative_groups.py -----------------------------------------------------
CG = "tests/cudapy/test_cooperative_groups.py"


@kernel_case(CG, lambda: [z(1, np.float32)], 1, 1)
def this_grid(A):
    cuda.cg.this_grid()
    A[0] = 1.0


@kernel_case(CG, lambda: [z(1, np.float32)], 1, 1, sim=False)
def sync_group(A):
    g = cuda.cg.this_grid()
    g.sync()
    A[0] = 1.0


@kernel_case(CG, lambda: [z((4, 8), np.int32)], 2, 4, sim=False)
def sequential_rows(M):
    col = cuda.grid(1)
    g = cuda.cg.this_grid()
    rows = M.shape[0]
    cols = M.shape[1]
    for row in range(1, rows):
        opposite = cols - col - 1
        M[row, col] = M[row - 1, opposite] + 1
        g.sync()


# -- extensions= and cuda.In / cuda.Out (test_retrieve_autoconverted_arrays.py) --------------------
AUTO = "tests/cudapy/test_retrieve_autoconverted_arrays.py"


class DefaultIn:
    """numba-cuda's test extension: host arrays are copied in, never back."""

    def prepare_args(self, ty, val, **kwargs):
        from numba.cuda.args import wrap_arg

        return ty, wrap_arg(val, default=cuda.In)


@kernel_case(AUTO, lambda: [np.zeros(1, np.int64)], name="set_array_to_three_nocopy", extensions=[DefaultIn()])
def set_array_to_three(arr):
    arr[0] = 3


kernel_case(AUTO, lambda: [np.zeros(1, np.int64)], name="set_array_to_three_default")(set_array_to_three)
kernel_case(AUTO, lambda: [cuda.In(np.zeros(1, np.int64))], name="set_array_to_three_in")(set_array_to_three)
kernel_case(AUTO, lambda: [cuda.InOut(np.zeros(1, np.int64))], name="set_array_to_three_inout")(set_array_to_three)


@kernel_case(AUTO, lambda: [np.zeros(1, np.dtype([("b", np.int32)], align=True))])
def set_record_to_three(rec):
    rec[0]["b"] = 3


# -- numerical kernels (test_laplace.py, test_matmul.py, test_blackscholes.py, test_montecarlo.py) -
@kernel_case(
    "tests/cudapy/test_matmul.py",
    lambda: [np.arange(16.0, dtype=np.float32).reshape(4, 4), np.eye(4, dtype=np.float32) * 2, z((4, 4), np.float32)],
    1,
    (4, 4),
)
def cu_square_matrix_mul(A, B, C):
    sA = cuda.shared.array(shape=(4, 4), dtype=np.float32)
    sB = cuda.shared.array(shape=(4, 4), dtype=np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sA[tx, ty] = A[tx, ty]
    sB[tx, ty] = B[tx, ty]
    cuda.syncthreads()
    acc = np.float32(0)
    for i in range(4):
        acc += sA[tx, i] * sB[i, ty]
    C[tx, ty] = acc


@kernel_case("tests/cudapy/test_laplace.py", lambda: [np.arange(25.0).reshape(5, 5), z((5, 5)), z(1)], 1, (5, 5))
def jocabi_relax_core(A, Anew, error):
    err_sm = cuda.shared.array((5, 5), dtype=np.float64)
    ty = cuda.threadIdx.x
    tx = cuda.threadIdx.y
    n, m = A.shape
    err_sm[ty, tx] = 0
    if 0 < tx < m - 1 and 0 < ty < n - 1:
        Anew[ty, tx] = 0.25 * (A[ty, tx + 1] + A[ty, tx - 1] + A[ty - 1, tx] + A[ty + 1, tx])
        err_sm[ty, tx] = Anew[ty, tx] - A[ty, tx]
    cuda.syncthreads()
    if tx == 0 and ty == 0:
        total = 0.0
        for i in range(n):
            for j in range(m):
                total = max(total, abs(err_sm[i, j]))
        error[0] = total


RSQRT2PI = 0.39894228040143267794
A1, A2, A3, A4, A5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429


@cuda.jit(device=True)
def cnd_cuda(d):
    K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    ret_val = RSQRT2PI * math.exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))))
    if d > 0:
        ret_val = 1.0 - ret_val
    return ret_val


@kernel_case(
    "tests/cudapy/test_blackscholes.py",
    lambda: [
        z(4),
        z(4),
        np.array([30.0, 35, 40, 45]),
        np.array([25.0, 40, 35, 50]),
        np.array([1.0, 2, 0.5, 3]),
        0.02,
        0.30,
    ],
    1,
    4,
)
def black_scholes_cuda(callResult, putResult, S, X, T, R, V):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= S.shape[0]:
        return
    sqrtT = math.sqrt(T[i])
    d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1 = cnd_cuda(d1)
    cndd2 = cnd_cuda(d2)
    expRT = math.exp((-1.0 * R) * T[i])
    callResult[i] = S[i] * cndd1 - X[i] * expRT * cndd2
    putResult[i] = X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1)


@kernel_case("tests/cudapy/test_reduction.py", lambda: [ar(32, np.int64), z(1, np.int64)], 1, 32)
def shared_tree_reduce(x, out):
    sm = cuda.shared.array(32, np.int64)
    i = cuda.threadIdx.x
    sm[i] = x[i]
    cuda.syncthreads()
    s = 16
    while s > 0:
        if i < s:
            sm[i] += sm[i + s]
        cuda.syncthreads()
        s //= 2
    if i == 0:
        out[0] = sm[0]


@kernel_case("tests/cudapy/test_random.py", lambda: [z(8, np.uint64)], 1, 8)
def xorshift_like(out):
    i = cuda.grid(1)
    s = np.uint64(i + 1) * np.uint64(0x9E3779B97F4A7C15)
    s ^= s >> np.uint64(12)
    s ^= s << np.uint64(25)
    s ^= s >> np.uint64(27)
    out[i] = s * np.uint64(2685821657736338717)


@kernel_case("tests/cudapy/test_casting.py", lambda: [z(4, np.int8), np.array([1.7, -2.2, 100.9, -100.5])], 1, 4)
def float_to_int8(out, x):
    i = cuda.grid(1)
    out[i] = np.int8(x[i])


@kernel_case("tests/cudapy/test_casting.py", lambda: [z(3, np.uint16), np.array([1, 65535, 7], np.int64)], 1, 3)
def int64_to_uint16(out, x):
    i = cuda.grid(1)
    out[i] = np.uint16(x[i])


@kernel_case("tests/cudapy/test_exception.py", lambda: [z(4, np.int32), ar(4, np.int32)], 1, 4, debug=True, opt=False)
def debug_assert_passes(out, x):
    i = cuda.grid(1)
    assert x[i] >= 0
    out[i] = x[i] + 1


@kernel_case("tests/cudapy/test_userexc.py", lambda: [z(2, np.int32), np.int32(1)], 1, 2, debug=True, opt=False)
def user_exception_not_raised(out, flag):
    i = cuda.grid(1)
    if flag > 5:
        raise ValueError("flag too large")
    out[i] = flag + i


# -- user types with a struct data model (tests/cudapy/extensions_usecases.py) -----------------
# numba-cuda's own extension (imported above): MyStruct typed as struct_model_type, a struct of two int32.


@kernel_case("tests/cudapy/test_localmem.py", lambda: [z(10, np.int32), z(10, np.int32)], sim=False)
def struct_model_type_local_arr(outx, outy):
    arr = cuda.local.array(10, dtype=struct_model_type)
    for i in range(len(arr)):
        obj = MyStruct(np.int32(i), np.int32(i * 2))
        arr[i] = obj
    for i in range(len(arr)):
        outx[i] = arr[i].x
        outy[i] = arr[i].y


@kernel_case("tests/cudapy/test_sm.py", lambda: [z(8, np.int32), z(8, np.int32)], 1, 8, sim=False)
def struct_model_type_shared_arr(outx, outy):
    arr = cuda.shared.array(8, dtype=struct_model_type)
    i = cuda.threadIdx.x
    arr[i] = MyStruct(np.int32(i), np.int32(i + 100))
    cuda.syncthreads()
    outx[i] = arr[7 - i].x
    outy[i] = arr[7 - i].y


def type_with_struct_data_model(x):
    l = cuda.local.array(10, dtype=struct_model_type)  # noqa: E741 (numba-cuda's own spelling)
    l[0] = x[0]
    x[0] = l[0]


# Kernels compiled only: their arguments cannot be built in Python (an array of a user type), or
# their output is the process's stdout (printf).
# name -> (origin, kernel, signature)
COMPILE_ONLY: dict[str, tuple[str, Callable[..., None], tuple[Any, ...]]] = {
    "type_with_struct_data_model": (
        "tests/cudapy/test_localmem.py",
        type_with_struct_data_model,
        (struct_model_type[::1],),
    ),
}


# -- bfloat16 (tests/cudapy/test_bfloat16.py) and printing (tests/cudapy/test_print.py) ---------------
if not _simulating():  # the simulator has no bfloat16 intrinsics
    from numba.cuda import bf16

    @kernel_case(
        "tests/cudapy/test_bfloat16.py", lambda: [z(1, np.float32), np.float32(1.5), np.float32(2.25)], sim=False
    )
    def bf16_hadd(r, a, b):
        r[0] = np.float32(bf16.hadd(bf16.bfloat16(a), bf16.bfloat16(b)))

    @kernel_case("tests/cudapy/test_bfloat16.py", lambda: [z(3, np.float32), mvals(np.float32)[:3]], 1, 3, sim=False)
    def bf16_hmul_hneg(r, x):
        i = cuda.grid(1)
        v = bf16.bfloat16(x[i])
        r[i] = np.float32(bf16.hneg(bf16.hmul(v, v)))


def printing_kernel(x):
    i = cuda.grid(1)
    print("value", i, x[i])


COMPILE_ONLY["printing_kernel"] = ("tests/cudapy/test_print.py", printing_kernel, (types.float64[::1],))


# -- running the corpus ------------------------------------------------------------------------------
SIM_OPTIONS = ("debug", "fastmath", "opt")  # what numba's simulator jit takes


def signature(values: list[Any]) -> tuple[Any, ...]:
    """The Numba types a ``@lazy_kernel`` launch gives these arguments."""
    from lazykern._numba.args import classify

    return tuple(classify(v, i)[0] for i, v in enumerate(values))


def compile_step(store: str, arches: tuple[str, ...] = ARCHES, baseline: bool = False) -> dict[str, Any]:
    """Each case warmed for ``arches`` through ``@lazy_kernel`` (served or compiled); with ``baseline``,
    numba-cuda's own PTX compile of the same signature for sm_90 too (its device functions compiled
    for sm_90 through lazykern's stand-in device: with no GPU, Numba asks the driver for one)."""
    from lazykern import lazy_kernel
    from lazykern._numba.compile import _target_cc
    from lazykern.store.cache import KernelCache

    cache = KernelCache(store)
    out: dict[str, Any] = {}
    for name, (origin, kernel_fn, sig_types) in COMPILE_ONLY.items():
        row = {"origin": origin}
        for arch in arches:
            try:
                (report,) = lazy_kernel(kernel_fn, cache=cache).warm([sig_types], arch=arch)
                row[arch] = "compiled" if report["compiled"] else "served"
            except Exception as exc:
                row[arch] = f"error: {type(exc).__name__}: {str(exc)[:300]}"
        out[name] = row
    for case in CASES:
        row: dict[str, Any] = {"origin": case.origin}
        try:
            sig = signature(case.args())
        except Exception as exc:
            out[case.name] = {**row, "error": f"typing: {exc}"}
            continue
        kernel = lazy_kernel(case.kernel, cache=cache, **case.options)
        for arch in arches:
            try:
                (report,) = kernel.warm([sig], arch=arch)
                row[arch] = "compiled" if report["compiled"] else "served"
            except Exception as exc:
                row[arch] = f"error: {type(exc).__name__}: {str(exc)[:300]}"
        out[case.name] = row
        if not baseline:
            continue
        opts = {k: v for k, v in case.options.items() if k in ("debug", "fastmath", "opt", "lineinfo")}
        try:
            with _target_cc((9, 0)):
                cuda.compile_ptx(case.kernel, sig, device=False, cc=(9, 0), **opts)
            row["numba"] = "compiled"
        except Exception as exc:
            row["numba"] = f"error: {type(exc).__name__}: {str(exc)[:300]}"
    return out


def _outputs(values: list[Any]) -> list[Any]:
    """What a launch may have written: arrays and records (inside cuda.In/Out/InOut too), as bytes
    per field (a record's padding is not data: a copied record's padding is whatever it was)."""
    from numba.cuda.args import ArgHint

    seen = []
    for v in values:
        v = v.value if isinstance(v, ArgHint) else v
        if isinstance(v, (np.ndarray, np.void)):
            names = v.dtype.names or (None,)
            seen.append([(str(v.dtype), np.asarray(v if n is None else v[n]).tobytes()) for n in names])
        elif isinstance(v, tuple):
            seen.append(_outputs(list(v)))
    return seen


def _jit(case: Case, simulating: bool) -> Any:
    if simulating:
        k = cuda.jit(case.kernel, **{k: v for k, v in case.options.items() if k in SIM_OPTIONS})
        k.extensions = list(case.options.get("extensions", ()))
        return k
    return cuda.jit(case.kernel, **case.options)


def run_step(simulating: bool, repeat: int = 0) -> dict[str, Any]:
    """Each case launched by ``@cuda.jit`` and by ``@lazy_kernel`` on copies of the same arguments;
    ``equal``: every array and record they may have written holds the same bytes. With ``repeat``,
    also the host time per launch (us) of each, ``repeat`` launches on device copies of the arguments."""
    from lazykern import lazy_kernel

    out: dict[str, Any] = {}
    for case in CASES:
        if simulating and not case.sim:
            continue
        row: dict[str, Any] = {"origin": case.origin}
        results = []
        for kernel_of in (_jit, lambda c, _: lazy_kernel(c.kernel, **c.options)):
            values = copy.deepcopy(case.args())
            try:
                kernel = kernel_of(case, simulating)
                kernel[case.grid, case.block, 0, case.shared](*values)
                cuda.synchronize()
                results.append(_outputs(values))
            except Exception as exc:
                results.append(f"error: {type(exc).__name__}: {str(exc)[:300]}")
        row["jit"], row["lazy"] = (r if isinstance(r, str) else "ran" for r in results)
        row["equal"] = not isinstance(results[0], str) and results[0] == results[1]
        if repeat and row["equal"]:
            row["us_per_launch"] = _timings(case, repeat)
        out[case.name] = row
    return out


def _timings(case: Case, repeat: int) -> dict[str, float]:
    from lazykern import lazy_kernel

    times = {}
    for label, kernel in (
        ("jit", cuda.jit(case.kernel, **case.options)),
        ("lazy", lazy_kernel(case.kernel, **case.options)),
    ):
        values = [cuda.to_device(v) if isinstance(v, np.ndarray) else v for v in copy.deepcopy(case.args())]
        launcher = kernel[case.grid, case.block, 0, case.shared]
        launcher(*values)  # compile or load outside the timing
        cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeat):
            launcher(*values)
        elapsed = time.perf_counter() - start
        cuda.synchronize()
        times[label] = round(elapsed / repeat * 1e6, 2)
    return times


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    step = argv[0]
    if step == "compile":
        arches = tuple(a for a in argv[2:] if a.startswith("sm_")) or ARCHES
        report = compile_step(argv[1], arches, baseline="--baseline" in argv)
    elif step == "sim":
        # The simulator runs kernels as NumPy, in threads (np.errstate would not reach them): an
        # integer kernel's intended wrap-around warns there.
        warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
        report = run_step(simulating=True)
    elif step == "gpu":
        report = run_step(simulating=False, repeat=int(argv[1]) if len(argv) > 1 else 50)
    else:
        raise SystemExit(f"unknown step {step!r}: compile STORE [ARCH...] [--baseline] | sim | gpu [REPEAT]")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
