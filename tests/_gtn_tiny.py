"""A tiny stand-in for lazykern.tn.problems (the problem interface solve reads), and a brute force.

Tests of :func:`lazykern.tn.solve` use it for problems the problem classes do not spell (random
tables, hyper-edges, float weights, flavors above 2) and until the problem classes land.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Table:
    variables: tuple[int, ...]
    values: np.ndarray


@dataclass
class TableProblem:
    """A problem given by its tables: ``cons`` (variables, bool array) and ``objs`` (variables, sizes)."""

    num_variables: int
    num_flavors: int
    cons: list[tuple[tuple[int, ...], Any]]
    objs: list[tuple[tuple[int, ...], Any]]
    goal: str = "max"
    openvertices: tuple[int, ...] = ()
    fixedvertices: dict[int, int] = field(default_factory=dict)
    integer_weights: bool = True

    def constraints(self) -> list[Table]:
        return [Table(tuple(v), np.asarray(t, dtype=bool)) for v, t in self.cons]

    def objectives(self) -> list[Table]:
        return [Table(tuple(v), np.asarray(t)) for v, t in self.objs]

    def is_feasible(self, config: Any) -> bool:
        return all(bool(np.asarray(t)[tuple(config[v] for v in vs)]) for vs, t in self.cons)

    def size(self, config: Any) -> Any:
        total = sum(np.asarray(t)[tuple(config[v] for v in vs)].item() for vs, t in self.objs)
        return int(total) if self.integer_weights else float(total)

    def variable_names(self) -> list[int]:
        return list(range(self.num_variables))


def independent_set(n: int, edges: list[tuple[int, int]], weights: Any = None, **kw: Any) -> TableProblem:
    w = [1] * n if weights is None else list(weights)
    cons = [((a, b), [[True, True], [True, False]]) for a, b in edges]
    integer = all(float(x).is_integer() for x in w)
    objs = [((v,), np.array([0, w[v]], dtype=np.int64 if integer else np.float64)) for v in range(n)]
    return TableProblem(n, 2, cons, objs, integer_weights=integer, **kw)


def brute(problem: TableProblem) -> list[tuple[np.ndarray, Any]]:
    """(configuration, size) of every feasible configuration (fixed vertices honoured), lexicographic."""
    out = []
    for combo in itertools.product(range(problem.num_flavors), repeat=problem.num_variables):
        config = np.array(combo)
        if any(config[v] != f for v, f in problem.fixedvertices.items()):
            continue
        if problem.is_feasible(config):
            out.append((config, problem.size(config)))
    return out


def brute_answers(problem: TableProblem, k: int = 3, beta: float = 1.0) -> dict[str, Any]:
    """Every property by brute force (no open vertices)."""
    rows = brute(problem)
    sizes = [s for _, s in rows]
    distinct = sorted(set(sizes))
    counts = {s: sizes.count(s) for s in distinct}
    sign = 1 if problem.goal == "max" else -1
    integer = problem.integer_weights
    z = [sign * beta * s for s in sizes]
    top = max(z) if z else -math.inf
    return {
        "max": distinct[::-1][:k],
        "min": distinct[:k],
        "cmax": [(s, counts[s]) for s in distinct[::-1][:k]],
        "cmin": [(s, counts[s]) for s in distinct[:k]],
        "all": len(rows),
        "logz": top + math.log(sum(math.exp(x - top) for x in z)) if z else -math.inf,
        "configs": np.array([c for c, _ in rows]).reshape(len(rows), problem.num_variables),
        "by_size": {s: np.array([c for c, t in rows if t == s]) for s in distinct},
        "poly": [counts.get(i, 0) for i in range(int(max(distinct)) + 1)]
        if distinct and integer and max(distinct) < 1000
        else None,
    }
