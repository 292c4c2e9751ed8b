"""Brute-force oracle for ``lazykern.tn.problems``: every configuration, its feasibility and exact size.

It shares nothing with the tensor-network solver but the tables themselves (``constraints()`` and
``objectives()``), and reads them one entry per configuration, so it checks any contraction of
them. Up to ``LIMIT`` configurations (``num_flavors ** free variables``; n <= ~16 binary).

Conventions (GenericTensorNetworks.jl's, with the API of issue 47):
* only feasible configurations count; ``fixedvertices`` restrict the space (their values are kept
  in every configuration); variables in no table are free (num_flavors choices each);
* ``size_max(k)`` / ``size_min(k)``: the k best *distinct* sizes, best first (fewer if fewer occur);
  ``largest(k)`` / ``smallest(k)``: the k best sizes *with multiplicity* (GenericTensorNetworks'
  ``SizeMax(k).orders``, reversed: best first);
* ``counting_max(k)``: [(size, count)] for those distinct sizes, best first;
* ``polynomial()``: coefficient of x^s at index s (integer sizes >= 0); ``laurent()``: (lowest, coeffs);
* ``log_partition(beta)``: log sum exp(beta * size) for a "max" goal, exp(-beta * size) for "min";
* ``configs_max(k)``: [(size, configs (count, n), rows sorted)], best first; ``configs_all()``;
* ``tensor(f)``: ``f`` of the oracle restricted to each assignment of the open vertices, as an object
  array with one axis of num_flavors per open vertex (in ``openvertices`` order).

Past brute force (Tutte's 46 vertices, C60's 60 spins), :func:`laurent_by_contraction` (exact
integers: x set to a base larger than any coefficient) and :func:`log_partition_by_contraction`
contract the same tables as a plain sum-product network with opt_einsum on NumPy.

>>> from lazykern.tn.problems import IndependentSet
>>> import networkx as nx
>>> b = Brute(IndependentSet(nx.petersen_graph()))
>>> b.size_max(), b.counting_max(2), b.counting_all(), b.polynomial()
([4], [(4, 5), (3, 30)], 76, [1, 10, 30, 30, 5])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

LIMIT = 1 << 22


def _exact(values: np.ndarray) -> bool:
    return values.dtype.kind in "iuO"


class Brute:
    """All configurations of ``problem`` with its fixed vertices set; ``sizes`` and ``feasible`` per row."""

    def __init__(self, problem: Any, *, _rows: np.ndarray | None = None, _parent: Brute | None = None) -> None:
        self.problem = problem
        self.goal = problem.goal
        if _parent is not None:
            assert _rows is not None
            self.configs = _parent.configs[_rows]
            self.feasible = _parent.feasible[_rows]
            self.sizes = _parent.sizes[_rows]
            self.exact = _parent.exact
            return
        n, q = problem.num_variables, problem.num_flavors
        fixed = dict(problem.fixedvertices)
        free = [i for i in range(n) if i not in fixed]
        count = q ** len(free)
        if count > LIMIT:
            raise ValueError(f"{count} configurations: too many for the brute force (at most {LIMIT})")
        idx = np.arange(count, dtype=np.int64)
        configs = np.zeros((count, n), dtype=np.int8)
        for j, v in enumerate(free):  # the first free variable is the fastest digit (Julia's order)
            configs[:, v] = (idx // q**j) % q
        for v, f in fixed.items():
            configs[:, v] = f
        self.configs = configs
        feasible = np.ones(count, dtype=bool)
        for t in problem.constraints():
            feasible &= np.asarray(t.values, dtype=bool)[tuple(configs[:, v] for v in t.variables)]
        self.feasible = feasible
        self.exact = all(_exact(t.values) for t in problem.objectives())
        self.sizes = self._sizes(problem.objectives(), configs)

    def _sizes(self, tables: list[Any], configs: np.ndarray) -> np.ndarray:
        if not self.exact:
            total = np.zeros(len(configs), dtype=np.float64)
            for t in tables:
                total += np.asarray(t.values, dtype=np.float64)[tuple(configs[:, v] for v in t.variables)]
            return total
        ints = [[int(x) for x in np.asarray(t.values).reshape(-1).tolist()] for t in tables]
        bound = sum(max((abs(x) for x in xs), default=0) for xs in ints)
        dtype: Any = np.int64 if bound < 2**62 else object  # our own decision, not the problem's
        total = np.zeros(len(configs), dtype=dtype)
        if dtype is object:
            total[:] = 0
        for t, xs in zip(tables, ints):
            values = np.empty(len(xs), dtype=dtype)
            values[:] = xs
            total += values.reshape(t.values.shape)[tuple(configs[:, v] for v in t.variables)]
        return total

    # -- restriction ---------------------------------------------------------------------------------
    def restricted(self, assignment: dict[int, int]) -> Brute:
        """The configurations whose variables (indices) take the given flavors."""
        rows = np.ones(len(self.configs), dtype=bool)
        for v, f in assignment.items():
            rows &= self.configs[:, v] == f
        return Brute(self.problem, _rows=rows, _parent=self)

    def tensor(self, f: Callable[[Brute], Any]) -> np.ndarray:
        """``f`` per assignment of the open vertices: an object array, one axis per open vertex."""
        opened = tuple(self.problem.openvertices)
        q = self.problem.num_flavors
        out = np.empty((q,) * len(opened), dtype=object)
        for index in np.ndindex(*out.shape):
            out[index] = f(self.restricted(dict(zip(opened, index))))
        return out

    # -- sizes ---------------------------------------------------------------------------------------
    def _feasible_sizes(self) -> list[Any]:
        s = self.sizes[self.feasible]
        return [x.item() if isinstance(x, np.generic) else x for x in s.tolist()]

    def _distinct(self, best: str) -> list[Any]:
        return sorted(set(self._feasible_sizes()), reverse=(best == "max"))

    def size_max(self, k: int = 1) -> list[Any]:
        return self._distinct("max")[:k]

    def size_min(self, k: int = 1) -> list[Any]:
        return self._distinct("min")[:k]

    def largest(self, k: int = 1) -> list[Any]:
        return sorted(self._feasible_sizes(), reverse=True)[:k]

    def smallest(self, k: int = 1) -> list[Any]:
        return sorted(self._feasible_sizes())[:k]

    def counts(self) -> dict[Any, int]:
        out: dict[Any, int] = {}
        for s in self._feasible_sizes():
            out[s] = out.get(s, 0) + 1
        return out

    def counting_max(self, k: int = 1) -> list[tuple[Any, int]]:
        c = self.counts()
        return [(s, c[s]) for s in self.size_max(k)]

    def counting_min(self, k: int = 1) -> list[tuple[Any, int]]:
        c = self.counts()
        return [(s, c[s]) for s in self.size_min(k)]

    def counting_all(self) -> int:
        return int(self.feasible.sum())

    def laurent(self) -> tuple[int, list[int]]:
        """(lowest exponent, coefficients from it up): sizes must be integers."""
        c = self.counts()
        if not c:
            return 0, []
        if any(float(s) != int(s) for s in c):
            raise ValueError("the polynomial needs integer sizes")
        lo, hi = int(min(c)), int(max(c))
        return lo, [c.get(s, 0) for s in range(lo, hi + 1)]

    def polynomial(self) -> list[int]:
        """Coefficient of x^s at index s (sizes must be integers >= 0)."""
        lo, coeffs = self.laurent()
        if lo < 0:
            raise ValueError(f"a size is negative ({lo}): use laurent()")
        return [0] * lo + coeffs

    def log_partition(self, beta: float) -> float:
        sign = 1.0 if self.goal == "max" else -1.0
        x = [sign * beta * float(s) for s in self._feasible_sizes()]
        if not x:
            return -math.inf
        m = max(x)
        return m + math.log(math.fsum(math.exp(v - m) for v in x))

    # -- configurations ------------------------------------------------------------------------------
    def configs_at(self, size: Any) -> np.ndarray:
        """Every feasible configuration of this size, (count, n) int64, rows in lexicographic order."""
        rows = self.configs[self.feasible & (self.sizes == size)].astype(np.int64)
        return _sorted_rows(rows)

    def configs_max(self, k: int = 1) -> list[tuple[Any, np.ndarray]]:
        return [(s, self.configs_at(s)) for s in self.size_max(k)]

    def configs_min(self, k: int = 1) -> list[tuple[Any, np.ndarray]]:
        return [(s, self.configs_at(s)) for s in self.size_min(k)]

    def configs_all(self) -> np.ndarray:
        return _sorted_rows(self.configs[self.feasible].astype(np.int64))


def _sorted_rows(rows: np.ndarray) -> np.ndarray:
    if len(rows) == 0 or rows.shape[1] == 0:
        return rows
    return rows[np.lexsort(rows.T[::-1])]


def sorted_rows(rows: Any) -> np.ndarray:
    """Configurations as (count, n) int64 in lexicographic order: compare a solver's set with ours."""
    return _sorted_rows(np.asarray(rows, dtype=np.int64).reshape(len(rows), -1))


