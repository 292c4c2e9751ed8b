"""Contraction-order search under a time budget, in processes lazykern starts and ends.

cotengra's own parallel pools keep running queued trials after its search returns: the process then
lingers at exit until they end (minutes on a large lattice), and one trial's slicing can run far past
``max_time``. So the search runs in worker processes lazykern owns (``_plan_worker.py``, started as a
script: no ``__main__`` re-import, no fork of a process holding locks or a CUDA context). Each writes
its best order as it improves; at the deadline the parent takes the best it has, kills the workers and
reaps them. Planning ends within ``max_time`` plus process teardown, and leaves nothing running.
"""

from __future__ import annotations

import json
import logging
import math
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from .. import config

log = logging.getLogger("lazykern")

DEFAULT_MAX_TIME = 5.0  # seconds of search for optimize="cotengra" when max_time is not given
_WORKER = Path(__file__).with_name("_plan_worker.py")
_REAP_SECONDS = 2.0
_ERRORS: dict[int, IO[bytes]] = {}  # worker pid -> the file its stderr goes to
# Worker processes at most, one per core this process may run on. The 5 s search's orders are its trials' luck:
# on the H200 host (16 cores) 16 workers found k-best orders predicted 4-15% quicker than 8 did on three
# random 3-regular graphs of 200 vertices, whose CountingMax(2) then took 40 against 47 ms and 42-62 against
# 51-70 ms, the third alike (83-87 against 82-84 ms; benchmarks/results/s77-h200, call 4).
_MAX_WORKERS = 16
REPEATS = 128  # trials per hyper-optimizing worker (cotengra's own default); the deadline may end them sooner
_KEEP = 4  # orders handed back for lazykern's own costing (cotengra counts flops a little differently)
# One worker refines the caller's order where there is one; the rest run the hyper-optimizer, each
# with its own partitioner mix so they do not repeat each other.
_METHODS: list[list[str] | None] = [None, ["kahypar", "greedy"], ["greedy", "kahypar-agglom"], ["kahypar"]]

Candidate = tuple[list[tuple[int, ...]], list[str]]  # (path, sliced symbols)
Found = list[tuple[float, float, Candidate]]  # (multiply-adds, entries written, the order) per worker line


def cotengra_missing() -> ImportError:
    return ImportError(
        "optimize='cotengra' needs cotengra, which is not installed: pip install 'lazykern[tn]' "
        "(or pass optimize='greedy' / 'auto', or an explicit path)"
    )


