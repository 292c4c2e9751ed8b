"""A combinatorial problem as GenericTensorNetworks.jl states it: constraint tables and objective tables.

A configuration assigns each variable a flavor (0..num_flavors-1). It is feasible when every
constraint table holds (its entry at the configuration's local values is True); its size is the
sum of every objective table's entry. The goal ("max" or "min") says which sizes are best. This is
ProblemReductions.jl's ``ConstraintSatisfactionProblem`` (``constraints``, ``objectives``,
``energy_mode``), so GenericTensorNetworks' published values carry over.

Sizes are exact for integer weights: the tables hold int64 when every partial sum of sizes fits
(the sum over tables of each table's largest magnitude is below 2^63), Python ints otherwise.

>>> t = Table((0, 1), np.array([[True, True], [True, False]]))
>>> t.at([1, 1])
False
"""

from __future__ import annotations

import abc
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import shown
from .. import _exact
from . import _inputs

GOALS = ("max", "min")
_INT64_BOUND = 2**63 - 1
_FLOAT_EXACT_BOUND = 2**53  # every integer below this is a float64, and so is every sum of them


@dataclass(frozen=True, eq=False)
class Table:
    """One local table: ``values[c_0, c_1, ...]`` for the flavors ``c_i`` of ``variables[i]``.

    In :meth:`Problem.constraints` the values are bool (True: allowed); in
    :meth:`Problem.objectives` they are a size contribution: int64, an object array of Python ints
    (beyond int64), or float64. The array is read-only."""

    variables: tuple[int, ...]
    values: np.ndarray

    def __post_init__(self) -> None:
        if len(set(self.variables)) != len(self.variables):
            raise ValueError(f"a table's variables must be distinct, got {self.variables}")
        if self.values.ndim != len(self.variables):
            raise ValueError(f"a table over {len(self.variables)} variables has {self.values.ndim} axes")
        if len(set(self.values.shape)) > 1:
            raise ValueError(f"every axis of a table has num_flavors entries, got shape {self.values.shape}")
        self.values.setflags(write=False)

    def at(self, config: Sequence[int] | np.ndarray) -> Any:
        """The entry at a whole configuration (one flavor per variable of the problem)."""
        x = self.values[tuple(int(config[v]) for v in self.variables)]
        return x.item() if isinstance(x, np.generic) else x  # an object array holds Python ints already


