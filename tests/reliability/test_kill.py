"""SIGKILL a process at random moments while it compiles and stores; nothing stored is lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import warnings

import pytest

from lazykern import KernelCache

from ._families import synthetic_family
from ._kill_worker import payload

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_kill_worker.py")
ROOT = os.path.dirname(os.path.dirname(HERE))


MODES = ("timer", "mid-blob", "after-blob")
# Each trial is a fresh process: 3 per mode by default, more with LAZYKERN_FUZZ_EXAMPLES.
TRIALS = max(int(os.environ.get("LAZYKERN_FUZZ_EXAMPLES", "9")), len(MODES))


def _run_and_kill(directory, seed: int, delay: float, mode: str) -> tuple[list[str], bool]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen(
        [sys.executable, WORKER, str(directory), str(seed), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    if mode == "timer":
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL or "done" in out, err
    lines = out.splitlines()
    assert "Traceback" not in err, err
    return [line.split()[1] for line in lines if line.startswith("stored ")], "done" in lines


def _expected(directory) -> dict[str, bytes]:
    """Bytes every acknowledged key must hold: payloads, and the synthetic family's cubins."""
    fam = synthetic_family(KernelCache(directory.parent / "reference"))
    out = {f"p{i}": payload(i) for i in range(300)}
    for name in fam.names():
        out[fam.key(name, "sm_90")] = fam.get(name, "sm_90").code
    return out


@pytest.mark.slow
def test_sigkill_mid_write_loses_nothing(tmp_path, record_property):
    directory = tmp_path / "cache"
    expected = _expected(directory)
    rng = random.Random(7)
    acked: set[str] = set()
    orphans = lost = finished = 0
    for trial in range(TRIALS):
        mode = MODES[trial % len(MODES)]
        keys, done = _run_and_kill(directory, seed=trial, delay=rng.uniform(0.0, 1.0), mode=mode)
        finished += done
        acked.update(keys)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the next process must not even need to warn
            cache = KernelCache(directory)
            for key in sorted(acked):
                entry = cache.lookup(key)
                if entry is None or entry.code != expected[key]:
                    lost += 1
        report = cache.check(repair=True, min_age=0)
        assert report["integrity"] == "ok" and not report["bad_entries"] and not report["missing_files"], report
        orphans += report["orphan_files"]
        assert cache.check(min_age=0)["ok"]
        cache.close()
    print(
        f"\n{TRIALS} kills, {finished} finished before the kill, {len(acked)} entries acknowledged, "
        f"{orphans} orphan blob files removed, {lost} lost"
    )
    record_property("acknowledged", len(acked))
    record_property("orphans_removed", orphans)
    assert lost == 0
    # Timer kills may land after the worker finished on a fast machine; the mid-blob and
    # after-blob modes kill it from inside the write path, so some trials always die mid-write.
    assert finished < TRIALS, "no kill landed while the worker was still writing"
    assert orphans > 0, "the injected kills leave blob files without rows; check() must have found them"
