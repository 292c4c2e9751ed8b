"""Host cost per call of the launching entry points, for checking that device resolution
(issue 18) keeps the hot path cheap: median of repeats of N calls, no sync inside the loop.

    python benchmarks/device_overhead.py --out dev.json                       # this checkout
    python benchmarks/device_overhead.py --compare /path/to/other/checkout    # both, side by side

Cases: a ``Kernel`` and a ``@lazy_kernel`` launch with three Numba arrays, ``tropical.matmul``
64^3 with ``out=``, a graph replay; each with the arrays on the current device, and (where
there are two GPUs) on device 1 while device 0 is current, which makes the call switch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

CXX = (
    'extern "C" __global__ void add3(const float *x, const float *y, float *out, int n) {'
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = x[i] + y[i]; }"
)


def _sync_all() -> None:
    from numba import cuda

    for gpu in cuda.gpus:
        with gpu:
            cuda.synchronize()


def _per_call(fn, launches: int, repeats: int) -> float:
    fn()
    _sync_all()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(launches):
            fn()
        times.append((time.perf_counter() - start) / launches)
        _sync_all()
    return statistics.median(times) * 1e6


def measure(launches: int, repeats: int) -> None:
    """Prints one JSON line per figure, so a crash in one case keeps the figures before it."""
    from numba import cuda

    from lazykern import KernelFamily, lazy_kernel

    @lazy_kernel
    def add3(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + y[i]

    for gpu in cuda.gpus:  # retain every primary context while none is current (see lazykern/launch/_device.py)
        with gpu:
            pass
    fam = KernelFamily("overhead", "")
    fam.add("add3", CXX, signature=["ptr", "ptr", "ptr", "int32"])
    places = [("same", 0, 0)] + ([("dev1_from_dev0", 1, 0)] if len(cuda.gpus) > 1 else [])
    for label, data_dev, current in places:
        _measure_place(fam["add3"], add3, label, data_dev, current, launches, repeats)


def _measure_place(kern, add3, label: str, data_dev: int, current: int, launches: int, repeats: int) -> None:
    from numba import cuda

    from lazykern import graph, tropical

    n = 4096
    with cuda.gpus[data_dev]:
        x, y, z = (cuda.to_device(np.ones(n, np.float32)) for _ in range(3))
        A, B = (cuda.to_device(np.ones((64, 64), np.float32)) for _ in range(2))
        C = cuda.device_array((64, 64), np.float32)
        s = cuda.stream()
    with cuda.gpus[current]:
        cases = {
            "Kernel": lambda: kern[(16,), (256,)](x, y, z, np.int32(n)),
            "lazy_kernel": lambda: add3[(16,), (256,)](x, y, z),
            "matmul 64^3 out=": lambda: tropical.matmul(A, B, out=C),
        }
        for name, fn in cases.items():
            print(json.dumps({f"{name} {label}": _per_call(fn, launches, repeats)}), flush=True)
        with graph.capture(s) as g:
            kern[(16,), (256,), s](x, y, z, np.int32(n))
        print(json.dumps({f"graph replay {label}": _per_call(g.replay, launches, repeats)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--compare", default=None, help="another checkout's root: measured in a child process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.child:
        measure(args.launches, args.repeats)
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = {"this": here} | ({"compare": os.path.abspath(args.compare)} if args.compare else {})
    result: dict[str, object] = {"benchmark": "device_overhead (us per call)", "roots": roots}
    for name, root in roots.items():
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", "--launches", str(args.launches)]
        cmd += ["--repeats", str(args.repeats)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root)
        figures: dict[str, object] = {}
        for line in done.stdout.splitlines():
            figures.update(json.loads(line))
        if done.returncode != 0:
            figures["error"] = done.stderr[-1500:]
        result[name] = figures
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
