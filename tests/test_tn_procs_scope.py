"""No worker process outlives the call that started it (issue 44's rule): a spread's workers are shared
by everything inside one public call and ended when it returns; ``lazykern.tn.keep_workers()`` keeps them
between calls while it is open."""

from __future__ import annotations

import numpy as np
import pytest

import lazykern.tn
from lazykern.tn import _procs
from lazykern.tn import networks as nw

from ._processes import gone
from ._spin_oracles import transfer_matrix


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch):
    monkeypatch.setenv("LAZYKERN_SPREAD", "processes")  # NumPy operands in worker processes, as GPUs' are
    _procs.shutdown()
    yield
    _procs.shutdown()
    assert _procs.workers() == []


def _started(monkeypatch) -> list[int]:
    """The pids of the workers started from now on."""
    pids: list[int] = []
    real = _procs._start

    def start(device, gpu):
        worker = real(device, gpu)
        pids.append(worker.pid)
        return worker

    monkeypatch.setattr(_procs, "_start", start)
    return pids


def test_a_calls_workers_end_when_it_returns(monkeypatch):
    pids = _started(monkeypatch)
    assert _procs.run([(1, "os", "getpid", ())], lambda: None, gpu=False)[1] == pids[0]
    assert _procs.workers() == [] and gone(pids[0])


def test_one_call_shares_its_workers_between_its_passes(monkeypatch):
    """A degeneracy's counting passes (past int64 here: 4^45) and slices share one worker per device,
    and none is left when it returns."""
    pids = _started(monkeypatch)
    sg = nw.square_lattice(6, seed=7)
    E0, count = transfer_matrix(sg, 6)
    assert nw.degeneracy(sg, slices=[3, 14, 21], devices=[0, 1]) == (E0, count)
    assert len(pids) == 1 and _procs.workers() == [] and gone(pids[0])
    from lazykern.tropical import counting

    v, c = counting.einsum(
        ",".join("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS") + "->",
        *[np.zeros(4)] * 45,
        slices="abc",
        devices=[0, 1],
    )
    assert (float(v), c) == (0.0, 4**45)
    assert len(pids) == 2 and _procs.workers() == [] and gone(pids[1])  # one more start: a call of its own


def test_keep_workers_keeps_them_between_calls_and_ends_them_after(monkeypatch):
    pids = _started(monkeypatch)
    sg = nw.square_lattice(6, seed=7)
    with lazykern.tn.keep_workers():
        first = nw.ground_state_energy(sg, slices=[3, 14, 21], devices=[0, 1])
        assert nw.ground_state_energy(sg, slices=[3, 14, 21], devices=[0, 1]) == first
        assert len(pids) == 1 and _procs.workers() == pids  # warm: one start for both calls
    assert _procs.workers() == [] and gone(pids[0])


def test_a_failed_call_leaves_no_worker(monkeypatch):
    pids = _started(monkeypatch)

    def fail() -> None:
        raise KeyError("here")

    with pytest.raises(KeyError, match="here"):
        _procs.run([(1, "time", "sleep", (0.2,))], fail, gpu=False)
    assert _procs.workers() == [] and gone(pids[0])
