"""lazykern.families._procpool: worker processes that end with their work, whatever ends it."""

from __future__ import annotations

import os
import time
from contextlib import closing

from lazykern.families import _procpool
from tests import _procpool_tasks as tasks


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_every_task_runs_once_and_results_come_back():
    outcomes = list(_procpool.run(tasks.square, [(i,) for i in range(12)], 2))
    assert sorted(o.value for o in outcomes) == [i * i for i in range(12)]
    assert all(o.ok and o.value == o.task[0] ** 2 for o in outcomes)


def test_a_dead_worker_fails_only_its_task_and_is_replaced():
    outcomes = {o.task[0]: o for o in _procpool.run(tasks.die_on, [(i, 3) for i in range(8)], 2)}
    assert sorted(outcomes) == list(range(8))
    assert not outcomes[3].ok and "SIGKILL" in outcomes[3].error
    assert all(outcomes[i].ok and outcomes[i].value == i for i in range(8) if i != 3)


def test_an_exception_is_data_and_a_hung_task_is_stopped():
    failed = {o.task[0]: o for o in _procpool.run(tasks.fail_on, [(i, 1) for i in range(3)], 2)}
    assert not failed[1].ok and failed[1].error == "ValueError: bad input 1"
    start = time.monotonic()
    hung = {o.task[0]: o for o in _procpool.run(tasks.hang_on, [(i, 0) for i in range(3)], 2, task_timeout=2)}
    assert time.monotonic() - start < 20
    assert not hung[0].ok and "timed out after 2 s" in hung[0].error
    assert hung[1].ok and hung[2].ok


def test_leaving_early_terminates_the_workers():
    pids: list[int] = []
    start = time.monotonic()
    with closing(_procpool.run(tasks.pid, [(i,) for i in range(50)], 2)) as outcomes:
        for outcome in outcomes:
            pids.append(outcome.value)
            if len(set(pids)) == 2:
                break  # a consumer that stops (an exception, Ctrl-C) closes the generator
    assert time.monotonic() - start < 30
    assert len(set(pids)) == 2 and os.getpid() not in pids
    deadline = time.monotonic() + 3
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
