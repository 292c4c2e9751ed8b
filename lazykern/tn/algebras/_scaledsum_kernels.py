"""The scaled-sum product on the GPU: a lazily compiled family (``tn_scaledsum``) of ``scaledsum.cu``.

:func:`product` takes a step's operands (s, l) and the max-plus product of their s, and returns its log
weights: each operand's rows scaled by :func:`side` (a thread a row, or a block a row of
:data:`LONG_ROW` terms or more), cuBLAS's float64 product of the scaled weights (the array module's
``matmul``), then one kernel for each output's log weight, which also says whether a sum may have
underflowed (the caller then redoes those entries). Every other array operation of the step is gone:
CuPy compiled 37 kernels the first time a machine ran a PartitionFunction (27-37 s on the H200,
session 81).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from ...families.family import KernelFamily
from ...families.per_device import Loaded
from . import _kbest_kernels

if TYPE_CHECKING:
    from ...store.cache import KernelCache

THREADS = _kbest_kernels.THREADS  # the blocks of every algebra kernel (launch_into)
LONG_ROW = 256  # terms from which a row takes a block of its own
_MAX_BLOCKS = 132 * 32
# s, l, E, top, xtop; rows, R, K; s's strides (batch, row, term), E's; c
SIDE_SIGNATURE = ["ptr"] * 5 + ["int64", "int32", "int32"] + ["int64"] * 6 + ["float64"]
# s, total, a, xa, b, yb, logw, small; outputs, M, N; a's and b's batch strides; c, tiny
FINISH_SIGNATURE = ["ptr"] * 8 + ["int64", "int32", "int32", "int64", "int64", "float64", "float64"]
SIDES = {"ss_side_rows": 1, "ss_side_long": THREADS}


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    preamble = resources.files(__package__).joinpath("scaledsum.cu").read_text(encoding="utf-8")
    fam = KernelFamily("tn_scaledsum", preamble, options=("-std=c++17", "--fmad=false"), cache=cache)
    for name, team in SIDES.items():
        fam.add(name, side_source(name, team), signature=SIDE_SIGNATURE)
    fam.add("ss_finish", finish_source("ss_finish"), signature=FINISH_SIGNATURE)
    return fam


def side_source(name: str, team: int) -> str:
    return (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const double *s, const double *l, '
        "double *E, double *top, double *xtop, long long rows, int R, int K, long long sb, long long sr, "
        "long long sk, long long eb, long long er, long long ek, double c) {\n"
        f"    lk_ss_side<{team}>(s, l, E, top, xtop, rows, R, K, sb, sr, sk, eb, er, ek, c);\n}}\n"
    )


def finish_source(name: str) -> str:
    return (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const double *s, const double *total, '
        "const double *a, const double *xa, const double *bt, const double *yb, double *logw, int *small, "
        "long long outputs, int M, int N, long long ab, long long bb, double c, double tiny) {\n"
        "    lk_ss_finish(s, total, a, xa, bt, yb, logw, small, outputs, M, N, ab, bb, c, tiny);\n}\n"
    )


_loaded = Loaded(make_family)
family = _loaded.family  # the process's ``tn_scaledsum`` family, made on first use

Call = tuple[str, int, tuple[Any, ...]]


def side_arguments(be: Any, s: Any, logs: Any, columns: bool, c: float) -> tuple[tuple[Any, Any, Any], Call]:
    """The scaled weights E (C-contiguous, ``s``'s shape) and each row's best s and best exponent (batch, R),
    and the launch that fills them: rows of A (batch, M, K), or with ``columns`` the columns of B
    (batch, K, N). ``s`` and ``logs`` (its log weights) are read through one set of strides (copied where
    they have two)."""
    batch, first, second = (int(n) for n in s.shape)
    if tuple(logs.shape) != tuple(s.shape) or be.strides(logs) != be.strides(s):
        s, logs = be.contiguous(s), be.contiguous(logs)
    sb, s1, s2 = be.strides(s)
    E = be.empty(s, (batch, first, second))
    if columns:  # a row is a column j of B: R = N, its terms along K
        R, K, sr, sk, er, ek = second, first, s2, s1, 1, second
    else:
        R, K, sr, sk, er, ek = first, second, s1, s2, second, 1
    top, xtop = be.empty(s, (batch, R)), be.empty(s, (batch, R))
    rows = batch * R
    name = "ss_side_long" if K >= LONG_ROW else "ss_side_rows"
    blocks = min(rows, _MAX_BLOCKS) if SIDES[name] > 1 else min(-(-rows // THREADS), _MAX_BLOCKS)
    ptrs = [be.pointer(x) for x in (s, logs, E, top, xtop)]
    args = (*ptrs, rows, R, K, sb, sr, sk, first * second, er, ek, float(c))
    return (E, top, xtop), (name, max(blocks, 1), args)


def finish_arguments(
    be: Any, s: Any, total: Any, a: Any, xa: Any, b: Any, yb: Any, c: float, tiny: float
) -> tuple[tuple[Any, Any], Call]:
    """Each output's log weight (``s``'s shape, C-contiguous) and a flag (one int32, 0) that the launch
    sets where a scaled sum fell below ``tiny``; ``a``, ``xa`` (batch|1, M) and ``b``, ``yb`` (batch|1, N)
    the operands' :func:`side_arguments`."""
    batch, M, N = (int(n) for n in s.shape)
    logw = be.empty(s, (batch, M, N))
    xp = be.xp
    flag = xp.zeros((1,), dtype=xp.int32, device=s.device) if be.name == "torch" else xp.zeros((1,), dtype=np.int32)
    outputs = batch * M * N
    ab = M if int(a.shape[0]) > 1 else 0
    bb = N if int(b.shape[0]) > 1 else 0
    ptrs = [be.pointer(x) for x in (s, total, a, xa, b, yb, logw, flag)]
    args = (*ptrs, outputs, M, N, ab, bb, float(c), float(tiny))
    return (logw, flag), ("ss_finish", max(1, min(-(-outputs // THREADS), _MAX_BLOCKS)), args)


def launch(out: Any, call: Call) -> None:
    """Run ``call`` on the device and stream of ``out``, the array it writes."""
    _kbest_kernels.launch_into(_loaded, out, call)
