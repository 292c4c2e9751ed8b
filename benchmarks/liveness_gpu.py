"""Liveness on a GPU machine (issue 26): each scenario with a CUDA context open, as a real subprocess.

    python benchmarks/liveness_gpu.py --out benchmarks/results/liveness-h100-$(date +%F).json

1. ``warm``: ``lazykern warm --all -j N`` of the tropical family from a process holding a CUDA
   context, SIGINT once workers have compiled something: exit 130 within 2 s, no worker left,
   the store sound (``check``) and holding at least what was reported stored.
2. ``fork``: a thread compiles (held open / inside NVRTC), the process forks (multiprocessing
   "fork"), the child compiles a kernel; the child ends, and the parent's context still launches.
3. ``planner``: the contraction-planner scenario of the ``tn`` work (``tests/liveness/*plan*.py``),
   run with ``LAZYKERN_LIVENESS_CUDA=1``; recorded as skipped when this tree has none.

Writes one JSON object: the device, then per scenario ``ok``, the figures and the output's tail.
Exits 1 when a scenario failed.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.liveness._proc import Scenario, children, cmdline, env, still_running  # noqa: E402

# `python -m lazykern ...` with a CUDA context opened first (runpy: wherever the CLI module lives).
WARM_WITH_CONTEXT = (
    "import runpy, sys; from numba import cuda; cuda.current_context(); "
    "sys.argv = ['lazykern', *sys.argv[1:]]; runpy.run_module('lazykern', run_name='__main__', alter_sys=True)"
)


def device() -> dict[str, Any]:
    from numba import cuda

    dev = cuda.get_current_device()
    return {"name": dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name), "cc": dev.compute_capability}


def warm_sigint(jobs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as cache_dir:
        args = ["-c", WARM_WITH_CONTEXT, "warm", "--all", "-j", str(jobs)]
        run = Scenario(args, env(cache_dir, LAZYKERN_PROGRESS_INTERVAL="0.5"), hard_timeout=300)
        run.wait_for(lambda line: bool(re.search(r"\[[1-9]\d*/\d+\]", line)), timeout=240)
        workers = [p for p in children(run.proc.pid) if "resource_tracker" not in cmdline(p)]
        run.proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        code, _ = run.finish()
        took = time.monotonic() - sent
        left = still_running(workers)
        m = re.search(r"(\d+) of (\d+) kernels compiled and stored", run.output)
        stored = int(m.group(1)) if m else -1
        from lazykern import KernelCache

        report = KernelCache(cache_dir).check()
    ok = code == 130 and took < 2.0 and not left and m is not None and report["ok"] and report["entries"] >= stored
    return {
        "ok": ok,
        "exit_code": code,
        "seconds_to_stop": round(took, 3),
        "workers_at_signal": len(workers),
        "workers_left": len(left),
        "reported_stored": stored,
        "entries_in_store": report["entries"],
        "store_ok": report["ok"],
        "output_tail": run.output[-1500:],
    }


def fork_mid_compile(mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as cache_dir:
        run = Scenario(["tests/liveness/_fork_user.py", mode, "cuda"], env(cache_dir), hard_timeout=120)
        code, _ = run.finish()
    lines = [line for line in run.lines if line.startswith("{")]
    result = json.loads(lines[-1]) if lines else {}
    ok = code == 0 and result.get("exit") == 0 and not result.get("hung") and result.get("parent_launch") == 1
    return {"ok": ok, "exit_code": code, **result, "output_tail": run.output[-1500:]}


def planner() -> dict[str, Any]:
    found = sorted(glob.glob(os.path.join(ROOT, "tests", "liveness", "*plan*.py")))
    if not found:
        return {"ok": True, "skipped": "no planner scenario (tests/liveness/*plan*.py) in this tree"}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *found],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, LAZYKERN_LIVENESS_CUDA="1"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return {
        "ok": done.returncode == 0,
        "files": [os.path.relpath(f, ROOT) for f in found],
        "exit_code": done.returncode,
        "seconds": round(time.monotonic() - start, 2),
        "output_tail": (done.stdout + done.stderr)[-1500:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="warm workers (default: every core)")
    args = parser.parse_args()
    log: dict[str, Any] = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device(),
        "cpus": os.cpu_count(),
        "scenarios": {},
    }
    steps = {
        "warm_sigint": lambda: warm_sigint(args.jobs),
        "fork_same_kernel": lambda: fork_mid_compile("same"),
        "fork_inside_nvrtc": lambda: fork_mid_compile("nvrtc"),
        "planner": planner,
    }
    for name, step in steps.items():
        start = time.monotonic()
        try:
            result = step()
        except Exception as exc:  # one broken scenario must not hide the others
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        result["wall_seconds"] = round(time.monotonic() - start, 2)
        log["scenarios"][name] = result
        print(f"{name}: {'ok' if result['ok'] else 'FAILED'} ({result['wall_seconds']} s)", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(log, fh, indent=2)
    print(f"wrote {args.out}")
    sys.exit(0 if all(s["ok"] for s in log["scenarios"].values()) else 1)


if __name__ == "__main__":
    main()
