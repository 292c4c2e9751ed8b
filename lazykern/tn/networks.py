"""Ising spin glasses as tropical tensor networks: exact ground states, configurations, degeneracy.

Convention: spins s_i = +-1, energy E(s) = -sum_(ij) J_ij s_i s_j - sum_i h_i s_i; the
ground state minimizes E. The network has one label per spin (index 0 is s = +1,
index 1 is s = -1), a 2 x 2 bond tensor J_ij s s' per coupling and a length-2 vertex
tensor h_i s per spin; its max-plus contraction to a scalar is max_s (-E(s)), so
E_0 = -(the contraction). The same network in counting numbers gives the number of
ground states (Liu, Wang, Zhang, PRL 126, 090506 (2021)).

>>> from lazykern.tropical import networks
>>> sg = networks.square_lattice(3, seed=1)
>>> E, spins = networks.ground_state(sg)
>>> bool(sg.energy(spins) == E)
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import LazykernWarning, warn_user
from . import _arena, _cost, _eliminate, _exact, _instance, _kit, _plan_store, _procs, _shared, _upload, orders
from ._backend import DEFAULT_HOST_LIMIT, backend_of
from ._planner import DEFAULT_MAX_TIME
from .counting import CountingAlgebra, count_network
from .einsum import (
    ARENA_FASTER,
    ContractionPlan,
    contract_network,
    contraction_plan,
    fit_in_place,
    fit_to_memory,
    network_argmax,
    plan_steps,
)

SPIN = np.array([1.0, -1.0])  # label index -> spin value
# Floats exact as Python ints on the host up to this many spins: a 10 x 10 Gaussian lattice's count took
# 0.60 s with Python ints and 0.75 s in float64 (the CPU machine); a 16 x 16's boundaries of 2^16 entries
# would be several times slower.
_EXACT_OBJECT_SPINS = 100

log = logging.getLogger("lazykern")


@dataclasses.dataclass(frozen=True)
class SpinGlass:
    """n spins, couplings J on ``edges`` (m, 2), fields h (n,; None: no field); ``positions``
    (n, 2 or 3; optional) for drawing and geometry; ``order``: a spin order whose boundary sweep
    is a good contraction order (None: search one).

    Any instance of one's own is built here (or with :meth:`from_edges` from a weighted edge
    list); the inputs are checked when it is made (and J, h again by each solver): spins numbered
    0..n-1, one integer pair per edge, no self loop, each pair once (sum duplicate couplings
    first), finite couplings and fields of the right lengths (each number read exactly, np.longdouble
    included). Anything else is a ValueError that says what (a NaN or infinity by its position); a
    bool given as a coupling or field is a TypeError.

    >>> sg = SpinGlass(3, [(0, 1), (1, 2)], [1.0, -1.0])
    >>> ground_state_energy(sg)
    -2.0
    """

    n: int
    edges: np.ndarray
    J: np.ndarray
    h: np.ndarray = None  # type: ignore[assignment]  # None in, zeros kept (__post_init__)
    positions: np.ndarray | None = None
    name: str = ""
    order: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        n, edges, J, h, positions = _instance.check(self.n, self.edges, self.J, self.h, self.positions)
        checked = {"n": n, "edges": edges, "J": J, "h": h, "positions": positions}
        checked["order"] = _instance.check_order(n, self.order)
        for key, value in checked.items():
            object.__setattr__(self, key, value)  # frozen: the checked inputs replace the given ones

    @classmethod
    def from_edges(
        cls,
        edges: Any,
        J: Any = None,
        *more: Any,
        n: int | None = None,
        h: Any = None,
        positions: Any = None,
        name: str = "",
    ) -> SpinGlass:
        """An instance from an edge list: ``edges`` (m, 2) with ``J`` (m,), or a weighted edge list
        (m, 3) of (i, j, J_ij) rows. ``n``: the number of spins (default: one more than the largest
        index in ``edges``, or len(h)); ``from_edges(n, edges, J)`` also reads as the constructor.

        >>> SpinGlass.from_edges([(0, 1, -1.0), (1, 2, 2.0)]).n
        3
        """
        if isinstance(edges, (int, np.integer)) and not isinstance(edges, (bool, np.bool_)):
            if n is not None or len(more) > 1:
                raise TypeError("from_edges(n, edges, J): n given twice, or more than three positional arguments")
            n, edges, J = int(edges), J, (more[0] if more else None)
        elif more:
            raise TypeError(f"from_edges takes edges and J positionally, got {2 + len(more)} positional arguments")
        e = np.array(edges)  # integer couplings stay integers (exact answers, as ints)
        if J is None:
            if e.ndim != 2 or e.shape[1] != 3:
                raise ValueError(
                    f"edges has shape {e.shape}: give a weighted edge list (m, 3) of (i, j, J) rows, "
                    "or the pairs (m, 2) with J= (one coupling per edge)"
                )
            if not isinstance(edges, np.ndarray):  # rows of Python numbers: each J as given, not as NumPy rounds them
                e = np.array(edges, dtype=object)
            e, J = e[:, :2], e[:, 2]
        if n is None:
            if h is not None:
                n = len(h)
            elif positions is not None:
                n = len(positions)
            elif not np.size(e):
                raise ValueError("from_edges: no edges, so no number of spins: pass n=")
            else:  # bad indices (NaN, fractions, negatives) are named by the constructor
                pairs = np.asarray(e, dtype=float)
                n = max(int(np.max(pairs[np.isfinite(pairs)], initial=0)) + 1, 1)
        return cls(n, e, J, h, positions, name)

    def resolve(self, module: Any, dtype: Any, warn: bool = True) -> tuple[Any, np.dtype]:
        """(array module, value dtype) for solving this instance: ``module`` may be a name; ``dtype``
        None picks the narrowest of float32, float64 and (on the host) int64 in which every partial
        sum of the couplings' exact integer numerators is exact (:mod:`._exact`: integers, decimals
        such as 0.1 scaled by a power of ten); an integer dtype that would truncate is a ValueError,
        a float32 that rounds warns (``warn``)."""
        module = _instance.array_module(module)
        return module, self.fitted(module, dtype, warn=warn).dtype

    def fitted(self, module: Any, dtype: Any, count: bool = False, warn: bool = True) -> _exact.Fitted:
        """The values the solvers contract (:func:`._instance.fitted`): on a GPU only float values
        (its kernels add floats; its counting kernels hold no int64 values); on the host, floats whose
        exact numerators pass 62 bits are summed as Python ints up to _EXACT_OBJECT_SPINS spins (as fast as
        float64 there: each step's Python costs more than its arithmetic), rounded past that."""
        _instance.check_unchanged(self.n, self.edges, self.J, self.h)
        host = getattr(module, "__name__", "") == "numpy"
        objects = host and self.n <= _EXACT_OBJECT_SPINS
        return _instance.fitted(self.J, self.h, dtype, host, floats_only=not host, warn=warn, objects=objects)

    def energy(self, spins: Any) -> Any:
        """E(s) for spins (..., n) of +-1, exactly (:mod:`._exact`: the couplings' integer numerators times
        their unit, summed as int64 or Python ints), as the solvers answer it: an int when J and h are
        integers, else the float nearest the exact energy; an array over the leading axes. ValueError for
        spins of another length or with an entry other than +1 and -1 (:func:`_spins`)."""
        s = _spins(self.n, spins)
        numbers = _exact.classify(self.J, self.h)
        Jn, hn = numbers.numerators if numbers.exact else numbers.big
        kind = np.int64 if Jn.dtype == np.int64 and hn.dtype == np.int64 else object
        s = s.astype(kind)
        e = -(s[..., self.edges[:, 0]] * s[..., self.edges[:, 1]]) @ Jn.astype(kind) - s @ hn.astype(kind)
        unit = numbers.unit

        def one(v: Any) -> int | float:
            exact = int(v) * unit
            return int(exact) if numbers.integral else exact.numerator / exact.denominator

        if np.ndim(e) == 0:
            return one(e)
        if numbers.integral:
            return e
        return np.array([one(v) for v in np.ravel(e).tolist()], dtype=np.float64).reshape(np.shape(e))

    def frustrated(self, spins: Any) -> np.ndarray:
        """Mask (..., m) of the bonds each configuration of spins (..., n) of +-1 leaves unsatisfied
        (J_ij s_i s_j < 0), over the leading axes as :meth:`energy`; ValueError for other spins, as there."""
        s = _spins(self.n, spins)
        mask: np.ndarray = self.J * (s[..., self.edges[:, 0]] * s[..., self.edges[:, 1]]) < 0
        return mask

    def labels(self) -> list[tuple[int, ...]]:
        """The network's labels per tensor (bonds, then vertices); spin i is label i."""
        return [(int(a), int(b)) for a, b in self.edges.tolist()] + [(i,) for i in range(self.n)]

    def network(self, dtype: Any = None, module: Any = np) -> tuple[list[tuple[int, ...]], list[Any]]:
        """(labels per tensor, tensors) of the max-plus network: spin i is label i (index 0 is s = +1), a
        bond tensor J_ij s s' = [[J, -J], [-J, J]] per edge, then a field tensor h_i s = [h, -h] per spin.
        Its max-plus contraction to a scalar is max_s (-E(s)) = -E_0.

        The tensors hold the couplings and fields themselves (the solvers contract integer numerators of a
        unit instead), exactly wherever ``dtype`` can (:func:`._exact.as_values`): ``dtype`` None picks the
        narrowest of float32, float64 and, on the host, int64 and object (Python ints) that holds every
        coupling, field and partial sum exactly. Where none does, decimals such as 0.1 and fractions
        (no binary float holds 1/10) are float64's nearest, with a LazykernWarning; floats taken at their
        binary value (Gaussian couplings) are float64, each as given, their sums rounding; integers are
        never rounded (on a device past 2^53: ValueError). A given ``dtype`` (float32, float64, int32,
        int64, or object on the host: Python ints or Fractions, exact) that cannot hold them is a
        ValueError for an integer dtype, integer couplings or numbers past its range, else it rounds with
        a LazykernWarning, as the solvers' ``dtype`` does. ``module``: numpy, cupy or torch, or its name
        (tensors made on its default device: torch gets device="cuda").

        >>> labels, tensors = SpinGlass(2, [(0, 1)], [2**53 + 1]).network()
        >>> labels, tensors[0].dtype, int(tensors[0][0, 0])
        ([(0, 1), (0,), (1,)], dtype('int64'), 9007199254740993)
        """
        _instance.check_unchanged(self.n, self.edges, self.J, self.h)
        module = _instance.array_module(module)
        host = getattr(module, "__name__", "") == "numpy"
        dtype, (J, h) = _instance.values(self.J, self.h, dtype, host)
        return _tensors(self, J, h, dtype, module)


def _spins(n: int, spins: Any) -> np.ndarray:
    """``spins`` (..., n) as int64, every entry +1 or -1 (not the label indices 0 and 1: s = 1 - 2 * index);
    ValueError naming the first entry that is not, or the shape."""
    s = np.asarray(spins)
    if s.ndim == 0 or s.shape[-1] != n:
        raise ValueError(f"spins must have shape (..., {n}), one +-1 per spin, got shape {s.shape}")
    if s.dtype.kind not in "iuf":
        raise ValueError(f"spins must be +1 or -1 (integers or floats), got dtype {s.dtype}")
    bad = (s != 1) & (s != -1)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"spins[{', '.join(map(str, where))}] is {s[where].item()!r}: each spin is +1 or -1 (from label "
            "indices 0/1, s = 1 - 2 * index)"
        )
    return s.astype(np.int64)


