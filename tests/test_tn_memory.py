"""Contractions within the machine: on the CPU the plan is fitted to the available RAM (or refused with the
figures before anything is allocated), and a memory_limit no sane plan meets is refused at once."""

from __future__ import annotations

import time
import weakref
from unittest import mock

import networkx as nx
import numpy as np
import pytest

from lazykern.errors import SlicingError
from lazykern.tn import _backend, _contract, _cost, counting
from lazykern.tn import networks as nw
from lazykern.tn._contract import Algebra
from lazykern.tn.contraction import network, operands
from lazykern.tn.contraction.network import Network
from lazykern.tn.einsum import build_network, contract_network, contraction_plan, network_argmax


def _tutte_chain(K: int | None = None):
    """Independent sets of the Tutte graph by size: a chain label (0..K-1) threads the 46 vertices; the
    default plan's intermediates reach 2^24.6 entries (K = 47)."""
    g = nx.tutte_graph()
    n = g.number_of_nodes()
    K = n + 1 if K is None else K
    labels, ops = [], []
    for u, v in g.edges():
        labels.append((u, v))
        ops.append(np.array([[0.0, 0.0], [0.0, -np.inf]]))
    for i, v in enumerate(sorted(g.nodes())):
        t = np.full((2, K, K), -np.inf)
        for k in range(K):
            t[0, k, k] = 0.0
            if k + 1 < K:
                t[1, k, k + 1] = 0.0
        labels.append((v, ("k", i), ("k", i + 1)))
        ops.append(t[:, :1, :] if i == 0 else t)
    return labels, ops, ("k", n)


def test_available_ram_is_read_from_the_machine(monkeypatch):
    ram = _backend.available_ram()
    assert ram is None or ram > 0
    host = _backend.Backend("numpy", np)
    assert host.memory_limit(16) <= _backend.DEFAULT_HOST_LIMIT
    # the host's budget is the RAM available at the time it is asked (it moves with other processes)
    monkeypatch.setattr(_backend, "available_ram", lambda: 3 << 30)
    assert host.budget_bytes() == 3 << 30


def test_a_container_memory_limit_lowers_the_available_ram(tmp_path, monkeypatch):
    """MemAvailable is the machine's; a cgroup limit (a container's) below it is what this process may use."""
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    limit.write_text("1073741824\n")
    usage.write_text("805306368\n")
    monkeypatch.setattr(_backend, "_CGROUPS", ((str(limit), str(usage)),))
    ram = _backend.available_ram()
    assert ram is None or ram == 256 << 20  # None only where /proc/meminfo is absent
    limit.write_text("max\n")  # no limit: the machine's figure
    assert _backend._cgroup_room() is None


def test_the_tutte_counting_network_is_refused_past_the_ram_before_allocating(monkeypatch):
    """The default plan needs ~4 GiB on the host (the NumPy kernels' temporaries counted); with 64 MiB of RAM
    the planner slices and, finding nothing that fits, refuses with the figures at once."""
    labels, ops, out = _tutte_chain()
    monkeypatch.setattr(_backend, "available_ram", lambda: 64 << 20)
    start = time.monotonic()
    with pytest.raises(MemoryError, match=r"GiB of RAM at its peak .* GiB of RAM is available"):
        counting.count_network(labels, (out,), ops)
    assert time.monotonic() - start < 20


def test_a_plan_is_sliced_to_fit_the_ram_and_stays_within_it(monkeypatch):
    """A smaller chain (max-plus; ~100 MiB predicted unsliced on the host) with 64 MiB of RAM: sliced to fit,
    the same answer, and the NumPy allocations (traced) stay within the figure the plan was fitted to."""
    import tracemalloc

    labels, ops, out = _tutte_chain(K=4)
    want = contract_network(labels, (out,), ops, memory_limit=2**28)
    net = build_network(labels, (out,), ops, "maxplus", Algebra)
    ram = 64 << 20
    assert net.peak(net.plan("auto", (), 2**28, None)) * _cost.POOL_MARGIN > ram  # it would not fit unsliced
    monkeypatch.setattr(_backend, "available_ram", lambda: ram)
    plan = net.plan("auto", (), None, None)
    assert plan.nslices > 1 and net.peak(plan) * _cost.POOL_MARGIN <= ram
    tracemalloc.start()
    try:
        got = contract_network(labels, (out,), ops)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= ram and np.array_equal(got, want)


