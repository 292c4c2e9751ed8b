"""Plans for a GPU are ranked by predicted seconds, not by multiply-adds (issue 47: the fewest
multiply-adds of a 3-regular n = 200 network ran its large steps at 1.7% of the GEMM rate).

* the lean walk that ranks candidates (``contraction.search._gpu_seconds``) prices a path as the cost model does
  (``_cost.seconds`` over ``plan_steps``), sliced or not;
* the search's workers minimize each objective they are given, and hand back each one's best;
* ``rank="seconds"`` takes the quickest predicted candidate where "flops" takes the fewest multiply-adds,
  and the executor plans that way for a GPU (the host keeps "flops");
* the two rankings are stored under different keys.
"""

from __future__ import annotations

import importlib
import math

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import _cost, _plan_store, _planner
from lazykern.tn.contraction import network
from lazykern.tn.contraction import search as S

E = importlib.import_module("lazykern.tn.einsum")
pytest.importorskip("cotengra")


def _regular(n: int, seed: int) -> tuple[list[tuple[int, ...]], dict[int, int]]:
    g = nx.random_regular_graph(3, n, seed=seed)
    return [(v,) for v in g.nodes] + [tuple(e) for e in g.edges], dict.fromkeys(g.nodes, 2)


@pytest.mark.parametrize("seed", range(4))
def test_the_lean_walk_prices_a_path_as_the_cost_model(seed):
    inputs, sizes = _regular(24, seed)
    rng = np.random.default_rng(seed)
    path = S.search_path(inputs, (), sizes, "greedy")[0]
    sliced = {} if seed % 2 else {int(v): 2 for v in rng.choice(24, 2, replace=False)}
    steps = E.plan_steps(inputs, (), sizes, path, sliced)
    model = _cost.seconds(steps, math.prod(sliced.values()), 4, _cost.rates_for(False, 4))
    assert S._gpu_seconds(inputs, (), sizes, path, sliced) == pytest.approx(model, rel=1e-9)


def test_a_kbest_step_is_priced_by_the_kernel_its_shape_takes():
    """k-best orders are ranked at the k-best kernels' rates (``rank="kbest"``): a step of 32 x 32 tiles
    at the tiled kernel's, a thin one (K * min(M, N) < 64) at a tenth of it, a long sum into few outputs
    as the split one-thread-per-output kernels, a memory-bound step by its bytes; the lean walk sums them."""
    macs, step = _cost.KBEST_MACS, _cost.KBEST_STEP
    assert _cost.kbest_step_seconds(4, 256, 512, 256, 0, False) == pytest.approx(4 * 256**2 * 512 / macs["s"] + step)
    assert _cost.kbest_step_seconds(4, 256, 512, 256, 0, True) == pytest.approx(4 * 256**2 * 512 / macs[""] + step)
    assert _cost.kbest_step_seconds(1, 1 << 20, 2, 4, 0, False) == pytest.approx(8 * (1 << 20) / macs["thin"] + step)
    bound = _cost.kbest_step_seconds(1, 1 << 20, 1, 1, 1 << 30, False)
    assert bound == pytest.approx((1 << 30) * _cost.KBEST_ENTRY / _cost.KBEST_BYTES + step)
    # ab,bc (a: 256, b: 512, c: 256): one step, (256, 512) x (512, 256) in 64 tiles of 32 x 32
    sizes = {"a": 256, "b": 512, "c": 256}
    walked = S._gpu_seconds([("a", "b"), ("b", "c")], ("a", "c"), sizes, [(0, 1)], {}, kbest=True)
    assert walked == pytest.approx(_cost.kbest_step_seconds(1, 256, 512, 256, 3 * 256 * 512, False))
    # b: 4096 and a, c: 64: 4 tiles (1024 threads) over sums of 4096 terms: cut along the sum
    sizes = {"a": 64, "b": 4096, "c": 64}
    walked = S._gpu_seconds([("a", "b"), ("b", "c")], ("a", "c"), sizes, [(0, 1)], {}, kbest=True)
    assert walked == pytest.approx(_cost.kbest_step_seconds(1, 64, 4096, 64, 2 * 64 * 4096 + 64 * 64, True))
    # into one entry: few threads over a long sum, so the algebra cuts it (priced as its split kernels)
    one = S._gpu_seconds([("b",), ("b",)], (), {"b": 1 << 20}, [(0, 1)], {}, kbest=True)
    assert one == pytest.approx(_cost.kbest_step_seconds(1, 1, 1 << 20, 1, (2 << 20) + 1, True))


