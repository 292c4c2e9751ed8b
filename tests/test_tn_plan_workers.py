"""No planner worker (lazykern/tn/_plan_worker.py) or anything it starts outlives the call that started it:
after a normal return, after the deadline, and when the calling process is killed with SIGKILL mid-plan.
Processes are found by the marker every worker (and its children) carries in its environment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lazykern.tn import _planner, networks

pytest.importorskip("cotengra")
ROOT = Path(__file__).resolve().parent.parent


def _ours(parent: int) -> list[int]:
    """Live processes started for ``parent``'s planning (their environment names it)."""
    marker = f"LAZYKERN_PLAN_PARENT={parent}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if marker in env and state != "Z":
            found.append(int(pid))
    return found


def _wait_none(parent: int, seconds: float) -> list[int]:
    end = time.monotonic() + seconds
    while (left := _ours(parent)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


def _lattice(L: int) -> tuple[list[list[str]], list[str], dict[str, int]]:
    sg = networks.square_lattice(L)
    symbol = [chr(0x4E00 + i) for i in range(sg.n)]
    inputs = [[symbol[i] for i in t] for t in sg.labels()]
    return inputs, [], dict.fromkeys(symbol, 2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("L, max_time", [(4, 2.5), (14, 0.3)])  # orders found / killed while still starting
def test_nothing_survives_a_return(L, max_time):
    inputs, output, sizes = _lattice(L)
    found = _planner.search(inputs, output, sizes, target=2**8, max_time=max_time, workers=2)
    assert found or max_time < 1
    assert _ours(os.getpid()) == []  # reaped before search returned: not even a zombie


WORKER_PARENT = textwrap.dedent(
    """
    import sys
    from lazykern.tn import _planner, networks
    sg = networks.square_lattice(16)
    symbol = [chr(0x4E00 + i) for i in range(sg.n)]
    inputs = [[symbol[i] for i in t] for t in sg.labels()]
    _planner.search(inputs, [], dict.fromkeys(symbol, 2), target=2**8, max_time=60.0, workers=2)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG is Linux's")
def test_nothing_survives_the_caller_killed_mid_plan():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", WORKER_PARENT], env=env)
    try:
        end = time.monotonic() + 30
        while len(_ours(proc.pid)) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        assert len(_ours(proc.pid)) >= 2, "the workers never started"
        time.sleep(0.5)  # mid-search
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert _wait_none(proc.pid, 5.0) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _ours(proc.pid):  # a failed test leaves nothing behind either
            os.kill(pid, signal.SIGKILL)


def test_cotengra_auto_parallelism_is_serial_in_a_worker():
    """The worker turns cotengra's parallel="auto" serial (a borrowed flag: this fails if a release moves it)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import _plan_worker as w; import cotengra.parallel as p; "
        "assert w.serial_cotengra(); assert p.parse_parallel_arg('auto') is None; print('serial')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "lazykern" / "tn")], capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "serial", out.stderr


def test_the_same_network_gets_the_same_order_in_every_search():
    """The workers seed cotengra's random sources: two searches of one 3-regular graph whose trials end
    before the deadline hand back the same orders (unseeded, most such pairs differed)."""
    nx = pytest.importorskip("networkx")
    graph = nx.random_regular_graph(3, 40, seed=3)
    symbol = [chr(0x4E00 + i) for i in graph]
    inputs = [[symbol[i], symbol[j]] for i, j in graph.edges()] + [[symbol[i]] for i in graph]
    sizes = dict.fromkeys(symbol, 2)
    first, second = (_planner.search(inputs, [], sizes, target=2**30, max_time=60.0, workers=1, repeats=6)
                     for _ in range(2))  # fmt: skip
    assert first and first == second


def test_a_final_line_replaces_what_the_polls_saw():
    """A worker whose search ran all its trials ends with its result marked final: the orders its polls
    happened to see before (one improvement or two, by timing) are dropped, so a seeded search hands
    back the same orders in every run."""

    def line(flops: float, final: bool = False) -> bytes:
        item = {"path": [[0, 1]], "sliced": [], "flops": flops, "write": 1.0, "size": 2.0}
        return json.dumps(item | ({"final": True} if final else {})).encode()

    found: list = []
    _planner._take(line(9.0), found)
    _planner._take(line(7.0), found)
    assert [f for f, _, _ in found] == [9.0, 7.0]  # cut short by the deadline: every improvement counts
    _planner._take(line(7.0, final=True), found)
    assert [f for f, _, _ in found] == [7.0]


def test_default_workers_follow_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``workers`` a search starts one worker per core the process may run on (its affinity, not
    the host's count), at most _planner._MAX_WORKERS."""
    from lazykern import config

    jobs: list[dict[str, object]] = []
    monkeypatch.setattr(_planner, "_start", lambda job: jobs.append(job) or _Stub())  # no process: counted
    monkeypatch.setattr(_planner, "_collect", lambda procs, deadline, found: None)
    monkeypatch.setattr(_planner, "_reap", lambda procs: None)
    for usable, want in ((1, 1), (3, 3), (64, _planner._MAX_WORKERS)):
        jobs.clear()
        monkeypatch.setattr(config, "cores", lambda usable=usable: usable)
        _planner.search([["a", "b"], ["b", "c"]], ["a"], {"a": 2, "b": 2, "c": 2}, target=8, max_time=1.0)
        assert len(jobs) == want, (usable, len(jobs))
        assert len({job["seed"] for job in jobs}) == want  # each its own trials


class _Stub:
    """A stand-in for a worker process that nothing reads."""


def test_config_cores_is_the_affinity() -> None:
    from lazykern import config

    n = config.cores()
    assert 1 <= n <= (os.cpu_count() or n)
    if hasattr(os, "sched_getaffinity"):
        assert n == len(os.sched_getaffinity(0))
