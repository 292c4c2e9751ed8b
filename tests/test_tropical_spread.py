"""Slices of one contraction spread over devices (``devices=``, :mod:`lazykern.tn._spread`).

On the CPU the "devices" are thread groups: NumPy operands stay on the host, and an injected
device-setter shows which group ran where. Results must equal the one-device loop and the
oracles of tests/_spin_oracles.py, for energies (max-plus) and degeneracies (the counting add).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import defaultdict

import numpy as np
import pytest

from lazykern.tn import _crt, _spread, counting
from lazykern.tn import networks as nw
from lazykern.tn._backend import Backend
from lazykern.tn._contract import Algebra, Term
from lazykern.tn.einsum import build_network, contract_slices, contraction_plan
from lazykern.tropical import argmax_einsum, einsum

from ._spin_oracles import transfer_matrix

SLICED = [3, 14, 21]  # 8 slices of the 6x6 lattice, cut across its middle rows


@pytest.fixture(scope="module")
def lattice():
    sg = nw.square_lattice(6, seed=7)
    return sg, transfer_matrix(sg, 6)


def test_energy_and_degeneracy_over_devices_equal_one_device_and_the_oracle(lattice):
    sg, (E0, count) = lattice
    for devices in ([0, 1], [0, 1, 2], [2, 0, 1, 3, 4], "all"):
        assert nw.ground_state_energy(sg, slices=SLICED, devices=devices) == E0
        assert nw.degeneracy(sg, slices=SLICED, devices=devices) == (E0, count)
    assert nw.ground_state_energy(sg, slices=SLICED) == E0
    # more devices than slices: the extra ones get no group; no slices: the first device alone
    assert nw.degeneracy(sg, slices=[5], devices=[0, 1, 2, 3]) == (E0, count)
    assert nw.ground_state_energy(sg, devices=[1, 0]) == E0


def test_a_configuration_over_devices_is_the_one_device_configuration(lattice):
    """ground_state / argmax_einsum: each group finds its slices' optima; the first best slice (slice
    order, as one device scans them) is contracted again and backtracked: the same spins come back."""
    sg, (E0, _) = lattice
    E1, spins1 = nw.ground_state(sg, slices=SLICED)
    for devices in ([0, 1], [0, 1, 2], "all"):
        E, spins = nw.ground_state(sg, slices=SLICED, devices=devices)
        assert E == E1 == E0 and sg.energy(spins) == E0
        np.testing.assert_array_equal(spins, spins1)
    E, spins = nw.ground_state(sg, slices=SLICED, checkpoint=True, devices=[0, 1])
    assert E == E0 and sg.energy(spins) == E0
    A = np.array([[0.0, 2.0, 2.0], [1.0, 2.0, -1.0]])  # a tie between slices 1 and 2 of label j
    assert argmax_einsum("ij->", A, slices="j", devices=[0, 1, 2]) == argmax_einsum("ij->", A, slices="j")
    with pytest.raises(ValueError, match="autograd"):
        nw.ground_state(sg, method="autograd", devices=[0, 1])


def test_counts_of_a_tie_split_between_groups_are_added():
    """A ferromagnet's two ground states (all up, all down) sit in different slices of spin 0:
    each group finds one, and only the counting add of the two partials gives 2."""
    sg = nw.square_lattice(4, J="ferro")
    assert nw.degeneracy(sg, slices=[0], devices=[0, 1]) == (-24.0, 2)
    v, c = counting.einsum("i,i->", np.array([1.0, 3.0, 3.0, 2.0]), np.zeros(4), slices="i", devices=[0, 1])
    assert (float(v), int(c)) == (3.0, 2)


def test_einsum_with_an_output_and_minplus_over_devices():
    rng = np.random.default_rng(3)
    A, B, C = rng.standard_normal((5, 6)), rng.standard_normal((6, 7)), rng.standard_normal((7, 4))
    for semiring in ("maxplus", "minplus"):
        one = einsum("ij,jk,kl->il", A, B, C, semiring=semiring, slices="jk")
        spread = einsum("ij,jk,kl->il", A, B, C, semiring=semiring, slices="jk", devices=[0, 1, 2])
        np.testing.assert_array_equal(spread, one)


def test_each_group_runs_its_own_slices_on_its_own_thread_with_its_device_current(lattice, monkeypatch):
    sg, (E0, _) = lattice
    labels, tensors = sg.network()
    plan = contraction_plan(labels, (), dict.fromkeys(range(sg.n), 2), optimize="greedy", slices=SLICED)
    net = build_network(labels, (), tensors, "maxplus", Algebra)
    current = threading.local()
    entered: list[tuple[int | None, int]] = []

    @contextlib.contextmanager
    def activate(device):
        entered.append((device, threading.get_ident()))
        before = getattr(current, "device", "none")
        current.device = device
        try:
            yield
        finally:
            current.device = before

    # device -> (thread, slice values) of every slice run. The Thread objects themselves, not their
    # idents: an ident is reused once its thread ends, and group 7's thread may end before 5's starts
    ran = defaultdict(list)
    real_run = type(net).run

    def run(self, plan, values, keep, cache=None, **kw):
        ran[current.device].append((threading.current_thread(), tuple(values.values())))
        return real_run(self, plan, values, keep, cache, **kw)

    monkeypatch.setattr(type(net), "run", run)
    total = _spread.contract(net, plan, [7, 5], contract_slices, activate=activate)
    assert -float(net.finish(total)) == E0
    every = [tuple(v.values()) for v in plan.slice_values()]
    assert [s for _, s in ran[7]] == every[:4] and [s for _, s in ran[5]] == every[4:]
    threads = {dev: {id(t) for t, _ in runs} for dev, runs in ran.items()}  # ran keeps them alive
    assert all(len(t) == 1 for t in threads.values()) and threads[7] != threads[5]
    assert threading.current_thread() not in {t for t, _ in ran[7] + ran[5]}
    assert entered[-1] == (None, threading.get_ident())  # the sum of the groups: on the caller, at home


class _TwoGpuBackend(Backend):
    """NumPy arrays that pretend to live on a GPU (a dict records where): checks that partials move to
    the operands' device before the semiring add, and that each group waits for its device."""

    def __init__(self) -> None:
        super().__init__("fake", np)
        self.where_is: dict[int, int] = {}
        self.current: int | None = None
        self.synced: list[int | None] = []
        self.moves: list[tuple[int, int]] = []

    @property
    def on_host(self) -> bool:
        return False

    def device_of(self, x):
        return self.where_is.get(id(x), 0)

    def to_device(self, x, device):
        if self.device_of(x) == device:
            return x
        self.moves.append((self.device_of(x), device))
        y = x.copy()
        self.where_is[id(y)] = device
        return y

    def on_device(self, device):
        lock = threading.Lock()

        @contextlib.contextmanager
        def scope():
            with lock:
                self.current = device
            yield

        return scope()

    def synchronize(self):
        self.synced.append(threading.current_thread().name)


