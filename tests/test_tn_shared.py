"""The steps every pass of an exact count shares (lazykern/tn/_shared.py): run once, counts unchanged."""

from __future__ import annotations

import concurrent.futures
import itertools
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest

from lazykern.tn import _backend, _contract, _crt, _shared, counting
from lazykern.tn import networks as nw
from lazykern.tn.counts import passes
from lazykern.tn.einsum import contract_network

from ._spin_oracles import transfer_matrix
from .test_tropical_counting import _free_rows
from .test_tropical_einsum import device_route  # the GPU route on the host


def _counted_passes():
    """(patch, calls): counting.contract_network recorded with the moduli and path length of each pass."""
    calls = []
    real = counting.contract_network

    def counted(labels, output, operands, **kw):
        calls.append((kw["algebra"].moduli, len(kw["optimize"].path), len(operands)))
        return real(labels, output, operands, **kw)

    return mock.patch.object(counting, "contract_network", counted), calls


@pytest.mark.parametrize("small", [4, 16, 64, 1 << 12])
def test_prime_passes_run_the_shared_steps_once_and_count_exactly(small):
    """A count past 2^63 on the GPU route: every prime pass runs the shorter plan (the shared steps' results
    as leaves), and the count is the transfer method's big integer, whatever the size of a shared step."""
    sg = _free_rows(10, 7, seed=2)
    E0, count = transfer_matrix(sg, 10)
    patch, calls = _counted_passes()
    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(passes, "residues_per_pass", lambda net, plan: 2),
        mock.patch.object(_shared, "SMALL", small),
        mock.patch.object(counting, "WIDE_PASS", False),  # the primes' passes (the 128-bit one: below)
        patch,
    ):
        assert nw.degeneracy(sg, memory_limit=2**28) == (E0, count)
    full = len(sg.labels()) - 1  # one step per tensor after the first
    assert calls[0][0] == ()  # the float64 pass that bounds the counts, then the primes
    assert calls[1:] and all(moduli for moduli, _, _ in calls[1:])
    assert all(steps < full for _, steps, _ in calls)  # shorter in every pass, the float64 pass's too
    assert len({(steps, leaves) for _, steps, leaves in calls}) == 1  # one shorter plan, made once


def test_shared_steps_match_the_full_plan_on_random_networks():
    """Counts past int64 of random +-1 networks on the GPU route: the passes with shared steps give the
    very counts of the full plan run in every pass (the sharing switched off)."""
    rng = np.random.default_rng(3)
    for trial in range(4):
        sg = _free_rows(10, 6, seed=int(rng.integers(1 << 30)))  # 60 free spins, and ties below them
        J = np.where(rng.random(len(sg.J)) < 0.3, 0.0, sg.J)
        sg = nw.SpinGlass(sg.n, sg.edges, J)
        E0, count = transfer_matrix(sg, 10)
        assert count >= 2**63, trial
        with (
            device_route(),
            mock.patch.object(_contract, "STRIDED_MIN", 0),
            mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
            mock.patch.object(_shared, "SMALL", 32),
        ):
            shared = nw.degeneracy(sg, memory_limit=2**28)
            with mock.patch.object(passes, "share", lambda net, plan, inputs, operands: (inputs, operands, plan)):
                full = nw.degeneracy(sg, memory_limit=2**28)
        assert shared == full == (E0, count), trial


