"""lazykern.tn.solve on the GPU (CuPy, torch): every property equal to the NumPy path's answer."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import properties as Q
from lazykern.tn import solve

pytestmark = pytest.mark.gpu

PROPERTIES = [
    Q.SizeMax(),
    Q.SizeMax(3),
    Q.SizeMin(2),
    Q.CountingMax(),
    Q.CountingMax(2),
    Q.CountingMin(3),
    Q.CountingAll(),
    Q.GraphPolynomial(),
    Q.ConfigsMax(2),
    Q.ConfigsAll(),
]


def _instances():
    P = pytest.importorskip("lazykern.tn.problems")
    return [
        P.IndependentSet(nx.petersen_graph()),
        P.IndependentSet(nx.random_regular_graph(3, 40, seed=4), weights=list(range(1, 41))),
        P.MaxCut(nx.random_regular_graph(3, 16, seed=5)),
        P.Coloring(nx.petersen_graph(), 3),
        P.IndependentSet(nx.petersen_graph(), openvertices=(0, 5)),
    ]


def _same(a, b):
    if isinstance(a, np.ndarray) and a.dtype == object:
        return a.shape == b.shape and all(_same(x, y) for x, y in zip(a.ravel(), b.ravel()))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("module", ["cupy", "torch"])
@pytest.mark.parametrize("index", range(5))
def test_every_property_on_the_device_equals_numpy(module, index):
    pytest.importorskip(module)
    p = _instances()[index]
    for prop in PROPERTIES:
        if p.openvertices and isinstance(prop, (Q.ConfigsMax, Q.ConfigsAll)):
            continue  # an array of lists of arrays: the scalar properties cover open vertices
        if isinstance(prop, Q.ConfigsAll) and solve(p, Q.CountingAll()) > 10**4:
            continue
        assert _same(solve(p, prop, module=module), solve(p, prop)), prop
    logz = solve(p, Q.PartitionFunction(1.5), module=module)
    assert np.allclose(logz, solve(p, Q.PartitionFunction(1.5)), rtol=1e-12)
    size, config = solve(p, Q.SingleConfigMax(), module=module) if not p.openvertices else (None, None)
    if size is not None:
        assert size == solve(p, Q.SizeMax())[0] and p.size(config) == size


@pytest.mark.parametrize("module", ["cupy", "torch"])
def test_exact_counts_past_int64_on_the_device(module):
    P = pytest.importorskip("lazykern.tn.problems")
    pytest.importorskip(module)
    p = P.IndependentSet(nx.grid_2d_graph(12, 12))
    assert solve(p, Q.CountingAll(), module=module) == 162481813349792588536582997  # OEIS A006506(12)
    assert solve(p, Q.CountingMax(2), module=module) == solve(p, Q.CountingMax(2))