def test_partials_come_home_before_the_semiring_add():
    be = _TwoGpuBackend()

    class Net:
        def __init__(self):
            self.be, self.alg = be, Algebra("maxplus", be)
            self.leaves = [Term((np.zeros(2),), ("a",))]

        def on_device(self, device):
            return self

    class Plan:
        nslices, sliced = 6, {"a": 6}

    def run_range(net, plan, start, stop, cache):
        out = np.array([float(stop), -float(start)])
        be.where_is[id(out)] = {0: 1, 3: 2}[start]  # each group's partial on its device
        return Term((out,), ("b",))

    total = _spread.contract(Net(), Plan(), [1, 2], run_range)
    np.testing.assert_array_equal(total.parts[0], [6.0, -0.0])
    assert sorted(be.moves) == [(1, 0), (2, 0)]
    assert len(be.synced) == 2 and all(name.startswith("lazykern-slices") for name in be.synced)


def test_a_failing_group_raises_after_every_group_ended():
    be = Backend("numpy", np)
    ended = []

    class Net:
        def __init__(self):
            self.be, self.alg = be, Algebra("maxplus", be)
            self.leaves = [Term((np.zeros(1),), ("a",))]

        def on_device(self, device):
            return self

    class Plan:
        nslices, sliced = 4, {"a": 4}

    def run_range(net, plan, start, stop, cache):
        if start == 0:
            raise RuntimeError("group 0 failed")
        threading.Event().wait(0.05)
        ended.append(start)
        return Term((np.zeros(1),), ())

    with pytest.raises(RuntimeError, match="group 0 failed"):
        _spread.contract(Net(), Plan(), [0, 1], run_range)
    assert ended == [2]


