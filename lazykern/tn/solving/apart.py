"""Small independent components solved apart: counted on the host (:mod:`.._components`), the rest
contracted as one network, the parts' answers merged (sizes, counts, the graph polynomial, the partition
function)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from .. import _components, _tables
from .. import properties as Q
from ..algebras import polynomial
from .context import Context
from .graph_poly import graph_polynomial, polynomial_checks
from .partition import nearest_float, partition_function, past_range
from .sizes import count_all, counting, sizes


def apart(tab: _tables.Tables, prop: Q.Property, goal: str, ctx: Context) -> Any:
    """A size, counting or partition-function property of ``tab`` with its small independent components
    counted on the host (:mod:`.._components`) and the rest contracted; None where ``tab`` has none to set
    apart (and for configuration sets, one network; one configuration: :func:`.configurations.single_config`)."""
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
            polynomial_checks(low + int(tab.offset), high + int(tab.offset), prop.laurent)
        found = parts.histogram(keep)
        if parts.rest is not None:
            low, coefficients = graph_polynomial(parts.rest, True, ctx)
            found = _components.merge(found, {low + i: c for i, c in enumerate(coefficients) if c}, keep)
        if not found:
            return (0, []) if prop.laurent else []
        smin, smax = min(found) + int(tab.offset), max(found) + int(tab.offset)
        polynomial_checks(smin, smax, prop.laurent)
        coefficients = [found.get(v, 0) for v in range(min(found), max(found) + 1)]
        return (smin, coefficients) if prop.laurent else [0] * smin + coefficients
    if isinstance(prop, Q.PartitionFunction):
        # the small parts' log Z exactly (an exact best term and a float log weight beside it), added to the
        # rest's before it rounds, checks its range and warns of float64 sums (partition_function's plus=)
        scale = Fraction(prop.beta) if goal == "max" else -Fraction(prop.beta)
        terms = [_components.log_sum(g.histogram(), scale * tab.unit) for g in parts.small]
        if any(t == -math.inf for t in terms):
            return -math.inf  # a part with no feasible configuration
        counts = [len(g.components) for g in parts.small]
        small = scale * tab.unit * Fraction(tab.offset) + sum(
            (Fraction(t) * n for t, n in zip(terms, counts)), Fraction(0)
        )
        if parts.rest is not None:
            return partition_function(parts.rest, prop.beta, goal, ctx, plus=small)
        answer = nearest_float(small)
        if not math.isfinite(answer):
            raise past_range(tab, scale)
        return answer
    return None
