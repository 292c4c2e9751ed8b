"""A user's graph, weights and names, checked once: one ValueError (TypeError for a wrong type)
that names the fault, never a KeyError deep in a contraction.

A graph is a networkx graph (its nodes, in ``list(g.nodes)`` order, become indices 0..n-1) or
``(n, edges)`` with 0-based integer endpoints. Weights are a sequence (one per vertex or edge, in
order) or a dict keyed by node or edge; Python and NumPy integers stay exact integers. Where the order
of edges, sets, clauses or weights names variables or pairs them with weights, a set (whose order
follows hashes) is refused: :func:`refuse_set`.

>>> g = graph((3, [(0, 1), (1, 2)]))
>>> g.names, g.edges
([0, 1, 2], [(0, 1), (1, 2)])
>>> weights([1, 2.5, 3], g.names, "vertex")
[1.0, 2.5, 3.0]
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import NumberTypeError, shown
from .. import _exact, _instance

Number = int | float


@dataclass(frozen=True)
class Graph:
    """A checked graph: node names, and edges as tuples of node indices (in the order given)."""

    names: list[Hashable]
    edges: list[tuple[int, ...]]

    @property
    def n(self) -> int:
        return len(self.names)

    def edge_names(self) -> list[tuple[Hashable, ...]]:
        return [tuple(self.names[i] for i in e) for e in self.edges]

    def neighbors(self) -> list[list[int]]:
        """Each vertex's neighbours, ascending, each once."""
        nbrs: list[set[int]] = [set() for _ in self.names]
        for e in self.edges:
            for u in e:
                nbrs[u].update(v for v in e if v != u)
        return [sorted(s) for s in nbrs]


def is_networkx(g: Any) -> bool:
    return hasattr(g, "nodes") and hasattr(g, "edges") and hasattr(g, "is_directed")


def graph(
    g: Any,
    *,
    hyperedges: bool = False,
    self_loops: str = "refuse",
    duplicates: str = "refuse",
    edge_order: str | None = None,
) -> Graph:
    """Check a networkx graph or ``(n, edges)``. ``hyperedges``: an edge may hold any number (>= 1)
    of distinct vertices; otherwise exactly two. ``self_loops`` / ``duplicates``: "refuse" (a
    ValueError) or "drop" (a problem on which they change nothing). ``edge_order``: why the order of
    the edges means something (:func:`weights_in_order`), which refuses edges given as a set."""
    if is_networkx(g):
        if g.is_directed():
            raise ValueError("the graph is directed: give an undirected networkx graph (g.to_undirected())")
        names: list[Hashable] = list(g.nodes)
        index = {v: i for i, v in enumerate(names)}
        raw: list[tuple[int, ...]] = [(index[u], index[v]) for u, v in g.edges()]
    else:
        if not isinstance(g, (tuple, list)) or len(g) != 2:
            raise ValueError(f"a graph is a networkx graph or (n, edges), got {type(g).__name__}")
        n, edge_list = g
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"(n, edges): n must be a non-negative integer (the number of vertices), got {shown(n)}")
        check_variables(int(n), "(n, edges): n")
        names = list(range(int(n)))
        if edge_order is not None:
            refuse_set("edges", edge_list, edge_order)
        raw = [_edge(k, e, int(n), hyperedges) for k, e in enumerate(_items("edges", edge_list))]
    return Graph(names, _clean(raw, names, self_loops, duplicates, hyperedges))


# Variables a problem may have: each is an entry of every configuration and a label of the network (with a
# table of its own where nothing else holds it). 2^26 is a configuration of 512 MB; a problem past it is
# refused when it is made, not after an hour of building tables or a Python OverflowError.
VARIABLES_MAX = 1 << 26


def check_variables(n: int, what: str) -> None:
    """A ValueError naming ``what`` where ``n`` variables pass VARIABLES_MAX."""
    if n > VARIABLES_MAX:
        raise ValueError(
            f"{what} is {shown(n)}: that many variables is past the {VARIABLES_MAX} (2^26) a problem may have here "
            "(each is an entry of every configuration); number the variables from 1 (or 0) without gaps"
        )


def refuse_set(what: str, items: Any, why: str) -> None:
    """A ValueError for a set or frozenset where the order of ``items`` means something (``why``): a
    set iterates in the order of its hashes, which for strings changes from run to run."""
    if isinstance(items, (set, frozenset)):
        raise ValueError(f"{what} is a set, but {why}: a set has no order; give a list")


def weights_in_order(given: Any, what: str) -> str | None:
    """Why the order of the ``what`` matters when ``given`` weights them: a sequence is read in their
    order (a dict, or no weights, leaves any order alone: None)."""
    if given is None or isinstance(given, Mapping):
        return None
    return f"the {what} weights are a sequence, read in the order of the {_plural(what)}"


