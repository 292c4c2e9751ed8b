"""The energy's boundary held in one buffer (lazykern/tn/_arena.py): bit-addressed steps that grow, shrink
or keep the boundary written over the entries they read; the memory model that follows the executor's
rules; the planner taking it where two boundaries do not fit."""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from lazykern.errors import DeviceMemoryError
from lazykern.tn import _arena, _arena_kernels, _backend, _contract, _cost, _reference_einsum, _spread, orders
from lazykern.tn import networks as nw
from lazykern.tn.contraction import network
from lazykern.tn.contraction.network import Network
from lazykern.tn.spinglass import planning

from .test_tropical_einsum import device_route  # the GPU route on the host

E = importlib.import_module("lazykern.tn.einsum")  # the package's einsum is the function
ROUTE = _backend.Backend("cupy", np)


def _want(xv, x_labels, yv, y_labels, out, semiring):
    """X (x) Y by brute force, in ``out``'s axis order."""
    sym = {lab: chr(ord("a") + i) for i, lab in enumerate(dict.fromkeys([*x_labels, *y_labels]))}
    spec = ["".join(sym[x] for x in x_labels), "".join(sym[x] for x in y_labels)]
    return _reference_einsum.einsum_brute(spec, "".join(sym[x] for x in out), [xv, yv], semiring)


# (labels of X, summed out, batch, new): same size, growing, shrinking, none summed, none new
CASES = [(7, 2, 1, 2), (7, 1, 2, 3), (8, 3, 1, 1), (6, 0, 2, 2), (7, 2, 2, 0), (9, 4, 1, 4), (6, 1, 0, 4)]


def _case(n, con, batch, right, seed):
    rng = np.random.default_rng(seed)
    x_labels = [int(x) for x in rng.permutation(n)]
    shared = [int(x) for x in rng.choice(x_labels, size=con + batch, replace=False)]
    y_labels = shared + [100 + i for i in range(right)]
    y_labels = [y_labels[i] for i in rng.permutation(len(y_labels))]
    keep = set(x_labels) - set(shared[:con]) | set(shared[con:]) | {100 + i for i in range(right)}
    xv = rng.integers(-3, 4, (2,) * n).astype(np.float32)
    yv = rng.integers(-3, 4, (2,) * len(y_labels)).astype(np.float32)
    return rng, x_labels, y_labels, keep, xv, yv


def _step(xp, be, n, con, batch, right, semiring, inside, seed=0):
    """One step through the arena: X held in it at random bits with free bits between (``inside``), or a
    C-contiguous X elsewhere whose result the free arena takes; the result against brute force."""
    rng, x_labels, y_labels, keep, xv, yv = _case(n, con, batch, right, seed)
    bits = n + right + 2
    arena = _arena.Arena(bits)
    if inside:
        where = [int(p) for p in rng.choice(bits, size=n, replace=False)]
        (X,) = arena.view(be, (xp.asarray(xv),), where)
        X[...] = xp.asarray(xv)
        arena.held = True
    else:
        X = xp.asarray(xv.copy())
    alg = _contract.Algebra(semiring, be)
    alg.rank = {lab: i for i, lab in enumerate(sorted(set(x_labels) | set(y_labels)))}
    alg.arena = arena
    with mock.patch.object(_contract, "STRIDED_MIN", 0):
        term, choice = _contract.contract(
            alg, _contract.Term((X,), tuple(x_labels)), _contract.Term((xp.asarray(yv),), tuple(y_labels)), keep, False,
            (True, False),
        )  # fmt: skip
    got = term.parts[0]
    assert arena.held and _arena._address(be, got) == _arena._address(be, arena.buffer)  # the result is in the arena
    assert set(choice.labels) == set(x_labels) & set(y_labels) - keep
    got = np.asarray(got.get() if hasattr(got, "get") else got)
    np.testing.assert_array_equal(got, _want(xv, x_labels, yv, y_labels, list(term.labels), semiring))
    return term


@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("inside", [True, False])
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_an_arena_step_is_the_product_whether_it_grows_shrinks_or_keeps_the_boundary(
    n, con, batch, right, inside, semiring
):
    """The kernel's addressing (in NumPy, as the GPU route on the host runs it): written over X held at
    scattered bits, or into the free arena from an X elsewhere, every result is the product's."""
    _step(np, ROUTE, n, con, batch, right, semiring, inside)


