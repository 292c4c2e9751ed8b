"""Problems whose sizes are huge, cancel, or sit far from 0 (issue 47, session 61's hostile round): fixed
and open vertices over weights past int64, a polynomial whose lowest power is huge, the partition function
with exact offsets (its log-weights never hold a large size), decimals too fine for their magnitude."""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from lazykern.errors import LazykernWarning
from lazykern.tn import problems as P
from lazykern.tn import properties as Q
from lazykern.tn import solve
from tests._gtn_brute import Brute


def _log_partition(problem, beta):
    """log sum exp(+-beta * size) over the feasible configurations, with the exact best size taken out
    first (each gap an exact Fraction): the reference the float log-space contraction missed by 1e-4."""
    sign = 1 if problem.goal == "max" else -1
    sizes = []
    for config in itertools.product(range(problem.num_flavors), repeat=problem.num_variables):
        if all(config[v] == f for v, f in problem.fixedvertices.items()) and problem.is_feasible(config):
            sizes.append(Fraction(problem.size(config)) * sign)
    if not sizes:
        return -math.inf
    logs = [Fraction(beta) * s for s in sizes]
    top = max(logs)
    return float(top) + math.log(math.fsum(math.exp(float(v - top)) for v in logs))


def test_weights_past_int64_with_fixed_or_open_vertices():
    fixed = P.IndependentSet((2, [(0, 1)]), weights=[2**62, 2**62], fixedvertices={0: 0})
    assert solve(fixed, Q.CountingAll()) == 2
    with pytest.raises(ValueError, match="past what this property holds exactly"):
        solve(fixed, Q.SizeMax(k=2))
    opened = P.IndependentSet((2, [(0, 1)]), weights=[2**62, 2**62], openvertices=[0])
    assert solve(opened, Q.CountingAll()).tolist() == [2, 1]


def test_a_polynomial_whose_lowest_power_is_huge_asks_for_laurent():
    p = P.DominatingSet((1, []), weights=[2**40])
    assert solve(p, Q.GraphPolynomial(laurent=True)) == (2**40, [1])
    with pytest.raises(ValueError, match="laurent=True"):
        solve(p, Q.GraphPolynomial())


@pytest.mark.parametrize("beta", [1.0, 0.37, -0.7, 0.0])
def test_the_partition_function_of_cancelling_large_weights_is_exact_to_its_precision(beta):
    cases = [
        P.DominatingSet((3, [(0, 2)]), weights=[-(2**40), 2**40, 1]),
        P.IndependentSet((4, [(0, 1), (1, 2), (2, 3)]), weights=[2**45 + 1, -(2**45), 3, 2**44]),
        P.MaxCut((4, [(0, 1), (1, 2), (2, 3), (0, 3)]), weights=[2**50, -(2**50) + 1, 7, -3]),
        P.SpinGlass((3, [(0, 1), (0, 2), (1, 2)]), J=[2**51 + 1, 1, -(2**51)], fixedvertices={1: 0}),
        P.IndependentSet((3, [(0, 1)]), weights=[0.1, 0.2, 12345678.9]),  # decimals: whole units of 1/10
    ]
    for p in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("error", LazykernWarning)
            got = solve(p, Q.PartitionFunction(beta=beta))
        assert got == pytest.approx(_log_partition(p, beta), rel=1e-12, abs=1e-12), p
        with warnings.catch_warnings():  # sliced: slices whose best sizes lie 2^40 apart, added exactly
            warnings.simplefilter("ignore", LazykernWarning)
            sliced = solve(p, Q.PartitionFunction(beta=beta), memory_limit=1)
        assert sliced == pytest.approx(_log_partition(p, beta), rel=1e-12, abs=1e-12), p