def test_devices_argument_is_checked(monkeypatch):
    host, gpu = Backend("numpy", np), Backend("cupy", None)
    assert _spread.resolve(None, host) is None
    assert _spread.resolve([3, 1], host) == [3, 1]  # host operands: the ordinals only name threads
    assert len(_spread.resolve("all", host)) >= 1
    with pytest.raises(ValueError, match="at least one"):
        _spread.resolve([], host)
    with pytest.raises(ValueError, match="distinct"):
        _spread.resolve([0, 0], host)
    with pytest.raises(ValueError, match="'all'"):
        _spread.resolve("every", host)
    with pytest.raises(TypeError, match="ordinals"):
        _spread.resolve(["gpu0"], host)
    monkeypatch.setattr(_spread._device, "count", lambda: 2)
    assert _spread.resolve("all", gpu) == [0, 1]
    with pytest.raises(ValueError, match=r"devices \[5\] do not exist: this process sees 2 GPU"):
        _spread.resolve([0, 5], gpu)  # a GPU backend: ordinals past what the process sees
    assert _spread.groups(3, [0, 1, 2, 3]) == [(0, 0, 1), (1, 1, 2), (2, 2, 3)]


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_gpu_operands_over_every_gpu_equal_one_gpu(lattice, library):
    """Real devices: each group's operands copied to its GPU, partials brought back to the operands'
    device; energy and degeneracy equal one GPU's and the oracle (on a one-GPU host: one group)."""
    module = pytest.importorskip(library, reason=f"needs {library} for GPU operands")
    sg, (E0, count) = lattice
    assert nw.ground_state_energy(sg, module=module, dtype=np.float32, slices=SLICED, devices="all") == E0
    assert nw.ground_state_energy(sg, module=module, dtype=np.float32, slices=SLICED) == E0
    assert nw.degeneracy(sg, module=module, slices=SLICED, devices="all") == (E0, count)
    E, spins = nw.ground_state(sg, module=module, dtype=np.float32, slices=SLICED, devices="all")
    assert E == E0 == sg.energy(spins)


def _sparse_lattice(L: int, seed: int) -> nw.SpinGlass:
    """An L x L +-J lattice with nine couplings in ten set to zero: far more than 2^64 ground states."""
    sg = nw.square_lattice(L, seed=seed)
    keep = np.random.default_rng(seed).random(len(sg.J)) < 0.1
    return nw.SpinGlass(sg.n, sg.edges, sg.J * keep, positions=sg.positions)