def _items(what: str, seq: Any) -> list[Any]:
    if isinstance(seq, (str, bytes, Mapping)) or not hasattr(seq, "__iter__"):
        raise ValueError(f"{what} must be a sequence, got {type(seq).__name__}")
    return list(seq)


def _edge(k: int, e: Any, n: int, hyperedges: bool) -> tuple[int, ...]:
    if isinstance(e, (str, bytes)) or not hasattr(e, "__iter__"):
        raise ValueError(f"edge {k} is {e!r}: an edge is a pair (u, v) of vertex indices")
    ends = list(e.tolist() if isinstance(e, np.ndarray) else e)
    if not hyperedges and len(ends) != 2:
        raise ValueError(f"edge {k} is {ends!r}: an edge is a pair (u, v) of vertex indices")
    if hyperedges and not ends:
        raise ValueError(f"edge {k} is empty: an edge holds at least one vertex")
    for v in ends:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise ValueError(f"edge {k} is {shown(ends)}: vertices are integers 0..{n - 1} (n = {n})")
    return tuple(int(v) for v in ends)


def _clean(
    raw: list[tuple[int, ...]], names: list[Hashable], self_loops: str, duplicates: str, hyperedges: bool
) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    seen: set[frozenset[int]] = set()
    for k, e in enumerate(raw):
        shown = tuple(names[i] for i in e)
        if len(set(e)) != len(e):
            if hyperedges or self_loops == "refuse":
                what = "holds a vertex twice" if hyperedges else "is a self loop"
                raise ValueError(f"edge {k} {shown} {what}: this problem has no meaning for it; remove it")
            continue
        key = frozenset(e)
        if key in seen:
            if duplicates == "refuse":
                raise ValueError(
                    f"edge {k} {shown} appears twice: give each edge once (merge the weights of duplicates)"
                )
            continue
        seen.add(key)
        out.append(e)
    return out


def weights(given: Any, keys: Sequence[Hashable], what: str, *, unordered: bool = False) -> list[Number]:
    """One number per key: None gives 1 each; a sequence is read in the keys' order; a dict is keyed
    by them (``unordered``: a key is a tuple whose order does not matter, as an undirected edge).
    All Python ints when every weight is an integer (exact), else all floats."""
    if given is None:
        return [1] * len(keys)
    if isinstance(given, Mapping):
        values = _from_dict(given, keys, what, unordered)
    else:
        if isinstance(given, (str, bytes)) or not hasattr(given, "__len__"):
            raise TypeError(f"weights must be a sequence (one per {what}) or a dict, got {type(given).__name__}")
        refuse_set("weights", given, f"they are read in the order of the {_plural(what)}")
        arr = np.asarray(given) if not isinstance(given, np.ndarray) else given
        if arr.ndim != 1:
            raise ValueError(f"weights must be one-dimensional (one per {what}), got shape {arr.shape}")
        values = list(given)
        if len(values) != len(keys):
            raise ValueError(f"got {len(values)} weights for {len(keys)} {_plural(what)}: give one per {what}")
    return numbers(values, what)


def numbers(values: Sequence[Any], what: str) -> list[Number]:
    """Check numbers: exact Python ints when all are integers, else floats (finite, real). A Fraction or
    Decimal is taken where it is whole or a float stands for it exactly (:func:`_exact_number`)."""
    out: list[Number] = []
    for k, w in enumerate(values):
        if isinstance(w, (bool, np.bool_)):
            raise NumberTypeError(f"weight {k} of the {_plural(what)} is a bool ({w!r}): give a number")
        if isinstance(w, np.timedelta64):  # NumPy counts it an integer type
            raise NumberTypeError(f"weight {k} of the {_plural(what)} is a time span ({w!r}): give a number")
        if isinstance(w, (int, np.integer)):
            out.append(int(w))
        elif _instance.is_wide(w):
            out.append(_long_double(k, w, what))
        elif isinstance(w, (float, np.floating)):
            if not math.isfinite(float(w)):
                raise ValueError(f"weight {k} of the {_plural(what)} is {w!r}: weights must be finite")
            out.append(float(w))
        elif isinstance(w, (Fraction, Decimal)):
            out.append(_exact_number(k, w, what))
        else:
            raise TypeError(f"weight {k} of the {_plural(what)} is {w!r} ({type(w).__name__}): give a real number")
    if all(isinstance(x, int) for x in out):
        return out
    for k, x in enumerate(out):
        if isinstance(x, int) and not _exact_float(x):
            raise ValueError(
                f"weight {k} of the {_plural(what)}, {shown(x)}, has no exact float64 value (past its 53 bits or its "
                "range, 1.8e308) among float weights: give every weight as an int, or this one as a float"
            )
    return [float(x) for x in out]


