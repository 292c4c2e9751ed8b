"""Worker processes of a spread (:mod:`lazykern.tn._procs`): owned, warm, never orphaned; errors come home.

The pool's lifecycle is tested with host workers (``gpu=False``) calling standard-library functions;
the whole spread path runs with NumPy operands in worker processes (``LAZYKERN_SPREAD=processes``) and
must equal the one-process path and the oracles.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from lazykern.errors import DeviceMemoryError
from lazykern.tn import _crt, _procs, counting
from lazykern.tn import networks as nw
from lazykern.tn.counts import exact as counts_exact
from lazykern.tropical import einsum

from ._processes import gone
from ._spin_oracles import transfer_matrix


@pytest.fixture(autouse=True)
def fresh_pool():
    """A fresh pool, kept warm between calls (keep_warm: the pool's own mechanics are what these tests
    read; workers ending with their call is tests/test_tn_procs_scope.py's)."""
    _procs.shutdown()
    with _procs.keep_warm():
        yield
    _procs.shutdown()
    assert _procs.workers() == []


def test_a_worker_answers_and_is_kept_warm_for_the_next_call():
    [got] = _procs.run([(3, "math", "factorial", (20,))], lambda: "here", gpu=False)[1:]
    assert got == 2432902008176640000
    [pid] = _procs.workers()
    answers = _procs.run([(3, "os", "getpid", ())], lambda: os.getpid(), gpu=False)
    assert answers == [os.getpid(), pid]  # the same process: warm, no second start
    assert _procs.workers() == [pid]
    _procs.shutdown()
    assert gone(pid) and _procs.workers() == []


def test_a_worker_error_comes_back_as_its_own_type_with_its_message_and_the_worker_stays():
    with pytest.raises(ValueError, match="invalid literal for int") as info:
        _procs.run([(0, "builtins", "int", ("x",))], lambda: None, gpu=False)
    assert "in the worker process for device 0" in str(info.value.__cause__)
    [pid] = _procs.workers()
    with pytest.raises(DeviceMemoryError, match="no room"):  # lazykern's own errors, pickled whole
        _procs.run([(0, __name__, "raise_memory_error", ("no room",))], lambda: None, gpu=False)
    assert _procs.workers() == [pid]  # an answered call, even an error, keeps the worker


def test_an_exception_that_does_not_pickle_comes_back_by_type_and_message():
    item = _procs.encode_error(_Unpicklable("the worker's words"))
    assert item[0] == "named"
    rebuilt = _procs.decode_error(item, "a worker")
    assert isinstance(rebuilt, Exception) and "the worker's words" in str(rebuilt)
    assert "_Unpicklable" in str(rebuilt.__cause__)


def raise_memory_error(message: str) -> None:
    """Run in a worker: a device memory error, as a worker's memory guard raises it."""
    raise DeviceMemoryError(message)


class _Unpicklable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.handle = lambda: None  # a lambda: pickle refuses it


def test_a_worker_that_dies_gives_a_clear_error_and_is_replaced():
    with pytest.raises(_procs.WorkerError, match=r"device 2 .* ended before it answered.*exit status 7"):
        _procs.run([(2, "os", "_exit", (7,))], lambda: None, gpu=False)
    assert _procs.workers() == []  # the dead one is reaped, not kept
    [pid] = _procs.run([(2, "os", "getpid", ())], lambda: None, gpu=False)[1:]
    assert _procs.workers() == [pid]


def test_an_error_here_waits_for_the_workers_and_leaves_them_idle():
    def fail() -> None:
        raise KeyError("here")

    with pytest.raises(KeyError, match="here"):
        _procs.run([(0, "time", "sleep", (0.3,)), (1, "time", "sleep", (0.3,))], fail, gpu=False)
    pids = _procs.workers()
    assert len(pids) == 2
    assert _procs.run([(0, "os", "getpid", ()), (1, "os", "getpid", ())], lambda: None, gpu=False)[1:] == pids


def test_an_interrupted_call_kills_the_busy_worker():
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _procs.run([(0, "time", "sleep", (60,))], interrupted, gpu=False)
    assert _procs.workers() == []


_OWNER = textwrap.dedent(
    """
    import sys, time
    from lazykern.tn import _procs
    _procs.keep_warm().__enter__()  # kept to the end: the exit path ends it (atexit)
    w = _procs.take(0, gpu=False)
    w.call("time", "sleep", (float(sys.argv[1]),))
    print(w.pid, flush=True)
    if sys.argv[2] == "wait":
        w.result()
        _procs.give_back(w)
    elif sys.argv[2] == "hang":
        time.sleep(60)
    """
)


@pytest.mark.parametrize(
    "how",
    [
        "exit with an idle worker",  # atexit ends it
        "exit with a busy worker",  # stdin closes; PDEATHSIG if still busy
        "killed while the worker is busy",  # SIGKILL: PDEATHSIG
    ],
)
def test_no_worker_outlives_its_owner(how):
    if "idle" in how:
        args = ["0", "wait"]
    elif "exit" in how:
        args = ["30", "exit"]
    else:
        args = ["30", "hang"]
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, *args], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    pid = int(owner.stdout.readline())
    if "killed" in how:
        time.sleep(0.2)
        owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)
    owner.stdout.close()
    assert gone(pid), f"worker {pid} outlived its owner ({how})"