# -- beyond brute force: a plain sum-product contraction (opt_einsum on NumPy, nothing of lazykern) -----
def _network(
    problem: Any, value: Callable[[np.ndarray], np.ndarray]
) -> tuple[list[np.ndarray], list[tuple[int, ...]], int]:
    """(tensors, labels, free variables): constraints as 0/1, objective tables through ``value``, fixed
    vertices sliced out; a variable in no table (and not fixed) counts as a free factor."""
    fixed = dict(problem.fixedvertices)
    tensors, labels = [], []
    tables = [(t, True) for t in problem.constraints()] + [(t, False) for t in problem.objectives()]
    for t, is_constraint in tables:
        a = np.asarray(t.values).astype(int).astype(object) if is_constraint else value(np.asarray(t.values))
        index = tuple(fixed[v] if v in fixed else slice(None) for v in t.variables)
        tensors.append(a[index])
        labels.append(tuple(v for v in t.variables if v not in fixed))
    used = {v for ix in labels for v in ix}
    free = sum(1 for v in range(problem.num_variables) if v not in used and v not in fixed)
    return tensors, labels, free


def _contract(tensors: list[np.ndarray], labels: list[tuple[int, ...]]) -> Any:
    import opt_einsum as oe

    if not tensors:
        return 1
    eq = ",".join("".join(oe.get_symbol(v) for v in ix) for ix in labels) + "->"
    return oe.contract(eq, *tensors, optimize="greedy")


