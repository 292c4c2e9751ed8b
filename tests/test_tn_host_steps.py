"""lazykern.tn._host_steps: a problem's small steps run on the host give the contraction's own numbers.

Each case contracts one network twice in NumPy: as given, and as the shorter network whose leaves include
the host's results (what a GPU solve contracts), in every algebra :func:`_host_steps.runs` takes."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from lazykern.tn import _host_steps, _tables
from lazykern.tn import problems as P
from lazykern.tn._contract import Algebra
from lazykern.tn.algebras import kbest, modular, top2
from lazykern.tn.einsum import contract_network, contraction_plan
from lazykern.tn.solving import values as V


def _network(problem):
    tab = _tables.build(problem, {})
    sizes = {x: tab.flavors for t in tab.labels for x in t}
    plan = contraction_plan(tab.labels, (), sizes, optimize="greedy", memory_limit=2**40, store=False)
    return tab, [tuple(p) for p in plan.path]


def _numbers(out):
    return [np.asarray(x).item() for x in (out if isinstance(out, tuple) else (out,))]


def _both(tab, path, operands, semiring, algebra):
    shorter = _host_steps.first(tab.labels, (), operands, semiring, algebra, path, operands, np.asarray)
    assert shorter is not None, "the plan has small steps over leaves: they run on the host"
    labels, ops, short_path = shorter
    assert len(ops) < len(operands) and len(short_path) < len(path)
    full = contract_network(tab.labels, (), operands, semiring=semiring, optimize=path, algebra=algebra)
    short = contract_network(labels, (), ops, semiring=semiring, optimize=short_path, algebra=algebra)
    return _numbers(full), _numbers(short)


PROBLEMS = {
    "independent set": lambda: P.IndependentSet(nx.random_regular_graph(3, 80, seed=1)),
    "weighted IS": lambda: P.IndependentSet(
        nx.random_regular_graph(3, 80, seed=2), weights=[(i % 5) + 1 for i in range(80)]
    ),
    "max cut": lambda: P.MaxCut(
        nx.random_regular_graph(3, 70, seed=3), weights=[(-1) ** i * (i % 3 + 1) for i in range(105)]
    ),
    "coloring": lambda: P.Coloring(nx.random_regular_graph(3, 40, seed=4), 3),
    # a component the host contracts whole: its result is a scalar (0-d) leaf of the shorter network
    "two components": lambda: P.IndependentSet(
        nx.disjoint_union(nx.random_regular_graph(3, 80, seed=5), nx.cycle_graph(5))
    ),
}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize("largest", [True, False])
def test_values_max_and_min_plus(name, largest):
    tab, path = _network(PROBLEMS[name]())
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=True), largest)
    full, short = _both(tab, path, values, "maxplus" if largest else "minplus", Algebra)
    assert full == short


def _kbest_cases(tab):
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=False), True)
    masks = tab.mask
    return {
        "k=2 values": ([(v,) for v in values], kbest.algebra(2)),
        "k=3 values": ([(v,) for v in values], kbest.algebra(3)),
        "k=2 float32 counts": ([(v, m.astype("f4")) for v, m in zip(values, masks)], kbest.algebra(2, True, floats=4)),
        "k=2 float64 counts": ([(v, m.astype("f8")) for v, m in zip(values, masks)], kbest.algebra(2, True, floats=8)),
        "k=3 int64 counts": ([(v, m.astype("i8")) for v, m in zip(values, masks)], kbest.algebra(3, True)),
        "k=2 prime counts": ([(v, m.astype("i8")) for v, m in zip(values, masks)], kbest.algebra(2, True, 65521)),
        "k=2 prime, reduced": (
            [(v, m.astype("i8")) for v, m in zip(values, masks)],
            kbest.algebra(2, True, 65521, reduced=True),
        ),
    }


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize("case", ["k=2 values", "k=3 values", "k=2 float32 counts", "k=2 float64 counts",
                                  "k=3 int64 counts", "k=2 prime counts", "k=2 prime, reduced"])  # fmt: skip
def test_kbest_values_and_counts(name, case):
    tab, path = _network(PROBLEMS[name]())
    operands, algebra = _kbest_cases(tab)[case]
    full, short = _both(tab, path, operands, "maxplus", algebra)
    assert full == short
    assert any(np.isfinite(v) for v in full[: algebra.k])


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize("floats", [4, 8])
def test_top_two_values_and_counts(name, floats):
    tab, path = _network(PROBLEMS[name]())
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=False), True)
    operands = [(v, m.astype(f"f{floats}")) for v, m in zip(values, tab.mask)]
    full, short = _both(tab, path, operands, "maxplus", top2.algebra(floats))
    assert np.isfinite(full[0]) and full[1] >= 1
    if max(full[1:]) < kbest.FLOAT_EXACT[floats]:  # exact: the same numbers in any order of operations
        assert full == short
    else:  # a count past the floats' exact line stays past it (how a count is refused)
        assert full[0] == short[0] and max(short[1:]) >= kbest.FLOAT_EXACT[floats]


def test_counts_past_a_prime_are_reduced_as_the_device_reduces_them():
    tab, path = _network(PROBLEMS["independent set"]())
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=False), True)
    counts = [np.where(m, 7, 0).astype(np.int64) for m in tab.mask]  # each leaf counts 7: past the prime 5
    full, short = _both(tab, path, list(zip(values, counts)), "maxplus", kbest.algebra(2, True, 5))
    assert full == short


def test_algebras_it_does_not_run_are_left_to_the_contraction():
    tab, path = _network(PROBLEMS["independent set"]())
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=False), True)
    paired = kbest.paired_algebra(2, 65521)
    operands = [(v, m.astype("i8")) for v, m in zip(values, tab.mask)]
    assert _host_steps.first(tab.labels, (), operands, "maxplus", paired, path, operands, np.asarray) is None
    assert not _host_steps.runs(Algebra, "maxmul")


def test_a_label_twice_in_one_operand_takes_its_diagonal():
    rng = np.random.default_rng(5)
    n = 90
    g = nx.random_regular_graph(3, n, seed=6)
    labels = [(a, b) for a, b in g.edges] + [(v, v) for v in range(n)]  # each vertex tensor read on its diagonal
    operands = [rng.integers(-3, 4, (2, 2)).astype(np.float64) for _ in labels]
    sizes = dict.fromkeys(range(n), 2)
    distinct = [tuple(dict.fromkeys(t)) for t in labels]
    path = [tuple(p) for p in contraction_plan(distinct, (), sizes, optimize="greedy", store=False).path]
    shorter = _host_steps.first(labels, (), operands, "maxplus", Algebra, path, operands, np.asarray)
    assert shorter is not None
    full = contract_network(labels, (), operands, semiring="maxplus", optimize=path)
    new_labels, ops, short_path = shorter
    assert len(ops) < len(operands)
    assert contract_network(new_labels, (), ops, semiring="maxplus", optimize=short_path) == full


def test_a_plan_of_only_small_steps_is_left_whole():
    tab, path = _network(P.IndependentSet(nx.petersen_graph()))
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=True), True)
    assert _host_steps.first(tab.labels, (), values, "maxplus", Algebra, path, values, np.asarray) is None


@pytest.mark.parametrize("name", ["independent set", "weighted IS", "two components"])
@pytest.mark.parametrize("moduli", [(65521,), (2097143, 2097131, 65521)], ids=["one prime", "three primes"])
def test_polynomial_evaluations_modulo_primes(name, moduli):
    """A graph polynomial's network: every table a power of its evaluation point modulo each prime, one label
    (the points) in every tensor and the output, as GraphPolynomial contracts it."""
    from lazykern.tn.algebras import polynomial

    tab, _ = _network(PROBLEMS[name]())
    mins = [int(s[m].min()) for m, s in zip(tab.mask, tab.size)]
    exponents = [np.where(m, s - lo, 0) for m, s, lo in zip(tab.mask, tab.size, mins)]
    points = np.arange(1, 6, dtype=np.int64)
    tables = [t for e, m in zip(exponents, tab.mask) for t in polynomial.powers_modulo(e, m, points, moduli)]
    r = len(moduli)
    ops = [tuple(tables[i : i + r]) for i in range(0, len(tables), r)]
    operands = [op[0] for op in ops] if r == 1 else ops
    labels = [(polynomial.POINTS, *t) for t in tab.labels]
    sizes = {x: tab.flavors for t in tab.labels for x in t} | {polynomial.POINTS: len(points)}
    path = [tuple(p) for p in contraction_plan(labels, (polynomial.POINTS,), sizes, optimize="greedy",
                                               memory_limit=2**40, store=False).path]  # fmt: skip
    alg = modular.algebra(*moduli)
    shorter = _host_steps.first(labels, (polynomial.POINTS,), operands, "maxplus", alg, path, operands, np.asarray)
    assert shorter is not None
    new_labels, new_ops, short_path = shorter
    assert len(new_ops) < len(operands)
    full = contract_network(labels, (polynomial.POINTS,), operands, semiring="maxplus", optimize=path, algebra=alg)
    short = contract_network(new_labels, (polynomial.POINTS,), new_ops, semiring="maxplus", optimize=short_path,
                             algebra=alg)  # fmt: skip
    full, short = (x if isinstance(x, tuple) else (x,) for x in (full, short))
    for a, b in zip(full, short):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert any(np.asarray(a).any() for a in full)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_largest_size_beside_the_float_count_of_configurations(name):
    """GraphPolynomial's first pass: the largest size and the float64 sum-product of the masks: equal below
    2^53 (exact), within float64's rounding past it (3-colourings of 40 vertices: 1.2e19)."""
    from lazykern.tn.algebras import floatsum

    tab, path = _network(PROBLEMS[name]())
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=True), True)
    operands = [(v, m.astype(np.float64)) for v, m in zip(values, tab.mask)]
    full, short = _both(tab, path, operands, "maxplus", floatsum.SizeAndCountAlgebra)
    assert full[0] == short[0] and full[1] >= 1
    assert full[1] == short[1] if full[1] < 2**53 else short[1] == pytest.approx(full[1], rel=1e-12)