def test_a_step_whose_counts_may_pass_int64_is_not_shared():
    """The int64 counts of shared steps are exact only below 2^63: a step whose bound (the operands' largest
    counts times the sizes it sums out) reaches it runs in every pass instead, as do the steps that read it."""
    labels = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f")]
    sizes = dict.fromkeys("abcde", 2) | {"f": 16}
    path = [(0, 1), (0, 1), (1, 2), (0, 1)]  # ac; ce; (ac)(ce) -> ae; (ef)(ae) -> af, of 32 entries
    small = _shared.split(labels, ("a", "f"), sizes, path, [1] * 5, small=8)
    assert small is not None and small.shared == [True, True, True, False]
    assert small.path == ((0, 1),) and small.sources == [("leaf", 4), ("step", 2)]
    big = _shared.split(labels, ("a", "f"), sizes, path, [1, 1, 2**62, 1, 1], small=8)  # d summed: 2^63
    assert big is not None and big.shared == [True, False, False, False]
    assert big.path == ((0, 1), (0, 2), (0, 1))
    assert big.sources == [("leaf", 2), ("leaf", 3), ("step", 0), ("leaf", 4)]
    assert _shared.split(labels, ("a", "f"), sizes, path, [1] * 5, small=1 << 12) is None  # all shared: no gain
    assert _shared.split(labels, ("a", "f"), sizes, path, [1] * 5, small=2) is None  # none shared


def test_shorter_path_reads_the_same_terms_as_the_plan():
    """The shorter plan's every step reads the terms the plan's step reads (leaves, shared results, or its
    own earlier results), on sweeps of random lattices."""
    rng = np.random.default_rng(11)
    for _ in range(3):
        sg = nw.square_lattice(7, seed=int(rng.integers(1 << 30)))
        labels = sg.labels()
        sizes = dict.fromkeys(range(sg.n), 2)
        plan, _ = nw._sweep(sg, labels, sizes, nw._cost.rates_for(False, 4), 4)
        cut = _shared.split(labels, (), sizes, plan.path, [1] * len(labels), small=64)
        assert cut is not None
        live = [("leaf", i) for i in range(len(labels))]
        reads = []
        for n, step in enumerate(plan.path):
            picked = [live[i] for i in step]
            for i in sorted(step, reverse=True):
                live.pop(i)
            live.append(("step", n))
            if not cut.shared[n]:
                reads.append((n, picked))
        now = list(cut.sources)
        for (n, picked), step in zip(reads, cut.path, strict=True):
            assert [now[i] for i in step] == picked
            for i in sorted(step, reverse=True):
                now.pop(i)
            now.append(("step", n))
        assert now == [("step", len(plan.path) - 1)]


def test_shared_steps_keep_the_crt_primes_in_order():
    """The passes after the shared steps still take the primes in order, two a pass, to the stopping rule."""
    sg = _free_rows(10, 7, seed=2)
    patch, calls = _counted_passes()
    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(passes, "residues_per_pass", lambda net, plan: 2),
        patch,
    ):
        nw.degeneracy(sg, memory_limit=2**28)
    used = [q for moduli, _, _ in calls for q in moduli]
    assert used == list(itertools.islice(_crt.primes(), len(used)))


# -- an energy's small steps on the host (run_values, networks._host_first) ------------------------------
def _sweep_plan(sg):
    labels = sg.labels()
    sizes = dict.fromkeys(range(sg.n), 2)
    plan, _ = nw._sweep(sg, labels, sizes, nw._cost.rates_for(False, 4), 4)
    return labels, sizes, plan


@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_run_values_leaves_give_the_full_contraction(semiring, dtype):
    """The shorter plan over run_values' leaves contracts to the very array the full plan gives, for lattices,
    random regular graphs and chimera cells, any size a shared step may have, with and without open labels."""
    rng = np.random.default_rng(17)
    graphs = [nw.square_lattice(6, seed=1), nw.random_regular(16, 3, seed=2), nw.chimera(1, 2, 3, seed=3)]
    for sg in graphs:
        labels, sizes, plan = _sweep_plan(sg)
        tensors = [rng.integers(-20, 20, [2] * len(t)).astype(dtype) for t in labels]
        for output in [(), (0,), (sg.n - 1, 1)]:
            for small in (3, 5, 17, 64, 1 << 12):
                cut = _shared.split(labels, output, sizes, plan.path, [1] * len(labels), small=small)
                if cut is None:
                    continue
                leaves, arrays = _shared.run_values(cut, plan.path, labels, tensors, output, semiring)
                assert all(a.dtype == dtype and a.flags.c_contiguous for a in arrays)
                assert [a.shape for a in arrays] == [(2,) * len(t) for t in leaves]
                want = contract_network(labels, output, tensors, semiring=semiring, optimize=plan)
                got = contract_network(leaves, output, arrays, semiring=semiring, optimize=replace(plan, path=cut.path))
                np.testing.assert_array_equal(got, want, err_msg=f"{sg.name} {output} {small}")


