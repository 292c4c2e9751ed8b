"""``lazykern warm`` stops on SIGINT and SIGTERM within 2 s, with its workers, keeping what completed.

Each scenario is the command as a user types it, in a real subprocess; the signal is sent for
real once the progress lines show that workers have compiled something (not after a blind sleep).
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from lazykern import KernelCache

from ._proc import Scenario, children, cmdline, env, still_running

WARM = ["-m", "lazykern", "warm", "--family", "tests.liveness._family:family", "--arch", "sm_90"]
DONE = re.compile(r"\[(\d+)/(\d+)\]")


def _workers(pid: int) -> list[int]:
    """warm's worker processes: not multiprocessing's resource tracker, nor the trace server a compile
    in warm's own process starts (it ends when warm does: its stdin closes)."""
    return [p for p in children(pid) if not any(s in cmdline(p) for s in ("resource_tracker", "_trace_server"))]


def _compiled_some(line: str) -> bool:
    m = DONE.search(line)
    return bool(m) and int(m.group(1)) > 0


@pytest.mark.parametrize(
    ("sig", "status", "jobs"),
    [(signal.SIGINT, 130, "2"), (signal.SIGTERM, 143, "2"), (signal.SIGINT, 130, "1")],
    ids=["sigint-j2", "sigterm-j2", "sigint-j1"],
)
def test_a_signal_stops_warm_and_its_workers_keeping_what_completed(tmp_path, sig, status, jobs):
    run = Scenario([*WARM, "-j", jobs], env(str(tmp_path), LIVENESS_KERNELS="400"))
    run.wait_for(_compiled_some)
    workers = _workers(run.proc.pid)
    assert len(workers) == (2 if jobs == "2" else 0), [cmdline(p) for p in workers]
    run.proc.send_signal(sig)
    sent = time.monotonic()
    code, _ = run.finish()
    took = time.monotonic() - sent
    assert code == status, run.output
    assert took < 2.0, f"took {took:.2f} s to stop after the signal"
    assert still_running(workers) == [], "worker processes outlived the command"
    m = re.search(r"warm stopped after .*: (\d+) of (\d+) kernels compiled and stored", run.output)
    assert m, run.output
    assert "interrupted by SIG" in run.output and "Traceback" not in run.output
    stored, todo = int(m.group(1)), int(m.group(2))
    assert 0 < stored < todo == 400

    report = KernelCache(str(tmp_path)).check()  # nothing half-written: every entry sound
    assert report["ok"] and not report["bad_entries"], report
    assert stored <= report["entries"] < todo

    again = Scenario([*WARM, "-j", "1", "--kernels", "add_0,add_1,add_2"], env(str(tmp_path), LIVENESS_KERNELS="400"))
    code, _ = again.finish()
    assert code == 0, again.output


def test_warm_that_finishes_leaves_no_process_and_exits_promptly(tmp_path):
    run = Scenario([*WARM, "-j", "2"], env(str(tmp_path), LIVENESS_KERNELS="6"))
    run.wait_for(lambda line: "compiling 6 kernels in 2 worker processes" in line)
    workers = _workers(run.proc.pid)
    code, _ = run.finish()
    assert code == 0, run.output
    assert still_running(workers) == []
    assert re.search(r"│\s+6 │\s+0 │\s+0 │", run.output), run.output
