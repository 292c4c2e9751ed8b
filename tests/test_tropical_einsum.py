"""tropical.einsum and argmax_einsum (CPU path) against the brute-force einsum of the definition."""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazykern import tropical
from lazykern.tn import _cost, _reference_einsum
from lazykern.tn import networks as nw
from lazykern.tn.einsum import argmax_einsum, einsum, parse
from lazykern.tropical import reference

from ._spin_oracles import transfer_matrix

EXAMPLES = int(os.environ.get("LAZYKERN_FUZZ_EXAMPLES", "60"))
DTYPES = ["float32", "float64", "int32", "int64"]


@st.composite
def networks(draw):
    """Random subscripts (repeated labels, outer products, scalars, size-1 axes) and small-integer operands."""
    labels = "abcde"
    sizes = {c: draw(st.integers(1, 3)) for c in labels}
    count = draw(st.integers(1, 4))
    inputs = ["".join(draw(st.lists(st.sampled_from(labels), min_size=0, max_size=4))) for _ in range(count)]
    used = sorted({c for t in inputs for c in t})
    output = "".join(draw(st.permutations(used))[: draw(st.integers(0, len(used)))]) if used else ""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    semiring = draw(st.sampled_from(reference.SEMIRINGS))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    lo, hi = (0, 3) if semiring == "maxmul" else (-9, 9)  # max-times distributes only over nonnegative numbers
    ops = [rng.integers(lo, hi + 1, size=tuple(sizes[c] for c in t)).astype(dtype) for t in inputs]
    return inputs, output, ops, semiring


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks(), st.sampled_from(["auto", "greedy", "optimal"]))
def test_einsum_matches_the_definition(net, optimize):
    inputs, output, ops, semiring = net
    subscripts = ",".join(inputs) + "->" + output
    got = einsum(subscripts, *ops, semiring=semiring, optimize=optimize)
    want = _reference_einsum.einsum_brute(inputs, output, ops, semiring)
    assert got.dtype == ops[0].dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks(), st.sampled_from([False, True, 3]))
def test_argmax_assignment_reaches_the_optimum(net, checkpoint):
    inputs, _, ops, semiring = net
    subscripts = ",".join(inputs) + "->"
    value, assignment = argmax_einsum(subscripts, *ops, semiring=semiring, checkpoint=checkpoint)
    assert value == _reference_einsum.einsum_brute(inputs, "", ops, semiring)
    total = None
    for term, op in zip(inputs, ops):
        x = op[tuple(assignment[c] for c in term)]
        total = x if total is None else reference.product(semiring, total, x)
    assert total == value
    assert set(assignment) == {c for t in inputs for c in t}


def test_einsum_float_values_and_matrix_product():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((5, 7)), rng.random((7, 3))
    for semiring in reference.SEMIRINGS:
        np.testing.assert_allclose(einsum("ik,kj->ij", A, B, semiring=semiring), reference.matmul(A, B, semiring))
        np.testing.assert_allclose(einsum("ik,kj->ji", A, B, semiring=semiring), reference.matmul(A, B, semiring).T)
    assert tropical.einsum is einsum and tropical.argmax_einsum is argmax_einsum


def test_nan_and_infinities_follow_the_matmul_rules():
    A = np.array([[np.nan, 1.0, -np.inf], [np.nan, np.nan, np.nan]])
    B = np.array([[5.0], [0.0], [np.inf]])
    for semiring in reference.SEMIRINGS:
        np.testing.assert_array_equal(einsum("ik,kj->ij", A, B, semiring=semiring), reference.matmul(A, B, semiring))


def test_integer_saturation_matches_matmul():
    info = np.iinfo(np.int32)
    A = np.array([[info.max - 1, 3], [info.min, 2]], np.int32)
    B = np.array([[5, info.max], [1, 2]], np.int32)
    for semiring in reference.SEMIRINGS:
        np.testing.assert_array_equal(einsum("ik,kj->ij", A, B, semiring=semiring), reference.matmul(A, B, semiring))