def test_a_kept_walk_plan_serves_new_values_and_many_threads():
    """walk's plan is kept per structure (labels, path, sizes, output, shared steps): a second network of
    that structure with other values gets its own answer, and solves in several threads at once (Dask's
    workers), each adding and evicting kept plans, all answer right."""
    sg = nw.random_regular(16, 3, seed=5)
    labels, sizes, plan = _sweep_plan(sg)
    cut = _shared.split(labels, (), sizes, plan.path, [1] * len(labels), small=64)
    rng = np.random.default_rng(3)
    batches = [[rng.integers(-9, 9, [2] * len(t)).astype(np.int64) for t in labels] for _ in range(3)]
    wants = [contract_network(labels, (), ts, semiring="maxplus", optimize=plan) for ts in batches]

    def check(i: int) -> bool:
        ts = batches[i % 3]
        output = () if i % 2 else (i % sg.n,)  # two outputs: two kept plans, evicted and added in turn
        c = cut if not output else _shared.split(labels, output, sizes, plan.path, [1] * len(labels), small=64)
        leaves, arrays = _shared.run_values(c, plan.path, labels, ts, output, "maxplus")
        got = contract_network(leaves, output, arrays, semiring="maxplus", optimize=replace(plan, path=c.path))
        want = wants[i % 3] if not output else contract_network(labels, output, ts, semiring="maxplus", optimize=plan)
        return bool(np.array_equal(got, want))

    assert all(check(i) for i in range(6))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(check, range(48)))


def test_run_values_refuses_other_semirings():
    labels, sizes, plan = _sweep_plan(nw.square_lattice(4, seed=1))
    cut = _shared.split(labels, (), sizes, plan.path, [1] * len(labels), small=64)
    with pytest.raises(KeyError):
        _shared.run_values(cut, plan.path, labels, [np.zeros([2] * len(t)) for t in labels], (), "maxmul")


class _CountingModule:
    """A stand-in for a GPU array module: NumPy arrays, every host-to-device copy counted."""

    __name__ = "fakegpu"

    def __init__(self):
        self.copies = []

    def asarray(self, x):
        self.copies.append(x.size)
        return np.asarray(x)


@pytest.mark.parametrize("L", [14, 16])
def test_a_device_energy_gets_the_host_steps_results_in_one_copy(L):
    """_host_first on a GPU module: the small steps run on the host, their results and the leaves the device
    steps read reach the device in one copy, and the shorter plan contracts to the energy of the full one."""
    sg = nw.square_lattice(L, seed=L, field=0.5)
    fit = sg.fitted(np, None)
    labels, tensors = nw._network(sg, fit, np)
    plan = nw._plan(sg, module=np, dtype=fit.dtype)
    module = _CountingModule()
    short_labels, short_tensors, short = nw._host_first(sg, fit, module, plan)
    assert len(module.copies) == 1
    assert len(short.path) < len(plan.path) and len(short_labels) == len(short.path) + 1
    want = contract_network(labels, (), tensors, optimize=plan)
    assert contract_network(short_labels, (), short_tensors, optimize=short) == want


def test_host_first_leaves_numpy_sliced_plans_and_other_orders_alone():
    sg = nw.square_lattice(8, seed=1)
    fit = sg.fitted(np, None)
    plan = nw._plan(sg, module=np, dtype=fit.dtype)
    labels, _, same = nw._host_first(sg, fit, np, plan)
    assert same is plan and len(labels) == len(sg.labels())
    sliced = replace(plan, sliced={0: 2})
    assert sliced.nslices > 1
    module = _CountingModule()
    labels, tensors, same = nw._host_first(sg, fit, module, sliced)
    assert same is sliced and len(labels) == len(tensors) == len(sg.labels()) and len(module.copies) == 1
    _, _, how = nw._host_first(sg, fit, _CountingModule(), "greedy")
    assert how == "greedy"