class Problem(abc.ABC):
    """The common part of every problem: variables, flavors, goal, tables, open and fixed variables.

    A subclass builds its tables from the user's input (checked: one ValueError naming the
    fault) and hands them to this constructor; ``openvertices`` / ``fixedvertices`` are given in the
    user's names (:meth:`variable_names`) and kept as indices. ``openvertices`` in the order given (the
    axes of a solve's answer), or as a set: then in ascending variable index, the same in every run."""

    goal: str
    num_flavors: int
    num_variables: int
    openvertices: tuple[int, ...]
    fixedvertices: dict[int, int]
    integer_weights: bool

    def __init__(
        self,
        names: Sequence[Hashable],
        num_flavors: int,
        constraints: Sequence[Table],
        objectives: Sequence[tuple[tuple[int, ...], np.ndarray]],
        openvertices: Any,
        fixedvertices: Any,
    ) -> None:
        """``objectives``: (variables, values) with values an object array of Python ints, or of
        floats; they become int64 where every partial sum provably fits."""
        if self.goal not in GOALS:
            raise TypeError(f"{type(self).__name__}.goal must be one of {GOALS}")
        self._names = list(names)
        self.num_variables = len(self._names)
        self.num_flavors = num_flavors
        self._constraints = list(constraints)
        self._objectives, self.integer_weights = _finish_objectives(objectives)
        self.openvertices = tuple(self._indices("openvertices", openvertices))
        if len(set(self.openvertices)) != len(self.openvertices):
            raise ValueError(f"openvertices names a variable twice: {list(openvertices)}")
        self.fixedvertices = self._fixed(fixedvertices)
        both = sorted(set(self.openvertices) & set(self.fixedvertices))
        if both:
            named = [self._names[i] for i in both]
            raise ValueError(f"variables {named} are both open and fixed: a variable is one or the other")

    # -- the interface -------------------------------------------------------------------------------
    def constraints(self) -> list[Table]:
        """The feasibility tables (bool); a configuration is feasible when all of them hold."""
        return list(self._constraints)

    def objectives(self) -> list[Table]:
        """The size tables; a configuration's size is the sum of their entries."""
        return list(self._objectives)

    def variable_names(self) -> list[Any]:
        """What each variable index stands for (a graph node, an edge, a DIMACS variable, a car)."""
        return list(self._names)

    def size(self, config: Sequence[int] | np.ndarray) -> int | float:
        """The sum of the objectives at one configuration: a Python int for integer weights (whole floats
        below 2^53 included, as ``solve`` answers them), else the float nearest the exact sum of the
        weights, each read as ``solve`` reads it (a short decimal as that decimal, a whole float as its
        integer, another float at its binary value): 0.1 + 0.2 is 0.3, and 2^52 + 1.0, 0.5 and -2^52 sum
        to 1.5, not float64's running sum 2.0. No order of summing changes it."""
        c = self._check_config(config)
        if self.integer_weights:  # ints, or whole floats whose every sum float64 holds: exact as ints
            whole: int = sum((int(t.at(c)) for t in self._objectives), 0)
            return whole
        return _exact.exact_sum([t.at(c) for t in self._objectives])

    def is_feasible(self, config: Sequence[int] | np.ndarray) -> bool:
        """Whether every constraint holds (fixed vertices restrict what a solve enumerates; they are
        not constraints of the problem)."""
        c = self._check_config(config)
        return all(bool(t.at(c)) for t in self._constraints)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.num_variables} variables, {self.num_flavors} flavors, "
            f"{len(self._constraints)} constraints, {len(self._objectives)} objectives, goal {self.goal})"
        )

    # -- helpers -------------------------------------------------------------------------------------
    def _check_config(self, config: Sequence[int] | np.ndarray) -> list[int]:
        c = list(np.asarray(config).reshape(-1).tolist())
        if len(c) != self.num_variables:
            raise ValueError(f"a configuration has one flavor per variable ({self.num_variables}), got {len(c)}")
        for i, x in enumerate(c):
            if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < self.num_flavors:
                raise ValueError(f"variable {i} has flavor {x!r}: flavors are 0..{self.num_flavors - 1}")
        return c

    def _index(self, what: str, name: Any) -> int:
        """The variable index of a user's name; subclasses with another naming override this."""
        lookup = self.__dict__.get("_lookup")
        if lookup is None:
            lookup = {}
            for i, n in enumerate(self._names):
                lookup.setdefault(n, i)
            self._lookup = lookup
        try:
            i = int(lookup[name])
        except (KeyError, TypeError):
            raise ValueError(f"{what} names {shown(name)}, which is not a variable of this problem") from None
        if not _inputs.same_name(name, self._names[i]):  # True or 1.0 for a vertex named 1
            has = self._names[i]
            raise ValueError(f"{what} names {shown(name)}, which is not a variable of this problem (it has {has!r})")
        return i

    def _indices(self, what: str, names: Any) -> list[int]:
        """The variable indices of ``names``: in their order for a sequence, ascending for a set (whose
        iteration order follows hashes, and for strings changes from run to run with PYTHONHASHSEED)."""
        flat = not isinstance(names, np.ndarray) or names.ndim == 1
        if isinstance(names, (str, bytes)) or not isinstance(names, (Sequence, set, frozenset, np.ndarray)) or not flat:
            raise ValueError(f"{what} must be a sequence of variable names, got {names!r}")
        indices = [self._index(what, n) for n in names]
        return sorted(indices) if isinstance(names, (set, frozenset)) else indices

    def _fixed(self, fixed: Any) -> dict[int, int]:
        if not isinstance(fixed, Mapping):
            raise ValueError(f"fixedvertices must be a dict {{name: flavor}}, got {fixed!r}")
        out: dict[int, int] = {}
        for name, flavor in fixed.items():
            i = self._index("fixedvertices", name)
            if isinstance(flavor, (bool, np.bool_)) or not isinstance(flavor, (int, np.integer)):
                raise ValueError(f"fixedvertices[{shown(name)}] = {shown(flavor)}: a flavor is an integer")
            if not 0 <= int(flavor) < self.num_flavors:
                raise ValueError(
                    f"fixedvertices[{shown(name)}] = {shown(int(flavor))}: flavors are 0..{self.num_flavors - 1}"
                )
            if i in out:
                raise ValueError(f"fixedvertices names variable {self._names[i]!r} twice")
            out[i] = int(flavor)
        return out


def _finish_objectives(
    objectives: Sequence[tuple[tuple[int, ...], np.ndarray]],
) -> tuple[list[Table], bool]:
    """Tables with their final dtype, and whether every value is an integer (sizes exact)."""
    arrays = [np.asarray(v) for _, v in objectives]
    floats = any(a.dtype.kind == "f" or any(isinstance(x, float) for x in a.reshape(-1).tolist()) for a in arrays)
    if floats:
        try:
            as_float = [np.asarray(a, dtype=np.float64) for a in arrays]
        except OverflowError:
            raise ValueError(
                "an objective holds an int past float64's range (1.8e308) beside float values: give every "
                "value as an int, or that one as a float"
            ) from None
        try:
            bound = math.fsum(float(np.max(np.abs(a))) if a.size else 0.0 for a in as_float)
        except OverflowError:
            bound = math.inf
        if not math.isfinite(bound):
            raise ValueError(
                "the weights sum past float64's range: a size would overflow to inf. Scale them down "
                "(the optima do not move)"
            )
        integral = all(bool(np.all(a == np.round(a))) for a in as_float) and bound < _FLOAT_EXACT_BOUND
        return [Table(v, a) for (v, _), a in zip(objectives, as_float)], integral
    ints = [[int(x) for x in a.reshape(-1).tolist()] for a in arrays]
    bound = sum(max((abs(x) for x in xs), default=0) for xs in ints)
    dtype: Any = np.int64 if bound <= _INT64_BOUND else object
    tables = []
    for (v, a), xs in zip(objectives, ints):
        values = np.empty(len(xs), dtype=dtype)
        values[:] = xs
        tables.append(Table(v, values.reshape(a.shape)))
    return tables, True
