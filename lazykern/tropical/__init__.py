"""Tropical GEMM: max-plus, min-plus and max-times products on the GPU, compiled lazily.

>>> import numpy as np
>>> from lazykern import tropical
>>> tropical.matmul(np.array([[0.0, 1.0]]), np.array([[2.0], [0.0]]), semiring="maxplus")
array([[2.]])

Semantics (the contract of :mod:`lazykern.tropical.reference`, held by the tests)

==========  ====================  ======================  ==========================
semiring    C[i, j]               zero (empty K)          integer product a (x) b
==========  ====================  ======================  ==========================
maxplus     max_k A[i,k]+B[k,j]   -inf / dtype min        a==MIN|b==MIN -> MIN;
                                                          a==MAX|b==MAX -> MAX; else sat(a+b)
minplus     min_k A[i,k]+B[k,j]   +inf / dtype max        a==MAX|b==MAX -> MAX;
                                                          a==MIN|b==MIN -> MIN; else sat(a+b)
maxmul      max_k A[i,k]*B[k,j]   -inf / dtype min        a==MIN|b==MIN -> MIN;
                                                          a==MAX|b==MAX -> MAX if the other
                                                          is > 0 else MIN; else sat(a*b)
==========  ====================  ======================  ==========================

* Floats: IEEE sums (so -inf + inf is NaN); a NaN product never wins, the way
  fmaxf/fminf ignore NaN; all-NaN gives the zero. max-times products are IEEE
  products but for two rules that make max distribute over them on nonnegative
  values with infinities: the zero -inf absorbs (-inf * x = -inf for every x,
  -inf * -inf included) and 0 * +inf = 0.
* Integers: MIN/MAX are the dtype's bounds and stand for -inf/+inf; the semiring
  zero absorbs first (MIN + MAX = MIN in maxplus, MAX in minplus), finite results
  saturate at the bounds (no wrap-around). An integer max-times product with a
  MAX operand and a zero or negative other operand is MIN (like NaN: it never wins).
* argmax (int32): the smallest k whose product equals C[i, j] (strict comparison
  in ascending k); 0 when no product beats the zero (C is the zero), -1 when K == 0.
* Backward: grad_A[i, k] = sum_j grad_C[i, j] [argmax[i, j] == k], grad_B[k, j] =
  sum_i grad_C[i, j] [argmax[i, j] == k]; a broadcast operand's gradient is summed
  over the batch. GPU sums use atomics (order not reproducible for floats).

Inputs are Numba device arrays, CuPy arrays, PyTorch CUDA tensors or any
``__cuda_array_interface__`` object (zero-copy, on the producer's stream), or
NumPy arrays (copied to the GPU and back; computed by the NumPy reference, with a
log message, where there is no GPU or under ``NUMBA_ENABLE_CUDASIM=1``).
``lazykern.tropical.torch.matmul`` is the autograd-aware version for tensors.

Tensor networks live in their own package, :mod:`lazykern.tn`; its names stay reachable here:
:func:`einsum` / :func:`argmax_einsum` (any semiring, contraction orders from the graph, opt_einsum
or cotengra; :func:`contraction_plan` plans once and says what the order costs), and the module
paths ``lazykern.tropical.counting`` ((max, count) numbers, exact counts) and
``lazykern.tropical.networks`` (spin-glass ground states, configurations and degeneracies).
"""

from __future__ import annotations

import sys
import types

# The tensor networks' names, re-exported (the one upward import, listed in pyproject's layer contract).
from ..tn.einsum import ContractionPlan, argmax_einsum, contraction_plan, einsum
from . import reference
from ._family import family, make_family
from .api import bmm, choose_tile, matmul, matmul_backward
from .fragments import all_specs, core_names, core_specs
from .kernels import kernels_for


class _Package(types.ModuleType):
    """``tropical.einsum`` stays the function when the documented module path ``lazykern.tropical.einsum``
    (an alias of ``lazykern.tn.einsum``) is imported: the import system sets a loaded submodule on its
    parent, and leaves a parent that refuses (``AttributeError``) as it was."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "einsum" and isinstance(value, types.ModuleType):
            raise AttributeError(name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "ContractionPlan",
    "all_specs",
    "argmax_einsum",
    "bmm",
    "choose_tile",
    "contraction_plan",
    "core_names",
    "core_specs",
    "einsum",
    "family",
    "kernels_for",
    "make_family",
    "matmul",
    "matmul_backward",
    "reference",
]
