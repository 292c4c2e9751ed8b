"""numba-cuda 0.30.4's documentation examples, with ``@cuda.jit`` swapped for ``@lazy_kernel``.

Each case copies one example (BSD-2-Clause, Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES):
``numba/cuda/tests/doc_examples/test_*.py`` (the code the user guide includes) or a page of
``docs/source/user/*.rst``. Its ``build(jit)`` defines the example's kernels with ``jit`` in place of
``cuda.jit`` (``jit(fn)``, ``jit(sig)``, ``jit(device=True)`` as written) and returns them by name;
``run(kernels, small)`` launches them as the example does and returns what they wrote (``small``:
smaller sizes, for the simulator, which runs every thread in Python); ``sigs`` names the signatures
those launches use (None: the kernel's declared ones), which the CPU step compiles.

:func:`main` runs one step in a fresh process (``python -m tests._doc_corpus STEP [STORE]``):

- ``compile STORE``: every kernel through ``@lazy_kernel(...).warm`` for sm_90, with no GPU; per
  kernel, "compiled", "served" (from the store), or the error.
- ``sim [CASE...]`` (under ``NUMBA_ENABLE_CUDASIM=1``) / ``gpu STORE``: every case run by ``@cuda.jit`` and by
  ``@lazy_kernel``; whether their outputs are equal, and on the GPU how many instantiations the
  ``@lazy_kernel`` run compiled (after ``compile`` in the same store: none, but for a kernel that
  captures a device array, whose address is baked into its code, as numba-cuda recompiles it).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

ARCH = "sm_90"


def _simulating() -> bool:
    from lazykern._numba.internals import simulating

    return simulating()


@dataclass
class Case:
    name: str
    origin: str
    build: Callable[[Any], dict[str, Any]]
    run: Callable[[dict[str, Any], bool], list[Any]]
    # kernel name -> the signatures its launches use: a list, a function of numba.cuda.types giving
    # one, or None (the kernel's declared ones)
    sigs: dict[str, Any]
    sim: bool = True  # numba's simulator runs it (no grid sync, no pointers, no linked C++)
    cpu: bool = True  # its kernels can be built with no GPU (a captured device array needs one)
    memory_only: tuple[str, ...] = ()  # kernels a new process recompiles (a device array's address in the code)
    needs: tuple[str, ...] = ()  # modules the example imports beyond numba (numba's own test skips without them)


CASES: list[Case] = []


def available(c: Case) -> bool:
    """Whether every module the example needs is installed (numba-cuda's ffi examples skip without cffi)."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in c.needs)


def case(name: str, origin: str, sigs: dict[str, Any], **kw: Any) -> Callable[[Callable[..., Any]], Any]:
    """Register ``build`` (decorated) with its ``run`` given as ``kw["run"]``."""

    def register(build: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
        CASES.append(Case(name, origin, build, kw.pop("run"), sigs, **kw))
        return build

    return register


def _host(x: Any) -> Any:
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


FFI_DIR = os.path.join(os.path.dirname(cuda.__file__), "tests", "doc_examples", "ffi")
DATA_INCLUDE = os.path.join(os.path.dirname(cuda.__file__), "tests", "data", "include")
DOC = "numba/cuda/tests/doc_examples/"


# -- test_vecadd.py: the docs' first example; forall, then an explicit grid --------------------------
def _vecadd_build(jit: Any) -> dict[str, Any]:
    @jit
    def f(a, b, c):
        # like threadIdx.x + (blockIdx.x * blockDim.x)
        tid = cuda.grid(1)
        size = len(c)

        if tid < size:
            c[tid] = a[tid] + b[tid]

    return {"f": f}


def _vecadd_run(k: dict[str, Any], small: bool) -> list[Any]:
    f = k["f"]
    np.random.seed(1)
    N = 1000 if small else 100000
    a = cuda.to_device(np.random.random(N))
    b = cuda.to_device(np.random.random(N))
    c = cuda.device_array_like(a)
    f.forall(len(a))(a, b, c)
    first = c.copy_to_host()
    nthreads = 256
    nblocks = (len(a) // nthreads) + 1
    c2 = cuda.device_array_like(a)
    f[nblocks, nthreads](a, b, c2)
    s = cuda.stream()  # forall on a stream (the ForAll's stream= argument)
    c3 = cuda.device_array_like(a)
    f.forall(len(a), stream=s)(a, b, c3)
    s.synchronize()
    return [first, c2.copy_to_host(), c3.copy_to_host(), first == a.copy_to_host() + b.copy_to_host()]


case("vecadd", DOC + "test_vecadd.py", {"f": ["void(float64[::1], float64[::1], float64[::1])"]}, run=_vecadd_run)(
    _vecadd_build
)


# -- test_laplace.py: forall of a cooperative kernel (grid.sync) -------------------------------------
def _laplace_build(jit: Any) -> dict[str, Any]:
    @jit
    def solve_heat_equation(buf_0, buf_1, timesteps, k):
        i = cuda.grid(1)

        # Don't continue if our index is outside the domain
        if i >= len(buf_0):
            return

        # Prepare to do a grid-wide synchronization later
        grid = cuda.cg.this_grid()

        for step in range(timesteps):
            # Select the buffer from the previous timestep
            if (step % 2) == 0:
                data = buf_0
                next_data = buf_1
            else:
                data = buf_1
                next_data = buf_0

            # Get the current temperature associated with this point
            curr_temp = data[i]

            # Apply formula from finite difference equation
            if i == 0:
                # Left wall is held at T = 0
                next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
            elif i == len(data) - 1:
                # Right wall is held at T = 0
                next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
            else:
                # Interior points are a weighted average of their neighbors
                next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp) + data[i + 1])

            # Write new value to the next buffer
            next_data[i] = next_temp

            # Wait for every thread to write before moving on
            grid.sync()

    return {"solve_heat_equation": solve_heat_equation}


def _laplace_run(k: dict[str, Any], small: bool) -> list[Any]:
    size = 1001
    data = np.zeros(size)
    data[500] = 10000
    buf_0 = cuda.to_device(data)
    buf_1 = cuda.device_array_like(buf_0)
    niter = 10000
    k["solve_heat_equation"].forall(len(data))(buf_0, buf_1, niter, 0.25)
    results = buf_1.copy_to_host()
    return [results, np.isclose(results.sum(), 10000)]


case(
    "laplace",
    DOC + "test_laplace.py",
    {"solve_heat_equation": ["void(float64[::1], float64[::1], int64, float64)"]},
    run=_laplace_run,
    sim=False,
)(_laplace_build)


# -- test_sessionize.py: forall, a closure constant, grid sync ----------------------------------------
def _sessionize_build(jit: Any) -> dict[str, Any]:
    # Set the timeout to one hour
    session_timeout = np.int64(np.timedelta64("3600", "s"))

    @jit
    def sessionize(user_id, timestamp, results):
        gid = cuda.grid(1)
        size = len(user_id)

        if gid >= size:
            return

        # Determine session boundaries
        is_first_datapoint = gid == 0
        if not is_first_datapoint:
            new_user = user_id[gid] != user_id[gid - 1]
            timed_out = timestamp[gid] - timestamp[gid - 1] > session_timeout
            is_sess_boundary = new_user or timed_out
        else:
            is_sess_boundary = True

        # Determine session labels
        if is_sess_boundary:
            # This thread marks the start of a session
            results[gid] = gid

            # Make sure all session boundaries are written
            # before populating the session id
            grid = cuda.cg.this_grid()
            grid.sync()

            look_ahead = 1
            # Check elements 'forward' of this one
            # until a new session boundary is found
            while results[gid + look_ahead] == 0:
                results[gid + look_ahead] = gid
                look_ahead += 1
                # Avoid out-of-bounds accesses by the last thread
                if gid + look_ahead == size - 1:
                    results[gid + look_ahead] = gid
                    break

    return {"sessionize": sessionize}


_SESSION_IDS = [1] * 6 + [2] * 3 + [3] * 10 + [4] * 9
_SESSION_SEC = [1, 2, 3, 5000, 5001, 5002, 1, 2, 3, 1, 2, 5000, 5001, 10000, 10001, 10002, 10003, 15000, 150001,
                1, 5000, 50001, 15000, 20000, 25000, 25001, 25002, 25003]  # fmt: skip


def _sessionize_run(k: dict[str, Any], small: bool) -> list[Any]:
    ids = cuda.to_device(np.array(_SESSION_IDS))
    sec = cuda.to_device(np.array(_SESSION_SEC, dtype="datetime64[ns]").astype("int64"))
    results = cuda.to_device(np.zeros(len(ids)))
    k["sessionize"].forall(len(ids))(ids, sec, results)
    return [results.copy_to_host()]


case(
    "sessionize",
    DOC + "test_sessionize.py",
    {"sessionize": ["void(int64[::1], int64[::1], float64[::1])"]},
    run=_sessionize_run,
    sim=False,
)(_sessionize_build)


# -- test_cpu_gpu_compat.py: a @numba.jit function called from the kernel, forall ---------------------
def _compat_build(jit: Any) -> dict[str, Any]:
    from math import pi

    import numba

    @numba.jit
    def business_logic(x, y, z):
        return 4 * z * (2 * x - (4 * y) / 2 * pi)

    @jit
    def f(res, xarr, yarr, zarr):
        tid = cuda.grid(1)
        if tid < len(xarr):
            # The function decorated with numba.jit may be directly reused
            res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])

    return {"f": f}


