"""A small real kernel family shaped like lazykern.tropical, for CLI, warm and demo tests.

The kernels are real CUDA C++ (naive tropical products) compiled by NVRTC;
``matmul`` computes on the host with NumPy, as the tropical module does with no GPU.
"""

from __future__ import annotations

import types

import numpy as np

from lazykern import KernelFamily
from lazykern.tropical import reference

PREAMBLE = r"""
struct MaxPlus { __device__ static float zero() { return -__int_as_float(0x7f800000); }
                 __device__ static float mul(float a, float b) { return a + b; }
                 __device__ static bool better(float a, float b) { return a > b; } };
struct MinPlus { __device__ static float zero() { return __int_as_float(0x7f800000); }
                 __device__ static float mul(float a, float b) { return a + b; }
                 __device__ static bool better(float a, float b) { return a < b; } };
template <class S, bool ARG>
__device__ void product(const float *A, const float *B, float *C, int *K, int m, int n, int kk) {
  int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  float acc = S::zero(); int arg = 0;
  for (int k = 0; k < kk; ++k) {
    float p = S::mul(A[i * kk + k], B[k * n + j]);
    if (S::better(p, acc)) { acc = p; arg = k; }
  }
  C[i * n + j] = acc; if (ARG) K[i * n + j] = arg;
}
"""

SIG = ["ptr", "ptr", "ptr", "ptr", "int32", "int32", "int32"]


def _fragment(semiring: str, argmax: bool) -> tuple[str, str]:
    name = f"{semiring}_f32" + ("_argmax" if argmax else "")
    cls = {"maxplus": "MaxPlus", "minplus": "MinPlus"}[semiring]
    code = (
        f'extern "C" __global__ void {name}(const float *A, const float *B, float *C, int *K, int m, int n, int k)'
        f" {{ product<{cls}, {'true' if argmax else 'false'}>(A, B, C, K, m, n, k); }}"
    )
    return name, code


def make_family(name: str = "tropical_like") -> KernelFamily:
    fam = KernelFamily(name, PREAMBLE)
    for semiring in ("maxplus", "minplus"):
        for argmax in (False, True):
            frag, code = _fragment(semiring, argmax)
            fam.add(frag, code, signature=SIG)
    return fam


family = make_family()
pool_family = make_family("tropical_like_pool")

broken = KernelFamily("broken", PREAMBLE)
broken.add("good", _fragment("maxplus", False)[1], symbol="maxplus_f32")
broken.add("bad", 'extern "C" __global__ void bad(float *a) { a[0] = undefined_name; }')


def matmul(a, b, *, semiring: str = "maxplus", argmax: bool = False):
    return reference.matmul(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32), semiring, argmax)


def kernels_for(a, b, semiring: str = "maxplus", *, argmax: bool = False) -> list[str]:
    """Its one kernel per (semiring, argmax), whatever the shapes."""
    return [f"{semiring}_f32" + ("_argmax" if argmax else "")]


def namespace(fam: KernelFamily | None = None) -> types.SimpleNamespace:
    """A stand-in with the tropical module's shape: family, matmul, kernels_for, reference.matmul."""
    return types.SimpleNamespace(
        family=fam or make_family(),
        matmul=matmul,
        kernels_for=kernels_for,
        reference=types.SimpleNamespace(matmul=matmul),
    )