def test_the_layout_keeps_rows_in_place_and_refuses_what_the_kernel_cannot_take():
    lay = _arena.layout([0, 1, 2, 3], [5, 0, 3, 1], [1, 2, 9, 8], {0, 2, 9, 8}, bits=6, inside=True)
    assert lay["con"] == [0] and lay["right_pos"] == [0, 2]  # the summed-out bit first, then the lowest free
    assert dict(zip(lay["out"], lay["out_pos"]))[0] == 5 and lay["rows"] == 4  # labels 0, 3 stay: row bits
    assert lay["batch_in"] == lay["batch_out"] == [3] and lay["holes_in"] == lay["holes_out"] == [0, 2, 3, 4]
    assert _arena.layout([0, 1, 2, 3], [5, 0, 3, 1], [1, 2, 9, 8], {0, 2, 9, 8}, bits=4, inside=True) is None  # full
    assert _arena.layout([0, 1, 2], [2, 1, 0], [0, 1, 2, 3, 4], {7}, bits=8, inside=False) is None  # K > 16
    assert _arena.layout([0, 1], [1, 0], [1, 5], {0}, bits=8, inside=False) is None  # Y's own spin summed
    assert _arena.positions(ROUTE, np.zeros((2, 2, 2))[:, :, ::-1]) is None  # a negative stride: no bit
    assert _arena.positions(ROUTE, np.zeros((2, 3))) is None


@contextlib.contextmanager
def _launches():
    """The layouts of the arena steps launched inside (each launch runs as it would)."""
    lays = []
    real = _arena.launch

    def launch(*a, **kw):
        lays.append(a[4])
        return real(*a, **kw)

    with mock.patch.object(_arena, "launch", launch):
        yield lays


def _sweep_run(sg, group, free=10**12):
    """Energy of ``sg`` along its sweep of ``group`` spins a step on the GPU route with the arena forced
    (the run as it would be where two boundaries do not fit), with the arena steps it launched."""
    labels, tensors = nw._network(sg, sg.fitted(np, np.float32), np)
    plan = E.ContractionPlan(tuple(orders.sweep_path(labels, nw._order(sg), group)), {}, 0, 0)
    want = float(E.contract_network(labels, (), tensors, optimize=plan))
    launched = []
    real = _arena.launch

    def launch(*a, **kw):
        launched.append(a[4]["rows"])
        return real(*a, **kw)

    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 8),
        mock.patch.object(_backend.Backend, "free_bytes", lambda self: free),
        mock.patch.object(_backend.Backend, "out_of_memory", lambda self, exc: False),
        mock.patch.object(_backend.Backend, "release_cached", lambda self: None),
        mock.patch.object(Network, "fits", lambda *a, **kw: False),
        mock.patch.object(_arena, "launch", launch),
    ):
        got = float(E.contract_network(labels, (), [t.copy() for t in tensors], optimize=plan))
        steps = E.plan_steps(labels, (), dict.fromkeys(range(sg.n), 2), plan.path, {})
    return want, got, launched, steps, labels


@pytest.mark.parametrize("group", [1, 2, 3])
def test_an_energy_with_its_boundary_in_one_buffer_is_the_energy(group):
    """A sweep's whole run in the arena gives the plain run's energy (random integer couplings: no ties
    to hide a wrong entry), and the memory model's arena steps are the executor's, one for one."""
    rng = np.random.default_rng(group)
    base = nw.chimera(2, 2, 4, seed=2)
    sg = nw.SpinGlass(base.n, base.edges, rng.integers(-9, 10, len(base.edges)), rng.integers(-3, 4, base.n))
    want, got, launched, steps, labels = _sweep_run(sg, group)
    assert got == want
    capacity = max(s.result for s in steps)  # the steps as priced with the run's STRIDED_MIN
    _, resident = _cost.arena_run(steps, 4 * len(sg.edges) + 2 * sg.n, 4, capacity)
    assert launched and len(launched) == len(resident)


