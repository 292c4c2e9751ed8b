"""Does a process that used every GPU exit cleanly? (issue 31: SIGSEGV / "double free" at exit after multi-GPU work)

    python3 benchmarks/multigpu_exit.py --repeat 20 --out benchmarks/results/multigpu-exit-2xh200.json
    python3 benchmarks/multigpu_exit.py --repeat 20 --without-teardown --out /tmp/exit-without.json  # A/B
    python3 benchmarks/multigpu_exit.py --once          # one process: the work below, then a plain exit

One process (--once) uses every visible GPU through each library that is installed:
  numba    Numba device arrays through tropical.matmul, and a lazykern graph capturing
           tropical.matmul(out=) on a Numba stream, replayed 5 times
  cupy     tropical.matmul of CuPy arrays, and a CuPy stream-captured graph, launched
  torch    tropical.matmul of torch tensors, and a torch.cuda.CUDAGraph, replayed
  spread   an 8 x 8 spin glass's ground-state energy with its slices over every GPU (devices="all")
then returns from main() and lets the interpreter exit: the exit is what is tested. --repeat N
runs N such processes one after the other and writes, per run, the exit code (a negative code
is the signal that ended it: -11 is SIGSEGV, -6 SIGABRT as glibc's "double free" raises),
seconds, what each child ran and the tail of its stderr; the command exits 0 only if every
child did. --without-teardown sets LAZYKERN_EXIT_TEARDOWN=0 in the children (lazykern leaves its
graphs, modules and pools to Numba's finalizers, as before the teardown existed).
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

import numpy as np

from lazykern import graph, tropical
from lazykern.tn import networks as nw

N = 64  # side of the products: small, the exit is what matters


def _close(a: Any, b: Any) -> bool:
    return bool(np.allclose(np.asarray(a), np.asarray(b)))


def numba_work(devices: int, A: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    from numba import cuda

    done = []
    for d in range(devices):
        with cuda.gpus[d]:
            s = cuda.stream()
            dA = cuda.to_device(A, stream=s)
            out = cuda.device_array((N, N), dtype=A.dtype, stream=s)
            direct = tropical.matmul(dA, dA).copy_to_host()
            with graph.capture(s) as g:  # a lazykern graph on this device
                tropical.matmul(dA, dA, out=out, stream=s)
            for _ in range(5):
                g.replay()
            s.synchronize()
            done.append(_close(direct, want) and _close(out.copy_to_host(), want))
    return {"devices": devices, "correct": all(done)}


def cupy_work(devices: int, A: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    import cupy

    done = []
    for d in range(devices):
        with cupy.cuda.Device(d):
            a = cupy.asarray(A)
            c = tropical.matmul(a, a)
            s = cupy.cuda.Stream(non_blocking=True)
            with s:
                s.begin_capture()
                y = a + 1
                g = s.end_capture()
            g.launch(s)
            s.synchronize()
            done.append(_close(cupy.asnumpy(c), want) and _close(cupy.asnumpy(y), A + 1))
    return {"devices": devices, "correct": all(done)}


def torch_work(devices: int, A: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    import torch

    done = []
    for d in range(devices):
        dev = torch.device("cuda", d)
        with torch.cuda.device(dev):
            t = torch.as_tensor(A, device=dev)
            c = tropical.matmul(t, t)
            static = torch.zeros_like(t)
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):  # warm-up off the default stream, as torch's graph docs ask
                static.copy_(t + 1)
            torch.cuda.current_stream(dev).wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static.copy_(t + 1)
            g.replay()
            torch.cuda.synchronize(dev)
            done.append(_close(c.cpu().numpy(), want) and _close(static.cpu().numpy(), A + 1))
    return {"devices": devices, "correct": all(done)}


def spread_work(module: Any) -> dict[str, Any]:
    sg = nw.square_lattice(8, seed=3)
    want = nw.ground_state_energy(sg, slices=[27, 28, 35, 36])
    got = nw.ground_state_energy(sg, module=module, dtype=np.float32, slices=[27, 28, 35, 36], devices="all")
    return {"module": module.__name__, "correct": got == want}


def once() -> dict[str, Any]:
    """The work of one child; what ran goes to stdout as one JSON line."""
    from numba import cuda

    devices = len(cuda.gpus)
    rng = np.random.default_rng(0)
    A = rng.integers(-8, 8, (N, N)).astype(np.float32)
    want = tropical.reference.matmul(A, A)
    summary: dict[str, Any] = {"devices": devices, "pid": os.getpid()}
    summary["numba"] = numba_work(devices, A, want)
    modules = []
    for name, work in (("cupy", cupy_work), ("torch", torch_work)):
        try:
            module = __import__(name)
        except ImportError:
            summary[name] = "not installed"
            continue
        summary[name] = work(devices, A, want)
        modules.append(module)
    summary["spread"] = spread_work(modules[0]) if modules else "needs cupy or torch"
    return summary


def repeat(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if args.without_teardown:
        env["LAZYKERN_EXIT_TEARDOWN"] = "0"
    runs = []
    for i in range(args.repeat):
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--once"],
            capture_output=True,
            text=True,
            env=env,
            timeout=args.timeout,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        runs.append(
            {
                "run": i,
                "rc": proc.returncode,
                "seconds": round(time.perf_counter() - start, 2),
                "summary": json.loads(lines[-1]) if lines else None,
                "stderr_tail": proc.stderr[-2000:],
            }
        )
        print(f"run {i}: rc {proc.returncode} in {runs[-1]['seconds']} s", file=sys.stderr, flush=True)
    record = {
        "command": " ".join(sys.argv),
        "teardown": not args.without_teardown,
        "passed": all(r["rc"] == 0 for r in runs),
        "exit_codes": [r["rc"] for r in runs],
        "runs": runs,
        "python": platform.python_version(),
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=2)
    print(f"{sum(r['rc'] == 0 for r in runs)}/{len(runs)} exited 0; written to {args.out}", file=sys.stderr)
    return 0 if record["passed"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true", help="one process: use every GPU, then exit")
    parser.add_argument("--repeat", type=int, default=20, help="child processes to run one after the other")
    parser.add_argument("--out", help="JSON file for --repeat")
    parser.add_argument("--without-teardown", action="store_true", help="LAZYKERN_EXIT_TEARDOWN=0 in the children")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a child may take")
    args = parser.parse_args()
    if args.once:
        print(json.dumps(once()), flush=True)
        return 0
    if not args.out:
        parser.error("--repeat needs --out FILE")
    return repeat(args)


if __name__ == "__main__":
    sys.exit(main())