def _tensors(sg: SpinGlass, J: np.ndarray, h: np.ndarray, dtype: np.dtype, module: Any) -> tuple[list[Any], list[Any]]:
    """(labels, tensors) of the network with couplings ``J`` and fields ``h`` (any scale) in ``dtype``."""
    sign = np.array([1, -1], dtype=dtype)
    bonds = np.asarray(J.astype(dtype)[:, None, None] * np.outer(sign, sign), dtype=dtype)
    fields = np.asarray(h.astype(dtype)[:, None] * sign, dtype=dtype)
    if getattr(module, "__name__", "") == "torch":  # leaves of their own: autograd differentiates each
        return sg.labels(), [_to_module(t, module) for t in (*bonds, *fields)]
    # Two copies to the device and views of them, not one small copy per tensor (a lattice has thousands).
    bonds, fields = _to_module(bonds, module), _to_module(fields, module)
    return sg.labels(), [bonds[i] for i in range(len(J))] + [fields[i] for i in range(sg.n)]


def _network(sg: SpinGlass, fit: _exact.Fitted, module: Any) -> tuple[list[Any], list[Any]]:
    """The network the solvers contract: the couplings' numerators (whole numbers of ``fit.unit``)."""
    return _tensors(sg, fit.values[0], fit.values[1], fit.dtype, module)


