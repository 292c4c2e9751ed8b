"""Configurations: one at the best size (``SingleConfigMax/Min``: the tropical argmax, backtracked),
or every one at the k best sizes or every feasible one (``ConfigsMax/Min``, ``ConfigsAll``: counted
exactly first, then read off one contraction that kept its steps' values); each checked against the
problem's own size."""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable
from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import InfeasibleError, ReconstructionError
from .. import _components, _configs, _tables
from .. import properties as Q
from .._backend import backend_of
from .._contract import Algebra, Term
from ..algebras import kbest
from ..config_tree import ConfigTree
from ..einsum import network_argmax
from .apart import apart
from .context import Context
from .sizes import count_all, counting
from .values import as_size, finite, k_cap, size_values, to_host, value_dtype


def single_config(problem: Any, tab: _tables.Tables, largest: bool, ctx: Context) -> tuple[Any, np.ndarray]:
    """(best size, one configuration reaching it), checked against the problem's own size."""
    if not tab.feasible:
        raise InfeasibleError("the problem has no feasible configuration (its fixed vertices violate a constraint)")
    parts = _components.split(tab)  # small independent components: each one's best, enumerated
    if parts is not None:
        small = _components.best_assignment(tab, parts, largest)
        if small is None:
            raise InfeasibleError("the problem has no feasible configuration")
        numerator, assignment = small
        if parts.rest is not None:
            best, more = _best_assignment(parts.rest, largest, ctx)
            numerator += as_size(parts.rest, best)  # the rest's answers are its numerators
            assignment.update(more)
        config = tab.configuration(assignment)
        return _checked(problem, tab, tab.answer(numerator), config), config
    best, assignment = _best_assignment(tab, largest, ctx)
    config = tab.configuration(assignment)
    return _checked(problem, tab, as_size(tab, best), config), config


def _best_assignment(tab: _tables.Tables, largest: bool, ctx: Context) -> tuple[Any, dict[int, int]]:
    """The contraction's best value and one assignment of ``tab``'s free variables reaching it."""
    dtype = value_dtype(tab, tropical_only=True)
    tensors = [ctx.put(t) for t in size_values(tab, dtype, largest)]
    best, assignment = network_argmax(
        tab.labels,
        (),
        tensors,
        **ctx.planning(tab, semiring="maxplus" if largest else "minplus"),
    )
    best = to_host(best).item()
    if not finite(best, dtype):
        raise InfeasibleError("the problem has no feasible configuration")
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