def test_memory_limit_1_on_16_spins_is_refused_at_once():
    """memory_limit=1 slices every spin: 2^16 slices (530 s before); refused before it runs."""
    sg = nw.random_regular(16, 3, seed=1)
    start = time.monotonic()
    for solve in (nw.ground_state_energy, nw.degeneracy, nw.ground_state):
        with pytest.raises(SlicingError, match=r"slices 16 labels: 65536 slices .* Raise memory_limit"):
            solve(sg, memory_limit=1)
    assert time.monotonic() - start < 10
    assert nw.ground_state_energy(sg, memory_limit=16) == nw.ground_state_energy(sg)  # a sane limit answers


def test_k18_with_a_tiny_limit_is_refused_within_seconds_and_a_sane_one_answers():
    g = nx.complete_graph(18)
    sg = nw.SpinGlass(18, list(g.edges()), np.ones(153, dtype=int))
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"slices \d+ labels: \d+ slices .* step runs, predicted"):
        nw.ground_state_energy(sg, memory_limit=4)
    assert time.monotonic() - start < 10
    small = nw.SpinGlass(10, list(nx.complete_graph(10).edges()), np.ones(45, dtype=int))
    assert nw.ground_state_energy(small, memory_limit=4) == -45  # sliced, but cheaply: answered
    plan = contraction_plan([t for t in sg.labels()], (), dict.fromkeys(range(18), 2), memory_limit=4)
    assert plan.nslices > 2**10  # planning alone is not refused: the plan can be inspected


class _FakeCupy:
    """What Backend._whole asks of CuPy, on the host: device allocations that fail ``refusals`` times
    (cudaErrorMemoryAllocation), a pool whose spare blocks can be handed back, arrays over a pointer."""

    class CUDARuntimeError(Exception):
        def __init__(self, status):
            super().__init__(f"CUDA error {status}")
            self.status = status

    class OutOfMemoryError(MemoryError):
        def __init__(self, size, total, limit=0):
            super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes)")

    def __init__(self, refusals=0, status=2):
        import types

        self.refusals, self.status, self.made, self.pooled, self.released = refusals, status, [], [], 0
        fake = self

        class Memory:
            def __init__(self, size):
                if fake.refusals:
                    fake.refusals -= 1
                    raise fake.CUDARuntimeError(fake.status)
                self.size = size
                fake.made.append(size)

        class Pool:
            def free_all_blocks(self):
                fake.released += 1

            def total_bytes(self):
                return 123

        memory = types.SimpleNamespace(
            Memory=Memory, MemoryPointer=lambda mem, offset: (mem, offset), OutOfMemoryError=self.OutOfMemoryError
        )
        runtime = types.SimpleNamespace(CUDARuntimeError=self.CUDARuntimeError)
        self.cuda = types.SimpleNamespace(memory=memory, runtime=runtime)
        self.pool = Pool()

    def get_default_memory_pool(self):
        return self.pool

    def empty(self, shape, dtype):
        self.pooled.append(shape)
        return np.empty(shape, dtype)

    def ndarray(self, shape, dtype, memptr):
        return ("whole", shape, np.dtype(dtype), memptr[0].size)


