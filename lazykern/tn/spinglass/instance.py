"""An Ising spin glass (:class:`SpinGlass`, its inputs checked by :mod:`lazykern.tn._instance`) and the
max-plus network of its couplings and fields, on any array module.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .. import _exact, _instance

SPIN = np.array([1.0, -1.0])  # label index -> spin value
# Floats exact as Python ints on the host up to this many spins: a 10 x 10 Gaussian lattice's count took
# 0.60 s with Python ints and 0.75 s in float64 (the CPU machine); a 16 x 16's boundaries of 2^16 entries
# would be several times slower.
_EXACT_OBJECT_SPINS = 100


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

    >>> from lazykern.tn.networks import ground_state_energy
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
        sum of the couplings' exact integer numerators is exact (:mod:`.._exact`: integers, decimals
        such as 0.1 scaled by a power of ten); an integer dtype that would truncate is a ValueError,
        a float32 that rounds warns (``warn``)."""
        module = _instance.array_module(module)
        return module, self.fitted(module, dtype, warn=warn).dtype

    def fitted(self, module: Any, dtype: Any, count: bool = False, warn: bool = True) -> _exact.Fitted:
        """The values the solvers contract (:func:`.._instance.fitted`): on a GPU only float values
        (its kernels add floats; its counting kernels hold no int64 values); on the host, floats whose
        exact numerators pass 62 bits are summed as Python ints up to _EXACT_OBJECT_SPINS spins (as fast as
        float64 there: each step's Python costs more than its arithmetic), rounded past that."""
        _instance.check_unchanged(self.n, self.edges, self.J, self.h)
        host = getattr(module, "__name__", "") == "numpy"
        objects = host and self.n <= _EXACT_OBJECT_SPINS
        return _instance.fitted(self.J, self.h, dtype, host, floats_only=not host, warn=warn, objects=objects)

    def energy(self, spins: Any) -> Any:
        """E(s) for spins (..., n) of +-1, exactly (:mod:`.._exact`: the couplings' integer numerators times
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
        unit instead), exactly wherever ``dtype`` can (:func:`.._exact.as_values`): ``dtype`` None picks the
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
        return sg.labels(), [to_module(t, module) for t in (*bonds, *fields)]
    # Two copies to the device and views of them, not one small copy per tensor (a lattice has thousands).
    bonds, fields = to_module(bonds, module), to_module(fields, module)
    return sg.labels(), [bonds[i] for i in range(len(J))] + [fields[i] for i in range(sg.n)]


def fitted_network(sg: SpinGlass, fit: _exact.Fitted, module: Any) -> tuple[list[Any], list[Any]]:
    """The network the solvers contract: the couplings' numerators (whole numbers of ``fit.unit``)."""
    return _tensors(sg, fit.values[0], fit.values[1], fit.dtype, module)


def to_module(x: np.ndarray, module: Any) -> Any:
    name = getattr(module, "__name__", "")
    if name == "torch":
        return module.as_tensor(x, device="cuda")
    return module.asarray(x)