def _compat_run(k: dict[str, Any], small: bool) -> list[Any]:
    X = cuda.to_device([1, 10, 234])
    Y = cuda.to_device([2, 2, 4014])
    Z = cuda.to_device([3, 14, 2211])
    results = cuda.to_device([0.0, 0.0, 0.0])
    k["f"].forall(len(X))(results, X, Y, Z)
    return [results.copy_to_host()]


case(
    "cpu_gpu_compat",
    DOC + "test_cpu_gpu_compat.py",
    {"f": ["void(float64[::1], int64[::1], int64[::1], int64[::1])"]},
    run=_compat_run,
)(_compat_build)


# -- test_montecarlo.py: xoroshiro states, forall, cuda.reduce, a @numba.jit function ------------------
def _montecarlo_build(jit: Any) -> dict[str, Any]:
    import numba
    from numba.cuda.random import xoroshiro128p_uniform_float32

    @numba.jit
    def func(x):
        return 1.0 / x

    @jit
    def mc_integrator_kernel(out, rng_states, lower_lim, upper_lim):
        """
        kernel to draw random samples and evaluate the function to
        be integrated at those sample values
        """
        size = len(out)

        gid = cuda.grid(1)
        if gid < size:
            # draw a sample between 0 and 1 on this thread
            samp = xoroshiro128p_uniform_float32(rng_states, gid)

            # normalize this sample to the limit range
            samp = samp * (upper_lim - lower_lim) + lower_lim

            # evaluate the function to be
            # integrated at the normalized
            # value of the sample
            y = func(samp)
            out[gid] = y

    return {"mc_integrator_kernel": mc_integrator_kernel}


