"""Contractions within the machine: on the CPU the plan is fitted to the available RAM (or refused with the
figures before anything is allocated), and a memory_limit no sane plan meets is refused at once."""

from __future__ import annotations

import time

import networkx as nx
import numpy as np
import pytest

from lazykern.errors import SlicingError
from lazykern.tn import _backend, _cost, counting
from lazykern.tn import networks as nw
from lazykern.tn._contract import Algebra
from lazykern.tn.einsum import build_network, contract_network, contraction_plan


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
