"""Tropical einsum: contraction order from opt_einsum or cotengra, each step one batched product.

>>> import numpy as np
>>> from lazykern.tropical import einsum
>>> A = np.array([[0.0, 1.0], [2.0, -1.0]])
>>> einsum("ij,jk->ik", A, A)  # max-plus matrix product
array([[3., 1.],
       [2., 3.]])
>>> float(einsum("ii->", A))  # max over the diagonal
0.0

``semiring``: "maxplus" (default), "minplus" or "maxmul" (max-times distributes over max
only for nonnegative entries, as probabilities are; with negative ones the result depends
on the contraction order). NumPy operands are computed
on the CPU by vectorized NumPy kernels; CuPy arrays, Numba device arrays and torch
tensors (CUDA) by lazykern's batched GPU kernels, results of the same kind. torch
tensors that require grad get the tropical gradient (one winner per max) through
:mod:`lazykern.tropical.torch`.

``optimize``: "auto", "greedy", "optimal" (any opt_einsum strategy name), "cotengra"
(hyper-optimized trees sliced to ``memory_limit`` entries, searched for ``max_time`` seconds,
default 5, in worker processes lazykern ends when the time is up; needs
``pip install 'lazykern[tn]'``), a cotengra optimizer object (run as given, its pools its
own), an explicit path (a list of position tuples, as opt_einsum writes them), or a
:class:`ContractionPlan` from :func:`contraction_plan` (the order, the sliced labels and
their cost, searched once and reused; cotengra's plans are also kept in the lazykern store,
so the same network skips the search next time). ``memory_limit``: entries of the largest
intermediate; by default a quarter of the GPU's free memory for GPU operands (two operands, the
result and a layout copy live at once), 2^28 on the CPU. ``slices``:
labels to slice over explicitly: the network is contracted once per value of those
labels and the results are combined by the semiring sum, so no intermediate carries
them (memory / time trade). ``devices``: spread those slices over several GPUs of this
host, ``"all"`` or a sequence of ordinals (default None: the operands' device alone); each
device contracts one contiguous group of slices on its own copy of the operands (the operands' device in
this process, every other one in a worker process of its own, ended with the call that started it unless
``lazykern.tn.keep_workers()`` is open: :mod:`._procs`), and the groups' results are added in the
semiring on the operands' device, so the result equals one device's. NumPy operands stay on the host,
one thread per group (``LAZYKERN_SPREAD=threads`` / ``processes`` overrides either choice).

:func:`argmax_einsum` also returns one optimal assignment of every label (backtracking
through the argmax of every step). A step whose argmax was not kept is recomputed by segments:
the subtree under it, down to the checkpoints (steps whose values the run kept: on a GPU those a
search predicts to save the most time within the free memory, :func:`._recompute.place`, with the
small steps right under the recomputed ones, so that a segment redoes the large steps alone; on the
host about the square root of their number), once, with the labels chosen so far fixed, keeping the
argmax of the segment's steps; so each step is recomputed about once, not once per step above it.
``checkpoint=True`` keeps no argmax at all; ``checkpoint=n`` keeps the argmax of the steps whose
results have at most n entries; ``checkpoint=None`` (the default) splits the GPU's free memory beside
the contraction between kept argmax, checkpoints and a segment's argmax by the seconds each split is
predicted to cost (multiply-adds and steps redone, :mod:`._recompute`; on the host every argmax is
kept); ``checkpoint=False`` keeps all of them. On CuPy, an argmax run's arrays of 256 MiB or more are
device allocations of their own (:attr:`._backend.Backend.large_whole`), and a split the device refuses
all the same is planned once more with one largest intermediate's bytes left aside.

Memory is planned: the peak of a contraction (every live intermediate, a step's layout copies and
result, the argmax kept) is computed from its plan (:mod:`._cost`) before it runs. With
``memory_limit`` not given, the plan is sliced until that peak fits the GPU's free memory; a plan
whose peak does not fit raises :class:`lazykern.errors.DeviceMemoryError` naming the bytes it needs,
before anything is allocated (an allocation failure inside a step is reported the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _spread
from ._backend import backend_of
from ._contract import Algebra
from .contraction.argmax import network_argmax, search_range
from .contraction.contract import build_network, contract_network, contract_range, contract_slices
from .contraction.fit import check_slicing, fit_in_place, fit_to_memory
from .contraction.inputs import Label, parse
from .contraction.network import ARENA_FASTER
from .contraction.paths import plan_steps
from .contraction.plan import ContractionPlan, contraction_plan, plan_flops
from .contraction.ship import unship

# The names the rest of lazykern, its tests and benchmarks import from here. Each is defined in one module
# of .contraction: patch a name there (where it is looked up), not here.
__all__ = [
    "ARENA_FASTER", "Algebra", "ContractionPlan", "argmax_einsum", "backend_of", "build_network", "check_slicing",
    "contract_network", "contract_range", "contract_slices", "contraction_plan", "einsum", "fit_in_place",
    "fit_to_memory", "network_argmax", "parse", "plan_flops", "plan_steps", "search_range", "unship",
]  # fmt: skip


def einsum(
    subscripts: str,
    *operands: Any,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: _spread.Devices = None,
) -> Any:
    """The tropical contraction ``subscripts`` (NumPy's notation, no ellipsis) of ``operands``.

    Raises ValueError for malformed subscripts or mismatched sizes, TypeError for mixed dtypes,
    ValueError for ``devices`` naming a GPU this process does not see.
    """
    inputs, output = parse(subscripts, len(operands))
    return contract_network(
        inputs,
        output,
        operands,
        semiring=semiring,
        optimize=optimize,
        slices=slices,
        memory_limit=memory_limit,
        max_time=max_time,
        devices=devices,
    )


def argmax_einsum(
    subscripts: str,
    *operands: Any,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    at: Sequence[int] | None = None,
    checkpoint: bool | int | None = None,
    slices: Sequence[Label] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: _spread.Devices = None,
) -> tuple[Any, dict[Label, int]]:
    """(value, assignment): the optimum of the contraction over every label (the output
    entry ``at`` when the output is not a scalar) and one assignment of all labels reaching it.
    ``devices``: each device finds the optimum of its group of slices; the best slice (the first
    one on a tie, as on one device) is then contracted again and backtracked on the operands' device."""
    inputs, output = parse(subscripts, len(operands))
    return network_argmax(
        inputs,
        output,
        operands,
        semiring=semiring,
        optimize=optimize,
        at=at,
        checkpoint=checkpoint,
        slices=slices,
        memory_limit=memory_limit,
        max_time=max_time,
        devices=devices,
    )