def _montecarlo_run(k: dict[str, Any], small: bool) -> list[Any]:
    from numba.cuda.random import create_xoroshiro128p_states

    nsamps = 16 if small else 1000000

    @cuda.reduce
    def sum_reduce(a, b):
        return a + b

    def mc_integrate(lower_lim, upper_lim, nsamps):
        out = cuda.to_device(np.zeros(nsamps, dtype="float32"))
        rng_states = create_xoroshiro128p_states(nsamps, seed=42)
        k["mc_integrator_kernel"].forall(nsamps)(out, rng_states, lower_lim, upper_lim)
        factor = (upper_lim - lower_lim) / (nsamps - 1)
        return out.copy_to_host(), sum_reduce(out) * factor

    out1, r1 = mc_integrate(1, 2, nsamps)
    out2, r2 = mc_integrate(2, 3, nsamps)
    return [out1, np.float64(r1), out2, np.float64(r2)]


def _states(t: Any) -> Any:
    """The array type of ``create_xoroshiro128p_states``' device array."""
    from numba.cuda.np.numpy_support import from_dtype
    from numba.cuda.random import xoroshiro128p_dtype

    return from_dtype(xoroshiro128p_dtype)[::1]


case(
    "montecarlo",
    DOC + "test_montecarlo.py",
    {"mc_integrator_kernel": lambda t: [(t.float32[::1], _states(t), t.int64, t.int64)]},
    run=_montecarlo_run,
)(_montecarlo_build)


# -- test_matmul.py: a naive and a shared-memory matmul ---------------------------------------------
TPB = 16


def _matmul_build(jit: Any) -> dict[str, Any]:
    from numba.cuda import float32

    @jit
    def matmul(A, B, C):
        """Perform square matrix multiplication of C = A * B."""
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            tmp = 0.0
            for k in range(A.shape[1]):
                tmp += A[i, k] * B[k, j]
            C[i, j] = tmp

    @jit
    def fast_matmul(A, B, C):
        """
        Perform matrix multiplication of C = A * B using CUDA shared memory.

        Reference: https://stackoverflow.com/a/64198479/13697228 by @RobertCrovella
        """
        # Define an array in the shared memory
        # The size and type of the arrays must be known at compile time
        sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)

        x, y = cuda.grid(2)

        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        bpg = cuda.gridDim.x  # blocks per grid

        # Each thread computes one element in the result matrix.
        # The dot product is chunked into dot products of TPB-long vectors.
        tmp = float32(0.0)
        for i in range(bpg):
            # Preload data into shared memory
            sA[ty, tx] = 0
            sB[ty, tx] = 0
            if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
                sA[ty, tx] = A[y, tx + i * TPB]
            if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
                sB[ty, tx] = B[ty + i * TPB, x]

            # Wait until all threads finish preloading
            cuda.syncthreads()

            # Computes partial product on the shared memory
            for j in range(TPB):
                tmp += sA[ty, j] * sB[j, tx]

            # Wait until all threads finish computing
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = tmp

    return {"matmul": matmul, "fast_matmul": fast_matmul}


def _matmul_run(k: dict[str, Any], small: bool) -> list[Any]:
    outs = []
    for name, (m, n, p) in (("matmul", (4, 4, 4)), ("fast_matmul", (4, 4, 4)), ("fast_matmul", (5, 23, 7))):
        x_h = np.arange(m * n).reshape([m, n])
        y_h = np.ones([n, p])
        z_h = np.zeros([m, p])
        x_d, y_d, z_d = cuda.to_device(x_h), cuda.to_device(y_h), cuda.to_device(z_h)
        threadsperblock = (TPB, TPB)
        grid_y_max = max(x_h.shape[0], y_h.shape[0])
        grid_x_max = max(x_h.shape[1], y_h.shape[1])
        blockspergrid = (math.ceil(grid_x_max / threadsperblock[0]), math.ceil(grid_y_max / threadsperblock[1]))
        k[name][blockspergrid, threadsperblock](x_d, y_d, z_d)
        z_h = z_d.copy_to_host()
        outs += [z_h, np.all(z_h == x_h @ y_h)]
    return outs


case(
    "matmul",
    DOC + "test_matmul.py",
    {
        "matmul": ["void(int64[:, ::1], float64[:, ::1], float64[:, ::1])"],
        "fast_matmul": ["void(int64[:, ::1], float64[:, ::1], float64[:, ::1])"],
    },
    run=_matmul_run,
)(_matmul_build)