def test_batched_views_need_no_copies_and_large_k_chunks():
    rng = np.random.default_rng(1)
    A = rng.integers(-50, 50, (4, 3, 300)).astype(np.float32)
    B = rng.integers(-50, 50, (300, 4, 2)).astype(np.float32)
    got = einsum("bik,kbj->bij", A, B)
    want = np.stack([reference.matmul(A[b], B[:, b, :]) for b in range(4)])
    np.testing.assert_array_equal(got, want)
    (C, K) = _reference_einsum.bmm(A[:, :, :], np.ascontiguousarray(B.transpose(1, 0, 2)), argmax=True)
    np.testing.assert_array_equal(K, np.stack([reference.matmul(A[b], B[:, b], argmax=True)[1] for b in range(4)]))


def test_slices_give_the_same_contraction():
    rng = np.random.default_rng(2)
    X, Y, Z = (rng.integers(-5, 5, s).astype(float) for s in ((3, 4, 5), (5, 4, 2), (2, 3)))
    plain = einsum("ijk,kjl,li->j", X, Y, Z)
    np.testing.assert_array_equal(einsum("ijk,kjl,li->j", X, Y, Z, slices="kl"), plain)
    value, a = argmax_einsum("ijk,kjl,li->", X, Y, Z, slices="k", checkpoint=True)
    assert value == plain.max() == X[a["i"], a["j"], a["k"]] + Y[a["k"], a["j"], a["l"]] + Z[a["l"], a["i"]]
    with pytest.raises(ValueError, match="output label"):
        einsum("ijk,kjl,li->j", X, Y, Z, slices="j")


def test_argmax_at_an_output_entry():
    A = np.array([[0.0, 5.0], [2.0, 1.0]])
    value, a = argmax_einsum("ij->i", A, at=(1,))
    assert value == 2.0 and a == {"i": 1, "j": 0}
    with pytest.raises(ValueError, match="at="):
        argmax_einsum("ij->i", A)


def test_explicit_path_and_cotengra():
    rng = np.random.default_rng(3)
    ops = [rng.integers(-5, 5, (3, 3)).astype(float) for _ in range(4)]
    eq = "ab,bc,cd,da->"
    want = _reference_einsum.einsum_brute(["ab", "bc", "cd", "da"], "", ops)
    assert einsum(eq, *ops, optimize=[(0, 1), (0, 1), (0, 1)]) == want
    assert einsum(eq, *ops, optimize=[(0, 1, 2, 3)]) == want
    cotengra = pytest.importorskip("cotengra")
    opt = cotengra.HyperOptimizer(max_repeats=4, progbar=False)
    assert einsum(eq, *ops, optimize=opt) == want
    assert einsum(eq, *ops, optimize="cotengra", memory_limit=4, max_time=0.5) == want  # sliced to 4 entries


def test_cotengra_missing_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cotengra", None)
    ops = [np.eye(2), np.eye(2), np.eye(2)]
    with pytest.raises(ImportError, match=r"cotengra.*pip install 'lazykern\[tn\]'"):
        einsum("ab,bc,ca->", *ops, optimize="cotengra")


def test_parse_and_input_errors():
    assert parse("ij,jk", 2) == ([("i", "j"), ("j", "k")], ("i", "k"))
    assert parse("ii", 1) == ([("i", "i")], ())
    A = np.zeros((2, 3))
    with pytest.raises(ValueError, match="ellipsis"):
        einsum("...i->i", A)
    with pytest.raises(ValueError, match="name 2 operands"):
        einsum("ij,jk->ik", A)
    with pytest.raises(ValueError, match="label 'j' has size 3"):
        einsum("ij,jk->ik", A, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="in no operand"):
        einsum("ij->k", A)
    with pytest.raises(TypeError, match="one dtype"):
        einsum("ij,jk->ik", A, np.zeros((3, 2), np.float32))
    with pytest.raises(TypeError, match="float32, float64, int32 and int64"):
        einsum("ij->", A.astype(np.int8))
    with pytest.raises(ValueError, match="3 axes"):
        einsum("ij->", np.zeros((1, 1, 1)))
    with pytest.raises(TypeError, match="must be NumPy"):
        einsum("i->", [1.0, 2.0])