def test_a_worker_started_from_a_short_lived_thread_outlives_that_thread():
    """PR_SET_PDEATHSIG follows the thread that started a child: workers are started by one long-lived
    launcher thread, so a warm worker survives the caller's thread."""
    import threading

    seen = []
    t = threading.Thread(target=lambda: seen.append(_procs.run([(0, "os", "getpid", ())], lambda: 0, gpu=False)[1]))
    t.start()
    t.join()
    time.sleep(0.3)
    assert _procs.workers() == seen


def test_visible_device_maps_ordinals_through_the_callers_list(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _procs.visible_device(1) == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5")
    assert _procs.visible_device(1) == "5"


# -- the spread path, in processes, with NumPy operands ---------------------------------------------------
SLICED = [3, 14, 21]


@pytest.fixture
def processes(monkeypatch):
    monkeypatch.setenv("LAZYKERN_SPREAD", "processes")


def test_energy_and_degeneracy_in_worker_processes_equal_one_process_and_the_oracle(processes, caplog):
    sg = nw.square_lattice(6, seed=7)
    E0, count = transfer_matrix(sg, 6)
    with caplog.at_level("DEBUG", logger="lazykern"):
        assert nw.ground_state_energy(sg, slices=SLICED, devices=[0, 1, 2]) == E0
    [profile] = [r.spread_profile for r in caplog.records if hasattr(r, "spread_profile")]
    assert [(g["device"], g["start"], g["stop"]) for g in profile["groups"]] == [(0, 0, 3), (1, 3, 6), (2, 6, 8)]
    assert len(_procs.workers()) == 2  # devices 1 and 2; device 0's group ran here
    assert nw.degeneracy(sg, slices=SLICED, devices=[0, 1]) == (E0, count)
    ferro = nw.square_lattice(4, J="ferro")  # its two ground states in two groups: only the add gives 2
    assert nw.degeneracy(ferro, slices=[0], devices=[0, 1]) == (-24.0, 2)


def test_a_configuration_found_over_worker_processes_is_the_one_process_configuration(processes, caplog):
    """argmax_einsum / ground_state: each worker finds its slices' optima (their values come home as Python
    numbers); the first best slice is backtracked here: the same spins as one process."""
    sg = nw.square_lattice(6, seed=7)
    E1, spins1 = nw.ground_state(sg, slices=SLICED)
    with caplog.at_level("DEBUG", logger="lazykern"):
        E, spins = nw.ground_state(sg, slices=SLICED, devices=[0, 1, 2])
    assert any("in worker processes" in r.getMessage() for r in caplog.records)
    assert E == E1 and sg.energy(spins) == E1
    np.testing.assert_array_equal(spins, spins1)
    A = np.array([[0.0, 2.0, 2.0], [1.0, 2.0, -1.0]])  # a tie between slices 1 and 2 of label j
    from lazykern.tropical import argmax_einsum

    assert argmax_einsum("ij->", A, slices="j", devices=[0, 1, 2]) == argmax_einsum("ij->", A, slices="j")


def test_einsum_in_worker_processes_equals_one_process(processes):
    rng = np.random.default_rng(3)
    A, B, C = rng.standard_normal((5, 6)), rng.standard_normal((6, 7)), rng.standard_normal((7, 4))
    for semiring in ("maxplus", "minplus"):
        one = einsum("ij,jk,kl->il", A, B, C, semiring=semiring, slices="jk")
        spread = einsum("ij,jk,kl->il", A, B, C, semiring=semiring, slices="jk", devices=[0, 1, 2])
        np.testing.assert_array_equal(spread, one)
    v, c = counting.einsum(
        ",".join("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS") + "->",
        *[np.zeros(4)] * 45,
        slices="abc",
        devices=[0, 1],
    )
    assert (float(v), c) == (0.0, 4**45)  # past 2^64: every counting pass spread, exact


def test_counting_passes_in_rounds_over_worker_processes(processes):
    """counting.exact with lanes: each round's passes whole, one per device, the home one here and the
    others in workers (counting_pass, NumPy): the count is the big integer the one-process passes give."""
    from lazykern.tn._backend import backend_of
    from lazykern.tn.einsum import contract_network, contraction_plan

    be, _ = backend_of(np.zeros(1))
    n = 150
    inputs = [(i,) for i in range(n)]
    operands = [np.zeros(2)] * n  # 2^150 assignments, all optimal: the int64 pass and 3 primes
    sizes = dict.fromkeys(range(n), 2)
    plan = contraction_plan(inputs, (), sizes, optimize="greedy")
    here = []

    def run(moduli, device=None):
        here.append((moduli, device))
        return contract_network(inputs, (), operands, optimize=plan, algebra=counting.algebra(*moduli))

    def remote(moduli):
        return (inputs, (), operands, "maxplus", moduli, "numpy", plan)

    values, count = counting.exact(
        be, inputs, (), operands, sizes, run, lambda: 1, [0, 1], lambda: True, remote=remote, home=0
    )
    assert int(count) == 2**150 and float(values) == 0.0
    assert here and all(device == 0 for _, device in here)  # device 1's passes ran in its worker
    assert len(here) >= 2  # rounds after the first: one pass here, one in the worker each
    assert here[0][0] == ()  # the int64 pass here, the first prime pass in the worker at once
    assert len(_procs.workers()) == 1
    first = next(iter(_crt.primes()))
    assert all(first not in m for m, _ in here)
    here.clear()
    counting.exact(
        be, inputs, (), operands, sizes, run, lambda: 1, [0, 1], lambda: True, remote=remote, home=0, rounds=False
    )
    assert here[0] == ((), 0) and all(device is None for _, device in here[1:])  # later passes: one by one


def test_a_round_that_does_not_fit_runs_again_one_residue_a_pass(processes, monkeypatch):
    calls = []

    def on_host(moduli, device):
        calls.append((moduli, device))
        return np.float64(0.0), [np.int64(5 % p) for p in moduli]

    def no_room(calls_, here, gpu=True):
        raise DeviceMemoryError("a worker's device is full")

    monkeypatch.setattr(_procs, "run", no_room)
    primes = tuple(itertools.islice(_crt.primes(), 4))
    out = counts_exact._in_processes([(primes[:2], 0), (primes[2:], 1)], on_host, lambda m: (), 0)
    assert calls == [(primes[:2], 0), (primes[2:], 1)] and len(out) == 2
    with pytest.raises(DeviceMemoryError):  # one residue a pass already: nothing narrower to try
        counts_exact._in_processes([(primes[:1], 0), (primes[1:2], 1)], on_host, lambda m: (), 0)


def test_algebras_a_worker_can_name_are_shipped_others_keep_their_threads(processes, caplog):
    """Module-level algebras (max-plus, log-space) and counting rings (rebuilt from their moduli) go to
    the worker; one made at run time that no worker can name (k-best) keeps its threads. Every result
    equals the one-process contraction."""
    from lazykern.tn.algebras import kbest, logsum
    from lazykern.tn.einsum import contract_network

    rng = np.random.default_rng(5)
    inputs, output = [("i", "j"), ("j", "k"), ("k", "l")], ("i",)
    ops = [rng.integers(-3, 4, shape).astype(np.float64) for shape in ((3, 4), (4, 4), (4, 2))]
    cases = [
        (None, ops, True),
        (logsum.LogSumAlgebra, ops, True),
        (counting.algebra(2147483647), [(o, np.ones(o.shape, np.int64)) for o in ops], True),
        (kbest.algebra(2), ops, False),
    ]
    for algebra, operands, shipped in cases:
        kw = {} if algebra is None else {"algebra": algebra}
        one = contract_network(inputs, output, operands, optimize="greedy", slices="jk", **kw)
        caplog.clear()
        with caplog.at_level("DEBUG", logger="lazykern"):
            spread = contract_network(inputs, output, operands, optimize="greedy", slices="jk", devices=[0, 1], **kw)
        for a, b in zip(one if isinstance(one, tuple) else (one,), spread if isinstance(spread, tuple) else (spread,)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)
        went = any("in worker processes" in r.getMessage() for r in caplog.records)
        assert went == shipped, algebra


def test_gpu_operands_spread_in_processes_by_default_numpy_in_threads(monkeypatch):
    from lazykern.tn import _spread
    from lazykern.tn._backend import Backend

    monkeypatch.delenv("LAZYKERN_SPREAD", raising=False)
    gpu, host = Backend("cupy", None), Backend("numpy", np)
    assert _spread.in_processes(gpu) and not _spread.in_processes(host)
    monkeypatch.setenv("LAZYKERN_SPREAD", "threads")
    assert not _spread.in_processes(gpu)
    monkeypatch.setenv("LAZYKERN_SPREAD", "processes")
    assert _spread.in_processes(host)