# -- test_reduction.py: a shared array sized by a closure variable ---------------------------------
def _reduction_build(jit: Any) -> dict[str, Any]:
    from numba.cuda.types import int32

    nelem = 1024  # len(a) of the example's a = cuda.to_device(np.arange(1024))

    @jit
    def array_sum(data):
        tid = cuda.threadIdx.x
        size = len(data)
        if tid < size:
            i = cuda.grid(1)

            # Declare an array in shared memory
            shr = cuda.shared.array(nelem, int32)
            shr[tid] = data[i]

            # Ensure writes to shared memory are visible
            # to all threads before reducing
            cuda.syncthreads()

            s = 1
            while s < cuda.blockDim.x:
                if tid % (2 * s) == 0:
                    # Stride by `s` and add
                    shr[tid] += shr[tid + s]
                s *= 2
                cuda.syncthreads()

            # After the loop, the zeroth  element contains the sum
            if tid == 0:
                data[tid] = shr[tid]

    return {"array_sum": array_sum}


def _reduction_run(k: dict[str, Any], small: bool) -> list[Any]:
    a = cuda.to_device(np.arange(1024))
    nelem = len(a)
    k["array_sum"][1, nelem](a)
    return [a.copy_to_host(), a[0] == sum(np.arange(1024))]


case("reduction", DOC + "test_reduction.py", {"array_sum": ["void(int64[::1])"]}, run=_reduction_run)(_reduction_build)


# -- test_ufunc.py: a NumPy ufunc called in a kernel, host arrays ----------------------------------
def _ufunc_build(jit: Any) -> dict[str, Any]:
    @jit
    def f(r, x):
        # Compute sin(x) with result written to r
        np.sin(x, r)

    return {"f": f}


def _ufunc_run(k: dict[str, Any], small: bool) -> list[Any]:
    x = np.arange(10, dtype=np.float32) - 5
    r = np.zeros_like(x)
    k["f"][1, 1](r, x)
    return [r]


case("ufunc", DOC + "test_ufunc.py", {"f": ["void(float32[::1], float32[::1])"]}, run=_ufunc_run)(_ufunc_build)


# -- test_random.py: xoroshiro states over a 3D grid ----------------------------------------------
def _random_build(jit: Any) -> dict[str, Any]:
    from numba.cuda.random import xoroshiro128p_uniform_float32

    @jit
    def random_3d(arr, rng_states):
        # Per-dimension thread indices and strides
        startx, starty, startz = cuda.grid(3)
        stridex, stridey, stridez = cuda.gridsize(3)

        # Linearized thread index
        tid = (startz * stridey * stridex) + (starty * stridex) + startx

        # Use strided loops over the array to assign a random value to each entry
        for i in range(startz, arr.shape[0], stridez):
            for j in range(starty, arr.shape[1], stridey):
                for k in range(startx, arr.shape[2], stridex):
                    arr[i, j, k] = xoroshiro128p_uniform_float32(rng_states, tid)

    return {"random_3d": random_3d}


def _random_run(k: dict[str, Any], small: bool) -> list[Any]:
    from numba.cuda.random import create_xoroshiro128p_states

    X, Y, Z = (7, 9, 7) if small else (701, 900, 719)
    bx, by, bz = (2, 2, 2) if small else (8, 8, 8)
    gx, gy, gz = (2, 2, 2) if small else (16, 16, 16)
    nthreads = bx * by * bz * gx * gy * gz
    rng_states = create_xoroshiro128p_states(nthreads, seed=1)
    arr = cuda.device_array((X, Y, Z), dtype=np.float32)
    k["random_3d"][(gx, gy, gz), (bx, by, bz)](arr, rng_states)
    host_arr = arr.copy_to_host()
    return [host_arr]


case(
    "random_3d", DOC + "test_random.py", {"random_3d": lambda t: [(t.float32[:, :, ::1], _states(t))]}, run=_random_run
)(_random_build)


# -- test_cg.py: a declared signature, overloads[sig].max_cooperative_grid_blocks, grid sync ------------
def _cg_build(jit: Any) -> dict[str, Any]:
    from numba.cuda import int32

    sig = (int32[:, ::1],)

    @jit(sig)
    def sequential_rows(M):
        col = cuda.grid(1)
        g = cuda.cg.this_grid()

        rows = M.shape[0]
        cols = M.shape[1]

        for row in range(1, rows):
            opposite = cols - col - 1
            # Each row's elements are one greater than the previous row
            M[row, col] = M[row - 1, opposite] + 1
            # Wait until all threads have written their column element,
            # and that the write is visible to all other threads
            g.sync()

    return {"sequential_rows": sequential_rows}


def _cg_run(k: dict[str, Any], small: bool) -> list[Any]:
    from numba.cuda import int32

    sequential_rows = k["sequential_rows"]
    sig = (int32[:, ::1],)
    A = np.zeros((1024, 1024), dtype=np.int32)
    blockdim = 32
    griddim = A.shape[1] // blockdim
    mb = sequential_rows.overloads[sig].max_cooperative_grid_blocks(blockdim)
    if mb < griddim:
        return ["skipped: the device does not support a large enough cooperative grid"]
    sequential_rows[griddim, blockdim](A)
    return [A, np.array_equal(A, np.tile(np.arange(1024), (1024, 1)).T)]