def test_the_arena_peak_holds_one_boundary():
    """A step that grows the boundary in the arena holds no second one: the arena alone (less the pool's
    margin, which a single block does not need), where a new array holds both."""
    grow = _cost.Step(
        flops=8, operands=(1024, 4), result=2048, depends=False, leaves=(False, True), bits=1, origins=(0, -1)
    )
    first = _cost.Step(
        flops=8, operands=(4, 4), result=1024, depends=False, leaves=(True, True), bits=0, origins=(-1, -1)
    )
    claim = first._replace(operands=(4096, 4), result=1024, bits=1)
    unit = _cost._UNIT
    # a first step that is no bit step allocates its result as any; the growth then takes the arena
    peak, resident = _cost.arena_run([first, grow], 8, 4, 2048)
    assert resident == {1} and peak == max(
        2 * unit + unit + 2 * unit + 1024 * 4, 3 * unit + 1024 * 4 + int(2048 * 4 / _cost.POOL_MARGIN) + unit
    )
    # a bit step from a leaf claims the arena at once; the growth is written over its result
    peak, resident = _cost.arena_run([claim, grow], 4096 + 8, 4, 2048)
    assert resident == {0, 1}
    leaves = -(-(4096 + 8) * 4 // unit) * unit  # the pool's whole units
    assert peak == leaves + 2 * unit + int(2048 * 4 / _cost.POOL_MARGIN) + unit


def test_the_planner_holds_chimera_8x8x4_in_one_boundary_on_an_80_gb_gpu():
    """The benchmark's instance (an edge list, spins shuffled, no positions): the sweep's two boundaries
    at a step need 192 GiB; held in place, an unsliced sweep of 2 spins a step fits 78.5 GiB free."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import spin_glass as bench

    sg = bench.edge_list_instance(["chimera", 8, 8, 4], shuffle=True, positions=False)
    free = int(78.5 * 2**30)
    with (
        mock.patch.object(planning, "backend_of", lambda x: (ROUTE, x)),
        mock.patch.object(_backend.Backend, "free_bytes", lambda self: free),
    ):
        plan = nw._plan(sg, module=np, dtype=np.float32, arena=True)
    assert plan.nslices == 1 and plan.largest == 2**34
    steps = E.plan_steps(sg.labels(), (), dict.fromkeys(range(sg.n), 2), plan.path, {})
    leaves = 4 * len(sg.edges) + 2 * sg.n
    assert _cost.arena_peak(steps, leaves, 4, plan.largest) * _cost.POOL_MARGIN <= free
    assert _cost.peak_bytes(steps, leaves, 4, 0) * _cost.POOL_MARGIN > free
    # 64 GiB of boundary, the rest within a few GiB
    assert 2**36 <= _cost.arena_peak(steps, leaves, 4, plan.largest) * _cost.POOL_MARGIN <= 2**36 + 6 * 2**30


def test_where_two_boundaries_fit_the_plan_and_run_are_unchanged():
    sg = nw.square_lattice(14, seed=1)
    with (
        mock.patch.object(planning, "backend_of", lambda x: (ROUTE, x)),
        mock.patch.object(_backend.Backend, "free_bytes", lambda self: 80 * 2**30),
    ):
        assert nw._plan(sg, module=np, dtype=np.float32, arena=True) == nw.plan(sg, module=np, dtype=np.float32)
    labels, tensors = nw._network(sg, sg.fitted(np, np.float32), np)
    with device_route(), mock.patch.object(_backend.Backend, "free_bytes", lambda self: 80 * 2**30):
        net = E.build_network(labels, (), tensors, "maxplus", _contract.Algebra)
        plan = net.plan("auto", (), None, None)
        net.use_arena(plan)
    assert net.alg.arena is None  # fits as it is: the row kernel's sweep


def test_a_large_binary_boundary_takes_the_arena_where_two_fit():
    """From ARENA_FASTER entries the arena is taken although two boundaries fit (its steps copy nothing): a
    14 x 14 sweep with the line lowered to its largest boundary, and not with the line above it; a network
    of labels of other sizes keeps the row kernel's sweep where it fits."""
    sg = nw.square_lattice(14, seed=1)
    labels, tensors = nw._network(sg, sg.fitted(np, np.float32), np)
    plan = E.ContractionPlan(tuple(orders.sweep_path(labels, nw._order(sg), 2)), {}, 0, 0)
    largest = max(s.result for s in E.plan_steps(labels, (), dict.fromkeys(range(sg.n), 2), plan.path, {}))
    for line, taken in ((largest, True), (2 * largest, False)):
        arena = _arena_taken(labels, tensors, plan, line)
        assert (arena is not None) == taken, line
        if arena is not None:
            assert 1 << arena.bits == largest
    rng = np.random.default_rng(4)
    ternary = [rng.integers(-5, 5, (3, 3)).astype(np.float32) for _ in range(12)]
    chain = [(i, i + 1) for i in range(12)]
    assert _arena_taken(chain, ternary, "auto", 1) is None


def _arena_taken(labels, tensors, plan, line):
    """The arena use_arena takes for ``plan`` (or "auto") on the GPU route with 80 GiB free and
    ARENA_FASTER at ``line``, or None."""
    with (
        device_route(),
        mock.patch.object(_backend.Backend, "free_bytes", lambda self: 80 * 2**30),
        mock.patch.object(network, "ARENA_FASTER", line),
    ):
        net = E.build_network(labels, (), tensors, "maxplus", _contract.Algebra)
        net.use_arena(net.plan(plan, (), None, None) if plan == "auto" else plan)
    return net.alg.arena


def test_a_plan_whose_large_steps_the_arena_cannot_take_keeps_the_products_where_they_fit():
    """A greedy order's large steps on a 3-regular graph are wide products (more spins summed at once than
    the bit-addressed kernel takes): with the line at its largest intermediate, the arena is still not
    taken where two boundaries fit."""
    sg = nw.random_regular(40, 3, seed=1)
    labels, tensors = nw._network(sg, sg.fitted(np, np.float32), np)
    plan = E.contraction_plan(labels, (), dict.fromkeys(range(sg.n), 2), optimize="greedy", memory_limit=2**40)
    steps = E.plan_steps(labels, (), dict.fromkeys(range(sg.n), 2), plan.path, {})
    largest = max(s.result for s in steps)
    _, resident = _cost.arena_run(steps, sum(t.size for t in tensors), 4, largest)
    assert not all(n in resident for n, s in enumerate(steps) if s.result >= largest)  # a wide step: refused
    assert _arena_taken(labels, tensors, plan, largest) is None


def test_a_run_that_fits_neither_way_is_refused_with_the_figures():
    sg = nw.chimera(2, 2, 4, seed=2)
    with pytest.raises(DeviceMemoryError, match="GiB of device memory"):
        _sweep_run(sg, 2, free=4096)


def test_values_only_kernels_are_lazy_and_compile_for_sm90(cache):
    fam = _arena_kernels.make_family(cache)
    assert len(fam.names()) == 2 * 2 * 25 and fam.compiled() == []  # semirings, value types, 0-4 spins out and in
    kinds = [("maxplus", "float32", 2, 2), ("minplus", "float64", 4, 1), ("maxplus", "float32", 0, 4)]
    names = [_arena_kernels.kernel_name(s, np.dtype(d), kb, nb) for s, d, kb, nb in kinds]
    assert names == ["values_bits22_max_f32", "values_bits41_min_f64", "values_bits04_max_f32"]
    assert [k.name for k in fam.warm(names, arch="sm_90")] == names
    assert fam.compiled() == sorted(names)


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_arena_steps_on_the_gpu(n, con, batch, right, semiring):
    cupy = pytest.importorskip("cupy")
    for inside in (True, False):
        _step(cupy, _backend.Backend("cupy", cupy), n, con, batch, right, semiring, inside)


@pytest.mark.gpu
def test_an_energy_in_the_arena_on_the_gpu_is_the_hosts():
    """chimera 4 x 4 x 4 with random integer couplings: the GPU run with its boundary forced into the arena
    (as where two boundaries do not fit) gives the host's energy."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(11)
    base = nw.chimera(4, 4, 4, seed=3)
    sg = nw.SpinGlass(base.n, base.edges, rng.integers(-9, 10, len(base.edges)), rng.integers(-3, 4, base.n))
    labels, tensors = nw._network(sg, sg.fitted(np, np.float32), np)
    plan = nw.plan(sg, dtype=np.float32)
    want = float(E.contract_network(labels, (), tensors, optimize=plan))
    with mock.patch.object(Network, "fits", lambda *a, **kw: False), _launches() as used:
        got = E.contract_network(labels, (), [cupy.asarray(t) for t in tensors], optimize=plan)
    assert used and float(got) == want


def test_an_energys_host_steps_then_its_arena_give_the_energy_on_the_gpu_route():
    """ground_state_energy's GPU flow on the host stand-in: the plan for a device, its small steps on the host
    (networks._host_first, one upload), then the shorter plan with its boundary in the arena from the line
    (2^13 here: every step of that size is the arena's), which launches its steps and gives the energy."""
    import types

    rng = np.random.default_rng(18)
    base = nw.square_lattice(20, seed=5)
    sg = nw.SpinGlass(base.n, base.edges, rng.integers(-9, 10, len(base.edges)), rng.integers(-3, 4, base.n))
    fit = sg.fitted(np, None)
    fake = types.SimpleNamespace(__name__="fakegpu", asarray=np.asarray)
    free = mock.patch.object(_backend.Backend, "free_bytes", lambda self: 140 * 2**30)
    with mock.patch.object(planning, "backend_of", lambda x: (ROUTE, x)), free:
        plan = nw._plan(sg, module=np, dtype=fit.dtype, arena=True)
        labels, tensors, how = nw._host_first(sg, fit, fake, plan)
    assert len(how.path) < len(plan.path)
    with device_route(), free, mock.patch.object(network, "ARENA_FASTER", 1 << 13), _launches() as launched:
        got = E.contract_network(labels, (), tensors, optimize=how)
    assert launched and fit.answer(-got.item()) == nw.ground_state_energy(sg)


@pytest.mark.gpu
def test_the_defaults_take_the_arena_from_its_line_and_give_the_hosts_energy():
    """A 20 x 20 lattice (the smallest the defaults contract on the GPU, not in NumPy) of random integer
    couplings through ground_state_energy's defaults on CuPy, with ARENA_FASTER lowered under its
    boundary: the host prefix, then the arena's steps, give the host's energy."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(18)
    base = nw.square_lattice(20, seed=5)
    sg = nw.SpinGlass(base.n, base.edges, rng.integers(-9, 10, len(base.edges)), rng.integers(-3, 4, base.n))
    want = nw.ground_state_energy(sg)
    with mock.patch.object(network, "ARENA_FASTER", 1 << 13), _launches() as used:
        got = nw.ground_state_energy(sg, module=cupy)
    assert used and got == want


def test_one_slice_runs_where_its_operands_are_whatever_devices_says():
    """devices= spreads slices; a plan of one slice runs in the calling process on the operands' device (so
    an energy that only fits in one buffer takes it, devices= or not), a sliced plan still spreads."""
    sg = nw.square_lattice(4, seed=1)
    labels, tensors = nw._network(sg, sg.fitted(np, np.float64), np)
    want = float(E.contract_network(labels, (), tensors))
    spread = []
    real = _spread.contract

    def contract(*a, **kw):
        spread.append(1)
        return real(*a, **kw)

    with mock.patch.object(_spread, "contract", contract):
        assert float(E.contract_network(labels, (), tensors, devices=[0, 1])) == want
        assert spread == []
        assert float(E.contract_network(labels, (), tensors, devices=[0, 1], slices=[0])) == want
        assert spread == [1]


@pytest.mark.gpu
def test_an_energy_in_the_arena_with_devices_all_is_the_hosts():
    """As above through ground_state_energy with devices="all": the unsliced plan runs on the operands' GPU."""
    pytest.importorskip("cupy")
    rng = np.random.default_rng(12)
    base = nw.chimera(4, 4, 4, seed=4)
    sg = nw.SpinGlass(base.n, base.edges, rng.integers(-9, 10, len(base.edges)), rng.integers(-3, 4, base.n))
    want = nw.ground_state_energy(sg)
    with mock.patch.object(Network, "fits", lambda *a, **kw: False), _launches() as used:
        got = nw.ground_state_energy(sg, module="cupy", devices="all")
    assert used and got == want


@pytest.mark.parametrize("group", [1, 2, 3])
def test_the_kernels_prefetched_are_those_the_arena_launches(group):
    """The plan names the arena's kernels before the run (contraction.network.Network.prefetch): the tiles (spins out,
    spins in) it asks for are exactly those of the steps the arena then launches, on a chimera sweep of
    1 to 3 spins a step."""
    sg = nw.chimera(2, 2, 4, seed=2)
    asked, launched = [], set()
    real = _arena.launch

    def launch(*a, **kw):
        launched.add((len(a[4]["con"]), len(a[4]["right_pos"])))
        return real(*a, **kw)

    with (
        mock.patch.object(_arena, "prefetch", lambda be, like, semiring, tiles: asked.append(set(tiles)) or []),
        mock.patch.object(_arena, "launch", launch),
    ):
        want, got, *_ = _sweep_run(sg, group)
    assert got == want
    assert len(asked) == 1 and asked[0] == launched and launched
