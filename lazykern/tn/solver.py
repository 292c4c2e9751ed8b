"""``solve(problem, property)``: one contraction of the problem's tables in the property's algebra.

>>> import networkx
>>> from lazykern.tn import problems as P, properties as Q, solve
>>> p = P.IndependentSet(networkx.petersen_graph())
>>> solve(p, Q.SizeMax(k=3)), solve(p, Q.CountingAll())
([4, 3, 2], 76)

Each property picks its algebra (:mod:`lazykern.tn.algebras`); the tables become its tensors
(:mod:`._tables`: merged per variable set, fixed variables sliced, open ones kept), and the
contraction is :func:`lazykern.tn.einsum.contract_network` (planning, slicing to the device's memory,
several devices) in that algebra:

==============================  ======================================================================
``SizeMax/SizeMin`` (k = 1)     tropical max-plus / min-plus (:mod:`lazykern.tropical`'s products)
``SizeMax/SizeMin`` (k > 1)     k best distinct values (:mod:`.algebras.kbest`)
``CountingMax/Min`` (k = 1)     (value, count) numbers, exact by residues and CRT (:mod:`.counting`)
``CountingMax/Min`` (k > 1)     k best values with float32, then float64 counts (exact below 2^24, 2^53),
                                then int64, then mod 2^64 and a prime in one pass and CRT
``CountingAll``                 the counting algebra with every value equal: a sum of products
``GraphPolynomial``             evaluations modulo primes, interpolated (:mod:`.algebras.polynomial`)
``PartitionFunction``           sum-product with exact offsets (:mod:`.algebras.scaledsum`)
``SingleConfigMax/Min``         the tropical argmax, backtracked (:func:`.einsum.network_argmax`)
``ConfigsMax/Min``, ``All``     branching on variables with exact counts as the guide (:mod:`._configs`)
==============================  ======================================================================

Sizes are exact for integer weights: values ride in float32 where every partial sum is an integer
below 2^24, float64 below 2^53, int64 (tropical properties only) beyond. A problem with no feasible
configuration gives ``[]`` for the list properties, 0 for ``CountingAll``, ``-inf`` for
``PartitionFunction``, an empty (0, n) array for ``ConfigsAll`` and a ValueError for
``SingleConfigMax/Min``.

Open vertices: the answer is a NumPy array with one axis of ``num_flavors`` per open vertex (in the
order of ``problem.openvertices``: as the user listed them, ascending variable index when given as a
set) whose entry is the answer with those vertices fixed to its index
(float64 for ``PartitionFunction``, else an object array holding the answers as they are).

The work is in :mod:`.solving`, one module per family of properties (this module dispatches):
``context`` (planning, transfers, contraction), ``values`` (dtypes and size values), ``sizes`` (sizes
and counts), ``graph_poly``, ``partition``, ``apart`` (small components solved apart) and
``configurations``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InfeasibleError
from . import _instance, _kit, _procs, _spread, _tables
from . import properties as Q
from .solving import ahead
from .solving.apart import apart
from .solving.configurations import config_size, configs, single_config
from .solving.context import Context
from .solving.graph_poly import graph_polynomial
from .solving.partition import partition_function
from .solving.sizes import count_all, counting, sizes
from .solving.values import FLOAT32_EXACT, FLOAT64_EXACT, INT64_EXACT, value_dtype

__all__ = [
    "FLOAT32_EXACT", "FLOAT64_EXACT", "INT64_EXACT", "config_size", "configs", "count_all", "counting",
    "graph_polynomial", "partition_function", "single_config", "sizes", "solve", "value_dtype",
]  # fmt: skip


@_procs.scoped
def solve(
    problem: Any,
    prop: Q.Property,
    *,
    module: Any = "numpy",
    optimize: Any = "auto",
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> Any:
    """The property ``prop`` (:mod:`lazykern.tn.properties`) of ``problem`` (:mod:`lazykern.tn.problems`).

    ``module``: "numpy" (CPU), "cupy" or "torch" (GPU), or the module; ``optimize``: "auto" (opt_einsum's
    greedy order where it is cheap, else a cotengra search of ``max_time`` seconds, its plan kept in the
    lazykern store) or anything :func:`lazykern.tn.einsum` takes; ``memory_limit`` (entries of the
    largest intermediate; default: what fits the device), ``devices`` as for :func:`lazykern.tn.einsum`.

    Raises TypeError for a ``prop`` that is not a property, ValueError for open vertices that are also
    fixed or repeat, for a GraphPolynomial of non-integer sizes, for a PartitionFunction whose log Z is
    past float64's range, for integer sizes past what the property holds exactly, for a Configs* property
    past its limit (naming the count) and for a SingleConfig* of a problem with no feasible configuration
    (with open vertices: None in each entry that has none). Float weights whose exact decimal sums pass
    what the property holds are summed as floats, with a LazykernWarning."""
    if not isinstance(prop, Q.Property) or type(prop) in (Q.Property,):
        raise TypeError(f"solve(problem, prop): prop must be a property of lazykern.tn.properties, got {prop!r}")
    _check_problem(problem)
    memory_limit = _instance.check_memory_limit(memory_limit)
    max_time = _instance.check_max_time(max_time)
    _spread.ordinals(devices)
    ctx = Context(_instance.array_module(module), optimize, memory_limit, max_time, devices)
    fixed = dict(problem.fixedvertices)
    opened = tuple(int(v) for v in problem.openvertices)
    if len(set(opened)) != len(opened) or set(opened) & set(fixed):
        raise ValueError(f"open vertices {opened} repeat or are also fixed ({sorted(fixed)})")
    if not opened:
        return _solve(problem, prop, fixed, ctx)
    flavors = int(problem.num_flavors)
    answers = {
        tuple(a[v] for v in opened): _entry(problem, prop, fixed | a, ctx) for a in _tables.assignments(opened, flavors)
    }
    shape = (flavors,) * len(opened)
    if isinstance(prop, Q.PartitionFunction):
        return np.array([answers[i] for i in np.ndindex(*shape)], dtype=np.float64).reshape(shape)
    out = np.empty(shape, dtype=object)
    for index, answer in answers.items():
        out[index] = answer
    return out


# what solve reads of a problem: a Problem of lazykern.tn.problems has them all, and so may one's own class
_PROTOCOL = ("num_variables", "num_flavors", "goal", "openvertices", "fixedvertices", "constraints", "objectives")


def _check_problem(problem: Any) -> None:
    """A TypeError for what is not a problem (a graph, a class, a spin glass of :mod:`lazykern.tn.networks`),
    saying what to pass instead; a class of one's own with :class:`lazykern.tn.problems.Problem`'s
    attributes is taken as it is."""
    if not isinstance(problem, type) and all(hasattr(problem, name) for name in _PROTOCOL):
        return
    from .networks import SpinGlass as Instance

    if isinstance(problem, Instance):
        raise TypeError(
            "solve(problem, prop): a lazykern.tn.networks.SpinGlass is an instance, not a problem; pass "
            "lazykern.tn.problems.SpinGlass.from_instance(sg)"
        )
    what = f"the class {problem.__name__}" if isinstance(problem, type) else type(problem).__name__
    raise TypeError(
        f"solve(problem, prop): problem must be a problem of lazykern.tn.problems (such as "
        f"IndependentSet(graph)), got {what}"
    )


def _entry(problem: Any, prop: Q.Property, fixed: dict[int, int], ctx: Context) -> Any:
    """One entry of an open-vertex tensor: a SingleConfig* of an assignment nothing feasible extends is
    None there (the other properties answer [], 0 or -inf), not an error for the whole tensor."""
    try:
        return _solve(problem, prop, fixed, ctx)
    except InfeasibleError:
        return None


def _solve(problem: Any, prop: Q.Property, fixed: dict[int, int], ctx: Context) -> Any:
    # k-best properties take float weights past their exact range on a grid, not as float sums: a list of k
    # sizes kept two partial sums a later float addition made one, and skipped a real size (:func:`._tables.build`)
    tab = _tables.build(problem, fixed, _exact_below(prop), grid=(getattr(prop, "k", None) or 1) > 1)
    building = ahead.start(tab, prop, ctx)
    try:
        return _answer(problem, tab, prop, ctx)
    finally:
        _kit.join(building)


def _answer(problem: Any, tab: _tables.Tables, prop: Q.Property, ctx: Context) -> Any:
    found = apart(tab, prop, problem.goal, ctx)
    if found is not None:
        return found
    if isinstance(prop, (Q.SizeMax, Q.SizeMin)):
        return sizes(tab, prop.k, prop.largest, ctx)
    if isinstance(prop, (Q.CountingMax, Q.CountingMin)):
        return counting(tab, prop.k, prop.largest, ctx)
    if isinstance(prop, Q.CountingAll):
        return count_all(tab, ctx)
    if isinstance(prop, Q.GraphPolynomial):
        return graph_polynomial(tab, prop.laurent, ctx)
    if isinstance(prop, Q.PartitionFunction):
        return partition_function(tab, prop.beta, problem.goal, ctx)
    if isinstance(prop, Q.SingleConfigMax):
        if prop.k is None:
            return single_config(problem, tab, prop.largest, ctx)
        each = (Q.ConfigsMax if prop.largest else Q.ConfigsMin)(prop.k, tree_storage=True)
        return [(size, tree[0]) for size, tree in configs(problem, tab, each, ctx)]  # each size's tree's first
    if isinstance(prop, (Q.ConfigsMax, Q.ConfigsAll)):
        return configs(problem, tab, prop, ctx)
    raise TypeError(f"solve does not know the property {type(prop).__name__}")


def _exact_below(prop: Q.Property) -> int | None:
    """The units below which ``prop`` sums sizes exactly (:func:`value_dtype`): int64's for one best size,
    one configuration and the graph polynomial's tropical passes, float64's for every other property (the
    partition function's exact offsets too); None for ``CountingAll`` and ``ConfigsAll``, which read no
    size (every feasible entry counts alike), so no size range refuses or warns them."""
    if isinstance(prop, (Q.CountingAll, Q.ConfigsAll)):
        return None
    one_best = isinstance(prop, (Q.SizeMax, Q.SizeMin)) and prop.k == 1
    one_config = isinstance(prop, Q.SingleConfigMax) and prop.k is None
    if one_best or one_config or isinstance(prop, Q.GraphPolynomial):
        return INT64_EXACT
    return FLOAT64_EXACT