case("cg", DOC + "test_cg.py", {"sequential_rows": None}, run=_cg_run, sim=False)(_cg_build)


# -- test_cpointer.py: CPointer(uint8) declared, the pointer passed as an integer ---------------------
def _cpointer_build(jit: Any) -> dict[str, Any]:
    from numba.cuda import types

    sig = types.void(types.CPointer(types.uint8), types.uint32)

    @jit(sig)
    def add_one(x, n):
        i = cuda.grid(1)
        if i < n:
            x[i] += 1

    return {"add_one": add_one}


def _cpointer_run(k: dict[str, Any], small: bool) -> list[Any]:
    add_one = k["add_one"]
    x = cuda.to_device(np.arange(10, dtype=np.uint8))
    x_ptr = x.__cuda_array_interface__["data"][0]
    x_len = len(x)
    add_one[1, 32](x_ptr, x_len)
    return [x.copy_to_host()]


case("cpointer", DOC + "test_cpointer.py", {"add_one": None}, run=_cpointer_run, sim=False)(_cpointer_build)


# -- test_ffi.py: cuda.declare_device with linked .cu files ---------------------------------------
def _ffi_link_build(jit: Any) -> dict[str, Any]:
    functions_cu = os.path.join(FFI_DIR, "functions.cu")
    mul = cuda.declare_device("mul_f32_f32", "float32(float32, float32)", link=functions_cu)

    @jit
    def multiply_vectors(r, x, y):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = mul(x[i], y[i])

    return {"multiply_vectors": multiply_vectors}


def _ffi_link_run(k: dict[str, Any], small: bool) -> list[Any]:
    N = 32
    np.random.seed(1)
    x = np.random.rand(N).astype(np.float32)
    y = np.random.rand(N).astype(np.float32)
    r = np.zeros_like(x)
    k["multiply_vectors"][1, 32](r, x, y)
    return [r, np.array_equal(r, x * y)]


_F32x3 = "void(float32[::1], float32[::1], float32[::1])"
case("ffi_linking_cu", DOC + "test_ffi.py", {"multiply_vectors": [_F32x3]}, run=_ffi_link_run, sim=False)(
    _ffi_link_build
)


def _ffi_buffer_build(jit: Any) -> dict[str, Any]:
    import cffi

    functions_cu = os.path.join(FFI_DIR, "functions.cu")
    signature = "float32(CPointer(float32), int32)"
    sum_reduce = cuda.declare_device("sum_reduce", signature, link=functions_cu)
    ffi = cffi.FFI()

    @jit
    def reduction_caller(result, array):
        array_ptr = ffi.from_buffer(array)
        result[()] = sum_reduce(array_ptr, len(array))

    return {"reduction_caller": reduction_caller}


def _ffi_buffer_run(k: dict[str, Any], small: bool) -> list[Any]:
    x = np.arange(10).astype(np.float32)
    r = np.ndarray((), dtype=np.float32)
    k["reduction_caller"][1, 1](r, x)
    return [r]


case(
    "ffi_from_buffer",
    DOC + "test_ffi.py",
    {"reduction_caller": lambda t: [(t.Array(t.float32, 0, "C"), t.float32[::1])]},
    run=_ffi_buffer_run,
    sim=False,
    needs=("cffi",),
)(_ffi_buffer_build)


def _ffi_includes_build(jit: Any) -> dict[str, Any]:
    from numba.cuda import config

    saxpy_cu = os.path.join(FFI_DIR, "saxpy.cu")
    # The example sets the search path for its includes (it is part of the key: keep it set while used)
    config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = ":".join([os.path.join(FFI_DIR, "include"), DATA_INCLUDE])
    sig = "float32(float32, float32, float32)"
    saxpy = cuda.declare_device("saxpy", sig=sig, link=saxpy_cu)

    @jit
    def vector_saxpy(a, x, y, res):
        i = cuda.grid(1)
        if i < len(res):
            res[i] = saxpy(a, x[i], y[i])

    return {"vector_saxpy": vector_saxpy}


def _ffi_includes_run(k: dict[str, Any], small: bool) -> list[Any]:
    size = 10_000
    a = 3.0
    X = np.ones((size,), dtype="float32")
    Y = np.ones((size,), dtype="float32")
    R = np.zeros((size,), dtype="float32")
    block_size = 32
    num_blocks = (size // block_size) + 1
    k["vector_saxpy"][num_blocks, block_size](a, X, Y, R)
    return [R, np.array_equal(R, a * X + Y)]


case(
    "ffi_extra_includes",
    DOC + "test_ffi.py",
    {"vector_saxpy": ["void(float64, float32[::1], float32[::1], float32[::1])"]},
    run=_ffi_includes_run,
    sim=False,
)(_ffi_includes_build)


# -- test_globals.py: a global array frozen as a constant; a global device array captured -------------
def _globals_const_build(jit: Any) -> dict[str, Any]:
    TAX_RATE = 0.08
    PRICES = np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float64)

    @jit
    def compute_totals(quantities, totals):
        i = cuda.grid(1)
        if i < totals.size:
            totals[i] = quantities[i] * PRICES[i] * (1 + TAX_RATE)

    return {"compute_totals": compute_totals, "PRICES": PRICES}