@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_run_counts_is_the_general_executors_shared_run(semiring):
    """run_counts (broadcast NumPy) gives the very values and int64 counts run_shared (the executor's own
    steps) gives, on sweeps with many ties (couplings of -1, 0, 1), with and without open labels."""
    from lazykern.tn.einsum import build_network

    rng = np.random.default_rng(5)
    for sg in [nw.square_lattice(6, seed=1), nw.random_regular(14, 3, seed=2), nw.chimera(1, 2, 3, seed=3)]:
        labels, sizes, plan = _sweep_plan(sg)
        values = [rng.integers(-1, 2, [2] * len(t)).astype(np.float32) for t in labels]
        counts = [rng.integers(1, 4, [2] * len(t)).astype(np.int64) for t in labels]
        for output in [(), (sg.n - 1,)]:
            for small in (5, 64):
                cut = _shared.split(labels, output, sizes, plan.path, [4] * len(labels), small=small)
                if cut is None:
                    continue
                pairs = list(zip(values, counts))
                net = build_network(labels, output, pairs, semiring, counting.CountingAlgebra)
                want_labels, want = _shared.run_shared(net, plan, cut, pairs, labels)
                got_labels, got = _shared.run_counts(cut, plan.path, labels, pairs, output, semiring)
                for (kind, _), wl, w, gl, g in zip(cut.sources, want_labels, want, got_labels, got, strict=True):
                    if kind == "leaf":
                        continue  # run_counts leaves the leaves to the caller
                    perm = [gl.index(x) for x in wl]
                    np.testing.assert_array_equal(np.transpose(g[0], perm), w[0])
                    np.testing.assert_array_equal(np.transpose(g[1], perm), w[1])
                    assert g[1].dtype == np.int64


def test_the_counting_kernels_prefetched_are_those_the_passes_launch():
    """Each counting pass names its bit-addressed kernels before it runs (contraction.network.Network.prefetch): the
    tiles asked for are exactly those the pass's bits steps launch (the GPU route on the host)."""
    sg = _free_rows(10, 7, seed=2)
    asked, launched = [], []
    bits = counting.CountingAlgebra.bits

    def recorded(self, X, Y, lay, inplace):
        launched[-1].add((len(lay["con"]), len(lay["right_pos"])))
        return bits(self, X, Y, lay, inplace)

    def prefetch(self, like, tiles):
        asked.append(set(tiles))
        launched.append(set())
        return []

    with (
        device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
        mock.patch.object(counting.CountingAlgebra, "bits", recorded),
        mock.patch.object(counting.CountingAlgebra, "prefetch", prefetch),
    ):
        nw.degeneracy(sg, memory_limit=2**28)
    assert asked and asked == launched and all(asked)


def test_a_run_joins_the_builds_it_started_before_it_returns():
    """contract_network owns the threads its plan's prefetch started: each is joined before the call
    returns, and also when the run fails."""
    import threading

    sg = nw.square_lattice(6, seed=1)
    labels, tensors = nw._network(sg, sg.fitted(np, np.float32), np)
    started = []

    def prefetch(self, plan):
        thread = threading.Thread(target=lambda: None)
        thread.start()
        started.append(thread)
        return [thread]

    joined = []
    real_join = threading.Thread.join

    def join(self, timeout=None):
        joined.append(self)
        return real_join(self, timeout)

    from lazykern.tn.contraction import contract
    from lazykern.tn.contraction.network import Network

    with (
        device_route(),
        mock.patch.object(Network, "prefetch", prefetch),
        mock.patch.object(threading.Thread, "join", join),
        mock.patch.object(_backend.Backend, "out_of_memory", lambda self, exc: False),
    ):
        contract_network(labels, (), tensors)
        with mock.patch.object(contract, "contract_slices", mock.Mock(side_effect=RuntimeError("boom"))):
            with pytest.raises(RuntimeError, match="boom"):
                contract_network(labels, (), tensors)
    assert len(started) == 2 and all(t in joined for t in started)