def test_every_opt_einsum_symbol_is_a_label():
    """A network of more than a few hundred axes is written with opt_einsum.get_symbol, which
    gives non-letters ('×', '÷', ...) too; the 32x32 spin glass of notebook 04 needs them."""
    from opt_einsum import get_symbol

    symbols = [get_symbol(i) for i in range(3000)]
    assert not all(c.isalpha() for c in symbols)  # the case that broke: '×' (i = 267) is not a letter
    chain = ",".join(a + b for a, b in zip(symbols, symbols[1:])) + "->"
    inputs, output = parse(chain, len(symbols) - 1)
    assert inputs == [(a, b) for a, b in zip(symbols, symbols[1:])] and output == ()
    ops = [np.array([[0.0, 1.0], [2.0, -1.0]])] * 3
    eq = "×÷,÷a,a×->"
    assert float(einsum(eq, *ops)) == float(_reference_einsum.einsum_brute(["×÷", "÷a", "a×"], "", ops))
    for bad in ("i-,jk", "i>,jk", "i j,\tk"):
        with pytest.raises(ValueError, match="cannot be an axis label"):
            parse(bad, 2)


def test_slices_reuse_the_steps_no_sliced_label_reaches(monkeypatch):
    from lazykern.tn.contraction.network import Network

    rng = np.random.default_rng(4)
    ops = [rng.integers(-5, 5, (2, 2)).astype(float) for _ in range(6)]
    eq = "ab,bc,cd,de,ef,fa->"
    want = _reference_einsum.einsum_brute(eq[:-2].split(","), "", ops)
    calls, per_slice = [], []
    real_bmm, real_run = _reference_einsum.bmm, Network.run
    monkeypatch.setattr(_reference_einsum, "bmm", lambda *a, **k: calls.append(1) or real_bmm(*a, **k))

    def run(self, *a, **k):
        before = len(calls)
        out = real_run(self, *a, **k)
        per_slice.append(len(calls) - before)
        return out

    monkeypatch.setattr(Network, "run", run)
    # cd,de -> ce and ef,ce -> cf carry no "a": contracted in the first slice only
    assert einsum(eq, *ops, optimize=[(2, 3), (2, 4), (0, 1), (0, 1), (0, 1)], slices="a") == want
    assert per_slice == [per_slice[0], per_slice[0] - 2]


def test_contraction_plan_costs_and_reuse():
    """Planned once, run as optimize=; the cost counts the steps every slice shares once."""
    rng = np.random.default_rng(4)
    ops = [rng.integers(-5, 5, (2, 2)).astype(float) for _ in range(6)]
    inputs = ["ab", "bc", "cd", "de", "ef", "fa"]
    path = [(2, 3), (2, 4), (0, 1), (0, 1), (0, 1)]
    plan = tropical.contraction_plan(inputs, "", dict.fromkeys("abcdef", 2), optimize=path, slices="a")
    # cd,de (8) and ef,ce (8) once; ab,bc (4), fa,cf (4) and ac,ac (2) in each of the 2 slices
    assert (plan.nslices, plan.largest, plan.flops) == (2, 4, 8 + 8 + 2 * (4 + 4 + 2))
    want = _reference_einsum.einsum_brute(inputs, "", ops)
    assert einsum(",".join(inputs) + "->", *ops, optimize=plan) == want
    assert argmax_einsum(",".join(inputs) + "->", *ops, optimize=plan)[0] == want
    with pytest.raises(ValueError, match="give its slices to contraction_plan"):
        einsum(",".join(inputs) + "->", *ops, optimize=plan, slices="b")
    with pytest.raises(ValueError, match="no operand carries"):
        einsum("bc,cd->", *ops[1:3], optimize=plan)
    with pytest.raises(ValueError, match="output label"):
        tropical.contraction_plan(inputs, "a", dict.fromkeys("abcdef", 2), slices="a")