def _exact_number(k: int, w: Fraction | Decimal, what: str) -> Number:
    """A Fraction or Decimal as the int it is, or as the float that a solve reads back as exactly this
    number (a short decimal: Decimal("0.1"), Fraction(1, 4)); any other (1/3, a decimal of more than
    9 significant digits) is refused, not rounded."""
    if isinstance(w, Decimal) and not w.is_finite():
        raise ValueError(f"weight {k} of the {_plural(what)} is {w!r}: weights must be finite")
    q = Fraction(w)
    if q.denominator == 1:
        return int(q)
    try:
        f = float(q)
    except OverflowError:  # past float64's range: no float holds it
        f = math.inf
    if math.isfinite(f) and _exact.rational(f) == q:
        return f
    raise ValueError(
        f"weight {k} of the {_plural(what)} is {shown(w)}, which no float the solver reads exactly stands for (it "
        f"reads floats as decimals of up to {_exact.DECIMAL_DIGITS} significant digits): scale the weights to "
        "integers (the optima do not move), or give floats to have them rounded"
    )


def _long_double(k: int, w: Any, what: str) -> Number:
    """An extended float (np.longdouble) at its exact value, which float(w) would round: a whole one as the
    Python int it is, another as the float64 that holds it exactly; one that float64 cannot hold is refused
    (no weight is rounded silently)."""
    exact = _instance.wide(w)
    if isinstance(exact, float):
        raise ValueError(f"weight {k} of the {_plural(what)} is {w!r}: weights must be finite")
    if isinstance(exact, int) or float(exact) == exact:
        return exact if isinstance(exact, int) else float(exact)
    raise ValueError(
        f"weight {k} of the {_plural(what)} is the long double {w!r}, which float64 would round: give it as a "
        "float (float(w), rounded), or scale the weights to integers"
    )


def _exact_float(x: int) -> bool:
    """Whether float64 holds the int ``x`` exactly (one past its range, 10**400, it does not hold at all)."""
    try:
        return float(x) == x
    except OverflowError:
        return False


def _from_dict(given: Mapping[Any, Any], keys: Sequence[Hashable], what: str, unordered: bool) -> list[Any]:
    position: dict[Any, int] = {}
    for i, key in enumerate(keys):
        position[frozenset(key) if unordered and isinstance(key, tuple) else key] = i
    values: list[Any] = [None] * len(keys)
    for key, w in given.items():
        try:
            lookup = frozenset(key) if unordered and isinstance(key, tuple) else key
            i = position[lookup]
        except (KeyError, TypeError):
            raise ValueError(f"weights names {key!r}: no {what} of this problem has that name") from None
        if not same_name(key, keys[i]):
            raise ValueError(f"weights names {key!r}: no {what} of this problem has that name (it has {keys[i]!r})")
        if values[i] is not None:
            raise ValueError(f"weights gives {what} {keys[i]!r} twice")
        values[i] = w
    missing = [keys[i] for i, w in enumerate(values) if w is None]
    if missing:
        raise ValueError(
            f"weights has no entry for the {_plural(what)} {missing[:5]}{' ...' if len(missing) > 5 else ''}"
        )
    return values


def same_name(given: Any, actual: Any) -> bool:
    """Whether a user's name that a dict lookup matched to a variable's (``True == 1 == 1.0`` there, with
    one hash) is that name: of its kind too (bool, integer, float, another number), element by element for
    a tuple (an edge or a hyperedge, its vertices in any order: a lookup by the set of them matched it). A
    vertex named ``True`` or ``3.0`` of an ``(n, edges)`` graph is refused, as an edge's endpoint is."""
    if isinstance(given, tuple) and isinstance(actual, tuple):
        if len(given) != len(actual):
            return False
        if all(g == a and same_name(g, a) for g, a in zip(given, actual)):
            return True
        return len(set(actual)) == len(actual) and all(any(g == a and same_name(g, a) for a in actual) for g in given)
    return _kind(given) == _kind(actual)


def _kind(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (int, np.integer)):
        return "int"
    if isinstance(x, (float, np.floating)):
        return "float"
    if isinstance(x, (complex, np.complexfloating, Fraction, Decimal)):
        return type(x).__name__
    return "name"  # any other hashable: equality decides


def _plural(what: str) -> str:
    return {"vertex": "vertices", "literal": "literals"}.get(what, what + "s")


def edge_lookup(g: Graph) -> dict[frozenset[Hashable], int]:
    """Edge name (either orientation) -> edge index, for problems whose variables are the edges."""
    return {frozenset(e): k for k, e in enumerate(g.edge_names())}