def _host_first(sg: SpinGlass, fit: _exact.Fitted, module: Any, how: Any) -> tuple[list[Any], list[Any], Any]:
    """(labels, tensors on ``module``'s device, plan) of an energy: where ``how`` is an unsliced plan for a
    GPU, its small steps over leaves (:func:`._shared.split`: each spin's field and couplings summed into
    the piece a boundary step absorbs, 2687 of a 32 x 32 sweep's 3007 steps) run on the host first
    (:func:`._shared.run_values`), and the device gets their results in one copy and the plan's other steps."""
    labels, tensors = _network(sg, fit, np)
    if getattr(module, "__name__", "") == "numpy":
        return labels, tensors, how
    if isinstance(how, ContractionPlan) and how.nslices == 1 and fit.dtype != object:
        sizes = dict.fromkeys(range(sg.n), 2)
        cut = _shared.split(labels, (), sizes, how.path, [1] * len(labels))
        if cut is not None:
            labels, tensors = _shared.run_values(cut, how.path, labels, tensors, (), "maxplus")
            how = dataclasses.replace(how, path=cut.path)
    return labels, _upload.upload(tensors, lambda x: _to_module(x, module)), how


def _to_module(x: np.ndarray, module: Any) -> Any:
    name = getattr(module, "__name__", "")
    if name == "torch":
        return module.as_tensor(x, device="cuda")
    return module.asarray(x)


