"""Issue 45's cause, shown alone: one Numba kernel run on two GPUs shares one CUlibrary between the
two contexts' modules, and each context's deallocation queue unloads it.

    python3 -X faulthandler benchmarks/shared_library_probe.py --out benchmarks/results/x.json

Each case runs in a child with NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0 (Numba flushes a context's
queue at every queued release, so the exit unloads every module at once instead of only when the
queue passes its threshold):
  numba           a @cuda.jit kernel launched on every GPU, lazykern never imported
  lazykern_first  lazykern launches on every GPU first (tropical.matmul), then the same kernel
  numba_first     the kernel on every GPU first, then lazykern (its exit teardown sees the sharing)
Per case: the exit code (a negative one is the signal), whether stderr shows a crash, and from the
child the CUlibrary handle of each context's modules (a handle in two contexts is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

CASES = ("numba", "lazykern_first", "numba_first")
CRASH_MARKS = ("double free", "corrupted size", "Fatal Python error", "Segmentation fault", "free(): invalid")


def numba_kernel_everywhere() -> None:
    import numpy as np
    from numba import cuda

    @cuda.jit
    def add_one(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1

    for d in range(len(cuda.gpus)):
        with cuda.gpus[d]:
            a = cuda.to_device(np.zeros(64, np.float32))
            add_one[1, 64](a)
            assert (a.copy_to_host() == 1).all()


def lazykern_everywhere() -> None:
    import numpy as np
    from numba import cuda

    from lazykern import tropical

    A = np.arange(16, dtype=np.float32).reshape(4, 4)
    for d in range(len(cuda.gpus)):
        with cuda.gpus[d]:
            tropical.matmul(cuda.to_device(A), cuda.to_device(A)).copy_to_host()


def libraries() -> dict[str, list[int]]:
    """Each device's Numba modules, as the CUlibrary handles they unload."""
    from numba import cuda

    out = {}
    for d in range(len(cuda.gpus)):
        with cuda.gpus[d]:
            ctx = cuda.current_context()
            out[str(d)] = sorted(int(m.handle) for m in ctx.modules.values())
    return out


def child(case: str) -> None:
    if case == "lazykern_first":
        lazykern_everywhere()
        numba_kernel_everywhere()
    elif case == "numba_first":
        numba_kernel_everywhere()
        lazykern_everywhere()
    else:
        numba_kernel_everywhere()
    held = libraries()
    seen: dict[int, int] = {}
    for handles in held.values():
        for h in handles:
            seen[h] = seen.get(h, 0) + 1
    print(json.dumps({"libraries": held, "shared": sum(n > 1 for n in seen.values())}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", choices=CASES)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    env = dict(os.environ, NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT="0")
    runs: list[dict[str, Any]] = []
    for case in CASES:
        for i in range(args.repeat):
            proc = subprocess.run(
                [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), "--child", case],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
            crashed = proc.returncode != 0 or any(m in proc.stderr for m in CRASH_MARKS)
            runs.append(
                {
                    "case": case,
                    "run": i,
                    "rc": proc.returncode,
                    "clean": not crashed,
                    "child": json.loads(lines[-1]) if lines else None,
                    "stderr_tail": proc.stderr[-1500:],
                }
            )
            print(f"{case} run {i}: rc {proc.returncode} clean {not crashed}", file=sys.stderr, flush=True)
    record = {
        "command": " ".join(sys.argv),
        "env": {"NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT": "0"},
        "runs": runs,
        "python": platform.python_version(),
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(record, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
