"""A sliced spin-glass contraction through Dask (:func:`lazykern.scale.dask.contract_network`):
one task per slice group, partials added on the client; equal to one process and to the oracle."""

from __future__ import annotations

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason='needs distributed: pip install "dask[array,distributed]"')

from lazykern.scale import dask as lkdask  # noqa: E402
from lazykern.tn import networks as nw  # noqa: E402
from lazykern.tn.counting import CountingAlgebra  # noqa: E402

from ._spin_oracles import transfer_matrix  # noqa: E402

SLICED = [3, 14, 21]  # forced: 8 slices of the 6x6 lattice


@pytest.fixture(scope="module")
def lattice():
    sg = nw.square_lattice(6, seed=11)
    labels, tensors = sg.network()
    return sg, labels, tensors, transfer_matrix(sg, 6)


def _cluster(processes: bool):
    return distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=":0", silence_logs=40
    )


def _group_tasks(stream) -> list[str]:
    return [t["key"] for t in stream.data if str(t["key"]).startswith("lazykern-slices")]


def test_energy_and_degeneracy_on_a_thread_cluster(lattice):
    sg, labels, tensors, (E0, count) = lattice
    with _cluster(processes=False) as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream:
            best = lkdask.contract_network(client, labels, (), tensors, optimize="greedy", slices=SLICED)
        assert -float(best) == E0 == nw.ground_state_energy(sg, slices=SLICED)
        assert len(_group_tasks(stream)) == 2  # one task per worker by default
        pairs = [(t, np.ones(t.shape, np.int64)) for t in tensors]
        v, c = lkdask.contract_network(
            client, labels, (), pairs, optimize="greedy", slices=SLICED, algebra=CountingAlgebra, groups=5
        )
        assert (-float(v), int(c)) == (E0, count) == nw.degeneracy(sg, slices=SLICED)
        with pytest.raises(ValueError, match="module must be one of"):
            lkdask.contract_network(client, labels, (), tensors, slices=SLICED, module="jax")
        with pytest.raises(ValueError, match="groups must be a positive"):
            lkdask.contract_network(client, labels, (), tensors, slices=SLICED, groups=0)


def test_a_tie_split_between_tasks_counts_twice():
    sg = nw.square_lattice(4, J="ferro")
    labels, tensors = sg.network()
    with _cluster(processes=False) as cluster, distributed.Client(cluster) as client:
        v, c = lkdask.contract_network(
            client, labels, (), tensors, optimize="greedy", slices=[0], algebra=CountingAlgebra
        )
    assert (-float(v), int(c)) == (-24.0, 2)


def test_worker_processes_get_the_network_and_plan_by_pickle(lattice):
    """processes=True: the network, the plan and the algebra travel pickled to other processes."""
    sg, labels, tensors, (E0, _) = lattice
    with _cluster(processes=True) as cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as stream:
            best = lkdask.contract_network(client, labels, (), tensors, optimize="greedy", slices=SLICED, groups=4)
    assert -float(best) == E0
    tasks = [t for t in stream.data if str(t["key"]).startswith("lazykern-slices")]
    assert len(tasks) == 4 and len({t["worker"] for t in tasks}) >= 1


@pytest.mark.gpu
def test_on_a_local_cuda_cluster(lattice):
    dask_cuda = pytest.importorskip(
        "dask_cuda", reason="needs dask-cuda (pip install 'lazykern[dask-cuda]') and a GPU per worker"
    )
    pytest.importorskip("cupy", reason="the workers contract CuPy arrays: needs cupy")
    sg, labels, tensors, (E0, count) = lattice
    with dask_cuda.LocalCUDACluster(dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        best = lkdask.contract_network(client, labels, (), tensors, optimize="greedy", slices=SLICED, module="cupy")
        pairs = [(t, np.ones(t.shape, np.int64)) for t in tensors]
        v, c = lkdask.contract_network(
            client, labels, (), pairs, optimize="greedy", slices=SLICED, algebra=CountingAlgebra, module="cupy"
        )
    assert -float(best) == E0
    assert (-float(v), int(c)) == (E0, count)


def test_counts_past_2_64_are_exact_on_thread_and_process_workers():
    """Each pass (modulo 2^64, then primes) runs over every worker in one ring and the partials add
    in it; the Chinese remainder theorem gives the transfer method's big integer (not int64's wrap).
    Process workers rebuild each prime's algebra themselves (it is not pickled)."""
    sg = nw.square_lattice(10, seed=5)
    keep = np.random.default_rng(5).random(len(sg.J)) < 0.1  # nine couplings in ten zero: 2^80 ground states
    sg = nw.SpinGlass(sg.n, sg.edges, sg.J * keep, positions=sg.positions)
    E0, count = transfer_matrix(sg, 10)
    assert count > 1 << 64
    labels, tensors = sg.network()
    pairs = [(t, np.ones(t.shape, np.int64)) for t in tensors]
    for processes in (False, True):
        with _cluster(processes) as cluster, distributed.Client(cluster) as client:
            v, c = lkdask.contract_network(
                client, labels, (), pairs, optimize="greedy", slices=[30, 40], algebra=CountingAlgebra, groups=3
            )
        assert (-float(v), c) == (E0, count)