def couplings(m: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "pm1":
        return rng.choice(np.array([-1.0, 1.0]), size=m)
    if kind == "gaussian":
        return rng.standard_normal(m)
    if kind == "ferro":
        return np.ones(m)
    raise ValueError(f"couplings must be 'pm1' (+-J), 'gaussian' or 'ferro', got {kind!r}")


def _make(
    n: int,
    edges: Any,
    positions: Any,
    J: str,
    seed: int | None,
    field: float,
    name: str,
    order: Iterable[int] | None = None,
) -> SpinGlass:
    rng = np.random.default_rng(seed)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    h = field * rng.standard_normal(n) if field else np.zeros(n)
    order = None if order is None else tuple(int(i) for i in order)
    return SpinGlass(n, edges, couplings(len(edges), J, rng), h, np.asarray(positions, float), name, order)


def square_lattice(L: int, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0) -> SpinGlass:
    """L x L open-boundary square lattice; spin r * L + c sits at row r, column c.
    ``J``: "pm1" (+-1 with equal probability), "gaussian" or "ferro"; ``field``: the
    standard deviation of Gaussian fields (0: none)."""
    idx = np.arange(L * L).reshape(L, L)
    edges = [(idx[r, c], idx[r, c + 1]) for r in range(L) for c in range(L - 1)]
    edges += [(idx[r, c], idx[r + 1, c]) for r in range(L - 1) for c in range(L)]
    pos = [(c, -r) for r in range(L) for c in range(L)]
    return _make(L * L, edges, pos, J, seed, field, f"square {L}x{L}", order=range(L * L))  # row by row


def cubic_lattice(L: int, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0) -> SpinGlass:
    """L x L x L open-boundary cubic lattice."""
    idx = np.arange(L**3).reshape(L, L, L)
    edges = []
    for axis in range(3):
        a = np.moveaxis(idx, axis, 0)
        edges += list(zip(a[:-1].ravel(), a[1:].ravel()))
    pos = np.stack(np.unravel_index(np.arange(L**3), (L, L, L)), axis=1)
    return _make(L**3, edges, pos, J, seed, field, f"cubic {L}^3")


def random_regular(n: int, degree: int = 3, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0) -> SpinGlass:
    """A uniformly random simple ``degree``-regular graph on n vertices (pairing model with restarts)."""
    if n * degree % 2 or degree >= n:
        raise ValueError(f"no simple {degree}-regular graph on {n} vertices (need n * degree even and degree < n)")
    rng = np.random.default_rng(seed)
    for _ in range(10_000):
        stubs = rng.permutation(np.repeat(np.arange(n), degree)).reshape(-1, 2)
        a, b = stubs.min(axis=1), stubs.max(axis=1)
        if np.all(a != b) and len({(int(x), int(y)) for x, y in zip(a, b)}) == len(a):
            break
    else:
        raise RuntimeError(f"could not draw a simple {degree}-regular graph on {n} vertices")
    order = np.lexsort((b, a))
    angle = 2 * np.pi * np.arange(n) / n
    pos = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return _make(
        n, np.stack([a[order], b[order]], axis=1), pos, J, int(rng.integers(2**31)), field, f"{degree}-regular n={n}"
    )


def chimera(
    m: int = 8, n: int | None = None, t: int = 4, *, J: str = "pm1", seed: int | None = 0, field: float = 0.0
) -> SpinGlass:
    """D-Wave's chimera graph: m x n cells of K_{t,t} (8 x 8 x 4: the 512-qubit chip).

    Qubit (r, c, side, k) is r * n * 2t + c * 2t + side * t + k; side 0 couples to the cell
    below (same k), side 1 to the cell on the right (dwave_networkx's numbering)."""
    n = m if n is None else n

    def q(r: int, c: int, side: int, k: int) -> int:
        return ((r * n + c) * 2 + side) * t + k

    edges = []
    for r in range(m):
        for c in range(n):
            edges += [(q(r, c, 0, i), q(r, c, 1, j)) for i in range(t) for j in range(t)]
            if r + 1 < m:
                edges += [(q(r, c, 0, k), q(r + 1, c, 0, k)) for k in range(t)]
            if c + 1 < n:
                edges += [(q(r, c, 1, k), q(r, c + 1, 1, k)) for k in range(t)]
    pos = []
    for r in range(m):
        for c in range(n):
            for side in range(2):
                for k in range(t):
                    pos.append((c * (t + 2) + (k if side else t / 2), -(r * (t + 2) + (t / 2 if side else k))))
    # Row of cells by row of cells (columns when there are more): first the t vertical spins of every
    # cell (each replaces the one above it), then the t horizontal chains one at a time. The boundary
    # holds t spins per column of cells plus one chain link: 2^(t n + 1) entries, 2^33 for 8 x 8 x 4
    # (cell by cell it would hold all t chain links: 2^36).
    order = []
    if n <= m:
        for r in range(m):
            order += [q(r, c, 0, k) for c in range(n) for k in range(t)]
            order += [q(r, c, 1, k) for k in range(t) for c in range(n)]
    else:
        for c in range(n):
            order += [q(r, c, 1, k) for r in range(m) for k in range(t)]
            order += [q(r, c, 0, k) for k in range(t) for r in range(m)]
    return _make(m * n * 2 * t, edges, pos, J, seed, field, f"chimera {m}x{n}x{t}", order=order)


# ---------------------------------------------------------------- solving --
def plan(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    count_dtype: Any = None,
    optimize: Any = "auto",
    memory_limit: int | None = None,
    max_time: float | None = None,
) -> ContractionPlan:
    """The contraction plan the solvers use for ``sg`` (pass it back as ``optimize=`` to reuse it).

    ``optimize="auto"``: the boundary sweep along a vertex order found from the graph itself
    (:func:`lazykern.tn.orders.graph_order`: ``sg.order``, the numbering, the axes of
    ``sg.positions`` and coordinates read off graph distances compete, so any numbering of the
    same graph plans alike) when its largest intermediate fits ``memory_limit`` entries (opt_einsum's
    greedy order instead where the device would run that faster: :mod:`lazykern.tn._cost`),
    else that sweep with the labels sliced that most of its oversized intermediates carry.
    ``optimize="cotengra"`` refines the sweep and searches
    afresh for ``max_time`` seconds (the plan is stored). Anything else is passed to
    :func:`lazykern.tropical.contraction_plan`. ``memory_limit`` defaults to what fits the
    device of ``module``: the plan is sliced until its predicted peak (``count_dtype`` counted in
    for :func:`degeneracy`) fits the free memory.
    """
    memory_limit = _instance.check_memory_limit(memory_limit)
    return _plan(
        sg,
        module=module,
        dtype=dtype,
        count_dtype=count_dtype,
        optimize=optimize,
        memory_limit=memory_limit,
        max_time=max_time,
    )


def _plan(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    count_dtype: Any = None,
    optimize: Any = "auto",
    memory_limit: int | None = None,
    max_time: float | None = None,
    arena: bool = False,
) -> ContractionPlan:
    """:func:`plan`; ``arena``: for :func:`ground_state_energy`, whose executor can hold the boundary
    in one buffer (:mod:`._arena`): where the unsliced sweep's run holding two boundaries at a step
    would not fit, an unsliced sweep that fits so is taken (:func:`_arena_sweep`), not a sliced one."""
    start = time.monotonic()
    module, dtype = sg.resolve(module, dtype, warn=False)  # the solvers warned
    labels = sg.labels()
    sizes = dict.fromkeys(range(sg.n), 2)
    be, _ = backend_of(_to_module(np.zeros(1, dtype=dtype), module))
    itemsize = np.dtype(dtype).itemsize
    entry = itemsize + (0 if count_dtype is None else np.dtype(count_dtype).itemsize)
    rates = _cost.rates_for(be.on_host, itemsize)
    sweep, sweep_steps = _sweep(sg, labels, sizes, rates, itemsize)

    def steps_of(p: ContractionPlan) -> list[_cost.Step]:  # the sweep's are kept with it: not priced twice
        return sweep_steps if p is sweep else plan_steps(labels, (), sizes, p.path, p.sliced)

    def seconds(p: ContractionPlan) -> float:
        return _cost.seconds(steps_of(p), p.nslices, itemsize, rates)

    def make(limit: int) -> ContractionPlan:
        how = optimize
        if how == "auto":
            if sweep.largest <= limit:
                return _faster(sweep, seconds(sweep), labels, sizes, limit, seconds)
            return contraction_plan(labels, (), sizes, optimize=list(sweep.path), memory_limit=limit)  # sliced
        budget = DEFAULT_MAX_TIME if max_time is None else float(max_time)
        left = max(budget - (time.monotonic() - start), min(budget, 0.5))  # the budget covers the sweep too
        return contraction_plan(
            labels,
            (),
            sizes,
            optimize=how,
            memory_limit=limit,
            max_time=left if how == "cotengra" else max_time,
            initial=sweep.path if how == "cotengra" else None,
        )

    if memory_limit is not None:
        return make(memory_limit)
    leaves = 4 * len(sg.edges) + 2 * sg.n

    counting = count_dtype is not None and not be.on_host  # counting runs its bit-addressed steps on a device

    def fit(width: int) -> ContractionPlan:
        def peak(p: ContractionPlan) -> int:  # without the slices' cache, which the executor drops if it does not fit
            steps = [s._replace(pinned=0) for s in steps_of(p)]
            return _cost.peak_bytes(steps, leaves, width, 0, inplace=counting, host=be.host_ram)

        # In place, a counting sweep holds one boundary, not the four arrays be.memory_limit assumes.
        return (fit_in_place if counting else fit_to_memory)(make, be.memory_limit(width), peak, be.budget_bytes())

    exact = counting and np.dtype(count_dtype).kind in "iu" and sg.n >= _INT64_SPINS
    if exact:
        # Counts past int64 are rebuilt from residues modulo primes (int32 each): a plan fit for one
        # residue a pass may be sliced less than one fit for the int64 pass, which counting.exact then
        # leaves out. Unsliced, it is the very plan (the passes' widths are counting.exact's to choose),
        # and the int64 fit (slicing searched for at its width) is not needed at all.
        narrow = fit(itemsize + 4)
        if narrow.nslices == 1:
            return narrow
        wide = fit(entry)
        return narrow if narrow.nslices < wide.nslices else wide
    free = be.budget_bytes()
    if arena and optimize == "auto" and free is not None and _arena.capable("maxplus", np.dtype(dtype), be):
        # Where the sweep's two boundaries at a step (the row kernel's) do not fit, one held in place may:
        # unsliced, not a sweep sliced thousands of times (chimera 8 x 8 x 4 on an 80 GB GPU).
        steps = [s._replace(pinned=0) for s in sweep_steps]
        if _cost.peak_bytes(steps, leaves, entry, 0) * _cost.POOL_MARGIN > free:
            found = _arena_sweep(sg, labels, sizes, rates, itemsize, leaves, free)
            if found is not None:
                log.info(
                    "%s: unsliced, its boundary of up to %d entries held in one buffer",
                    sg.name or "spins",
                    found.largest,
                )
                return found
    return fit(entry)


_INT64_SPINS = 63  # spins from which a count of +-1 assignments may pass 2^63: residues rebuild it


def _faster(
    sweep: ContractionPlan,
    took: float,
    labels: list[tuple[int, ...]],
    sizes: dict[int, int],
    limit: int,
    seconds: Any,
) -> ContractionPlan:
    """The sweep (predicted to take ``took`` seconds), or opt_einsum's greedy order when it fits
    ``limit`` and is predicted faster (a graph with no thin direction, such as a random regular one).
    Greedy takes ~0.3 ms a tensor to find, so it is tried only where the sweep would take several
    times that."""
    if took <= _GREEDY_WORTH * _GREEDY_SECONDS_PER_TENSOR * len(labels):
        return sweep
    greedy = contraction_plan(labels, (), sizes, optimize="greedy", memory_limit=2**62)
    if greedy.largest <= limit and seconds(greedy) < took:
        return greedy
    return sweep


_GREEDY_SECONDS_PER_TENSOR = 3e-4  # opt_einsum's greedy path on a 32 x 32 lattice: 0.82 s for 3008 tensors
_GREEDY_WORTH = 5


def _sweep(
    sg: SpinGlass, labels: list[tuple[int, ...]], sizes: dict[int, int], rates: _cost.Rates, itemsize: int
) -> tuple[ContractionPlan, list[_cost.Step]]:
    """The boundary sweep along :func:`lazykern.tn.orders.graph_order` absorbing 1 to 3 spins a
    step, whichever :mod:`._cost` predicts quickest on the device: 3 spins a step costs a third more
    multiply-adds on a square lattice but passes over the boundary a third as often as 1 (and K, N <= 8
    keeps tropical.bmm's row kernel). Returned with its steps as :mod:`._cost` prices them. Kept per
    graph for the process (a script solving many couplings of one lattice sweeps it once), and from
    SWEEP_STORED_FROM tensors in the lazykern store (the next process replays it, costs checked)."""
    positions = getattr(sg, "positions", None)
    where = None if positions is None else np.asarray(positions).tobytes()
    key: tuple[Any, ...] = (sg.n, sg.edges.tobytes(), sg.order, where, rates, itemsize)
    found = _sweeps.get(key)
    if found is not None:
        return found
    if len(_sweeps) >= _SWEEPS_KEPT:
        _sweeps.clear()
    store = None
    if len(labels) >= SWEEP_STORED_FROM:  # its search takes a tenth of a second or more: kept in the store
        digest = hashlib.sha256(repr((where, sg.order, rates, itemsize, SWEEP_FORMAT)).encode()).hexdigest()
        store = _plan_store.key(labels, (), sizes, 0, None, rank=f"sweep:{digest}")
        kept: list[list[_cost.Step]] = []

        def costs(path: list[tuple[int, ...]], sliced: list[Any]) -> tuple[int, int]:
            kept.append(plan_steps(labels, (), sizes, path, {}))
            return max((s.result for s in kept[-1]), default=1), sum(s.flops for s in kept[-1])

        stored = _plan_store.load(store, labels, costs)
        if stored is not None and not stored[1]:  # replayed by load: kept[-1] are its steps
            largest, flops = max((s.result for s in kept[-1]), default=1), sum(s.flops for s in kept[-1])
            _sweeps[key] = ContractionPlan(tuple(stored[0]), {}, largest, flops), kept[-1]
            return _sweeps[key]
    order = _order(sg)
    best = None
    for group in (1, 2, 3):
        path = orders.sweep_path(labels, order, group)
        steps = plan_steps(labels, (), sizes, path, {})
        one = 2 ** len(labels[0]) if labels else 1  # a network of one tensor (one spin, no coupling) has no step
        largest = max((s.result for s in steps), default=one)
        plan = ContractionPlan(tuple(path), {}, largest, sum(s.flops for s in steps))
        score = _cost.seconds(steps, 1, itemsize, rates)
        if best is None or score < best[0]:
            best = (score, plan, steps)
        if score - len(steps) * rates.step < _WORK_NEGLIGIBLE * score:
            # Every grouping has as many steps (one per tensor), so grouping saves at most the work
            # beside their fixed cost: on a tiny network nothing worth the 2 ms each grouping takes.
            break
    if store is not None:
        _plan_store.save(store, labels, best[1].path, [], (best[1].largest, best[1].flops))
    _sweeps[key] = best[1], best[2]
    return _sweeps[key]


def _arena_sweep(
    sg: SpinGlass,
    labels: list[tuple[int, ...]],
    sizes: dict[int, int],
    rates: _cost.Rates,
    itemsize: int,
    leaves: int,
    free: int,
) -> ContractionPlan | None:
    """The quickest (by :mod:`._cost`) unsliced sweep (1 to 3 spins a step) whose run with its
    boundary in one buffer (:func:`._cost.arena_peak`) fits ``free`` bytes with the pool's margin; None
    when none does. The groupings differ here: a sweep of 3 spins a step has steps the bit-addressed
    kernel cannot take (more than 8 batch spins), which hold two boundaries (chimera 8 x 8 x 4 from an
    edge list: 2 spins a step fits an 80 GB GPU, 3 do not, 1 grows a 2^35 boundary)."""
    order = _order(sg)
    best = None
    for group in (1, 2, 3):
        path = orders.sweep_path(labels, order, group)
        steps = plan_steps(labels, (), sizes, path, {})
        largest = max((s.result for s in steps), default=1)
        if _cost.arena_peak(steps, leaves, itemsize, largest) * _cost.POOL_MARGIN > free:
            continue
        score = _cost.seconds(steps, 1, itemsize, rates)
        if best is None or score < best[0]:
            best = (score, ContractionPlan(tuple(path), {}, largest, sum(s.flops for s in steps)))
    return None if best is None else best[1]


def _order(sg: SpinGlass) -> tuple[int, ...]:
    """The vertex order the sweep follows, from the graph (sg.order is one candidate): any numbering
    sweeps as well. Kept per graph for the process, as the sweeps are."""
    positions = getattr(sg, "positions", None)
    where = None if positions is None else np.asarray(positions).tobytes()
    key = (sg.n, sg.edges.tobytes(), sg.order, where)
    found = _orders.get(key)
    if found is None:
        if len(_orders) >= _SWEEPS_KEPT:
            _orders.clear()
        found = _orders[key] = orders.graph_order(sg.n, sg.edges, positions, sg.order)
    return found


def _tiny(
    sg: SpinGlass, fit: _exact.Fitted, optimize: Any, slices: Sequence[int], devices: Any, memory_limit: int | None
) -> bool:
    """Whether the defaults solve ``sg``'s energy by vertex elimination on the host (:mod:`._eliminate`):
    a sweep whose boundaries hold at most 2^TINY_SWEEP entries in all, a few milliseconds of NumPy,
    where the general executor's per-step Python alone costs tens (and a GPU's launches more). The
    fitted values are whole numbers whose every partial sum is exact in their dtype (:mod:`._exact`), so
    adding them in another order than the contraction's gives the very same energy; Python ints (an
    object dtype) keep the general executor."""
    if optimize != "auto" or slices or devices is not None or fit.dtype == object or sg.n == 0:
        return False
    order = _order(sg)
    if orders.sweep_score(sg.n, sg.edges, order) > TINY_SWEEP:
        return False
    largest = 2 ** int(orders.boundary_sizes(sg.n, sg.edges, order).max(initial=0) + 1)  # with the next spin
    return memory_limit is None or largest <= memory_limit


TINY_SWEEP = 20.0  # log2 of boundary entries summed over the sweep (a 12 x 12 lattice: 19.2)

_orders: dict[tuple[Any, ...], tuple[int, ...]] = {}
_sweeps: dict[tuple[Any, ...], tuple[ContractionPlan, list[_cost.Step]]] = {}
_WORK_NEGLIGIBLE = 0.1  # share of a sweep's predicted time under which its grouping is not searched
_SWEEPS_KEPT = 64
# Tensors from which a sweep's choice (order and grouping) is kept in the lazykern store (lazykern.tn._plan_store),
# keyed by the network's structure, positions, order hint, rates and entry size: a 32 x 32 lattice's (3008
# tensors) took 0.26 s of every fresh process to find again. The stored path is replayed and its costs checked.
SWEEP_STORED_FROM = 1000
SWEEP_FORMAT = 1  # bump when orders.graph_order or the groupings change: stored sweeps then miss


# log2 of a sweep's boundary entries summed past which the host is never predicted sooner than a GPU
# (:func:`_route`: a 20 x 20 lattice's 26.2 already goes to the device; a 32 x 32's is 38.9).
DEVICE_SWEEP = 28.0


def _stays_on_device(sg: SpinGlass, module: Any, optimize: Any, slices: Sequence[int], devices: Any) -> bool:
    """Whether :func:`_route` keeps a GPU ``module`` whatever its search finds: the caller fixed the
    plan, or the network's sweep is far past what the host contracts sooner. Only speed rests on it:
    kernels built ahead for a network the route sends to the host are built and stored, unused."""
    if module is np:
        return False
    if optimize != "auto" or slices or devices is not None:
        return True
    return orders.sweep_score(sg.n, sg.edges, _order(sg)) > DEVICE_SWEEP


def _arena_tiles(sg: SpinGlass, dtype: np.dtype) -> list[tuple[int, int]]:
    """The tiles (spins out, spins in) of the bit-addressed steps of the sweep :func:`_route` priced for
    ``sg`` (kept for the process), where its largest step is one the arena takes (ARENA_FASTER entries):
    their kernels can build before the run prices its plan. A guess that only decides what builds early."""
    sizes = dict.fromkeys(range(sg.n), 2)
    sweep, steps = _sweep(sg, sg.labels(), sizes, _cost.rates_for(False, dtype.itemsize), dtype.itemsize)
    if sweep.largest < ARENA_FASTER:
        return []
    return sorted({s.tile for s in steps if s.bits})


def _route(
    sg: SpinGlass,
    module: Any,
    dtype: np.dtype,
    optimize: Any,
    slices: Sequence[int],
    devices: Any,
    memory_limit: int | None,
    entry: int,
) -> tuple[Any, Any]:
    """(module, optimize) to solve ``sg`` with: numpy and the device's sweep when the host is predicted
    to finish first, else as given. On a tiny network the device's per-step Python and the copies
    outweigh its speed (an 8 x 8 lattice: ~60 ms on the H100, ~40 ms in NumPy); the algebra and dtype
    are the same, so the result is too, and the solvers return host values either way. Only for the
    defaults (``optimize="auto"``, no slices, no devices): what the caller fixed is kept. ``entry``:
    bytes per entry (value and count)."""
    if module is np or optimize != "auto" or slices or devices is not None:
        return module, optimize
    labels = sg.labels()
    sizes = dict.fromkeys(range(sg.n), 2)
    itemsize = dtype.itemsize
    sweep, steps = _sweep(sg, labels, sizes, _cost.rates_for(False, itemsize), itemsize)  # plan() reuses it
    if sweep.largest > min(DEFAULT_HOST_LIMIT, memory_limit or DEFAULT_HOST_LIMIT):
        return module, optimize
    host = _cost.latency(steps, 1, entry, _cost.HOST)
    leaves = (4 * len(sg.edges) + 2 * sg.n) * entry
    device = _cost.latency(steps, 1, entry, _cost.rates_for(False, itemsize), copies=2, nbytes=leaves)
    if host >= device:
        return module, optimize
    log.info(
        "%s: contracting on the host (NumPy): predicted %.1f ms there, %.1f ms on %s (%d steps)",
        sg.name or f"{sg.n} spins", 1e3 * host, 1e3 * device, getattr(module, "__name__", module), len(steps),
    )  # fmt: skip
    return np, sweep


def _planned(sg: SpinGlass, optimize: Any, slices: Sequence[int], **kw: Any) -> Any:
    """``optimize`` as the contraction takes it: a plan for ``sg`` unless the caller fixed the order."""
    if slices or isinstance(optimize, (ContractionPlan, list, tuple)) or hasattr(optimize, "search"):
        return optimize
    if optimize != "auto" and optimize != "cotengra":
        return optimize
    return _plan(sg, optimize=optimize, **kw)


@_procs.scoped
def ground_state_energy(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    optimize: Any = "auto",
    slices: Sequence[int] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> float:
    """E_0 = min_s E(s), exactly (one max-plus contraction). ``module``: numpy (CPU), cupy or
    torch (GPU); ``optimize``, ``memory_limit``, ``max_time`` as for :func:`plan` (a plan, an
    explicit path or any :func:`lazykern.tn.einsum` strategy also work); ``slices``: spins
    to slice over explicitly. ``dtype`` None (the default) takes float32 where every partial sum
    is exact in it (+-J and small-integer couplings: integer energies far below 2^24), float64
    otherwise; an integer dtype that would truncate is a ValueError, a float32 that rounds warns.
    ``module`` may also be named ("numpy", "cupy", "torch"); with the defaults a network the host is
    predicted to contract sooner (:mod:`._cost`: an 8 x 8 lattice, not a 20 x 20) runs in NumPy
    whatever ``module`` is, with the same dtype and result (logged at INFO). ``devices`` (``"all"`` or GPU
    ordinals) spreads the plan's slices over several GPUs, as for :func:`lazykern.tn.einsum`;
    a plan with no slices runs on the operands' GPU alone. On a CuPy GPU (``devices`` or not), where the
    sweep's steps would hold two boundaries that do not fit its free memory, the default plan is an unsliced sweep whose
    boundary is held in one buffer and written over in place (:mod:`._arena`: chimera 8 x 8 x 4's
    2^34 float32 entries, 64 GiB, on an 80 GB GPU), not a sweep sliced thousands of times.

    Exact (:mod:`lazykern.tn._exact`): the couplings are contracted as integer numerators of one unit
    (integers as they are, decimals of up to 9 significant digits such as 0.1 scaled by a power of ten,
    other floats at their exact binary value), in the narrowest dtype that holds every partial sum. The
    energy is an ``int`` when J and h were given as integers, else the float nearest the exact value.
    Floats whose numerators would pass 62 bits (typically Gaussian couplings) are rounded to a multiple
    of a power of two first: the energy is then within (m + n) of those units of the truth."""
    memory_limit = _instance.check_memory_limit(memory_limit)
    module = _instance.array_module(module)
    fit = sg.fitted(module, dtype)
    dtype = fit.dtype
    _warn_rounded(fit, "ground_state_energy", "may tie with it: E_0 is the rounded couplings' optimum")
    if _tiny(sg, fit, optimize, slices, devices, memory_limit):
        log.info("%s: contracting on the host (NumPy) by vertex elimination", sg.name or f"{sg.n} spins")
        labels, tensors = _network(sg, fit, np)
        return fit.answer(-_eliminate.sweep_max(labels, tensors, _order(sg)))
    # The steps' kernels (an empty store's compiles) build beside the planning: beside the route's sweep
    # search too where the device is sure to be kept.
    early = _stays_on_device(sg, module, optimize, slices, devices)
    building = _kit.start(module, dtype, "maxplus") if early else []
    try:
        module, optimize = _route(sg, module, dtype, optimize, slices, devices, memory_limit, dtype.itemsize)
        if not early:
            building = _kit.start(module, dtype, "maxplus")
        if module is not np and optimize == "auto" and not slices and devices is None:
            building += _kit.start_arena(module, dtype, "maxplus", _arena_tiles(sg, dtype))
        how = _planned(
            sg,
            optimize,
            slices,
            module=module,
            dtype=dtype,
            memory_limit=memory_limit,
            max_time=max_time,
            arena=True,  # an unsliced plan runs on the operands' device whatever devices= says (contract_network)
        )
        labels, tensors, how = _host_first(sg, fit, module, how)
        out = contract_network(
            labels, (), tensors, optimize=how, slices=slices, memory_limit=memory_limit, devices=devices
        )
    finally:
        _kit.join(building)
    return fit.answer(-_item(out))


def _warn_rounded(fit: _exact.Fitted, solver: str, effect: str) -> None:
    """A LazykernWarning where the couplings were rounded (floats at their binary value whose exact numerators
    pass 62 bits): which rounding, and what states within its tolerance of E_0 do to ``solver``'s answer."""
    if not fit.exact:
        warn_user(
            f"{solver}: these couplings are not exact in {fit.dtype} (their exact integer numerators need more "
            f"than 62 bits): each was rounded to a multiple of 2^{math.log2(fit.unit):.0f} and ties decided "
            f"between the rounded energies. States within {fit.tolerance:.3g} of E_0 {effect}",
            LazykernWarning,
        )


@_procs.scoped
def ground_state(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    optimize: Any = "auto",
    checkpoint: bool | int | None = None,
    slices: Sequence[int] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    method: str = "backtrack",
    devices: Sequence[int] | str | None = None,
) -> tuple[float, np.ndarray]:
    """(E_0, spins): the ground-state energy and one configuration reaching it (int8 +-1).

    ``method``: "backtrack" reads the argmax of the contraction steps (by default the device's free
    memory beside the contraction is split between kept argmax, checkpoints of values and the
    segments recomputed from them, each step recomputed about once; ``checkpoint=True``: keeps
    no argmax and recomputes by segments; ``False``: keeps all); "autograd" (``module=torch``)
    differentiates the contraction with the tropical gradient rule: d(-E_0)/d(vertex tensor i) is 1
    at the ground state's s_i.
    ``devices`` (backtrack only): the slices' optima are found over several GPUs, as for
    :func:`lazykern.tropical.argmax_einsum`.

    E_0 is exact as for :func:`ground_state_energy`; where the couplings had to be rounded it is the
    configuration's own energy (:meth:`SpinGlass.energy`), a state within the rounding of the optimum.
    """
    memory_limit = _instance.check_memory_limit(memory_limit)
    module = _instance.array_module(module)
    fit = sg.fitted(module, dtype)
    dtype = fit.dtype
    _warn_rounded(fit, "ground_state", "may be returned in its place: the state is the rounded couplings' optimum")
    if method not in ("backtrack", "autograd"):
        raise ValueError(f"method must be 'backtrack' or 'autograd', got {method!r}")
    if method == "backtrack":  # autograd differentiates torch tensors: it stays on the device
        module, optimize = _route(sg, module, dtype, optimize, slices, devices, memory_limit, dtype.itemsize)
    labels, tensors = _network(sg, fit, module)
    how = _planned(sg, optimize, slices, module=module, dtype=dtype, memory_limit=memory_limit, max_time=max_time)
    if method == "autograd":
        if devices is not None:
            raise ValueError(
                "devices= spreads slices over threads and worker processes, which autograd does not follow: "
                "use method='backtrack'"
            )
        best, spins = _ground_state_autograd(sg, labels, tensors, how, slices, memory_limit)
        return _energy_of(sg, fit, best, spins), spins
    best, assignment = network_argmax(
        labels,
        (),
        tensors,
        optimize=how,
        checkpoint=checkpoint,
        slices=slices,
        memory_limit=memory_limit,
        devices=devices,
    )
    spins = np.array([1 - 2 * assignment[i] for i in range(sg.n)], dtype=np.int8)
    return _energy_of(sg, fit, best, spins), spins


def _energy_of(sg: SpinGlass, fit: _exact.Fitted, best: Any, spins: np.ndarray) -> int | float:
    """E_0 from the contraction's optimum ``best`` (-E_0 in units), or the configuration's own energy
    where the couplings were rounded."""
    if fit.exact:
        return fit.answer(-_item(best))
    energy: int | float = sg.energy(spins)
    return energy


def _ground_state_autograd(
    sg: SpinGlass,
    labels: list[tuple[int, ...]],
    tensors: list[Any],
    optimize: Any,
    slices: Sequence[Any],
    memory_limit: int | None,
) -> tuple[float, np.ndarray]:
    if not hasattr(tensors[0], "requires_grad"):
        raise TypeError("method='autograd' differentiates torch tensors: pass module=torch")
    vertex = tensors[len(sg.edges) :]
    for v in vertex:
        v.requires_grad_(True)
    out = contract_network(labels, (), tensors, optimize=optimize, slices=slices, memory_limit=memory_limit)
    out.backward()
    grads = np.stack([v.grad.detach().cpu().numpy() for v in vertex])
    return out.item(), np.where(grads[:, 0] > grads[:, 1], 1, -1).astype(np.int8)


@_procs.scoped
def degeneracy(
    sg: SpinGlass,
    *,
    module: Any = np,
    dtype: Any = None,
    count_dtype: Any = None,
    optimize: Any = "auto",
    slices: Sequence[int] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> tuple[float, int | float]:
    """(E_0, number of ground states), from counting contractions. The count is an exact Python
    int (``count_dtype`` None or int64): counted modulo 2^64, which is the count itself for up to
    63 spins, and for more also modulo the 31-bit primes that a proven bound on the count needs
    (one pass of float64 counts, its rounding bounded, :func:`lazykern.tn.counting.count_network`),
    the Chinese remainder theorem giving the integer (:mod:`lazykern.tn._crt`; a +-J square lattice
    passes 2^63 ground states near L = 28). ``count_dtype=float64``: one pass
    of float counts, a float that rounds past 2^53 (with a warning); any integer type (or object)
    means the exact int. ``dtype``, ``devices`` as
    for :func:`ground_state_energy`; the device's counting kernels add float values only, so an
    integer dtype is refused there (int64 values count on the host).

    The count is exact only when the energies are (:mod:`lazykern.tn._exact`: integers, decimals, floats
    whose numerators fit 62 bits). Couplings that had to be rounded are counted with ties decided
    between the rounded energies, and a LazykernWarning names the tolerance: states whose energies lie
    that close to E_0 may be counted in or out."""
    memory_limit = _instance.check_memory_limit(memory_limit)
    module = _instance.array_module(module)
    fit = sg.fitted(module, dtype, count=True)
    dtype = fit.dtype
    if dtype.kind != "f" and (dtype not in (np.int64, object) or getattr(module, "__name__", "") != "numpy"):
        raise TypeError(
            f"degeneracy counts with float values (int64 or Python ints on the host), got dtype={dtype}: leave "
            "dtype unset "
            "(the narrowest exact one is chosen)"
        )
    _warn_rounded(fit, "degeneracy", "may be counted in or out: the count is exact for the rounded couplings only")
    if fit.exact:
        _exact.warn_binary_floats(fit.spread, "energies", "the count")
    exact = count_dtype is None or count_dtype is int or np.dtype(count_dtype).kind in "iuO"
    if not exact and np.dtype(count_dtype) != np.float64:
        raise TypeError(
            f"count_dtype must be None or an integer type (an exact int) or float64, got {np.dtype(count_dtype)}"
        )
    counts = np.dtype(np.int64 if exact else count_dtype).itemsize
    module, optimize = _route(sg, module, dtype, optimize, slices, devices, memory_limit, dtype.itemsize + counts)
    labels, tensors = _network(sg, fit, module)
    how = _planned(
        sg,
        optimize,
        slices,
        module=module,
        dtype=dtype,
        count_dtype=np.int64 if exact else count_dtype,
        memory_limit=memory_limit,
        max_time=max_time,
    )
    if exact:
        v, c = count_network(
            labels, (), tensors, optimize=how, slices=slices, memory_limit=memory_limit, devices=devices
        )
        return fit.answer(-_item(v)), int(_item(c))
    pairs = [(t, _ones_like(t, count_dtype, module)) for t in tensors]
    v, c = contract_network(
        labels,
        (),
        pairs,
        optimize=how,
        slices=slices,
        memory_limit=memory_limit,
        algebra=CountingAlgebra,
        devices=devices,
    )
    count = float(_item(c))
    if count >= 2.0**53:
        warn_user(
            f"degeneracy: {count:.6g} ground states in float64 counts, which round past 2^53; "
            "leave count_dtype unset for the exact integer",
            LazykernWarning,
        )
    return fit.answer(-_item(v)), count


def _ones_like(t: Any, dtype: Any, module: Any) -> Any:
    return _to_module(np.ones(tuple(t.shape), dtype=dtype), module)


def _item(x: Any) -> Any:
    if hasattr(x, "copy_to_host"):
        x = x.copy_to_host()
    return x.item() if hasattr(x, "item") else x