def test_counts_past_2_64_over_devices_are_exact():
    """Every pass (modulo 2^64, then primes) is spread over the groups and added in its own ring:
    the rebuilt count is the transfer method's big integer, not a wrapped int64."""
    sg = _sparse_lattice(10, seed=5)
    E0, count = transfer_matrix(sg, 10)
    assert count > 1 << 64
    assert nw.degeneracy(sg, slices=[30, 40], devices=[0, 1, 2]) == (E0, count)
    v, c = counting.einsum(
        ",".join("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS") + "->",
        *[np.zeros(4)] * 45,
        slices="abc",
        devices=[0, 1],
    )
    assert (float(v), c) == (0.0, 4**45)


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_counts_past_2_64_over_two_gpus_pair_their_first_passes(library):
    """Two GPUs: the first round runs one whole pass per GPU at once (a prime pass on the operands' GPU
    here, the next primes' pass in GPU 1's worker process); the plan has 4 slices, so later passes spread
    their slices (rounds=False); the count is still the transfer method's big integer (a one-GPU host:
    the passes as before)."""
    module = pytest.importorskip(library, reason=f"needs {library} for GPU operands")
    from unittest import mock

    from lazykern.tn import _procs

    sg = _sparse_lattice(10, seed=5)
    E0, count = transfer_matrix(sg, 10)
    seen = []
    real = counting.contract_network

    def counted(*a, **kw):
        seen.append((kw["algebra"].moduli, kw["devices"]))
        return real(*a, **kw)

    with mock.patch.object(counting, "contract_network", counted), _procs.keep_warm():
        assert nw.degeneracy(sg, module=module, slices=[30, 40], devices="all") == (E0, count)
        kept = _procs.workers()  # kept between calls while keep_warm is open
    assert _procs.workers() == []  # and ended when it closes
    if _spread._device.count() >= 2:
        # On a GPU two primes ride in the int64 pass's bytes: the first round is two prime passes, the
        # first primes here on the operands' GPU, the next ones in GPU 1's worker process
        (here, device), later = seen[0], seen[1:]
        assert device == [0] and len(here) >= 2 and here == tuple(itertools.islice(_crt.primes(), len(here)))
        assert all(d == "all" for _, d in later) and () not in [m for m, _ in seen]  # later: slices over every GPU
        used = {q for m, _ in seen for q in m}
        assert tuple(itertools.islice(_crt.primes(), 2 * len(here)))[len(here) :][0] not in used  # the worker's
        assert len(kept) >= 1


def test_each_spread_logs_its_profile(caplog):
    """The debug record a benchmark reads: one entry per group in group order, the slices it ran,
    when it began and ended after the spread began, its thread's CPU seconds; the combination."""
    A = np.arange(24, dtype=np.float64).reshape(4, 6)
    with caplog.at_level("DEBUG", logger="lazykern"):
        assert einsum("ij->", A, slices="j", devices=[0, 1, 2]) == einsum("ij->", A)
    [profile] = [r.spread_profile for r in caplog.records if hasattr(r, "spread_profile")]
    assert profile["nslices"] == 6
    assert [(g["device"], g["start"], g["stop"]) for g in profile["groups"]] == [(0, 0, 2), (1, 2, 4), (2, 4, 6)]
    for g in profile["groups"]:
        assert 0 <= g["began"] <= g["ended"] <= profile["seconds"] and g["cpu_seconds"] >= 0
    assert 0 <= profile["combine_seconds"] <= profile["seconds"] and 0 < profile["balance"] <= 1.0


def test_profile_record_balance():
    groups = [{"began": 0.0, "ended": 2.0}, {"began": 0.5, "ended": 1.5}]
    record = _spread.profile_record(4, groups, 0.25, 2.5)
    assert record["balance"] == 0.5 and record["combine_seconds"] == 0.25 and record["groups"] == groups
    assert _spread.profile_record(1, [], 0.0, 0.0)["balance"] == 1.0


# -- counting passes over two devices: the int64 pass and the first prime pass at once -----------
def _passes(true_count: int, log: list | None = None):
    """``run(moduli)`` of a contraction whose one count is ``true_count`` (values: 0.0)."""

    def run(moduli, device=None):
        if log is not None:
            log.append((moduli, device, threading.current_thread().name))
        if not moduli:
            wrapped = (true_count + 2**63) % 2**64 - 2**63  # int64 arithmetic wraps
            return np.float64(0.0), np.int64(wrapped)
        return (np.float64(0.0), *[np.int64(true_count % p) for p in moduli])

    return run


def _on_host(run):
    def on_host(moduli):
        values, *counts = run(moduli)
        return values, counts

    return on_host