def test_a_whole_array_is_a_device_allocation_of_its_own_and_small_ones_stay_in_the_pool():
    xp = _FakeCupy()
    be = _backend.Backend("cupy", xp)
    like = np.zeros(1, np.float32)
    big = (2, _backend.WHOLE_BYTES // 8)  # WHOLE_BYTES of float32
    assert be.empty(like, big, whole=True) == ("whole", big, np.dtype(np.float32), _backend.WHOLE_BYTES)
    assert xp.made == [_backend.WHOLE_BYTES] and not xp.pooled
    be.empty(like, (2, _backend.WHOLE_BYTES // 8 - 1), whole=True)  # a byte short: the pool's
    be.empty(like, big)  # not asked for whole
    assert xp.made == [_backend.WHOLE_BYTES] and len(xp.pooled) == 2


def test_a_whole_array_refused_by_the_device_is_tried_again_once_the_pool_hands_its_blocks_back():
    like, big = np.zeros(1, np.int32), (_backend.WHOLE_BYTES // 4,)
    xp = _FakeCupy(refusals=1)
    assert _backend.Backend("cupy", xp).empty(like, big, whole=True)[0] == "whole"
    assert xp.released == 1 and xp.made == [_backend.WHOLE_BYTES]
    xp = _FakeCupy(refusals=2)  # still refused: the pool's out-of-memory error, which the memory guard reports
    be = _backend.Backend("cupy", xp)
    with pytest.raises(MemoryError, match="Out of memory allocating 268,435,456 bytes") as info:
        be.empty(like, big, whole=True)
    assert be.out_of_memory(info.value) and xp.released == 1
    xp = _FakeCupy(refusals=1, status=700)  # another CUDA error is not memory: raised as it is
    with pytest.raises(_FakeCupy.CUDARuntimeError):
        _backend.Backend("cupy", xp).empty(like, big, whole=True)
    assert xp.released == 0


@pytest.mark.gpu
def test_a_whole_array_takes_no_pool_block_and_its_memory_comes_back_when_it_dies():
    cupy = pytest.importorskip("cupy")
    be = _backend.Backend("cupy", cupy)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    like = cupy.zeros(1, cupy.float32)
    used, total = pool.used_bytes(), pool.total_bytes()
    x = be.empty(like, (_backend.WHOLE_BYTES // 4,), whole=True)
    assert pool.used_bytes() == used and pool.total_bytes() == total  # no block of the pool
    x[...] = 3
    assert float(x.sum()) == 3 * x.size
    # Back to the device when it dies, not to the pool. The device's free memory is shared with whatever
    # else runs (pytest-xdist's workers): the gain is read across the release alone.
    before = cupy.cuda.runtime.memGetInfo()[0]
    del x
    after = cupy.cuda.runtime.memGetInfo()[0]
    assert after - before >= _backend.WHOLE_BYTES - (64 << 20)  # (x.sum()'s result is the pool's own block)


def test_an_argmax_run_asks_for_its_large_arrays_whole_and_the_hosts_gpu_route_allocates_as_before():
    """network_argmax sets :attr:`Backend.large_whole` on its network's backend; on NumPy (and the GPU route
    run on the host with NumPy arrays) it changes nothing: no ``out=`` for a product, plain arrays."""
    seen = []
    build = Network.build

    def spy(*args, **kwargs):
        net = build(*args, **kwargs)
        seen.append(net)
        return net

    with mock.patch.object(Network, "build", spy):
        best, _ = network_argmax([("a", "b"), ("b", "c")], (), [np.ones((2, 2)), np.ones((2, 2))])
    assert best == 2 and seen[0].be.large_whole
    route = _backend.Backend("cupy", np)
    route.large_whole = True
    big = np.zeros((1, 1 << 13, 1 << 13), dtype=np.float32)  # 256 MiB: WHOLE_BYTES
    assert route.product_out(big, big, False) is None
    assert isinstance(route.empty(np.zeros(1, np.float32), (4,)), np.ndarray)


@pytest.mark.gpu
def test_an_argmax_runs_large_arrays_and_products_take_no_pool_block_and_compute_the_same():
    """:attr:`Backend.large_whole` (an argmax run's): arrays and products' results of WHOLE_BYTES or more
    are device allocations of their own, smaller ones the pool's; a product into them (with its argmax)
    gives what the pool's would."""
    cupy = pytest.importorskip("cupy")
    be = _backend.Backend("cupy", cupy)
    be.large_whole = True
    pool = cupy.get_default_memory_pool()
    like = cupy.zeros(1, cupy.float32)
    used = pool.used_bytes()
    big = be.empty(like, (_backend.WHOLE_BYTES // 4,))
    assert pool.used_bytes() == used  # no block of the pool
    small = be.empty(like, (1024,))
    assert pool.used_bytes() >= used + small.nbytes  # a small one is the pool's
    del big, small
    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.integers(-3, 3, (1, _backend.WHOLE_BYTES // 16, 2)).astype(np.float32))
    b = cupy.asarray(rng.integers(-3, 3, (1, 2, 4)).astype(np.float32))
    assert be.product_out(a[:, :8], b, False) is None  # small: the product allocates in the pool
    out = be.product_out(a, b, True)
    assert isinstance(out, tuple) and out[1].dtype == np.int32 and out[0].shape == (1, a.shape[1], 4)
    alg = Algebra("maxplus", be)
    (values,), index = alg.bmm((a,), (b,), argmax=True)
    pooled = Algebra("maxplus", _backend.Backend("cupy", cupy)).bmm((a,), (b,), argmax=True)
    assert bool((values == pooled[0][0]).all()) and bool((index == pooled[1]).all())
    assert _backend.Backend("numpy", np).product_out(np.zeros((1, 2, 2)), np.zeros((1, 2, 2)), False) is None


def _square_count_network(L, moduli, be):
    sg = nw.square_lattice(L, seed=3)
    fit = sg.fitted(np, np.float32, count=True)
    labels, tensors = nw._network(sg, fit, np)
    with mock.patch.object(operands, "backend_of", lambda x: (be, np.asarray(x))):
        net = build_network(labels, (), tensors, "maxplus", counting.algebra(*moduli))
    return labels, tensors, net


def test_in_place_counting_on_cupy_plans_with_the_small_margin_only_where_every_large_array_is_whole():
    """A sweep's large arrays are all bit-addressed results (allocated whole on CuPy): the peak is held to
    WHOLE_MARGIN. A large array of a product of any shape (the pool's) or another library: the pool's margin."""
    _, _, net = _square_count_network(14, (2147483647,), _backend.Backend("cupy", np))
    sg = nw.square_lattice(14, seed=3)
    plan, _ = nw._sweep(sg, sg.labels(), dict.fromkeys(range(sg.n), 2), _cost.H100_F32, 4)
    steps = net.priced(plan)[0]  # as the executor runs them: bit-addressed from 2^12 entries
    other = max(max(s.result, *s.operands) for s in steps if not s.bits) * net.entry_bytes  # the pool's largest
    assert other < max(s.result for s in steps) * net.entry_bytes  # the sweep's boundaries are larger
    sliced = contraction_plan(sg.labels(), (), dict.fromkeys(range(sg.n), 2), optimize=list(plan.path), slices=[0])
    with mock.patch.object(network, "WHOLE_BYTES", other + 1):  # only bit-addressed steps' arrays are large
        assert net.margin(plan) == _cost.WHOLE_MARGIN
        assert sliced.nslices == 2 and net.margin(sliced) == _cost.POOL_MARGIN  # its kept results: the pool's
    with mock.patch.object(network, "WHOLE_BYTES", other):  # a product of any shape's array is large too
        assert net.margin(plan) == _cost.POOL_MARGIN
    torch_net = _square_count_network(14, (2147483647,), _backend.Backend("torch", np))[2]
    assert torch_net.margin(plan) == _cost.POOL_MARGIN


def test_a_pass_carries_two_residues_where_they_fit_by_the_whole_arrays_margin():
    """As the 32 x 32 count on an 80 GB H100 with two boundaries at a step: two residues a pass (12 bytes an
    entry) fit the free memory by WHOLE_MARGIN, not by the pool's; three do not fit at all. (With its boundary
    in one buffer three fit: tests/test_tn_count_arena.py; here no arena takes the run.)"""
    be = _backend.Backend("cupy", np)
    _, _, net = _square_count_network(14, (2147483647,), be)
    sg = nw.square_lattice(14, seed=3)
    plan, _ = nw._sweep(sg, sg.labels(), dict.fromkeys(range(sg.n), 2), _cost.H100_F32, 4)
    free = int(net.peak(plan, entry_bytes=12) * 1.05)
    other = max(max(s.result, *s.operands) for s in net.priced(plan)[0] if not s.bits) * 12
    with mock.patch.object(be, "budget_bytes", lambda: free), mock.patch.object(net, "arena_run", lambda *a: None):
        with mock.patch.object(network, "WHOLE_BYTES", other + 1):
            assert counting.residues_per_pass(net, plan) == 2
        with mock.patch.object(network, "WHOLE_BYTES", other):  # a product's large array in the pool
            assert counting.residues_per_pass(net, plan) == 1


class _Tracked(_backend.Backend):
    """The GPU route on the host, counting the bytes of the arrays it allocates while they live, as the
    pool hands them out (whole 512-byte units)."""

    def __init__(self):
        super().__init__("cupy", np)
        self.live, self.now, self.peak, self.on = {}, 0, 0, False

    def _own(self, x, source=None):
        if not self.on or x is source or (source is not None and np.shares_memory(x, source)):
            return
        while isinstance(x.base, np.ndarray):
            x = x.base
        if id(x) not in self.live:
            self.live[id(x)] = size = -(-x.nbytes // 512) * 512
            self.now += size
            self.peak = max(self.peak, self.now)
            weakref.finalize(x, self._drop, id(x))

    def _drop(self, key):
        self.now -= self.live.pop(key)

    def empty(self, like, shape, whole=False):
        out = super().empty(like, shape, whole)
        self._own(out)
        return out

    def full(self, like, shape, value, dtype=None):
        out = super().full(like, shape, value, dtype)
        self._own(out)
        return out

    def contiguous(self, x):
        out = super().contiguous(x)
        self._own(out, x)
        return out

    def contiguous_parts(self, parts, alike=False):
        out = super().contiguous_parts(parts, alike)
        for o, p in zip(out, parts):
            self._own(o, p)
        return out


@pytest.mark.parametrize("moduli", [(2147483647,), (2147483647, 2147483629), ()])
def test_the_predicted_peak_of_a_counting_pass_is_what_its_arrays_hold(moduli):
    """A 10 x 10 counting sweep, steps bit-addressed and in place as on the GPU, with one, two residues or
    int64 counts a pass: the bytes its arrays hold at the worst moment are the peak the plan predicts, to
    the 512-byte rounding of the small arrays' parts (the model rounds an entry's parts together)."""
    be = _Tracked()
    labels, tensors, net = _square_count_network(10, moduli, be)
    sg = nw.square_lattice(10, seed=3)
    with mock.patch.object(_contract, "STRIDED_MIN", 0):
        plan, steps = nw._sweep(sg, sg.labels(), dict.fromkeys(range(sg.n), 2), _cost.H100_F32, 4)
        real_run = Network.run

        def run(self, *a, **k):  # the leaves are the caller's: only the run's own arrays are counted
            be.on = True
            try:
                return real_run(self, *a, **k)
            finally:
                be.on = False

        with mock.patch.object(operands, "backend_of", lambda x: (be, np.asarray(x))):
            with mock.patch.object(Network, "run", run):
                contract_network(labels, (), tensors, optimize=plan, algebra=counting.algebra(*moduli))
    predicted = _cost.peak_bytes(steps, 0, net.entry_bytes, 0, inplace=True) - 2 * 512  # no leaves
    parts = 1 + max(len(moduli), 1)
    assert max(s.result for s in steps) * net.entry_bytes >= 4 * 512 * parts  # the boundary dominates the slack
    assert predicted <= be.peak <= predicted + 2 * (parts - 1) * 512
