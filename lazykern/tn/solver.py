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
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import LazykernWarning, ReconstructionError, warn_user
from . import _components, _configs, _cost, _crt, _host_steps, _instance, _procs, _tables, _upload
from . import properties as Q
from ._backend import backend_of
from ._contract import Algebra, Term
from .algebras import floatsum, kbest, modular, polynomial, scaledsum
from .counting import count_network
from .einsum import (
    ContractionPlan,
    build_network,
    contract_network,
    contraction_plan,
    network_argmax,
    plan_flops,
    plan_steps,
)

log = logging.getLogger("lazykern")

FLOAT32_EXACT = 1 << 24  # integer sizes whose every partial sum is below this ride in float32
FLOAT64_EXACT = 1 << 53
INT64_EXACT = 1 << 62  # int64 tropical values saturate at 2^63 - 1


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
    memory_limit = _instance.check_memory_limit(memory_limit)
    ctx = _Context(_instance.array_module(module), optimize, memory_limit, max_time, devices)
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


class _Infeasible(ValueError):
    """No configuration is feasible: a SingleConfig* has nothing to return."""


def _entry(problem: Any, prop: Q.Property, fixed: dict[int, int], ctx: _Context) -> Any:
    """One entry of an open-vertex tensor: a SingleConfig* of an assignment nothing feasible extends is
    None there (the other properties answer [], 0 or -inf), not an error for the whole tensor."""
    try:
        return _solve(problem, prop, fixed, ctx)
    except _Infeasible:
        return None


def _solve(problem: Any, prop: Q.Property, fixed: dict[int, int], ctx: _Context) -> Any:
    # k-best properties take float weights past their exact range on a grid, not as float sums: a list of k
    # sizes kept two partial sums a later float addition made one, and skipped a real size (:func:`._tables.build`)
    tab = _tables.build(problem, fixed, _exact_below(prop), grid=getattr(prop, "k", 1) > 1)
    apart = _apart(tab, prop, problem.goal, ctx)
    if apart is not None:
        return apart
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
    if isinstance(prop, (Q.SingleConfigMax, Q.SingleConfigMin)):
        return single_config(problem, tab, prop.largest, ctx)
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
    if one_best or isinstance(prop, (Q.SingleConfigMax, Q.SingleConfigMin, Q.GraphPolynomial)):
        return INT64_EXACT
    return FLOAT64_EXACT