def test_steps_of_one_form_run_together_and_scalars_stay_arrays(monkeypatch):
    """Ten triangles beside a larger graph: their steps share forms (one product a wave, far fewer products
    than steps), and a component's whole contraction, a scalar, comes back as a 0-d array like any other."""
    from lazykern.tn import _shared

    g = nx.random_regular_graph(3, 80, seed=9)
    for _ in range(10):
        g = nx.disjoint_union(g, nx.cycle_graph(3))
    tab, path = _network(P.IndependentSet(g))
    values = V.size_values(tab, V.value_dtype(tab, tropical_only=True), True)
    calls = []
    made = _shared.values_product

    def counted(semiring):
        product = made(semiring)
        return lambda *a: calls.append(1) or product(*a)

    monkeypatch.setattr(_shared, "values_product", counted)
    labels, ops, short_path = _host_steps.first(tab.labels, (), values, "maxplus", Algebra, path, values, np.asarray)
    shared = len(path) - len(short_path)
    assert 0 < len(calls) < shared / 2
    scalars = [op for op, t in zip(ops, labels) if not t]
    assert scalars and all(isinstance(op, np.ndarray) and op.shape == () for op in scalars)
    full = contract_network(tab.labels, (), values, semiring="maxplus", optimize=path)
    assert contract_network(labels, (), ops, semiring="maxplus", optimize=short_path) == full