def _globals_const_run(k: dict[str, Any], small: bool) -> list[Any]:
    d_quantities = cuda.to_device(np.array([1, 2, 3, 4, 5], dtype=np.float64))
    d_totals = cuda.device_array(5, dtype=np.float64)
    k["compute_totals"][1, 32](d_quantities, d_totals)
    first = d_totals.copy_to_host()
    k["PRICES"][:] = [20.0, 50.0, 10.0, 30.0, 60.0]  # the kernel keeps the values it was compiled with
    k["compute_totals"][1, 32](d_quantities, d_totals)
    return [first, d_totals.copy_to_host()]


case(
    "globals_constant",
    DOC + "test_globals.py",
    {"compute_totals": ["void(float64[::1], float64[::1])"]},
    run=_globals_const_run,
)(_globals_const_build)


def _globals_device_build(jit: Any) -> dict[str, Any]:
    PRICES = cuda.to_device(np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float32))

    @jit
    def compute_totals(quantities, totals):
        i = cuda.grid(1)
        if i < totals.size:
            totals[i] = quantities[i] * PRICES[i]

    return {"compute_totals": compute_totals, "PRICES": PRICES}


def _globals_device_run(k: dict[str, Any], small: bool) -> list[Any]:
    d_quantities = cuda.to_device(np.array([1.0, 1.0, 1.0, 1.0, 1.0], dtype=np.float32))
    d_totals = cuda.device_array(5, dtype=np.float32)
    k["compute_totals"][1, 32](d_quantities, d_totals)
    first = d_totals.copy_to_host()
    k["PRICES"].copy_to_device(np.array([20.0, 50.0, 10.0, 30.0, 60.0], dtype=np.float32))
    k["compute_totals"][1, 32](d_quantities, d_totals)
    return [first, d_totals.copy_to_host()]


case(
    "globals_device_array",
    DOC + "test_globals.py",
    {"compute_totals": ["void(float32[::1], float32[::1])"]},
    run=_globals_device_run,
    cpu=False,
    memory_only=("compute_totals",),
)(_globals_device_build)


