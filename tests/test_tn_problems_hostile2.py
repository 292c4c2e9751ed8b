"""The second hostile round on ``solve``'s partition function and k cap, and on the inputs properties and
set problems take: an infeasible entry answered -inf, log Z past float64's range from below, log-weights
past float64's range that cancel (log Z finite), beta and k given as NumPy numbers or past float64's
range, the k-best cap of float sizes, NumPy integers naming sets, and a CNF given as a set."""

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
from lazykern.tn import solve, solver
from lazykern.tn.solving import configurations
from lazykern.tn.solving import sizes as solving_sizes
from lazykern.tn.solving.values import k_cap

mpmath = pytest.importorskip("mpmath")


def _vertex_log_z(n: int, edges: list[tuple[int, int]], weights: list, beta, kind: str) -> float:
    """log Z of an independent (``kind`` "IS", goal max) or dominating ("DS", goal min) set, by every
    configuration, the weights taken at their exact values (mpmath at 60 digits)."""
    w = [Fraction(x) for x in weights]
    near = [{v} | {b for a, b in edges if a == v} | {a for a, b in edges if b == v} for v in range(n)]
    scale = Fraction(beta) * (1 if kind == "IS" else -1)
    exponents = []
    for c in itertools.product((0, 1), repeat=n):
        if kind == "IS" and any(c[u] and c[v] for u, v in edges):
            continue
        if kind == "DS" and not all(any(c[u] for u in near[v]) for v in range(n)):
            continue
        exponents.append(scale * sum((w[i] for i in range(n) if c[i]), Fraction(0)))  # exact
    if not exponents:
        return -math.inf
    with mpmath.workdps(60):
        return +mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(x.numerator) / x.denominator) for x in exponents))