def test_workers_hand_back_each_objectives_best():
    inputs, sizes = _regular(40, 1)
    symbol = {v: chr(0x4E00 + v) for v in sizes}
    sym_inputs = [tuple(symbol[x] for x in t) for t in inputs]
    found = _planner.search(
        sym_inputs, (), {symbol[v]: 2 for v in sizes}, target=2**30, max_time=3.0, workers=2,
        objectives=("flops", "combo-64"),
    )  # fmt: skip
    assert 1 <= len(found) <= 2 * _planner._KEEP
    assert all(isinstance(path, list) and path for path, _ in found)
    assert _planner.score("flops", 10.0, 3.0) == 10.0
    assert _planner.score("combo-64", 10.0, 3.0) == 10.0 + 64 * 3.0
    assert _planner.score("combo", 10.0, 3.0) == 10.0 + 64 * 3.0


def test_seconds_rank_takes_the_quickest_predicted_order(monkeypatch):
    inputs, sizes = _regular(30, 2)
    greedy = S.search_path(inputs, (), sizes, "greedy")[0]
    other = S.search_path(inputs, (), sizes, "random-greedy")[0]
    flops = {tuple(p): S.costs(inputs, (), sizes, p, {})[1] for p in (greedy, other)}
    if flops[tuple(greedy)] == flops[tuple(other)]:
        pytest.skip("the two orders cost alike")
    few, many = sorted((greedy, other), key=lambda p: flops[tuple(p)])
    asked = []

    def search(*args, objectives=("flops",), **kw):
        asked.append(tuple(objectives))
        symbols = {lab: S._symbol(i) for i, lab in enumerate(sizes)}
        return [(list(p), []) for p in (few, many)] if symbols else []

    # the model says the order of more multiply-adds is the quicker one (as it does where the fewest stream)
    monkeypatch.setattr(S, "_gpu_seconds", lambda i, o, s, path, sl: -S.costs(i, o, s, path, sl)[1])
    monkeypatch.setattr(_planner, "search", search)
    by_flops = S._search_cotengra(inputs, (), sizes, 2**40, 1.0, None, "flops")[0]
    by_seconds = S._search_cotengra(inputs, (), sizes, 2**40, 1.0, None, "seconds")[0]
    assert S.costs(inputs, (), sizes, by_flops, {})[1] <= flops[tuple(few)]
    assert S.costs(inputs, (), sizes, by_seconds, {})[1] == flops[tuple(many)]
    assert asked == [("flops",), ("flops", S.COMBO)]


def test_the_rankings_are_stored_apart():
    inputs, sizes = _regular(12, 0)
    keys = {r: _plan_store.key(inputs, (), sizes, 2**20, None, r) for r in ("flops", "seconds")}
    assert keys["flops"] == _plan_store.key(inputs, (), sizes, 2**20, None)  # the keys stored before ranks
    assert keys["flops"] != keys["seconds"]
    with pytest.raises(ValueError, match="rank must be one of"):
        E.contraction_plan(inputs, (), sizes, optimize="greedy", rank="fast")


def test_the_executor_ranks_by_seconds_on_a_gpu_and_by_flops_on_the_host(monkeypatch):
    inputs, sizes = _regular(12, 0)
    ranks = []
    real = E.contraction_plan

    def spy(*args, rank="flops", **kw):
        ranks.append(rank)
        return real(*args, rank=rank, **kw)

    monkeypatch.setattr(network, "contraction_plan", spy)  # where Network.plan looks it up
    ops = [np.zeros((2,) * len(t), np.float32) for t in inputs]
    net = E.build_network(inputs, (), ops, "maxplus", E.Algebra)
    net.plan("greedy", (), None, None)
    monkeypatch.setattr(type(net.be), "on_host", property(lambda self: False))
    net.plan("greedy", (), 2**20, None)
    assert ranks == ["flops", "seconds"]