def test_paired_passes_are_the_int64_pass_and_two_primes():
    calls, paired = [], []
    on_host = _on_host(_passes(2**70 + 3, calls))

    def together(groups):
        paired.append(tuple(groups))
        return [on_host(g) for g in groups]

    primes = list(itertools.islice(_crt.primes(), 20))
    _, count = _crt.solve(on_host, 2**100, residues=4, together=together)
    assert int(count) == 2**70 + 3
    assert paired == [((), tuple(primes[:2]))] and [m for m, _, _ in calls] == [(), tuple(primes[:2])]  # settled
    calls.clear()
    big = 3**150 + 7  # about 2^238, bounded by 2^300: 8 primes, the 6 after the first round in two passes of 3
    on_host_big = _on_host(_passes(big, calls))
    _, count = _crt.solve(on_host_big, 2**300, residues=4, together=lambda gs: [on_host_big(g) for g in gs])
    assert int(count) == big and len(_crt.primes_for(2**64, 2**300)) == 8
    assert [m for m, _, _ in calls] == [(), tuple(primes[:2]), tuple(primes[2:5]), tuple(primes[5:8])]
    calls.clear()
    _crt.solve(on_host, 2**62, residues=4, together=together)  # int64 holds every count: one pass, no round
    assert [m for m, _, _ in calls] == [()] and len(paired) == 1


@pytest.mark.parametrize("lanes", [2, 3])
@pytest.mark.parametrize("wide", [True, False])
def test_rounds_over_lanes_stop_at_the_same_prime_as_one_pass_after_another(lanes, wide):
    """Rounds of one pass per lane compute primes ahead; the primes are combined in order, so the counts,
    and the prime the search stops at, are those of one pass after the other (the others go unused)."""
    primes = list(itertools.islice(_crt.primes(), 40))
    for true in (2**70 + 3, 3**90 + 1, -(5**60), 0):
        one_by_one, rounds = [], []
        alone = _crt.solve(_on_host(_passes(true, one_by_one)), 2**1024, residues=1, wide=wide)
        run = _on_host(_passes(true, rounds))
        together_seen = []

        def together(groups, run=run, together_seen=together_seen):
            together_seen.append(list(groups))
            return [run(g) for g in groups]

        got = _crt.solve(run, 2**1024, residues=1, together=together, wide=wide, lanes=lanes)
        assert int(got[1]) == int(alone[1]) == true
        used = [p for m, _, _ in one_by_one for p in m]
        computed = [p for m, _, _ in rounds for p in m]
        assert computed[: len(used)] == used == primes[: len(used)]  # the same primes, in the same order
        assert len(computed) - len(used) < lanes * (2 if wide else 1)  # at most a round's worth ahead
        assert all(len(g) == lanes for g in together_seen)  # every round fills every lane


def test_exact_runs_the_paired_passes_on_their_own_devices_at_once():
    from lazykern.tn._backend import backend_of

    be, _ = backend_of(np.zeros(1))
    calls = []
    counts = np.array([2**40, 1], dtype=np.int64)
    operands = [(np.zeros(2), counts), (np.zeros(2), counts)]  # a bound of 2^82: primes needed
    values, count = counting.exact(
        be, ["i", "j"], (), operands, {"i": 2, "j": 2}, _passes(2**70 + 3, calls), lambda: 4, lanes=[1, 0]
    )
    assert int(count) == 2**70 + 3
    first = tuple(itertools.islice(_crt.primes(), 1))  # the bound 2^82 needs one prime beside 2^64
    assert sorted((m, d) for m, d, _ in calls) == sorted([((), 1), (first, 0)])  # whole passes, one per device
    assert {name.startswith("lazykern-passes") for _, _, name in calls} == {True}  # on the pair's threads
    calls.clear()
    counting.exact(be, ["i", "j"], (), operands, {"i": 2, "j": 2}, _passes(2**70 + 3, calls), lambda: 4)
    assert [(m, d) for m, d, _ in calls] == [((), None), (first, None)]