def test_the_partition_function_agrees_with_brute_force_on_random_instances():
    rng = np.random.default_rng(61)
    for trial in range(30):
        n = int(rng.integers(1, 7))
        edges = [e for e in itertools.combinations(range(n), 2) if rng.random() < 0.5]
        offset = int(rng.choice([0, 2**30, -(2**40)]))
        if trial % 2:
            p = P.IndependentSet((n, edges), weights=[offset + int(w) for w in rng.integers(-5, 6, n)])
        else:
            p = P.MaxCut((n, edges), weights=[offset + int(w) for w in rng.integers(-5, 6, len(edges))] or None)
        beta = float(rng.choice([0.5, -1.3, 2.0]))
        assert solve(p, Q.PartitionFunction(beta=beta)) == pytest.approx(_log_partition(p, beta), rel=1e-12, abs=1e-12)
        with warnings.catch_warnings():  # sliced to fit 2 entries: the slices' partial sums added (add)
            warnings.simplefilter("ignore", LazykernWarning)
            sliced = solve(p, Q.PartitionFunction(beta=beta), memory_limit=2)
        assert sliced == pytest.approx(_log_partition(p, beta), rel=1e-12, abs=1e-12)
        b = Brute(p)
        assert solve(p, Q.PartitionFunction(beta=beta)) == pytest.approx(b.log_partition(beta), rel=1e-6, abs=1e-6)


def test_a_partition_function_past_2_53_says_how_far_off_it_may_be():
    p = P.SpinGlass((3, [(0, 1), (0, 2), (1, 2)]), J=[2**61 + 1, 1, -(2**61)], fixedvertices={1: 0, 2: 0})
    with pytest.warns(LazykernWarning, match="may be off by that much"):
        solve(p, Q.PartitionFunction(beta=1.0))


def test_decimals_too_fine_for_their_magnitude_are_summed_as_floats_with_a_warning():
    p = P.SpinGlass((2, [(0, 1), (0,)]), J=[-(2**61), -(2**61)], h=[2.25, 0.2])  # floats: 2^61 beside 0.05
    best = Brute(p).size_min(1)[0]
    for prop in (Q.SizeMin(k=2), Q.ConfigsMin(k=2), Q.SizeMin(), Q.SingleConfigMin()):
        with pytest.warns(LazykernWarning, match="summed in float64 instead|rounded to whole multiples") as record:
            got = solve(p, prop)
        assert len([w for w in record if issubclass(w.category, LazykernWarning)]) == 1
        first = got[0][0] if isinstance(prop, Q.ConfigsMin) else got[0]
        assert first == pytest.approx(best, rel=1e-15)  # the next sizes (-2.05, 2.45) round away at 2^62
    ok = P.SpinGlass((2, [(0, 1), (0,)]), J=[-(2**40), -(2**40)], h=[2.25, 0.2])  # exact: units of 1/20
    assert solve(ok, Q.SizeMin(k=2)) == Brute(ok).size_min(2)


def test_the_scaled_sum_keeps_the_larger_best_and_its_products_exact():
    from lazykern.tn._backend import Backend
    from lazykern.tn.algebras import scaledsum

    alg = scaledsum.algebra(1.0)("maxplus", Backend("numpy", np))
    big = float(2**40)
    s, logw = alg.add((np.array([0.0]), np.array([0.0])), (np.array([big]), np.array([0.0])))
    assert s.tolist() == [big] and logw.tolist() == [0.0]  # exp(2^40) + exp(0): the best kept, e^-2^40 gone
    # A (1 x 2) times B (2 x 1): t = 2^40 + (-2^40) at k = 0 and 0 + 1 at k = 1: the best is 1, and the
    # k = 0 term, 1 below it, adds exp(-1): l = log(1 + e^-1), no cancellation of 2^40's
    A = (np.array([[[big, 0.0]]]), np.zeros((1, 1, 2)))
    B = (np.array([[[-big], [1.0]]]), np.zeros((1, 2, 1)))
    (s, logw), _ = alg.bmm(A, B, False)
    assert s.item() == 1.0 and logw.item() == pytest.approx(math.log1p(math.exp(-1.0)), rel=1e-15)
    forbidden = (np.array([[[-np.inf, -np.inf]]]), np.full((1, 1, 2), -np.inf))
    (s, logw), _ = alg.bmm(forbidden, B, False)
    assert s.item() == -np.inf and logw.item() == -np.inf


def test_an_open_entry_with_no_feasible_configuration_is_none_for_single_config():
    p = P.IndependentSet((2, [(0, 1)]), openvertices=[0], fixedvertices={1: 1})
    assert solve(p, Q.SizeMax()).tolist() == [[1], []]
    (size, config), nothing = solve(p, Q.SingleConfigMax())
    assert size == 1 and config.tolist() == [0, 1] and nothing is None
    with pytest.raises(ValueError, match="no feasible configuration"):  # no open vertex: nothing to answer
        solve(P.IndependentSet((2, [(0, 1)]), fixedvertices={0: 1, 1: 1}), Q.SingleConfigMax())