def test_slices_queue_without_reading_back_or_planning_again(monkeypatch):
    """With a plan, no slice searches an order again, and no value is read back (a read waits
    for the GPU) before every slice is queued."""
    from lazykern.tn import _backend
    from lazykern.tn.contraction import plan as plan_module
    from lazykern.tn.contraction.network import Network

    rng = np.random.default_rng(6)
    ops = [rng.integers(-5, 5, (2, 2)).astype(float) for _ in range(6)]
    inputs = ["ab", "bc", "cd", "de", "ef", "fa"]
    plan = tropical.contraction_plan(inputs, "", dict.fromkeys("abcdef", 2), optimize="greedy", slices="ac")
    events: list[str] = []
    real_item, real_run = _backend.Backend.item, Network.run
    monkeypatch.setattr(_backend.Backend, "item", lambda *a: events.append("read") or real_item(*a))
    monkeypatch.setattr(Network, "run", lambda *a, **k: events.append("run") or real_run(*a, **k))
    monkeypatch.setattr(plan_module, "search_path", lambda *a: pytest.fail("searched an order again"))
    want = _reference_einsum.einsum_brute(inputs, "", ops)
    assert einsum(",".join(inputs) + "->", *ops, optimize=plan) == want
    assert events == ["run"] * 4
    events.clear()
    assert argmax_einsum(",".join(inputs) + "->", *ops, optimize=plan)[0] == want
    assert events[:9] == ["run"] * 4 + ["read"] * 4 + ["run"]  # then the best slice again, keeping argmax


@contextlib.contextmanager
def device_route():
    """The GPU route (every step through tropical.bmm, which holds its operands to the kernels'
    layout rule on the host too, and argmax pairs) run on the host: a backend that is not
    NumPy's, over NumPy arrays, so tropical.bmm computes with its reference."""
    from lazykern.tn import _backend
    from lazykern.tn.contraction import operands, ship

    def stand_in(x):
        return _backend.Backend("cupy", np), np.asarray(x)

    # where a network's operands are wrapped: built here, or rebuilt from a shipped one
    with mock.patch.object(operands, "backend_of", stand_in), mock.patch.object(ship, "backend_of", stand_in):
        yield


def test_device_route_through_tropical_bmm():
    rng = np.random.default_rng(5)
    cases = [
        ("ijk,kjl,li->j", [(3, 4, 5), (5, 4, 2), (2, 3)]),
        ("ii,i,->i", [(4, 4), (4,), ()]),
        ("bik,kbj->jib", [(2, 3, 4), (4, 2, 3)]),
        ("bik,jkb->bij", [(2, 3, 4), (3, 4, 2)]),  # B as (b, k, j) is a view no kernel reads: copied
    ]
    for subscripts, shapes in cases:
        ops = [rng.integers(-9, 9, s).astype(np.float32) for s in shapes]
        inputs, output = parse(subscripts, len(ops))
        want = _reference_einsum.einsum_brute(["".join(t) for t in inputs], "".join(output), ops)
        with device_route():
            np.testing.assert_array_equal(einsum(subscripts, *ops), want)
            value, a = argmax_einsum(subscripts.split("->")[0] + "->", *ops, checkpoint=2)
        total = sum(op[tuple(a[c] for c in t)] for t, op in zip(inputs, ops))
        assert value == total == want.max()


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks(), st.sampled_from(["auto", "greedy"]), st.sampled_from([False, True]))
def test_device_route_reads_every_operand_in_place(net, optimize, checkpoint):
    """Random subscripts through the GPU route: no pairwise step hands tropical.bmm an operand
    whose strides the kernels cannot read (it raises ValueError on the host as on the GPU)."""
    inputs, output, ops, semiring = net
    with device_route():
        got = einsum(",".join(inputs) + "->" + output, *ops, semiring=semiring, optimize=optimize)
        value, _ = argmax_einsum(",".join(inputs) + "->", *ops, semiring=semiring, checkpoint=checkpoint)
    np.testing.assert_array_equal(got, _reference_einsum.einsum_brute(inputs, output, ops, semiring))
    assert value == _reference_einsum.einsum_brute(inputs, "", ops, semiring)