# -- docs/source/user/device-functions.rst: cuda.jit(device=True) called from a kernel -----------------
def _devfn_build(jit: Any) -> dict[str, Any]:
    @jit(device=True)
    def a_device_function(a, b):
        return a + b

    @jit
    def add_pairs(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a_device_function(x[i], y[i])

    return {"add_pairs": add_pairs}


def _devfn_run(k: dict[str, Any], small: bool) -> list[Any]:
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    k["add_pairs"][4, 32](x, x * 2, out)
    return [out]


case(
    "device_function",
    "docs/source/user/device-functions.rst",
    {"add_pairs": ["void(float32[::1], float32[::1], float32[::1])"]},
    run=_devfn_run,
)(_devfn_build)


# -- docs/source/user/kernels.rst: increment_by_one (1D) and increment_a_2D_array ------------------------
def _kernels_build(jit: Any) -> dict[str, Any]:
    @jit
    def increment_by_one(an_array):
        # Thread id in a 1D block
        tx = cuda.threadIdx.x
        # Block id in a 1D grid
        ty = cuda.blockIdx.x
        # Block width, i.e. number of threads per block
        bw = cuda.blockDim.x
        # Compute flattened index inside the array
        pos = tx + ty * bw
        if pos < an_array.size:  # Check array boundaries
            an_array[pos] += 1

    @jit
    def increment_a_2D_array(an_array):
        x, y = cuda.grid(2)
        if x < an_array.shape[0] and y < an_array.shape[1]:
            an_array[x, y] += 1

    return {"increment_by_one": increment_by_one, "increment_a_2D_array": increment_a_2D_array}


def _kernels_run(k: dict[str, Any], small: bool) -> list[Any]:
    an_array = np.arange(1000, dtype=np.float64)
    threadsperblock = 32
    blockspergrid = (an_array.size + (threadsperblock - 1)) // threadsperblock
    k["increment_by_one"][blockspergrid, threadsperblock](an_array)
    a2 = np.arange(40 * 30, dtype=np.float64).reshape(40, 30)
    tpb = (16, 16)
    bpg = (math.ceil(a2.shape[0] / tpb[0]), math.ceil(a2.shape[1] / tpb[1]))
    k["increment_a_2D_array"][bpg, tpb](a2)
    return [an_array, a2]


case(
    "kernels",
    "docs/source/user/kernels.rst",
    {"increment_by_one": ["void(float64[::1])"], "increment_a_2D_array": ["void(float64[:, ::1])"]},
    run=_kernels_run,
)(_kernels_build)


# -- docs/source/user/intrinsics.rst: atomic max, 1D and 3D --------------------------------------------
def _atomics_build(jit: Any) -> dict[str, Any]:
    @jit
    def max_example(result, values):
        """Find the maximum value in values and store in result[0]"""
        tid = cuda.threadIdx.x
        bid = cuda.blockIdx.x
        bdim = cuda.blockDim.x
        i = (bid * bdim) + tid
        cuda.atomic.max(result, 0, values[i])

    @jit
    def max_example_3d(result, values):
        """
        Find the maximum value in values and store in result[0].
        Both result and values are 3d arrays.
        """
        i, j, k = cuda.grid(3)
        # Atomically store to result[0,1,2] from values[i, j, k]
        cuda.atomic.max(result, (0, 1, 2), values[i, j, k])

    return {"max_example": max_example, "max_example_3d": max_example_3d}


def _atomics_run(k: dict[str, Any], small: bool) -> list[Any]:
    np.random.seed(1)
    arr = np.random.rand(16384)
    result = np.zeros(1, dtype=np.float64)
    grid, block = (16, 64) if small else (256, 64)
    k["max_example"][grid, block](result, arr[: grid * block])
    arr3 = np.random.rand(1000).reshape(10, 10, 10)
    result3 = np.zeros((3, 3, 3), dtype=np.float64)
    k["max_example_3d"][(2, 2, 2), (5, 5, 5)](result3, arr3)
    return [result, result3]


case(
    "atomics",
    "docs/source/user/intrinsics.rst",
    {
        "max_example": ["void(float64[::1], float64[::1])"],
        "max_example_3d": ["void(float64[:, :, ::1], float64[:, :, ::1])"],
    },
    run=_atomics_run,
)(_atomics_build)


# -- docs/source/user/random.rst: compute_pi --------------------------------------------------------
def _pi_build(jit: Any) -> dict[str, Any]:
    from numba.cuda.random import xoroshiro128p_uniform_float32

    @jit
    def compute_pi(rng_states, iterations, out):
        """Find the maximum value in values and store in result[0]"""
        thread_id = cuda.grid(1)

        # Compute pi by drawing random (x, y) points and finding what
        # fraction lie inside a unit circle
        inside = 0
        for i in range(iterations):  # noqa: B007 (the page's spelling)
            x = xoroshiro128p_uniform_float32(rng_states, thread_id)
            y = xoroshiro128p_uniform_float32(rng_states, thread_id)
            if x**2 + y**2 <= 1.0:
                inside += 1

        out[thread_id] = 4.0 * inside / iterations

    return {"compute_pi": compute_pi}


def _pi_run(k: dict[str, Any], small: bool) -> list[Any]:
    from numba.cuda.random import create_xoroshiro128p_states

    threads_per_block = 8 if small else 64
    blocks = 2 if small else 24
    rng_states = create_xoroshiro128p_states(threads_per_block * blocks, seed=1)
    out = np.zeros(threads_per_block * blocks, dtype=np.float32)
    k["compute_pi"][blocks, threads_per_block](rng_states, 10 if small else 10000, out)
    return [out]


case(
    "random_pi",
    "docs/source/user/random.rst",
    {"compute_pi": lambda t: [(_states(t), t.int64, t.float32[::1])]},
    run=_pi_run,
)(_pi_build)


# -- docs/source/user/cuda_array_interface.rst: a kernel over CUDA-array-interface arrays; a declared one
def _cai_build(jit: Any) -> dict[str, Any]:
    from numba.cuda import int32, void

    @jit
    def add(x, y, out):
        start = cuda.grid(1)
        stride = cuda.gridsize(1)
        for i in range(start, x.shape[0], stride):
            out[i] = x[i] + y[i]

    @jit(void(int32[::1]))  # the page's signature, as a signature object
    def initialize_array(x):
        i = cuda.grid(1)
        if i < len(x):
            x[i] = i

    return {"add": add, "initialize_array": initialize_array}


class _Foreign:
    """A device array seen only through ``__cuda_array_interface__`` (as CuPy's arrays are)."""

    def __init__(self, dev: Any) -> None:
        self._dev = dev
        self.__cuda_array_interface__ = dev.__cuda_array_interface__


def _cai_run(k: dict[str, Any], small: bool) -> list[Any]:
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None and not small:  # the page's code, as written
        a = cupy.arange(10)
        b = a * 2
        out = cupy.zeros_like(a)
        k["add"][1, 32](a, b, out)
        x = cuda.device_array(100, dtype=np.int32)
        k["initialize_array"][4, 32](x)
        return [cupy.asnumpy(out), x.copy_to_host()]
    a = cuda.to_device(np.arange(10))
    b = cuda.to_device(np.arange(10) * 2)
    out = cuda.device_array_like(a)
    foreign = (lambda x: x) if small else _Foreign  # the simulator's arrays export no interface
    k["add"][1, 32](foreign(a), foreign(b), foreign(out))
    x = cuda.device_array(100, dtype=np.int32)
    k["initialize_array"][4, 32](x)
    return [out.copy_to_host(), x.copy_to_host()]


case(
    "cuda_array_interface",
    "docs/source/user/cuda_array_interface.rst",
    {"add": ["void(int64[::1], int64[::1], int64[::1])"], "initialize_array": None},
    run=_cai_run,
)(_cai_build)


# -- docs/source/user/memory.rst: dynamic shared memory, sized at launch; zero-argument kernels ------------
def _dynshared_build(jit: Any) -> dict[str, Any]:
    @jit
    def kernel_func(x):
        dyn_arr = cuda.shared.array(0, dtype=np.float32)  # noqa: F841 (the page's code)
        ...

    @jit
    def f():
        f32_arr = cuda.shared.array(0, dtype=np.float32)
        i32_arr = cuda.shared.array(0, dtype=np.int32)
        f32_arr[0] = 3.14
        print(f32_arr[0])
        print(i32_arr[0])

    @jit
    def f_with_view():
        f32_arr = cuda.shared.array(0, dtype=np.float32)
        i32_arr = cuda.shared.array(0, dtype=np.int32)[1:]  # 1 int32 = 4 bytes
        f32_arr[0] = 3.14
        i32_arr[0] = 1
        print(f32_arr[0])
        print(i32_arr[0])

    return {"kernel_func": kernel_func, "f": f, "f_with_view": f_with_view}


def _dynshared_run(k: dict[str, Any], small: bool) -> list[Any]:
    x = cuda.to_device(np.zeros(32, np.float32))
    k["kernel_func"][32, 32, 0, 128](x)
    k["f"][1, 1, 0, 4]()
    cuda.synchronize()
    k["f_with_view"][1, 1, 0, 8]()
    cuda.synchronize()
    return [x.copy_to_host()]  # what the kernels print goes to the process's stdout


case(
    "dynamic_shared_memory",
    "docs/source/user/memory.rst",
    {"kernel_func": ["void(float32[::1])"], "f": ["void()"], "f_with_view": ["void()"]},
    run=_dynshared_run,
    sim=False,  # numba's simulator fails on a 0-size shared array of a NumPy dtype class, for cuda.jit too
)(_dynshared_build)


# -- steps -------------------------------------------------------------------------------------------
def _lazy_jit(cache: Any = None) -> Callable[..., Any]:
    from lazykern import lazy_kernel

    def jit(*args: Any, **kw: Any) -> Any:
        return lazy_kernel(*args, cache=cache, **kw) if cache is not None else lazy_kernel(*args, **kw)

    return jit


def _kernels(built: dict[str, Any]) -> dict[str, Any]:
    from lazykern import LazyKernel

    return {name: k for name, k in built.items() if isinstance(k, LazyKernel)}


def compile_step(store: str) -> dict[str, Any]:
    """Each case's kernels warmed for sm_90 (compiled or served), with no GPU."""
    from numba.cuda import types

    from lazykern.store.cache import KernelCache

    cache = KernelCache(store)
    out: dict[str, Any] = {}
    for c in CASES:
        if not c.cpu or not available(c):
            continue
        row: dict[str, Any] = {"origin": c.origin}
        try:
            kernels = _kernels(c.build(_lazy_jit(cache)))
        except Exception as exc:
            out[c.name] = {**row, "build": f"error: {type(exc).__name__}: {str(exc)[:300]}"}
            continue
        for name, sigs in c.sigs.items():
            try:
                reports = kernels[name].warm(sigs(types) if callable(sigs) else sigs, arch=ARCH)
                row[name] = "compiled" if any(r["compiled"] for r in reports) else "served"
            except Exception as exc:
                row[name] = f"error: {type(exc).__name__}: {str(exc)[:300]}"
        out[c.name] = row
    return out


def _same(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(_host(x)), np.asarray(_host(y))
        if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
            return False
    return True


def run_step(simulating: bool, store: str | None = None, names: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Each case (of ``names``, if given) run by ``@cuda.jit`` and by ``@lazy_kernel``; whether the
    outputs are equal, and (on the GPU) how many instantiations the ``@lazy_kernel`` run compiled."""
    from lazykern.store.cache import KernelCache

    cache = KernelCache(store) if store else None
    out: dict[str, Any] = {}
    for c in CASES:
        if (simulating and not c.sim) or (names and c.name not in names) or not available(c):
            continue
        row: dict[str, Any] = {"origin": c.origin}
        results = []
        for label, jit in (("jit", cuda.jit), ("lazy", _lazy_jit(cache))):
            try:
                built = c.build(jit)
                results.append(c.run(built, simulating))
                cuda.synchronize()
                if label == "lazy" and not simulating:
                    row["compiled"] = {n: k.stats()["compiles"] for n, k in _kernels(built).items()}
            except Exception as exc:
                results.append(f"error: {type(exc).__name__}: {str(exc)[:400]}")
        row["jit"], row["lazy"] = (r if isinstance(r, str) else "ran" for r in results)
        row["equal"] = not isinstance(results[0], str) and not isinstance(results[1], str) and _same(*results)
        row["memory_only"] = list(c.memory_only)
        out[c.name] = row
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    step = argv[0]
    if step == "compile":
        report = compile_step(argv[1])
    elif step == "sim":
        report = run_step(simulating=True, names=frozenset(argv[1:]))
    elif step == "gpu":
        report = run_step(simulating=False, store=argv[1] if len(argv) > 1 else None)
    else:
        raise SystemExit(f"unknown step {step!r}: compile STORE | sim [CASE...] | gpu [STORE]")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