def test_a_long_sum_modulo_a_prime_stays_exact():
    """Two operands of 2^11 entries with no label in common, every label summed: one shared step sums 2^22
    products of residues near the prime (2^21), which int64 holds only if each product is reduced first."""
    p = modular.PRIME_BELOW - 9  # 2097143, the largest prime below 2^21
    rng = np.random.default_rng(3)
    a_labels, b_labels = tuple(range(11)), tuple(range(11, 22))
    big = tuple(range(22, 35))
    labels = [a_labels, b_labels, big]
    arrays = [rng.integers(p - 50, p, (2,) * len(t)).astype(np.float64) for t in labels]
    path = [(0, 1), (0, 1)]
    alg = modular.algebra(p)
    shorter = _host_steps.first(labels, big, arrays, "maxplus", alg, path, arrays, np.asarray)
    assert shorter is not None
    new_labels, ops, short_path = shorter
    assert len(ops) == 2 and () in new_labels
    full = contract_network(labels, big, arrays, semiring="maxplus", optimize=path, algebra=alg)
    short = contract_network(new_labels, big, ops, semiring="maxplus", optimize=short_path, algebra=alg)
    assert np.array_equal(np.asarray(full), np.asarray(short))
    a, b = (int(x) for x in (arrays[0].astype(np.int64).sum() % p, arrays[1].astype(np.int64).sum() % p))
    assert int(np.asarray(ops[new_labels.index(())])) == a * b % p