def test_slice_ranges_add_up_to_the_whole():
    """The slice loop's seam: any split of the slices into ranges, each contracted alone and the
    results added, gives the whole contraction (what multi-GPU or Dask workers would do)."""
    import importlib

    from lazykern.tn import networks as nw
    from lazykern.tn._contract import Term
    from lazykern.tn.contraction.network import Network

    einsum_module = importlib.import_module("lazykern.tn.einsum")
    sg = nw.square_lattice(4, seed=4)
    labels, tensors = sg.network()
    plan = einsum_module.contraction_plan(
        labels, (), dict.fromkeys(range(sg.n), 2), optimize="greedy", slices=(1, 6, 9)
    )
    net = Network.build(labels, (), tensors, "maxplus", einsum_module.Algebra)
    whole = net.finish(einsum_module.contract_slices(net, plan, 0, plan.nslices, {}))
    parts = [einsum_module.contract_slices(net, plan, a, b, None) for a, b in ((0, 3), (3, 4), (4, 8))]
    total = parts[0]
    for p in parts[1:]:
        total = Term(net.alg.add(total.parts, p.parts), p.labels)
    assert net.finish(total) == whole == -nw.ground_state_energy(sg)
    with pytest.raises(ValueError, match="hold none"):
        einsum_module.contract_slices(net, plan, 8, 8, None)


def _recounted(monkeypatch) -> list[int]:
    """[steps run by the forward contraction, steps the backtracking recomputed]."""
    from lazykern.tn.contraction import argmax, executor

    counts = [0, 0]
    phase = [0]
    for name in ("contract", "reduce"):  # the run's steps and the backtracking's recomputed ones
        real = getattr(executor, name)

        def counted(*args, real=real):
            counts[phase[0]] += 1
            return real(*args)

        monkeypatch.setattr(executor, name, counted)
    backtrack = argmax._backtrack

    def marked(*args):
        phase[0] = 1
        try:
            return backtrack(*args)
        finally:
            phase[0] = 0

    monkeypatch.setattr(argmax, "_backtrack", marked)
    return counts


@pytest.mark.parametrize("budget", [0, 2**7, 2**11, float("inf")])
@pytest.mark.parametrize("checkpoints", [True, False])
def test_backtracking_by_segments_reaches_the_ground_state_with_any_budget(monkeypatch, budget, checkpoints):
    """Segments bounded by a few bytes (one step each) or by nothing, with and without checkpoints:
    the configuration's energy is the transfer matrix's, and each step is recomputed about once."""
    from lazykern.tn.contraction.network import Network

    monkeypatch.setattr(Network, "segment_bytes", lambda self, *args: budget)
    if not checkpoints:
        monkeypatch.setattr(Network, "checkpoints", lambda self, *args: frozenset())
    counts = _recounted(monkeypatch)
    for L, J, field in ((8, "gaussian", 0.3), (9, "pm1", 0.0)):
        sg = nw.square_lattice(L, seed=L, J=J, field=field)
        E0, _ = transfer_matrix(sg, L)
        counts[:] = [0, 0]
        E, spins = nw.ground_state(sg, checkpoint=True)  # no argmax kept: every step is backtracked by segments
        assert E == pytest.approx(E0, abs=1e-9) and sg.energy(spins) == pytest.approx(E0, abs=1e-9)
        if budget == float("inf") and checkpoints:
            assert counts[1] <= 1.2 * counts[0], counts  # once each (the quadratic walk redid ~L^2/2 times more)