def _solved(p, prop):
    """solve's answer and the PartitionFunction warnings it gave."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        answer = solve(p, prop)
    return answer, [str(w.message) for w in record if "PartitionFunction" in str(w.message)]


# --------------------------------------------------------------- 1. infeasible entries --
def test_an_infeasible_entry_of_float_weights_is_minus_infinity():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)  # 1/3 is not a short decimal
        for w in ([1 / 3, 1, 1], [0.5, 1, 1]):
            p = P.Matching((4, [(0, 1), (0, 2), (0, 3)]), weights=w, fixedvertices={(0, 1): 1, (0, 2): 1})
            for beta in (1.0, 0.0, -2.5):
                assert solve(p, Q.PartitionFunction(beta)) == -math.inf
        p = P.Matching((4, [(0, 1), (0, 2), (0, 3)]), weights=[1 / 3, 1, 1], openvertices=[(0, 1), (0, 2)])
        got = solve(p, Q.PartitionFunction(1.0))
    assert got[1, 1] == -math.inf
    assert got[0, 0] == pytest.approx(math.log(1 + math.e), rel=1e-15)  # (0,3) out or in
    assert got[1, 0] == pytest.approx(1 / 3, rel=1e-15) and got[0, 1] == 1.0


# ------------------------------------------------------ 2. log Z past the range below --
@pytest.mark.parametrize("weights", [[1e300, 1e300], [10**300, 10**300]])
def test_log_z_below_minus_float64s_range_is_refused(weights):
    p = P.DominatingSet((2, []), weights=weights)  # both vertices in: log Z = -1e8 * 2e300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        with pytest.raises(ValueError, match="log Z is past float64's range"):
            solve(p, Q.PartitionFunction(1e8))
        assert solve(p, Q.PartitionFunction(1e-300)) == pytest.approx(-2.0, rel=1e-15)


# ------------------------------------------------------------------ 3. beta and k --
def test_beta_is_a_finite_real_number_within_float64s_range():
    assert Q.PartitionFunction(np.float32(0.5)).beta == 0.5
    assert Q.PartitionFunction(np.int64(3)) == Q.PartitionFunction(3)
    assert type(Q.PartitionFunction(np.float64(2.0)).beta) is float
    for bad in (True, np.bool_(False), math.nan, math.inf, -math.inf, 10**400, -(10**400), "1", None):
        with pytest.raises(ValueError, match="beta"):
            Q.PartitionFunction(bad)
    p = P.IndependentSet((2, []), weights=[0, 0])
    assert solve(p, Q.PartitionFunction(10**300)) == math.log(4)  # every size 0: Z = 4 configurations
    assert solve(p, Q.PartitionFunction(np.int64(7))) == math.log(4)
    q = P.IndependentSet((2, []), weights=[1, 2])
    assert solve(q, Q.PartitionFunction(np.float32(0.25))) == pytest.approx(
        float(_vertex_log_z(2, [], [1, 2], 0.25, "IS")), rel=1e-15
    )


def test_k_and_limit_take_numpy_integers():
    p = P.IndependentSet((3, [(0, 1), (1, 2)]))
    assert Q.SizeMax(np.int64(3)) == Q.SizeMax(3) and type(Q.SizeMax(np.int32(2)).k) is int
    assert solve(p, Q.SizeMax(np.int64(3))) == [2, 1, 0]
    assert solve(p, Q.CountingMin(np.uint8(2))) == [(0, 1), (1, 3)]
    assert Q.ConfigsAll(np.int64(10)).limit == 10 and Q.ConfigsMax(np.int64(1), limit=np.int16(4)).limit == 4
    for bad in (np.bool_(True), np.float64(3.0), 0, np.int64(0)):
        with pytest.raises(ValueError, match="k"):
            Q.SizeMax(bad)


# ------------------------------------------- 4. log-weights past the range that cancel --
@pytest.mark.parametrize("weights", [[10**22, -(10**22)], [1e22, -1e22], [10**400, -(10**400)]])
def test_log_weights_past_float64s_range_that_cancel_give_a_finite_log_z(weights):
    p = P.DominatingSet((2, []), weights=weights)  # both vertices in: size 0, Z = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)  # the weights' own warning (summed as floats)
        for beta in (1e300, -1e300, 1.0, 1e-300, 0.0):
            answer, said = _solved(p, Q.PartitionFunction(beta))
            assert answer == 0.0 and not said


def test_exact_sizes_give_log_z_to_float64s_precision_without_a_warning():
    rng = np.random.default_rng(5)
    pools = [[1, 2, -3, 0], [10**15, -3, 7], [1e22, -1e22], [2.0**-1000, 3 * 2.0**-1000], [2**60, -(2**60), 2**20]]
    betas = [5e-324, 1e-200, -1e-17, 0.7, -3.0, 1e15, -1e200, 1e300]
    for trial in range(24):
        n = int(rng.integers(1, 6))
        edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.4]
        pool = pools[trial % len(pools)]
        weights = [pool[int(i)] for i in rng.integers(0, len(pool), n)]
        kind = "IS" if trial % 2 else "DS"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LazykernWarning)
            p = (P.IndependentSet if kind == "IS" else P.DominatingSet)((n, edges), weights=weights)
        for beta in betas:
            want = _vertex_log_z(n, edges, weights, beta, kind)
            if abs(want) > 1.7976931348623157e308:
                with pytest.raises(ValueError, match="log Z is past float64's range"):
                    _solved(p, Q.PartitionFunction(beta))
                continue
            answer, said = _solved(p, Q.PartitionFunction(beta))
            assert not said, (weights, beta, said)
            assert abs(mpmath.mpf(answer) - want) <= 1e-13 * max(1, abs(want)), (kind, edges, weights, beta, answer)


def test_the_precision_warning_says_how_far_off_and_is_honest():
    # 1/3 beside 2^60 in each edge's table: float sums of two tables may round by 2^61 * 2^-53, against
    # a log Z near -2/3 (both 1/3 vertices in)
    weights = [1 / 3, 2.0**60, 1 / 3, 2.0**60]
    p = P.DominatingSet((4, [(0, 1), (2, 3)]), weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        answer, said = _solved(p, Q.PartitionFunction(1.0))
    want = _vertex_log_z(4, [(0, 1), (2, 3)], weights, 1.0, "DS")
    assert said and "may be off by that much" in said[0]
    bound = float(said[0].split("off by up to about ")[1].split(":")[0])
    assert abs(mpmath.mpf(answer) - want) <= bound
    assert bound < 1e4  # a figure of the sums' rounding, not of beta times the sizes (1e18)


# ------------------------------------------------------------ 5. k cap of float sizes --
def test_k_best_of_float_sizes_is_capped_by_the_combinations_that_occur():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        p = P.IndependentSet((9, [(i, i + 1) for i in range(8)]), weights=[1 / 3] * 9)
        tab = solver._tables.build(p, {})
        assert k_cap(tab, 10**9) <= 89  # the path's independent sets, not 2^9
        got = solve(p, Q.SizeMax(10**9))
    assert [Fraction(x).limit_denominator(10) for x in got] == [Fraction(j, 3) for j in (5, 4, 3, 2, 1, 0)]
    assert len(set(got)) == len(got)


def test_the_float_cap_leaves_every_k_best_answer_unchanged(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)
        p = P.IndependentSet((6, [(0, 1), (1, 2), (3, 4)]), weights=[1 / 3, 1 / 7, 1 / 3, 0.1 + 1 / 9, 1 / 3, 2 / 3])
        capped = [solve(p, prop(k)) for prop in (Q.SizeMax, Q.SizeMin, Q.CountingMax) for k in (3, 100, 10**6)]
        for where in (solving_sizes, configurations):  # every module that calls k_cap
            monkeypatch.setattr(where, "k_cap", lambda tab, k: min(k, 64))  # every configuration's own value
        full = [solve(p, prop(k)) for prop in (Q.SizeMax, Q.SizeMin, Q.CountingMax) for k in (3, 100, 10**6)]
    assert capped == full


def test_the_integer_cap_counts_distinct_sums():
    tab = solver._tables.build(P.IndependentSet((4, []), weights=[1, 10, 100, 1000]), {})
    assert k_cap(tab, 10**9) == 16
    tab = solver._tables.build(P.IndependentSet((12, []), weights=[10**6] * 12), {})
    assert k_cap(tab, 10**9) == 13  # 0, 10^6, ..., 12 * 10^6: not the range of 1.2e7
    p = P.IndependentSet((12, []), weights=[10**6] * 12)
    assert solve(p, Q.SizeMin(10**9)) == [j * 10**6 for j in range(13)]


# ----------------------------------------------------------- 6. NumPy names of sets --
@pytest.mark.parametrize("cls", [P.SetPacking, P.SetCovering])
def test_sets_are_named_by_numpy_integers_too(cls):
    plain = solve(cls([[1], [1, 2], [2]], openvertices=[0, 1]), Q.CountingAll())
    numpy = solve(cls([[1], [1, 2], [2]], openvertices=np.array([0, 1])), Q.CountingAll())
    assert plain.tolist() == numpy.tolist()
    fixed = cls([[1], [1, 2], [2]], fixedvertices={np.int64(0): 1, np.uint8(2): 0})
    assert fixed.fixedvertices == {0: 1, 2: 0} or dict(fixed.fixedvertices) == {0: 1, 2: 0}
    assert solve(fixed, Q.CountingAll()) == solve(cls([[1], [1, 2], [2]], fixedvertices={0: 1, 2: 0}), Q.CountingAll())
    for bad in (np.bool_(True), True, np.float64(0.0), np.int64(3)):
        with pytest.raises(ValueError, match="index"):
            cls([[1], [1, 2], [2]], fixedvertices={bad: 1})


# -------------------------------------------------------------- 7. a CNF given as a set --
def test_a_cnf_given_as_a_set_is_refused_whenever_weights_name_its_clauses():
    for weights in ({0: 1, 1: 5}, [1, 5], (1, 5)):
        with pytest.raises(ValueError, match="cnf is a set"):
            P.Satisfiability({(1,), (-1,)}, weights=weights)
        with pytest.raises(ValueError, match="cnf is a set"):
            P.Satisfiability(frozenset({(1,), (-1,)}), weights=weights)
    p = P.Satisfiability({(1,), (-1,)})  # unweighted: every clause weighs 1, whatever the order
    assert solve(p, Q.CountingMax()) == [(1, 2)]
