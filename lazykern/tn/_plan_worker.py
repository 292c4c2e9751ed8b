"""One contraction-order search process, started and ended by :mod:`lazykern.tn._planner`.

Run as a script (``python _plan_worker.py``), so the child imports cotengra and opt_einsum only, never
the caller's ``__main__`` (as multiprocessing's spawn would) nor lazykern. It is the leader of its own
process group (the parent kills the group: anything it started goes too), dies with its parent
(``PR_SET_PDEATHSIG``), and forks nothing: cotengra's ``parallel="auto"`` is serial here, and any
process pool still made spawns its processes. It reads one JSON request
on stdin and writes one JSON line to stdout each time its best order improves:
``{"path": [[i, j], ...], "sliced": [label, ...], "flops": f, "write": w, "size": s}`` (labels are the
request's symbols; a hyper-optimizer that ran all its trials ends with its result, ``"final": true``),
by the request's ``minimize``: "flops" (multiply-adds) or cotengra's "combo-F" (multiply-adds plus F
times the entries written, which favours orders whose large steps are GEMM-like).
It stops by itself at the request's deadline; the parent kills it sooner when it is done.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from typing import Any


def _score(tree: Any, minimize: str) -> float:
    """The worker's objective of ``tree``: multiply-adds, or cotengra's combo of them and the writes."""
    if minimize.startswith("combo"):
        return float(tree.combo_cost(factor=float(minimize.partition("-")[2] or 64)))
    return float(tree.contraction_cost())


def _emit(tree: Any, best: list[float], minimize: str = "flops", final: bool = False) -> None:
    """Write ``tree`` as one line if it beats ``best``; ``final``: the search's own result, written
    whatever it scores (its line has ``"final": true``)."""
    score = _score(tree, minimize)
    if score >= best[0] and not final:
        return
    best[0] = min(score, best[0])
    line = {
        "path": [list(p) for p in tree.get_path()],
        "sliced": sorted(tree.sliced_inds),
        "flops": float(tree.contraction_cost()),
        "write": float(tree.total_write()),
        "size": float(tree.max_size()),
    }
    if final:
        line["final"] = True
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def refine(req: dict[str, Any], deadline: float, best: list[float]) -> None:
    """Subtree reconfiguration of the caller's order (a geometry seed), then slicing to the target."""
    import cotengra

    inputs, output, sizes = req["inputs"], req["output"], req["sizes"]
    minimize = req.get("minimize", "flops")
    tree = cotengra.ContractionTree.from_path(inputs, output, sizes, path=[tuple(p) for p in req["initial"]])
    target = req["target"]
    sliced = tree.slice(target_size=target) if tree.max_size() > target else tree
    _emit(sliced, best, minimize)
    seed = req["seed"]
    while time.monotonic() < deadline:
        tree = tree.subtree_reconfigure(subtree_size=8, maxiter=64, seed=seed, minimize=minimize)
        seed += 1
        sliced = tree.slice(target_size=target, seed=seed) if tree.max_size() > target else tree
        _emit(sliced, best, minimize)


def hyper(req: dict[str, Any], deadline: float, best: list[float]) -> None:
    """cotengra's hyper-optimizer, in this process only (parallel=False), read as it improves."""
    import cotengra

    minimize = req.get("minimize", "flops")
    opt = cotengra.HyperOptimizer(
        methods=req.get("methods"),
        max_repeats=int(req.get("repeats", 1 << 20)),
        max_time=max(deadline - time.monotonic(), 0.1),
        parallel=False,
        minimize=minimize,
        slicing_opts={"target_size": req["target"]},
        on_trial_error="ignore",
        progbar=False,
    )
    done = threading.Event()

    def search() -> None:
        try:
            opt.search(req["inputs"], req["output"], req["sizes"])
        finally:
            done.set()

    threading.Thread(target=search, daemon=True).start()  # this process ends with its deadline anyway
    while not done.wait(0.1) and time.monotonic() < deadline:
        if "tree" in opt.best:  # a dict cotengra replaces whole on each improvement
            _emit(opt.best["tree"], best, minimize)
    if "tree" in opt.best:
        # A search that ran all its trials ends with its result marked final: the parent then drops what
        # this worker's polls happened to see on the way (one improvement or two, by timing), so the same
        # seeded search hands back the same orders in every run.
        _emit(opt.best["tree"], best, minimize, final=done.is_set())


def _bound_to_parent(parent: int) -> None:
    """Die with the process that started this one: the kernel sends SIGKILL when the parent dies
    (Linux's PR_SET_PDEATHSIG), and a parent that died before that was set is caught by its pid.
    Elsewhere the worker ends at its own deadline."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # no prctl: the deadline still ends this process
            pass
    if parent and os.getppid() != parent:
        os._exit(0)


def _no_fork() -> None:
    """Any process pool cotengra makes starts its processes fresh, never as forks of this process (a
    thread of it searches: a fork copies locks the thread holds, and the child deadlocks on them)."""
    import multiprocessing

    multiprocessing.set_start_method("spawn", force=True)


def serial_cotengra() -> bool:
    """Make cotengra's ``parallel="auto"`` (the default of its random-greedy optimizer, of the optimizers
    subtree reconfiguration builds, of slice_and_reconfigure) serial in this process: it would start a
    process pool, which outlives a worker killed at its deadline (main's orphaned pairs: a worker and the
    pool child it forked, one on a futex, one on a pipe). cotengra makes "auto" serial inside its own pool
    workers through ``cotengra.parallel._IS_WORKER``; this process is one of ours. False where a cotengra
    release no longer has that flag (tests/test_tn_plan_workers.py then fails; spawn still holds)."""
    import cotengra.parallel

    if not hasattr(cotengra.parallel, "_IS_WORKER"):
        return False
    cotengra.parallel._IS_WORKER = True
    return True


def seeded(seed: int) -> None:
    """Seed the random sources cotengra draws from when it is given no seed (its hyper-optimizer's
    parameter search, the random-greedy and partitioner trials, slicing: ``random`` and NumPy's global
    generators), so the same network gives the same trials in every process. Unseeded, one n = 200
    graph got plans of 2^33.9 and 2^38.1 in two processes. The trials a search completes still depend
    on its time budget and the machine's load; the store then keeps the plan found first."""
    import random

    import numpy

    random.seed(seed)
    numpy.random.seed(seed)


def main() -> int:
    _bound_to_parent(int(os.environ.get("LAZYKERN_PLAN_PARENT", "0")))
    _no_fork()
    serial_cotengra()
    req = json.loads(sys.stdin.readline())
    seeded(int(req.get("seed", 0)))
    deadline = time.monotonic() + float(req["seconds"])
    best = [math.inf]
    try:
        (refine if req.get("initial") is not None else hyper)(req, deadline, best)
    except BrokenPipeError:  # the parent took what it needed and closed the pipe
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