def test_checkpoints_take_what_the_free_memory_leaves(monkeypatch):
    einsum_module = importlib.import_module("lazykern.tn.einsum")
    sg = nw.square_lattice(8, seed=3)
    labels, tensors = sg.network()
    plan = nw.plan(sg, memory_limit=2**20)
    net = einsum_module.build_network(labels, (), tensors, "maxplus", einsum_module.Algebra)
    steps = einsum_module.plan_steps(labels, (), net.sizes, plan.path, plan.sliced)
    candidates = [n for n, s in enumerate(steps[:-1]) if s.result > 1]
    save = net.checkpoints(plan, -1, None)  # the host: about sqrt of the recomputed steps
    assert len(save) == math.isqrt(len(candidates)) and save <= set(candidates)
    peak = net.argmax_peak(plan, -1)  # the run's and its backtracking's, by the checkpoints kept
    alone = peak(())
    assert peak(save) > alone and peak(save) >= net.peak(plan, -1, save=save)  # the checkpoints are counted
    for free in (math.ceil(alone * _cost.POOL_MARGIN), math.ceil(peak(save) * _cost.POOL_MARGIN) - 1):
        some = net.checkpoints(plan, -1, free)  # fewer, and what they add to the peak fits
        assert len(some) < len(save) and peak(some) * _cost.POOL_MARGIN <= free
    assert net.segment_bytes(plan, -1, save, None) == math.inf
    free = int(peak(save) * _cost.POOL_MARGIN) + 4096
    assert net.segment_bytes(plan, -1, save, free) == pytest.approx(4096 / _cost.POOL_MARGIN, abs=1)


@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_the_one_chunk_product_without_argmax_gives_the_chunked_walks_values(semiring, dtype):
    rng = np.random.default_rng(7)
    A = rng.integers(-3, 4, (3, 4, 5)).astype(dtype)
    B = rng.integers(-3, 4, (1, 5, 2)).astype(dtype)
    if dtype == np.float32:
        A[0, 0, :] = np.nan  # NaN never wins: a row of them gives the semiring zero
        A[1, 1, 2], B[0, 3, 1] = np.inf, -np.inf
    else:
        A[2, 0, 0], B[0, 0, 1] = np.iinfo(dtype).max, np.iinfo(dtype).min  # the products saturate
    values, _ = _reference_einsum.bmm(A, B, semiring, argmax=True)  # the accumulating walk
    np.testing.assert_array_equal(_reference_einsum.bmm(A, B, semiring), values)


def test_an_explicit_path_is_costed_once(monkeypatch):
    """contraction_plan keeps the plan of an explicit path: the same call gives the same plan without
    walking the path again; another memory limit or path is planned afresh, and equals a fresh plan."""
    from lazykern.tn.contraction import plan as module  # where contraction_plan looks its helpers up

    sizes = dict(a=2, b=3, c=4, d=5)
    inputs, path = ["ab", "bc", "cd"], [(1, 2), (0, 1)]
    first = module.contraction_plan(inputs, "", sizes, optimize=path)
    walks = []
    real = module.costs
    monkeypatch.setattr(module, "costs", lambda *a: walks.append(1) or real(*a))
    assert module.contraction_plan(inputs, "", sizes, optimize=list(path)) is first and walks == []
    sliced = module.contraction_plan(inputs, "", sizes, optimize=path, memory_limit=2)
    assert walks and sliced.sliced and sliced is not first
    monkeypatch.setattr(module, "_plans_kept", {})
    assert module.contraction_plan(inputs, "", sizes, optimize=path) == first