def configs(problem: Any, tab: _tables.Tables, prop: Any, ctx: Context) -> Any:
    """Every configuration of the k best sizes (ConfigsMax/Min) or every feasible one (ConfigsAll):
    counted exactly first (refused past ``prop.limit``), then read off one contraction that kept its
    intermediates (:mod:`.._configs`), the number listed checked against the count; with
    ``prop.tree_storage``, that contraction itself (a :class:`ConfigTree` per size, its count checked)."""
    everything = isinstance(prop, Q.ConfigsAll)
    n = tab.num_variables
    if not tab.feasible:
        if prop.tree_storage:
            return _empty_tree(problem, tab) if everything else []
        return np.zeros((0, n), dtype=np.int64) if everything else []
    # counted with small independent components apart (:func:`apart`): a refusal past the limit is quick
    if everything:
        total = apart(tab, Q.CountingAll(), problem.goal, ctx)
        total = count_all(tab, ctx) if total is None else total
        wanted = {0: total} if total else {}
        k, sign = 1, 1
    else:
        asked = Q.CountingMax(prop.k) if prop.largest else Q.CountingMin(prop.k)
        found = apart(tab, asked, problem.goal, ctx)
        wanted = dict(counting(tab, prop.k, prop.largest, ctx) if found is None else found)
        k, sign = k_cap(tab, prop.k), 1 if prop.largest else -1
    found = sum(wanted.values())
    if found > prop.limit and not prop.tree_storage:
        what = "feasible configurations" if everything else f"configurations at the {prop.k} best sizes"
        many = found if found < 10**30 else f"about 2^{math.log2(found):.1f}"  # str() of an int stops at 4300 digits
        raise ValueError(
            f"{type(prop).__name__}: the problem has {many} {what}, past limit={prop.limit} "
            "(tree_storage=True keeps them as a tree, to count, index and sample)"
        )
    tree = _tree(tab, k, sign, everything, ctx)
    sizes: dict[Hashable, int] = dict.fromkeys(tab.free, tab.flavors)
    listed: dict[Any, Any] = {}
    for v in tree.best():
        if not math.isfinite(v):
            continue
        size = 0 if everything else as_size(tab, sign * v)
        if prop.tree_storage:
            check = _feasible(problem, tab) if everything else _at_size(problem, tab, size)
            listed[size] = ConfigTree(tree, v, tab, None if everything else size, check)
            got = listed[size].count
        else:
            columns = tab.configurations(*tree.rows(v, sizes))  # (variables, configurations)
            got = columns.shape[1]
            for config in columns.T[:1]:
                _checked(problem, tab, config_size(problem, tab, config) if everything else size, config)
            listed[size] = _configs.sorted_rows(columns, tab.flavors)
        if got != wanted.get(size, -1):
            raise ReconstructionError(
                f"{type(prop).__name__}: {got} configurations found at size {size}, "
                f"{wanted.get(size, 0)} counted; report it with the problem"
            )
    if everything:
        if prop.tree_storage:
            return listed[0] if 0 in listed else _empty_tree(problem, tab)
        return listed.get(0, np.zeros((0, n), dtype=np.int64))
    return [(size, listed[size]) for size in wanted]


def _feasible(problem: Any, tab: _tables.Tables) -> Any:
    """A tree's check of one configuration (picklable, as the tree is): feasible, its size the problem's."""
    return functools.partial(_checked_own, problem, tab)


def _at_size(problem: Any, tab: _tables.Tables, size: Any) -> Any:
    """A tree's check of one configuration at ``size``."""
    return functools.partial(_checked, problem, tab, size)


def _checked_own(problem: Any, tab: _tables.Tables, config: np.ndarray) -> Any:
    return _checked(problem, tab, config_size(problem, tab, config), config)


def _empty_tree(problem: Any, tab: _tables.Tables) -> ConfigTree:
    """A tree of no configuration (nothing is feasible)."""
    return ConfigTree(None, None, tab, None, _feasible(problem, tab))


def config_size(problem: Any, tab: _tables.Tables, config: np.ndarray) -> Any:
    own = problem.size(config)
    return int(own) if tab.integer and not tab.floats else float(own)


def _tree(tab: _tables.Tables, k: int, sign: int, everything: bool, ctx: Context) -> _configs.Tree:
    """The max-plus contraction (k best values; every feasible entry worth 0 for ``everything``) with
    every step's values kept."""
    if everything:  # sizes unread: 0 and -inf are exact in float32, whatever the weights reach
        values = [np.where(m, 0.0, -math.inf).astype(np.float32) for m in tab.mask]
    else:
        values = size_values(tab, value_dtype(tab, tropical_only=False), True, sign=sign)
    algebra = Algebra if k == 1 else kbest.algebra(k)
    arrays = [ctx.put(v) for v in values]
    plan = ctx.plan(tab, tab.labels, (), [(a,) if k > 1 else a for a in arrays], "maxplus", algebra)
    if plan.sliced:
        raise ValueError(
            f"listing configurations (or keeping them as a tree) keeps every step's values, but this network needs "
            f"{plan.nslices} slices to fit memory_limit: raise memory_limit, or ask for counts or one configuration"
        )
    be, _ = backend_of(arrays[0])
    leaves = [Term(algebra.prepare(be, (a,), i), tuple(lab)) for i, (a, lab) in enumerate(zip(arrays, tab.labels))]
    return _configs.Tree(algebra("maxplus", be), leaves, plan.path, k)