def search(
    inputs: Sequence[Sequence[str]],
    output: Sequence[str],
    sizes: dict[str, int],
    *,
    target: int,
    max_time: float,
    initial: Sequence[Sequence[int]] | None = None,
    workers: int | None = None,
    repeats: int = REPEATS,
    seed: int = 0,
    objectives: Sequence[str] = ("flops",),
) -> list[Candidate]:
    """The best few orders the workers reported within ``max_time`` seconds by each of ``objectives``
    (cotengra's "flops", or "combo-F": multiply-adds plus F times the entries written), each objective's
    best first; the workers take the objectives in turn.

    ``inputs`` are single-character symbols (opt_einsum's); ``target``: entries of the largest
    intermediate after slicing; ``initial``: a path to refine (subtree reconfiguration) beside the
    fresh searches; ``repeats``: trials each hyper-optimizing worker runs at most. Each worker is seeded
    by ``seed`` plus its number (a second search of the same network passes another ``seed``), so a
    search whose workers finish their trials within ``max_time`` gives the same orders in every process;
    one cut short by the deadline gives what its trials found by then.
    Raises ImportError when cotengra is missing.
    """
    try:
        import cotengra  # noqa: F401  (checked here, where the error can name the extra)
    except ImportError:
        raise cotengra_missing() from None
    if max_time <= 0:
        raise ValueError(f"max_time must be a positive number of seconds, got {max_time!r}")
    count = workers or max(1, min(_MAX_WORKERS, config.cores()))
    start = time.monotonic()
    deadline = start + max_time
    request = {
        "inputs": [list(t) for t in inputs],
        "output": list(output),
        "sizes": dict(sizes),
        "target": int(target),
        # The child stops by itself a little before the parent's deadline (its start-up is spent already).
        "seconds": max(max_time - 0.25, 0.1),
        "repeats": int(repeats),
    }
    jobs = []
    for i in range(count):
        job = dict(request, seed=seed + i, minimize=objectives[i % len(objectives)])
        if initial is not None and i == 0:
            job["initial"] = [list(p) for p in initial]
        else:
            job["methods"] = _METHODS[(i // len(objectives)) % len(_METHODS)]  # each objective: every mix
        jobs.append(job)
    procs = [_start(job) for job in jobs]
    found: Found = []
    try:
        _collect(procs, deadline, found)
    finally:
        _reap(procs)
    log.debug("contraction search: %d orders from %d workers in %.2f s", len(found), count, time.monotonic() - start)
    kept: list[Candidate] = []
    for objective in dict.fromkeys(objectives):  # equal scores: by path, not by which worker spoke first
        ranked = sorted((score(objective, flops, write), c) for flops, write, c in found)
        kept += [c for _, c in ranked if c not in kept][:_KEEP]
    return kept


def score(objective: str, flops: float, write: float) -> float:
    """cotengra's score of an order: its multiply-adds, or with "combo-F" those plus F times its writes."""
    if objective.startswith("combo"):
        return flops + float(objective.partition("-")[2] or 64) * write
    return flops


def _tail(proc: subprocess.Popen[bytes]) -> str:
    err = _ERRORS.pop(proc.pid, None)
    if err is None:
        return ""
    with err:
        err.seek(0)
        return err.read()[-2000:].decode(errors="replace")


def _start(job: dict[str, Any]) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # cotengra as this process sees it
    env["LAZYKERN_PLAN_PARENT"] = str(os.getpid())  # the worker dies with this process (_plan_worker.py)
    err = tempfile.TemporaryFile()  # a file, not a pipe: a chatty worker never blocks on it
    proc = subprocess.Popen(
        [sys.executable, str(_WORKER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        env=env,
        close_fds=True,
        start_new_session=True,  # its own process group: _reap kills whatever the worker started, too
    )
    _ERRORS[proc.pid] = err
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job).encode() + b"\n")
    proc.stdin.close()
    return proc


def _collect(procs: list[subprocess.Popen[bytes]], deadline: float, found: Found) -> None:
    """Read the workers' lines until the deadline or until every worker has ended."""
    sel = selectors.DefaultSelector()
    buffers: dict[int, bytes] = {}
    heard: dict[int, Found] = {}  # each worker's orders: a final line replaces what its polls saw
    for p in procs:
        assert p.stdout is not None
        os.set_blocking(p.stdout.fileno(), False)
        sel.register(p.stdout, selectors.EVENT_READ)
        buffers[p.stdout.fileno()] = b""
    try:
        while sel.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(timeout=left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                lines = (buffers[key.fd] + chunk).split(b"\n")
                buffers[key.fd] = lines.pop()
                for line in lines:
                    _take(line, heard.setdefault(key.fd, []))
    finally:
        sel.close()
        found.extend(order for orders in heard.values() for order in orders)


def _take(line: bytes, found: Found) -> None:
    """One worker line into that worker's ``found``; a final line (the search's own result) replaces
    the orders its polls reported before it."""
    try:
        item = json.loads(line)
        path = [tuple(int(i) for i in step) for step in item["path"]]
        sliced = [str(s) for s in item["sliced"]]
        flops = float(item["flops"])
        write = float(item.get("write", 0.0))
    except (ValueError, KeyError, TypeError) as exc:
        log.debug("contraction search: ignored a worker line (%s)", exc)
        return
    if math.isfinite(flops) and math.isfinite(write):
        if item.get("final") is True:
            found.clear()
        found.append((flops, write, (path, sliced)))


def _reap(procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill every worker's process group (the worker and anything it started) and wait for the worker:
    nothing this search started outlives it."""
    for p in procs:
        _kill_group(p)
    for p in procs:
        try:
            p.wait(timeout=_REAP_SECONDS)
        except subprocess.TimeoutExpired:  # a process that ignores SIGKILL is stuck in the kernel
            log.warning("contraction search: worker %d did not end after SIGKILL", p.pid)
        if p.stdout is not None:
            p.stdout.close()
        _kill_group(p)  # a child the worker started while it ended
        tail = _tail(p)
        if p.returncode not in (0, -9):  # -9: the deadline's SIGKILL
            log.warning("contraction search: a worker failed (exit %s): %s", p.returncode, tail)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads (start_new_session): after the worker has ended too, for
    its children; the group is gone once all of them are."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is empty: everything ended
        pass