def laurent_by_contraction(problem: Any) -> tuple[int, list[int]]:
    """The polynomial sum over feasible configurations of x^size, exact, for graphs too large to
    enumerate (Tutte: 46 vertices): x is set to a base B larger than any coefficient, so the one
    integer contraction's base-B digits are the coefficients (Kronecker substitution)."""
    if problem.openvertices:
        raise ValueError("laurent_by_contraction contracts to a scalar: no open vertices")
    base = 1 << (problem.num_variables * max(1, problem.num_flavors.bit_length()) + 1)  # > q**n >= any count
    lows: list[int] = []

    def value(a: np.ndarray) -> np.ndarray:
        ints = [int(x) for x in a.reshape(-1).tolist()]
        if any(float(x) != float(y) for x, y in zip(ints, a.reshape(-1).tolist())):
            raise ValueError("the polynomial needs integer sizes")
        lo = min(ints, default=0)
        lows.append(lo)
        out = np.empty(len(ints), dtype=object)
        out[:] = [base ** (x - lo) for x in ints]
        return out.reshape(a.shape)

    tensors, labels, free = _network(problem, value)
    total = int(_contract(tensors, labels)) * problem.num_flavors**free
    coeffs = []
    while total:
        total, digit = divmod(total, base)
        coeffs.append(digit)
    lowest = sum(lows)
    while coeffs and coeffs[0] == 0:  # the sum of the tables' minima may lie below the smallest size
        coeffs.pop(0)
        lowest += 1
    return lowest, coeffs


def log_partition_by_contraction(problem: Any, beta: float) -> float:
    """log sum exp(+-beta * size) (the sign as :meth:`Brute.log_partition`) by one float64 contraction."""
    sign = 1.0 if problem.goal == "max" else -1.0

    def value(a: np.ndarray) -> np.ndarray:
        return np.exp(sign * beta * a.astype(np.float64))

    tensors, labels, free = _network(problem, value)
    tensors = [t.astype(np.float64) for t in tensors]
    return float(np.log(_contract(tensors, labels))) + free * math.log(problem.num_flavors)


def count_by_contraction(problem: Any) -> int:
    """The number of feasible configurations (fixed vertices honoured), exact, by one integer contraction."""

    def value(a: np.ndarray) -> np.ndarray:
        out = np.empty(a.shape, dtype=object)
        out[...] = 1
        return out

    tensors, labels, free = _network(problem, value)
    return int(_contract(tensors, labels)) * problem.num_flavors**free