class _Context:
    """The caller's array module and planning options, and the conversions every algebra shares."""

    def __init__(self, xp: Any, optimize: Any, memory_limit: int | None, max_time: float | None, devices: Any) -> None:
        self.xp = xp
        self.optimize = _default_optimize() if optimize == "auto" else optimize
        self.memory_limit = memory_limit
        self.max_time = max_time
        self.devices = devices
        # The host array each device array put here came from (by id, the device array kept beside it so
        # that the id is not reused): a contraction's small steps over them run on the host (_host_steps).
        self._hosts: dict[int, tuple[Any, np.ndarray]] = {}

    def planning(self, tab: _tables.Tables, **semiring: str) -> dict[str, Any]:
        """The keyword arguments every network of ``tab`` is contracted with: its order, the caller's
        memory limit, search time and devices (and ``semiring=`` where given)."""
        return dict(
            semiring, optimize=self.order(tab), memory_limit=self.memory_limit, max_time=self.max_time,
            devices=self.devices,
        )  # fmt: skip

    def put(self, x: np.ndarray) -> Any:
        """A host array on the caller's device."""
        name = self.xp.__name__
        if name == "numpy":
            return x
        if name == "torch":
            return self.xp.as_tensor(np.ascontiguousarray(x), device="cuda")
        return self.xp.asarray(x)

    def put_all(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        """Host arrays on the caller's device, each dtype's in one transfer (:mod:`._upload`)."""
        if self.xp.__name__ == "numpy":
            return list(arrays)
        out = _upload.upload(arrays, self.put)
        for dev, host in zip(out, arrays):
            self._hosts[id(dev)] = (dev, host)
        return out

    def _host_copies(self, operands: Sequence[Any]) -> list[Any] | None:
        """The host arrays ``operands`` (device arrays, or tuples of them) were put from, or None where one
        was not put by :meth:`put_all`."""

        def host(x: Any) -> np.ndarray | None:
            found = self._hosts.get(id(x))
            return found[1] if found is not None and found[0] is x else None

        out: list[Any] = []
        for op in operands:
            mapped = tuple(host(x) for x in op) if isinstance(op, tuple) else host(op)
            if mapped is None or (isinstance(mapped, tuple) and any(m is None for m in mapped)):
                return None
            out.append(mapped)
        return out

    def order(self, tab: _tables.Tables) -> Any:
        """What ``optimize=`` every network of ``tab`` takes: one order, searched (or read from the
        store) once for the tropical network, then given as a path to the others, which slice it to
        their own entry size. Only the caller's own plan, path or optimizer object is passed as it is."""
        if not isinstance(self.optimize, str):
            return self.optimize
        if tab.order is None:
            key = (self.xp.__name__, self.optimize, self.memory_limit, self.max_time, tuple(map(tuple, tab.labels)),
                   tuple(m.shape for m in tab.mask))  # fmt: skip
            tab.order = _orders.get(key)
            if tab.order is None:
                zeros = [self.put(np.zeros(m.shape, np.float32)) for m in tab.mask]
                net = build_network(tab.labels, (), zeros, "maxplus", Algebra)
                tab.order = [tuple(p) for p in net.plan(self.optimize, (), self.memory_limit, self.max_time).path]
                if len(_orders) >= _ORDERS_KEPT:
                    _orders.pop(next(iter(_orders)))  # the oldest
                _orders[key] = tab.order
        return list(tab.order)

    def contract(
        self,
        tab: _tables.Tables,
        labels: Any,
        output: Any,
        operands: Any,
        semiring: str,
        algebra: Any,
        plan: ContractionPlan | None = None,
    ) -> Any:
        """The contraction of one network of ``tab`` (``plan``: one made by :meth:`plan` for it). On a GPU,
        with the order's path or an unsliced plan, the small steps over the tables run on the host first
        (:mod:`._host_steps`); the rest of the plan, its own steps, on the device."""
        optimize = self.order(tab) if plan is None else plan
        path = optimize if isinstance(optimize, list) else plan.path if plan is not None and plan.nslices == 1 else None
        if path is not None and self.devices is None and self.xp.__name__ != "numpy":
            host = self._host_copies(operands)
            if host is not None:
                shorter = _host_steps.first(labels, output, host, semiring, algebra, path, operands, self.put)
                if shorter is not None:
                    labels, operands, short = shorter
                    optimize = short if plan is None else dataclasses.replace(plan, path=tuple(short))
        return contract_network(
            labels,
            output,
            operands,
            semiring=semiring,
            optimize=optimize,
            memory_limit=self.memory_limit if plan is None else None,
            max_time=self.max_time,
            algebra=algebra,
            devices=self.devices,
        )

    def plan(
        self, tab: _tables.Tables, labels: Any, output: Any, operands: Any, semiring: str, algebra: Any
    ) -> ContractionPlan:
        """The plan of a network contracted several times (residue passes, restricted counts)."""
        net = build_network(labels, output, operands, semiring, algebra)
        return net.plan(self.order(tab), (), self.memory_limit, self.max_time)


# The order of each network structure this process solved (by array module and planning options): a
# repeated solve skips the greedy order, the store's key and load, and the replay of the stored path
# (20-100 ms a call at 100-200 vertices, as long as the contraction itself on a GPU). A path fits any
# memory: each contraction slices it to its own entry size and the free memory of its call.
_orders: dict[tuple[Any, ...], list[tuple[int, ...]]] = {}
_ORDERS_KEPT = 32


def _default_optimize() -> str:
    import importlib.util

    return "cotengra" if importlib.util.find_spec("cotengra") is not None else "greedy"


# ------------------------------------------------------------------ values --
def value_dtype(tab: _tables.Tables, tropical_only: bool) -> np.dtype:
    """The narrowest dtype in which every partial sum of sizes is exact (floats: float64)."""
    if not tab.integer:
        return np.dtype(np.float64)
    bound = int(tab.magnitude())
    if bound < FLOAT32_EXACT:
        return np.dtype(np.float32)
    if bound < FLOAT64_EXACT:
        return np.dtype(np.float64)
    if tropical_only and bound < INT64_EXACT:
        return np.dtype(np.int64)
    held = (
        "one best size, configuration or graph polynomial: sums in int64, below 2^62 units"
        if tropical_only
        else "k-best sizes, counts and configuration sets: sums in float64, below 2^53 units"
    )
    size = bound * tab.unit  # the problem's own units, not numerators (decimal weights count in 1/10s ...)
    shown = str(size) if tab.unit == 1 and bound < 10**24 else _tables.figure(size)
    units = "" if tab.unit == 1 else f" ({_tables.figure(bound)} units of {_tables.figure(tab.unit)})"
    raise ValueError(
        f"sizes reach {shown}{units}, past what this property holds exactly ({held}); scale the weights down"
    )


def _worst(dtype: np.dtype, largest: bool) -> Any:
    """The semiring zero: what a forbidden entry holds."""
    if dtype.kind == "f":
        return -math.inf if largest else math.inf
    info = np.iinfo(dtype)
    return info.min if largest else info.max


def _values(tab: _tables.Tables, dtype: np.dtype, largest: bool, sign: int = 1) -> list[np.ndarray]:
    """Each tensor's sizes (times ``sign``) in ``dtype``, the semiring zero where it is forbidden. Float
    sizes carry the offset in the first tensor: a contraction's value is then the size it reports, and
    k best distinct values are k distinct sizes (added after, 1e300 + 1 and 1e300 + 0 were two values of
    one size: SizeMax(2) repeated it and ConfigsMax(2) lost a configuration)."""
    worst = _worst(dtype, largest)
    sizes = list(tab.size)
    if not tab.integer and tab.offset:
        sizes[0] = sizes[0] + float(tab.offset)
    return [np.where(m, s * sign, worst).astype(dtype) for m, s in zip(tab.mask, sizes)]


def _size(tab: _tables.Tables, v: Any) -> Any:
    """A contraction's value as the problem's size: an exact int for integer weights (offset added), the
    float nearest the exact value for decimal ones, the value itself for float sums (:func:`_values`
    folded the offset in)."""
    if tab.integer:
        return tab.answer(v if isinstance(v, (int, np.integer)) else int(round(float(v))))
    return float(v) + 0.0  # a negated 0.0 (a minimum's) reads as 0.0


def _finite(v: Any, dtype: np.dtype) -> bool:
    if dtype.kind == "f":
        return bool(math.isfinite(float(v)))
    info = np.iinfo(dtype)
    return info.min < int(v) < info.max


def _item(x: Any) -> Any:
    if hasattr(x, "copy_to_host"):
        x = x.copy_to_host()
    if hasattr(x, "get") and not isinstance(x, np.ndarray):  # a CuPy array
        x = x.get()
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _sizes_of(tab: _tables.Tables) -> dict[Any, int]:
    """Every variable's size in ``tab``'s networks: its flavors."""
    return dict.fromkeys((v for labels in tab.labels for v in labels), tab.flavors)


def _k_cap(tab: _tables.Tables, k: int) -> int:
    """``k``, or fewer where fewer distinct sizes can occur (proven). A contraction sums one entry of each
    table in one order whatever the configuration, so one combination of the tables' entries gives one
    value, float sums included: there are no more values than the configurations of the free variables
    (flavors ** free), than the products of each table's distinct allowed sizes, nor, where the
    configurations are few, than the distinct combinations the feasible ones take. Sizes of whole units
    (integers, decimal numerators) sum exactly: no more than the whole numbers between the tables' bounds
    (:meth:`._tables.Tables.size_bounds`) nor the distinct sums of one entry per table. A k-best algebra
    costs O(k^2) an entry: SizeMax(100000) of a path of 3 vertices has 3 sizes to find."""
    # flavors ** bit_length(k) > k for flavors >= 2: no need to raise flavors to every free variable
    cap = min(k, int(tab.flavors ** min(len(tab.free), k.bit_length())))
    distinct = [np.unique(s[m]) for m, s in zip(tab.mask, tab.size)]
    if any(len(d) == 0 for d in distinct):
        return 1  # a table allows nothing: no size occurs
    combinations = 1
    for d in distinct:
        combinations = min(combinations * len(d), cap)
    cap = combinations
    if tab.integer:
        low, high = tab.size_bounds()
        cap = min(cap, int(high - low) + 1, _distinct_sums([d.tolist() for d in distinct], cap))
    elif cap > 1 and tab.flavors ** len(tab.free) <= _ENUMERATED:
        cap = min(cap, _feasible_combinations(tab))
    return max(cap, 1)


_ENUMERATED = 1 << 14  # configurations few enough to enumerate on the host for a cap (milliseconds)
_SUM_WORK = 10**6  # additions spent at most on counting distinct sums for a cap


def _distinct_sums(values: list[list[Any]], cap: int) -> int:
    """The number of distinct sums of one entry of each of ``values`` (exact numbers), or ``cap`` once
    they reach it or counting them would take more than ``_SUM_WORK`` additions."""
    sums = {0}
    work = 0
    for d in values:
        if len(d) == 1:  # a constant moves every sum alike
            continue
        work += len(sums) * len(d)
        if work > _SUM_WORK:
            return cap
        sums = {a + b for a in sums for b in d}
        if len(sums) >= cap:
            return cap
    return len(sums)


def _feasible_combinations(tab: _tables.Tables) -> int:
    """The number of distinct combinations of the tables' allowed sizes that feasible configurations of
    the free variables take (every configuration enumerated)."""
    n = len(tab.free)
    column = {v: i for i, v in enumerate(tab.free)}
    configs = np.indices((tab.flavors,) * n).reshape(n, -1).T
    feasible = np.ones(len(configs), dtype=bool)
    ids = []
    for labels, m, s in zip(tab.labels, tab.mask, tab.size):
        entry = np.zeros(len(configs), dtype=np.int64)
        for v in labels:  # C order: the last label varies fastest
            entry = entry * tab.flavors + configs[:, column[v]]
        feasible &= m.ravel()[entry]
        _, which = np.unique(s.ravel(), return_inverse=True)
        ids.append(which.ravel()[entry])
    if not feasible.any():
        return 1
    return int(len(np.unique(np.stack(ids, axis=1)[feasible], axis=0)))


def sizes(tab: _tables.Tables, k: int, largest: bool, ctx: _Context) -> list[Any]:
    """The k best distinct sizes, best first."""
    if not tab.feasible:
        return []
    k = _k_cap(tab, k)
    if k == 1:
        dtype = value_dtype(tab, tropical_only=True)
        tensors = ctx.put_all(_values(tab, dtype, largest))
        out = ctx.contract(tab, tab.labels, (), tensors, "maxplus" if largest else "minplus", Algebra)
        v = _item(out).item()
        return [_size(tab, v)] if _finite(v, dtype) else []
    dtype = value_dtype(tab, tropical_only=False)
    sign = 1 if largest else -1  # a minimum is the maximum of the negated sizes
    tensors = [(t,) for t in ctx.put_all(_values(tab, dtype, True, sign=sign))]
    parts = ctx.contract(tab, tab.labels, (), tensors, "maxplus", kbest.algebra(k))
    return [_size(tab, sign * v) for v in (_item(p).item() for p in parts) if math.isfinite(v)]


def _count_operands(tab: _tables.Tables, dtype: np.dtype, largest: bool, ctx: _Context) -> list[Any]:
    values = _values(tab, dtype, largest)
    return list(zip(ctx.put_all(values), ctx.put_all([m.astype(np.int64) for m in tab.mask])))


def counting(tab: _tables.Tables, k: int, largest: bool, ctx: _Context) -> list[tuple[Any, int]]:
    """(size, exact count) at the k best sizes."""
    k = _k_cap(tab, k)
    if not tab.feasible:
        return []
    dtype = value_dtype(tab, tropical_only=False)
    bound = tab.flavors ** len(tab.free)
    if k == 1:
        ops = _count_operands(tab, dtype, largest, ctx)
        v, c = count_network(
            tab.labels,
            (),
            ops,
            **ctx.planning(tab, semiring="maxplus" if largest else "minplus"),
        )
        value = _item(v).item()
        return [(_size(tab, value), int(_item(c).item()))] if math.isfinite(value) else []
    sign = 1 if largest else -1
    values = ctx.put_all(_values(tab, dtype, True, sign=sign))
    # First passes of float counts: float32, exact wherever the k best counts are below 2^24, then float64,
    # below 2^53 (kbest.FLOAT_EXACT), as they mostly are for a few best sizes, at a float multiply-add per
    # term; a count past both (possible only where the bound allows it) is counted again by the integer
    # rings below. A float pass the bound makes needless is skipped.
    # (The inputs are exact in either float type: Tables' masks are boolean, counts 0 or 1.)
    for floats in kbest.FLOAT_PASSES:
        if floats != kbest.FLOAT_PASSES[0] and bound < kbest.FLOAT_EXACT[kbest.FLOAT_PASSES[0]]:
            break
        counts = ctx.put_all([m.astype(f"f{floats}") for m in tab.mask])
        alg = kbest.algebra(k, True, floats=floats)
        float_ops = list(zip(values, counts))
        with np.errstate(over="ignore", invalid="ignore"):  # a count past the floats' range: inf, counted again
            parts = ctx.contract(tab, tab.labels, (), float_ops, "maxplus", alg)
        found = [(float(_item(v)), float(_item(c))) for v, c in zip(parts[:k], parts[k:])]
        found = [(v, c) for v, c in found if math.isfinite(v)]
        if all(c < kbest.FLOAT_EXACT[floats] for _, c in found):
            return [(_size(tab, sign * v), int(c)) for v, c in found]
        if floats == 64:  # its rounding bounded: a proven bound on every count, which sets the primes below
            plan = ctx.plan(tab, tab.labels, (), float_ops, "maxplus", alg)  # the pass's own (the same order)
            entries = sum(int(m.size) for m in tab.mask)
            # a k-best product sums up to k * k terms where max-plus has one: k * k times the additions
            flops = plan_flops(tab.labels, (), _sizes_of(tab), plan) * k * k
            proven = floatsum.upper_bound(max(c for _, c in found), flops, entries, plan.nslices)
            bound = bound if proven is None else min(bound, proven)
    log.debug("CountingMax(%d): a count past what float counts hold exactly; counting in integer rings", k)
    ones = ctx.put_all([m.astype(np.int64) for m in tab.mask])
    operands = list(zip(values, ones))
    # Boolean masks count 0 or 1, their own residues modulo any prime: no `% p` per operand and pass.
    reduced = all(m.dtype == np.bool_ for m in tab.mask)

    # Each pass plans the shared order for its own algebra as it builds its network (one build, not a
    # plan's network and then the pass's: 300 operands prepared twice); the path's costs are kept.
    def run(moduli: tuple[int, ...]) -> tuple[Any, list[Any]]:
        alg = kbest.algebra(k, True, moduli[0] if moduli else 0, reduced=reduced)
        parts = ctx.contract(tab, tab.labels, (), operands, "maxplus", alg)
        return np.array([_item(p) for p in parts[:k]]), [np.array([_item(p) for p in parts[k:]])]

    def pair(_int64: tuple[int, ...], first: tuple[int, ...]) -> tuple[tuple[Any, list[Any]], tuple[Any, list[Any]]]:
        """The int64 pass and the first prime's in one contraction (both are needed once counts may
        pass 2^63): the values and their choices computed once, each count in both rings."""
        (p,) = first
        both = ctx.contract(tab, tab.labels, (), operands, "maxplus", kbest.paired_algebra(k, p, reduced=reduced))
        values = np.array([_item(x) for x in both[:k]])
        wide_counts = np.array([_item(x) for x in both[k : 2 * k]])
        return (values, [wide_counts]), (values, [np.array([_item(x) for x in both[2 * k :]])])

    vals, counts = _crt.solve(run, bound, 1, pair=pair if k <= kbest.PAIRED_KMAX and kbest.PAIRED else None)
    pairs = zip(vals.tolist(), np.asarray(counts).tolist())
    return [(_size(tab, sign * v), int(c)) for v, c in pairs if math.isfinite(v)]


def count_all(tab: _tables.Tables, ctx: _Context) -> int:
    """The number of feasible configurations (every value equal: the counting product is a sum of products)."""
    if not tab.feasible:
        return 0
    ops = [(ctx.put(np.zeros(m.shape, np.float32)), ctx.put(m.astype(np.int64))) for m in tab.mask]
    _, c = count_network(
        tab.labels,
        (),
        ops,
        **ctx.planning(tab),
    )
    return int(_item(c).item())


def graph_polynomial(tab: _tables.Tables, laurent: bool, ctx: _Context) -> Any:
    """Exact coefficients of sum_s count(s) x^s (index s), or (lowest, coefficients) with ``laurent``."""
    if not tab.integer or tab.unit != 1:
        why = (
            f"{tab.floated}: scale the weights down"
            if tab.floated
            else f"weights that are not whole numbers (sizes in units of {tab.unit}): give integer weights"
        )
        raise ValueError(f"GraphPolynomial needs integer sizes, summed exactly; this problem has {why}")
    proven = _uniform_lowest(tab)  # most problems' smallest size needs no contraction (see there)
    low = [proven] if proven is not None else sizes(tab, 1, False, ctx)
    if not low:
        return (0, []) if laurent else []
    smax, bound = _largest_and_count_bound(tab, ctx)
    smin = int(low[0])
    _polynomial_checks(smin, smax, laurent)
    mins = [int(s[m].min()) for m, s in zip(tab.mask, tab.size)]
    # Python ints (object arrays), exact at any size: an entry past int64 no feasible configuration reaches
    # still gets its power (:func:`.algebras.polynomial.powers_modulo` reduces it modulo p - 1)
    exponents = [np.where(m, s - lo, 0) for m, s, lo in zip(tab.mask, tab.size, mins)]
    shift = smin - (sum(mins) + int(tab.offset))  # Q(x) = x^shift R(x), R of degree smax - smin
    points = smax - smin + 1
    xs = np.arange(1, points + 1, dtype=np.int64)
    labels = [(polynomial.POINTS, *lab) for lab in tab.labels]

    largest = _largest_intermediate(tab, ctx)

    def run(moduli: tuple[int, ...]) -> np.ndarray:
        """One pass: the evaluations at every point modulo each of ``moduli`` (one part per prime), the
        points taken in as few groups as the memory holds without slicing (:func:`_points_per_pass`), or
        all at once by a plan of their own where that is predicted quicker (:func:`_points_plan`)."""
        r = len(moduli)
        per_pass = _points_per_pass(ctx, largest, 8 * r, points)
        plan = _points_plan(tab, labels, points, per_pass, 8 * r, ctx) if per_pass < points else None
        groups = 1 if plan is not None else -(-points // per_pass)
        out = []
        for chunk in np.array_split(xs, groups):
            tables = [t for e, m in zip(exponents, tab.mask) for t in polynomial.powers_modulo(e, m, chunk, moduli)]
            put = ctx.put_all(tables)  # one transfer, not one per table and prime
            ops = [tuple(put[i : i + r]) for i in range(0, len(put), r)]
            operands = [op[0] for op in ops] if r == 1 else ops  # one part: the array itself
            alg = modular.algebra(*moduli)
            parts = ctx.contract(tab, labels, (polynomial.POINTS,), operands, "maxplus", alg, plan)
            parts = parts if isinstance(parts, tuple) else (parts,)  # one part comes back as the array itself
            out.append(np.array([_item(p) for p in parts], dtype=np.int64).reshape(r, len(chunk)))
        return np.concatenate(out, axis=1)

    # No coefficient exceeds the number of feasible configurations (``bound``, proven from above by the
    # float64 count of the largest size's pass): it says how many primes the one pass of evaluations
    # needs, often far fewer than the free variables' bound (flavors ** free) asks.
    coefficients = polynomial.reconstruct(run, points, shift, bound, polynomial.primes_needed(bound))
    while coefficients and coefficients[-1] == 0:
        coefficients.pop()
    if laurent:
        return smin, coefficients
    return [0] * smin + coefficients


def _polynomial_checks(smin: int, smax: int, laurent: bool) -> None:
    """Refuse a polynomial of sizes ``smin``..``smax`` this solver does not give (with the reason)."""
    if smin < 0 and not laurent:
        raise ValueError(
            f"sizes go down to {smin}: a polynomial in x has no negative powers; pass "
            "GraphPolynomial(laurent=True) for (lowest size, coefficients)"
        )
    if smin >= polynomial.DEGREE_MAX and not laurent:
        raise ValueError(
            f"sizes start at {smin}: the coefficient list would open with {smin} zeros; pass "
            "GraphPolynomial(laurent=True) for (lowest size, coefficients)"
        )
    if smax - smin >= polynomial.DEGREE_MAX:
        raise ValueError(
            f"GraphPolynomial: sizes span {smin}..{smax}, a polynomial of degree {smax - smin}; this solver "
            f"evaluates it at every degree + 1 points and stops at degree {polynomial.DEGREE_MAX - 1} "
            "(scale the weights down, or ask CountingMax(k) for the top coefficients)"
        )


def _apart(tab: _tables.Tables, prop: Q.Property, goal: str, ctx: _Context) -> Any:
    """A size, counting or partition-function property of ``tab`` with its small independent components
    counted on the host (:mod:`._components`) and the rest contracted; None where ``tab`` has none to set
    apart (and for configuration sets, one network; one configuration: :func:`single_config`)."""
    served = (Q.CountingAll, Q.SizeMax, Q.SizeMin, Q.CountingMax, Q.CountingMin, Q.GraphPolynomial, Q.PartitionFunction)
    if (
        not isinstance(prop, served)
        or (isinstance(prop, Q.GraphPolynomial) and tab.unit != 1)  # refused by graph_polynomial, as one network
        or (isinstance(prop, Q.PartitionFunction) and goal not in ("max", "min"))
    ):
        return None
    parts = _components.split(tab)
    if parts is None:
        return None
    if isinstance(prop, Q.CountingAll):
        total = sum(parts.histogram(_components.keeper(0, True)).values())
        return (1 if parts.rest is None else count_all(parts.rest, ctx)) * total
    if isinstance(prop, (Q.SizeMax, Q.SizeMin, Q.CountingMax, Q.CountingMin)):
        counted = isinstance(prop, (Q.CountingMax, Q.CountingMin))
        keep = _components.keeper(prop.k, prop.largest)
        found = parts.histogram(keep)
        if parts.rest is not None:
            rest = (
                dict(counting(parts.rest, prop.k, prop.largest, ctx))
                if counted
                else dict.fromkeys(sizes(parts.rest, prop.k, prop.largest, ctx), 1)
            )
            found = _components.merge(found, rest, keep)
        best = sorted(found, reverse=prop.largest)
        return [(tab.answer(v), found[v]) for v in best] if counted else [tab.answer(v) for v in best]
    if isinstance(prop, Q.GraphPolynomial):
        keep = _components.keeper(None, True)
        ends = parts.extremes()
        if ends is None:
            return (0, []) if prop.laurent else []
        if ends[1] - ends[0] >= polynomial.DEGREE_MAX:  # the degree alone is past the limit: refused unmerged
            low, high = ends
            if parts.rest is not None:  # the whole span, for the message: the rest's by its best two sizes
                top, bottom = sizes(parts.rest, 1, True, ctx), sizes(parts.rest, 1, False, ctx)
                if not top:
                    return (0, []) if prop.laurent else []
                low, high = low + bottom[0], high + top[0]
            _polynomial_checks(low + int(tab.offset), high + int(tab.offset), prop.laurent)
        found = parts.histogram(keep)
        if parts.rest is not None:
            low, coefficients = graph_polynomial(parts.rest, True, ctx)
            found = _components.merge(found, {low + i: c for i, c in enumerate(coefficients) if c}, keep)
        if not found:
            return (0, []) if prop.laurent else []
        smin, smax = min(found) + int(tab.offset), max(found) + int(tab.offset)
        _polynomial_checks(smin, smax, prop.laurent)
        coefficients = [found.get(v, 0) for v in range(min(found), max(found) + 1)]
        return (smin, coefficients) if prop.laurent else [0] * smin + coefficients
    if isinstance(prop, Q.PartitionFunction):
        # each part's log Z as an exact best term and a float log weight beside it, summed exactly
        scale = Fraction(prop.beta) if goal == "max" else -Fraction(prop.beta)
        terms = [] if parts.rest is None else [partition_function(parts.rest, prop.beta, goal, ctx, exact=True)]
        terms += [_components.log_sum(g.histogram(), scale * tab.unit) for g in parts.small]
        if any(t == -math.inf for t in terms):
            return -math.inf  # a part with no feasible configuration
        counts = [1] * (parts.rest is not None) + [len(g.components) for g in parts.small]
        total = scale * tab.unit * Fraction(tab.offset) + sum(t * n for t, n in zip(terms, counts))
        answer = _float(total)
        if not math.isfinite(answer):
            raise _past_range(tab, scale)
        return answer
    return None


def _largest_intermediate(tab: _tables.Tables, ctx: _Context) -> int:
    """Entries of the largest intermediate of ``tab``'s order, unsliced (every polynomial tensor holds
    that many per point)."""
    sizes: dict[Hashable, int] = {lab: tab.flavors for labels in tab.labels for lab in labels}
    order = ctx.order(tab)
    if isinstance(order, ContractionPlan):  # every label holds ``flavors`` entries
        return int(order.largest * tab.flavors ** len(order.sliced))
    if not isinstance(order, list):  # the caller's optimizer object: it plans each network itself
        return 1
    plan = contraction_plan(tab.labels, (), sizes, optimize=order, memory_limit=2**62, store=False)
    return int(plan.largest)


def _points_per_pass(ctx: _Context, largest: int, entry_bytes: int, points: int) -> int:
    """How many evaluation points one contraction carries: as many as keep its largest intermediate
    (``largest`` entries per point) within the slicing target (the caller's ``memory_limit``, else the
    one the free memory sets for ``entry_bytes``). A 3-regular graph of 200 vertices, planned for a GPU,
    has intermediates of 2^29 entries: with its 91 points and 6 primes one such array is 2.3 TB, 16
    times an H200's memory, and slicing that far re-runs much of the network per slice (no answer in
    40 s, session 59); groups of points cost only their own work."""
    limit = ctx.memory_limit if ctx.memory_limit is not None else _device_limit(ctx, entry_bytes)
    return max(1, min(points, int(limit) // max(largest, 1)))


def _device_limit(ctx: _Context, entry_bytes: int) -> int:
    """The slicing target the free memory of the caller's device sets for entries of ``entry_bytes``."""
    be, _ = backend_of(ctx.put(np.zeros(1, np.float64)))
    return int(be.memory_limit(entry_bytes))


# Predicted seconds of the polynomial's groups of points below which no plan of its own is searched for
# (a search takes up to max_time, 5 s by default, the first time a network is seen).
_REPLAN_SECONDS = 2.0


def _points_plan(
    tab: _tables.Tables, labels: list[Any], points: int, per_pass: int, entry_bytes: int, ctx: _Context
) -> ContractionPlan | None:
    """A plan of the polynomial network with every point in it, sliced to the memory target, where it is
    predicted quicker than the shared order run once per group of ``per_pass`` points; else None. The
    shared order is the tropical network's quickest, whose largest intermediates a GPU holds once:
    every evaluation tensor holds them once per point and prime, and its steps stream them through
    memory (a 3-regular graph of 200 vertices: intermediates of 2^29 entries, one point per pass, 90
    passes of 0.5 s each on an H200, session 67). An order of smaller intermediates, sliced, streams
    less in all. Only a searched order is replanned (a caller's own plan or path is followed)."""
    order = ctx.order(tab)
    if not isinstance(optimize := ctx.optimize, str) or not isinstance(order, list):
        return None
    sizes = {**_sizes_of(tab), polynomial.POINTS: points}
    rates = _cost.rates_for(ctx.xp.__name__ == "numpy", 8)
    output = (polynomial.POINTS,)
    group = {**sizes, polynomial.POINTS: per_pass}
    groups = -(-points // per_pass)
    shared = groups * _cost.seconds(plan_steps(labels, output, group, order, {}), 1, entry_bytes, rates)
    if shared < _REPLAN_SECONDS:  # a search could cost more than it saves
        return None
    limit = ctx.memory_limit if ctx.memory_limit is not None else _device_limit(ctx, entry_bytes)
    plan = contraction_plan(
        labels, output, sizes, optimize=optimize, memory_limit=limit, max_time=ctx.max_time, initial=order,
        rank="seconds",
    )  # fmt: skip
    steps = plan_steps(labels, output, sizes, plan.path, dict(plan.sliced))
    mine = _cost.seconds(steps, plan.nslices, entry_bytes, rates)
    log.debug("GraphPolynomial: %d points in one plan of %d slices %.3g s, in %d groups %.3g s (predicted)",
              points, plan.nslices, mine, groups, shared)  # fmt: skip
    return plan if mine < shared else None


def _uniform_lowest(tab: _tables.Tables) -> int | None:
    """The smallest size of a feasible configuration when one with every free variable at one flavor
    proves it: feasible, and of the tables' lower bound (each table's smallest allowed size, summed),
    which nothing goes below (every vertex out of an independent set; no edge cut). None when no
    such configuration is feasible and at that bound (the minimum then takes a contraction)."""
    if not tab.feasible or not tab.integer:
        return None
    low, _ = tab.size_bounds()
    for flavor in range(tab.flavors):
        total = tab.offset
        for m, s in zip(tab.mask, tab.size):
            at = (flavor,) * m.ndim
            if not m[at]:
                break
            total += s[at]
        else:
            if total == low:
                return int(low)
    return None


def _largest_and_count_bound(tab: _tables.Tables, ctx: _Context) -> tuple[int, int]:
    """The largest size of a feasible configuration, and at least their number (proven): one pass of
    the max-plus values beside the float64 sum-product of the masks, its rounding bounded
    (:func:`.algebras.floatsum.upper_bound`), capped by flavors ** free variables; where the float
    overflowed, the exact count by residues (:func:`_modular_count`)."""
    dtype = value_dtype(tab, tropical_only=True)
    values = ctx.put_all(_values(tab, dtype, True))
    masks = ctx.put_all([m.astype(np.float64) for m in tab.mask])
    operands = list(zip(values, masks))
    alg = floatsum.SizeAndCountAlgebra
    plan = ctx.plan(tab, tab.labels, (), operands, "maxplus", alg)
    with np.errstate(over="ignore", invalid="ignore"):  # counts past 2^1024: inf or NaN, no bound (upper_bound)
        top, count = ctx.contract(tab, tab.labels, (), operands, "maxplus", alg, plan)
    largest = _item(top).item()
    if not _finite(largest, dtype):
        raise ReconstructionError("GraphPolynomial: no feasible configuration reached the largest size; report it")
    computed = float(_item(count).item())
    flops = plan_flops(tab.labels, (), _sizes_of(tab), plan)
    bound = floatsum.upper_bound(computed, flops, sum(int(m.size) for m in tab.mask), plan.nslices)
    if bound is None:
        log.debug("GraphPolynomial: the float64 count overflowed (%r); counting by residues", computed)
        bound = _modular_count(tab, ctx)
    return int(_size(tab, largest)), min(bound, tab.flavors ** len(tab.free))


def _modular_count(tab: _tables.Tables, ctx: _Context) -> int:
    """The number of feasible configurations by the modular algebra: one pass with as many primes as
    the proven bound (flavors ** free variables) needs, then the Chinese remainder theorem."""
    moduli = tuple(itertools.islice(_crt.primes(modular.PRIME_BELOW - 1), polynomial.primes_needed(
        tab.flavors ** len(tab.free))))  # fmt: skip
    ones = [tuple(ctx.put(m.astype(np.float64)) for _ in moduli) for m in tab.mask]
    operands = [op if len(moduli) > 1 else op[0] for op in ones]
    parts = ctx.contract(tab, tab.labels, (), operands, "maxplus", modular.algebra(*moduli))
    parts = parts if isinstance(parts, tuple) else (parts,)
    x, M = 0, 1
    for p, r in zip(moduli, parts):
        x, M = _crt.combine(x, M, int(_item(r).item()), p), M * p
    return int(x)


def partition_function(tab: _tables.Tables, beta: float, goal: str, ctx: _Context, exact: bool = False) -> Any:
    """log sum exp(+-beta * size) over feasible configurations (the sign: + for a "max" goal), by exact
    offsets (:mod:`.algebras.scaledsum`): an entry holds its best t, +-size in units of a power of two
    (:func:`_log_terms`), and its log weight relative to it, so no float ever holds beta times a size and
    log Z = beta * best + l is summed exactly at the end. Sizes whose exact sums are integers of that unit
    below 2^53 (integers and short decimals below 2^53 units, 1e22 beside -1e22) give log Z to float64's
    precision of itself; other sizes (1/3 beside 2^60) ride as float64 sums, with a warning where beta
    times their rounding is large against log Z. A log Z past float64's range is a ValueError, never
    +-inf. With ``exact``: log Z as the exact Fraction of those parts (-inf where nothing is feasible),
    unrounded and unchecked, for a sum with other independent parts' (:func:`_apart`)."""
    if goal not in ("max", "min"):
        raise ValueError(f"the problem's goal must be 'max' or 'min', got {goal!r}")
    if not tab.feasible:
        return -math.inf
    scale = Fraction(beta) if goal == "max" else -Fraction(beta)
    terms, quantum, base, whole, rounding = _log_terms(tab, (scale > 0) - (scale < 0))
    worth = abs(scale) * tab.unit * quantum  # the log weight of one unit of t
    if whole:
        # whole units: past 2^64 every entry below its best weighs exp(-2^64) = 0 as with the true worth
        c = float(min(worth, Fraction(2**64)))
    else:
        c = _float(worth)
        if c == math.inf:
            raise ValueError(
                f"PartitionFunction: |beta| = {_tables.figure(abs(scale))} times sizes of up to "
                f"{_tables.figure(Fraction(tab.magnitude()) * tab.unit)} gives log-weights past what float64 holds "
                "even relative to each other; scale the weights or beta down"
            )
    ones = [np.where(m, 0.0, -math.inf) for m in tab.mask]
    operands = [(ctx.put(t), ctx.put(z)) for t, z in zip(terms, ones)]
    s, logw = ctx.contract(tab, tab.labels, (), operands, "maxplus", scaledsum.algebra(c))
    best, log_weight = float(_item(s).item()), float(_item(logw).item())
    if best == -math.inf:  # no feasible configuration (t never overflows: its sums stay below 2^1000)
        return -math.inf
    if not math.isfinite(log_weight):
        raise ReconstructionError(f"PartitionFunction: a feasible best size with log weight {log_weight}; report it")
    whole_sum = scale * tab.unit * (Fraction(tab.offset) + base) + worth * Fraction(best) + Fraction(log_weight)
    if exact:
        return whole_sum
    answer = _float(whole_sum)
    if not math.isfinite(answer):
        raise _past_range(tab, scale)
    # Each configuration's t and the best are off by up to ``rounding``, and the steps' differences of
    # them round as much again: log Z by up to about 4 times that, times the worth of a unit.
    error = 4 * rounding * worth
    if error > Fraction(1e-9) * max(Fraction(1), abs(whole_sum)):
        size = _tables.figure(Fraction(tab.magnitude()) * tab.unit)
        off = _tables.figure(rounding * quantum * tab.unit)
        warn_user(
            f"PartitionFunction: sizes up to {size} are summed in float64, which rounds each sum by up to about "
            f"{off}; |beta| = {_tables.figure(abs(scale))} times that leaves log Z = {answer!r} off by up to about "
            f"{_tables.figure(error)}: it may be off by that much (integer or short-decimal weights whose sums "
            "stay below 2^53 units give log Z to float64's precision)",
            LazykernWarning,
        )
    return answer


def _log_terms(tab: _tables.Tables, sign: int) -> tuple[list[np.ndarray], Fraction, Fraction, bool, Fraction]:
    """Each table's t = ``sign`` * (size - its best) / q in float64 (-inf where forbidden), q (in
    ``tab.unit``) a power of two; the tables' best sizes summed (exact, moved out of the contraction:
    log-weights of 10^400 and -10^400 that cancel leave t of 0); whether every t is a whole number; and
    how far a configuration's float64 sum of t may lie from its exact value (in units of t). Where every
    allowed t is a whole number of some power of two and the tables' largest |t| summed stays below 2^53
    of it, q is that power: every t and partial sum is an integer below 2^53, exact. Else q keeps those
    sums below 2^1000 (float64's range, whatever the contraction adds): each t rounds once (Python ints)
    or not at all (floats), and each of a configuration's additions by up to 2^-53 of the sum. ``sign`` 0
    (beta 0): every t is 0."""
    sizes, base = [], Fraction(0)
    for m, s in zip(tab.mask, tab.size):
        moved, best = _less_best(s, m, sign) if sign else (s, Fraction(0))
        sizes.append(moved)
        base += best
    allowed = [s[m] for m, s in zip(tab.mask, sizes)]
    if sign == 0 or not any(bool(np.any(a != 0)) for a in allowed):
        return [np.where(m, 0.0, -math.inf) for m in tab.mask], Fraction(1), base, True, Fraction(0)
    reach = sum((_largest_abs(a) for a in allowed), Fraction(0))  # no sum of one entry per table passes it
    low = min(_lowest_bit(a) for a in allowed if np.any(a != 0))
    if reach / Fraction(2) ** low < 2**53:
        terms = [np.where(m, _shifted(s, low) * sign, -math.inf) for m, s in zip(tab.mask, sizes)]
        return terms, Fraction(2) ** low, base, True, Fraction(0)
    shift = max(0, reach.numerator.bit_length() - reach.denominator.bit_length() + 1 - 1000)  # reach < 2^(1000 + it)
    q = Fraction(2) ** shift
    shifted = [_shifted(s, shift) for s in sizes]
    rounding = (len(shifted) - 1) * reach / q / 2**53
    for a, m, s in zip(shifted, tab.mask, sizes):
        if s.dtype == object:  # each Python int rounded once: by this much at most
            errors = (abs(Fraction(x) - Fraction(y) / q) for x, y in zip(a[m].tolist(), s[m].tolist()))
            rounding += max(errors, default=Fraction(0))
    terms = [np.where(m, a * sign, -math.inf) for a, m in zip(shifted, tab.mask)]
    return terms, q, base, False, rounding


def _less_best(size: np.ndarray, mask: np.ndarray, sign: int) -> tuple[np.ndarray, Fraction]:
    """``size`` less its best allowed entry (the largest for ``sign`` 1, the smallest for -1), and that
    entry; ``size`` itself and 0 where a float subtraction would round (the table then keeps its sizes)."""
    allowed = size[mask]
    if not allowed.size:
        return size, Fraction(0)
    best = allowed.max() if sign > 0 else allowed.min()
    if size.dtype == object:
        return np.asarray(size - best, dtype=object), Fraction(int(best))  # a 0-d array stays an array
    with np.errstate(over="ignore", invalid="ignore"):
        moved = np.asarray(size - best, dtype=np.float64)
        back = moved - size  # TwoSum: the subtraction's rounding error, exactly (0: exact)
        error = (size - (moved - back)) + (-best - back)
    if not np.all(np.isfinite(moved[mask])) or np.any(error[mask] != 0):
        return size, Fraction(0)
    return moved, Fraction(float(best))


def _largest_abs(values: np.ndarray) -> Fraction:
    """The largest |x| of ``values`` (floats or Python ints), exact; 0 for none. NaN or inf is a ValueError."""
    if not values.size:
        return Fraction(0)
    if values.dtype == object:
        return Fraction(max(abs(int(x)) for x in values.ravel().tolist()))
    if not np.all(np.isfinite(values)):
        raise ValueError("PartitionFunction: a size is NaN or infinite; every weight must be a finite number")
    return Fraction(float(np.abs(values).max()))


def _lowest_bit(values: np.ndarray) -> int:
    """The exponent of the lowest bit set in any nonzero entry of ``values`` (floats or Python ints)."""
    if values.dtype == object:
        return min((x & -x).bit_length() - 1 for x in (int(v) for v in values.ravel().tolist()) if x)
    x = values[values != 0].astype(np.float64)
    mantissa, exponent = np.frexp(x)  # x = mantissa * 2^exponent, mantissa of 53 bits at most
    whole = np.abs(np.ldexp(mantissa, 53)).astype(np.int64)
    _, lowest = np.frexp((whole & -whole).astype(np.float64))  # a power of two 2^j: frexp gives j + 1
    return int((exponent - 53 + lowest - 1).min())


def _shifted(values: np.ndarray, shift: int) -> np.ndarray:
    """``values`` (floats or Python ints) times 2^-``shift`` in float64, correctly rounded."""
    if values.dtype != object:
        return np.ldexp(values.astype(np.float64), -shift)
    scaled = (Fraction(int(x)) / Fraction(2) ** shift for x in values.ravel().tolist())
    return np.array([x.numerator / x.denominator for x in scaled], dtype=np.float64).reshape(values.shape)


def _float(x: Any) -> float:
    """The float nearest ``x`` (an int, Fraction or float), +-inf past float64's range."""
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _past_range(tab: _tables.Tables, scale: Fraction, why: str = "") -> ValueError:
    """The refusal of a log Z past float64's range (never answered as +-inf or NaN)."""
    size = _tables.figure(Fraction(tab.magnitude()) * tab.unit)
    return ValueError(
        f"PartitionFunction: log Z is past float64's range (1.8e308): sizes reach {size} and |beta| is "
        f"{_tables.figure(abs(scale))}{' ' + why if why else ''}; scale the weights or beta down"
    )


# ---------------------------------------------------------- configurations --
def single_config(problem: Any, tab: _tables.Tables, largest: bool, ctx: _Context) -> tuple[Any, np.ndarray]:
    """(best size, one configuration reaching it), checked against the problem's own size."""
    if not tab.feasible:
        raise _Infeasible("the problem has no feasible configuration (its fixed vertices violate a constraint)")
    parts = _components.split(tab)  # small independent components: each one's best, enumerated
    if parts is not None:
        small = _components.best_assignment(tab, parts, largest)
        if small is None:
            raise _Infeasible("the problem has no feasible configuration")
        numerator, assignment = small
        if parts.rest is not None:
            best, more = _best_assignment(parts.rest, largest, ctx)
            numerator += _size(parts.rest, best)  # the rest's answers are its numerators
            assignment.update(more)
        config = tab.configuration(assignment)
        return _checked(problem, tab, tab.answer(numerator), config), config
    best, assignment = _best_assignment(tab, largest, ctx)
    config = tab.configuration(assignment)
    return _checked(problem, tab, _size(tab, best), config), config


def _best_assignment(tab: _tables.Tables, largest: bool, ctx: _Context) -> tuple[Any, dict[int, int]]:
    """The contraction's best value and one assignment of ``tab``'s free variables reaching it."""
    dtype = value_dtype(tab, tropical_only=True)
    tensors = [ctx.put(t) for t in _values(tab, dtype, largest)]
    best, assignment = network_argmax(
        tab.labels,
        (),
        tensors,
        **ctx.planning(tab, semiring="maxplus" if largest else "minplus"),
    )
    best = _item(best).item()
    if not _finite(best, dtype):
        raise _Infeasible("the problem has no feasible configuration")
    return best, {int(v): int(f) for v, f in assignment.items() if isinstance(v, (int, np.integer))}


def _checked(problem: Any, tab: _tables.Tables, size: Any, config: np.ndarray) -> Any:
    """``size``, once the problem agrees that ``config`` is feasible and has it (no silent wrong answer)."""
    if not problem.is_feasible(config):
        raise ReconstructionError(f"the contraction chose an infeasible configuration {config.tolist()}; report it")
    own = problem.size(config)
    if tab.integer and not tab.tolerance:  # exact sums: the problem's too (the float nearest the exact sum)
        same = own == size
    elif tab.integer:  # sums of weights on a grid: within its tolerance of the exact sum, each then rounded
        gap = abs(Fraction(float(own)) - Fraction(float(size)))
        same = gap <= tab.tolerance + Fraction(math.ulp(float(own))) + Fraction(math.ulp(float(size)))
    else:  # the contraction's float sums round; the problem's is exact
        slack = max(1e-9, _float_slack(problem))
        same = math.isclose(float(own), float(size), rel_tol=1e-9, abs_tol=slack)
    if not same:
        raise ReconstructionError(f"configuration {config.tolist()} has size {own}, the contraction said {size}")
    return size


def _float_slack(problem: Any) -> float:
    """How far two float64 sums of one configuration's objective entries, in any order and grouping, may
    lie apart: each takes at most one addition per table, each rounding by half an ulp of a partial sum,
    and no partial sum passes the sum of every table's largest |entry| (1.0 + 2^61 - 2^61 is 0.0)."""
    tables = problem.objectives()
    bound = math.fsum(float(np.max(np.abs(t.values.astype(np.float64)))) for t in tables if t.values.size)
    return bound * len(tables) * 2.0**-52


def configs(problem: Any, tab: _tables.Tables, prop: Any, ctx: _Context) -> Any:
    """Every configuration of the k best sizes (ConfigsMax/Min) or every feasible one (ConfigsAll):
    counted exactly first (refused past ``prop.limit``), then read off one contraction that kept its
    intermediates (:mod:`._configs`), the number listed checked against the count."""
    everything = isinstance(prop, Q.ConfigsAll)
    n = tab.num_variables
    if not tab.feasible:
        return np.zeros((0, n), dtype=np.int64) if everything else []
    # counted with small independent components apart (:func:`_apart`): a refusal past the limit is quick
    if everything:
        total = _apart(tab, Q.CountingAll(), problem.goal, ctx)
        total = count_all(tab, ctx) if total is None else total
        wanted = {0: total} if total else {}
        k, sign = 1, 1
    else:
        asked = Q.CountingMax(prop.k) if prop.largest else Q.CountingMin(prop.k)
        found = _apart(tab, asked, problem.goal, ctx)
        wanted = dict(counting(tab, prop.k, prop.largest, ctx) if found is None else found)
        k, sign = _k_cap(tab, prop.k), 1 if prop.largest else -1
    found = sum(wanted.values())
    if found > prop.limit:
        what = "feasible configurations" if everything else f"configurations at the {prop.k} best sizes"
        many = found if found < 10**30 else f"about 2^{math.log2(found):.1f}"  # str() of an int stops at 4300 digits
        raise ValueError(f"{type(prop).__name__}: the problem has {many} {what}, past limit={prop.limit}")
    tree = _tree(tab, k, sign, everything, ctx)
    sizes: dict[Hashable, int] = dict.fromkeys(tab.free, tab.flavors)
    listed: dict[Any, np.ndarray] = {}
    for v in tree.best():
        if not math.isfinite(v):
            continue
        size = 0 if everything else _size(tab, sign * v)
        rows = [tab.configuration(a) for a in tree.assignments(v, sizes)]
        if len(rows) != wanted.get(size, -1):
            raise ReconstructionError(
                f"{type(prop).__name__}: {len(rows)} configurations listed at size {size}, "
                f"{wanted.get(size, 0)} counted; report it with the problem"
            )
        for config in rows[:1]:
            _checked(problem, tab, config_size(problem, tab, config) if everything else size, config)
        listed[size] = _sorted_rows(rows, n)
    if everything:
        return listed.get(0, np.zeros((0, n), dtype=np.int64))
    return [(size, listed[size]) for size in wanted]


def config_size(problem: Any, tab: _tables.Tables, config: np.ndarray) -> Any:
    own = problem.size(config)
    return int(own) if tab.integer and not tab.floats else float(own)


def _tree(tab: _tables.Tables, k: int, sign: int, everything: bool, ctx: _Context) -> _configs.Tree:
    """The max-plus contraction (k best values; every feasible entry worth 0 for ``everything``) with
    every step's values kept."""
    if everything:  # sizes unread: 0 and -inf are exact in float32, whatever the weights reach
        values = [np.where(m, 0.0, -math.inf).astype(np.float32) for m in tab.mask]
    else:
        values = _values(tab, value_dtype(tab, tropical_only=False), True, sign=sign)
    algebra = Algebra if k == 1 else kbest.algebra(k)
    arrays = [ctx.put(v) for v in values]
    plan = ctx.plan(tab, tab.labels, (), [(a,) if k > 1 else a for a in arrays], "maxplus", algebra)
    if plan.sliced:
        raise ValueError(
            f"listing configurations keeps every step's values, but this network needs {plan.nslices} slices to "
            "fit memory_limit: raise memory_limit or list fewer configurations"
        )
    be, _ = backend_of(arrays[0])
    leaves = [Term(algebra.prepare(be, (a,), i), tuple(lab)) for i, (a, lab) in enumerate(zip(arrays, tab.labels))]
    return _configs.Tree(algebra("maxplus", be), leaves, plan.path, k)


def _sorted_rows(rows: list[np.ndarray], n: int) -> np.ndarray:
    if not rows:
        return np.zeros((0, n), dtype=np.int64)
    array = np.array(rows, dtype=np.int64).reshape(len(rows), n)
    if n == 0:  # configurations of no variable: the one empty configuration, nothing to order by
        return array
    return array[np.lexsort(array.T[::-1])]
