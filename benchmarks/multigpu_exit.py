"""Does a process that used every GPU exit cleanly? (issue 31: SIGSEGV / "double free" at exit after multi-GPU work)

    python3 benchmarks/multigpu_exit.py --repeat 20 --out benchmarks/results/multigpu-exit-2xh200.json
    python3 benchmarks/multigpu_exit.py --repeat 20 --without-teardown --out /tmp/exit-without.json  # A/B
    python3 benchmarks/multigpu_exit.py --once          # one process: the work below, then a plain exit

One process (--once) uses every visible GPU through each library that is installed, as the
multi-GPU tests do together (tests/test_multigpu_devices.py, tests/test_multigpu.py):
  numba     Numba device arrays through tropical.matmul, a lazykern graph capturing
            tropical.matmul(out=) on a Numba stream, replayed 5 times, and an allocating product
            captured into a CapturePool (a refused capture is recorded in the summary)
  numba_jit a plain @cuda.jit kernel launched on every GPU, and bmm_multi over every GPU with a
            @cuda.jit backend: one Numba code library loaded into every context (issue 45's cause)
  lazy      a @lazy_kernel on every GPU, captured with a DeviceScalar and replayed, and graphed()
  cupy      tropical.matmul of CuPy arrays, and a CuPy stream-captured graph, launched
  torch     tropical.matmul of torch tensors, and a torch.cuda.CUDAGraph, replayed
  dask      lazykern.scale.dask.matmul of CuPy chunks made on the last GPU (sync scheduler)
  planner   a bounded cotengra plan search (worker processes) for a 6 x 6 spin glass
  spread    an 8 x 8 spin glass's ground-state energy with its slices over every GPU (devices="all"),
            and a count past 2^64 in rounds of passes: the other GPUs' work in worker processes,
            whose pids the parent checks are gone once the child has exited
then returns from main() and lets the interpreter exit: the exit is what is tested.
--dealloc-count N sets NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=N in the children: with 0, every
queued release of Numba's flushes at once, so a library unloaded twice shows on every run instead
of only when the queues happen to pass Numba's threshold at exit. --repeat N runs N such
processes (--parallel K at a time; one after the other by default) and writes, per run, the exit
code (a negative code is the signal that ended it: -11 is SIGSEGV, -6 SIGABRT as glibc's "double
free" raises), seconds, what each child ran and the tail of its stderr; the command exits 0 only
if every child did and none printed a crash ("double free", a faulthandler dump).
--without-teardown sets LAZYKERN_EXIT_TEARDOWN=0 in the children (lazykern leaves its graphs,
modules and pools to Numba's finalizers, as before the teardown existed).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

import lazykern.tn
from lazykern import graph, tropical
from lazykern.tn import networks as nw

N = 64  # side of the products: small, the exit is what matters


def _close(a: Any, b: Any) -> bool:
    return bool(np.allclose(np.asarray(a), np.asarray(b)))


def numba_work(devices: int, A: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    from numba import cuda

    done: list[bool] = []
    pooled: list[Any] = []
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
            pooled.append(pool_work(dA, want, s))
    return {"devices": devices, "correct": all(done), "capture_pool": pooled}


def pool_work(dA: Any, want: np.ndarray, s: Any) -> Any:
    """An allocating product captured into a CapturePool of its own, replayed (warmed outside first).
    A refused capture is recorded, not raised: the exit after it is what this benchmark tests."""
    tropical.matmul(dA, dA, stream=s)
    s.synchronize()
    pool = graph.CapturePool(max_bytes=1 << 24)
    try:
        with graph.capture(s, pool=pool) as g:
            extra = tropical.matmul(dA, dA, stream=s)  # a graph allocation booked in the pool
        g.replay()
        s.synchronize()
        return _close(extra.copy_to_host(), want)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:300]


def numba_jit_work(devices: int, A: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    """A plain Numba kernel on every GPU: numba-cuda hands its one cached ObjectCode to every context."""
    from numba import cuda

    from lazykern.multigpu import bmm_multi

    @cuda.jit
    def maxplus_bmm(a, b, c):
        j, i, z = cuda.grid(3)
        if z < c.shape[0] and i < c.shape[1] and j < c.shape[2]:
            acc = -math.inf
            for k in range(a.shape[2]):
                acc = max(acc, a[z, i, k] + b[z, k, j])
            c[z, i, j] = acc

    def backend(a: Any, b: Any, *, semiring: str, stream: Any, out: Any) -> Any:
        batch, m, n = out.shape
        maxplus_bmm[((n + 15) // 16, (m + 15) // 16, batch), (16, 16, 1), stream](a, b, out)
        return out

    done = []
    for d in range(devices):
        with cuda.gpus[d]:
            dA = cuda.to_device(A[None])
            c = cuda.device_array((1, N, N), dtype=A.dtype)
            backend(dA, dA, semiring="maxplus", stream=0, out=c)
            done.append(_close(c.copy_to_host()[0], want))
    batch = np.stack([A] * (2 * devices))
    got = bmm_multi(batch, batch, chunk=2, backend=backend)
    done.append(_close(got, np.stack([want] * (2 * devices))))
    return {"devices": devices, "correct": all(done)}


def lazy_work(devices: int, A: np.ndarray) -> dict[str, Any]:
    """A @lazy_kernel on every GPU: launched, captured with a DeviceScalar and replayed, graphed()."""
    from numba import cuda

    from lazykern import lazy_kernel

    @lazy_kernel
    def add_step(x, step, out):  # type: ignore[no-untyped-def]
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + step[0]

    x = A.ravel().copy()
    done = []
    for d in range(devices):
        with cuda.gpus[d]:
            s = cuda.stream()
            dx, out = cuda.to_device(x, stream=s), cuda.device_array_like(x, stream=s)
            step = graph.DeviceScalar(np.float32(0), stream=s)
            with graph.capture(s) as g:
                add_step[(x.size + 255) // 256, 256, s](dx, step, out)
            step.set(np.float32(3.0))
            g.replay()
            s.synchronize()
            ok = _close(out.copy_to_host(), x + 3.0)

            def run(a: Any, st: Any, o: Any, s: Any = s) -> None:
                add_step[(x.size + 255) // 256, 256, s](a, st, o)

            fn = graph.graphed(run, stream=s)
            step.set(np.float32(5.0))
            fn(dx, step, out)
            s.synchronize()
            done.append(ok and _close(out.copy_to_host(), x + 5.0))
    return {"devices": devices, "correct": all(done)}


def dask_work(devices: int, A: np.ndarray, want: np.ndarray) -> dict[str, Any]:
    """lazykern's Dask product over CuPy chunks made on the last GPU, computed with another current."""
    import cupy
    import dask
    import dask.array as da

    from lazykern.scale import dask as lkdask

    device = devices - 1

    def on_device(x: np.ndarray) -> Any:
        with cupy.cuda.Device(device):
            return cupy.asarray(x)

    def chunks(x: np.ndarray, cols: int) -> Any:
        parts = [
            da.from_delayed(dask.delayed(on_device)(x[:, i : i + cols]), (x.shape[0], cols), x.dtype,
                            meta=cupy.empty((0, 0), x.dtype))
            for i in range(0, x.shape[1], cols)
        ]  # fmt: skip
        return da.concatenate(parts, axis=1)

    half = N // 2
    dA, dB = chunks(A, half), da.concatenate([chunks(A[:half], N), chunks(A[half:], N)], axis=0)
    with cupy.cuda.Device(0 if device else device):
        C = lkdask.matmul(dA, dB, semiring="maxplus")
        (c,) = dask.compute(C, scheduler="sync")
    return {"device": device, "correct": _close(cupy.asnumpy(c), want)}


def planner_work() -> dict[str, Any]:
    """A bounded cotengra search in the planner's worker processes, while the GPUs are in use."""
    try:
        import cotengra  # noqa: F401
    except ImportError:
        return {"skipped": "cotengra not installed"}
    sg = nw.square_lattice(6, seed=5)
    p = nw.plan(sg, optimize="cotengra", max_time=1.0)
    return {"nslices": int(p.nslices), "correct": nw.ground_state_energy(sg, optimize=p) == nw.ground_state_energy(sg)}


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
    """Slices over every GPU (their other GPUs' groups in worker processes) and a count past 2^64 in
    rounds of passes over them; the workers' pids, which the parent checks are gone after the exit."""
    lazykern.tn.keep_workers().__enter__()  # kept to the exit: the exit path is what ends them here
    sg = nw.square_lattice(8, seed=3)
    want = nw.ground_state_energy(sg, slices=[27, 28, 35, 36])
    got = nw.ground_state_energy(sg, module=module, dtype=np.float32, slices=[27, 28, 35, 36], devices="all")
    sparse = nw.SpinGlass(sg.n, sg.edges, sg.J * (np.arange(len(sg.J)) % 8 == 0), positions=sg.positions)
    counted = nw.degeneracy(sparse, slices=[27, 28], devices="all") == nw.degeneracy(
        sparse, module=module, slices=[27, 28], devices="all"
    )
    return {"module": module.__name__, "correct": got == want and counted, "workers": worker_pids()}


def worker_pids() -> list[int]:
    """This process's children that run lazykern's spread worker (read from /proc: what the OS sees)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().split(")")[-1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"_proc_worker" in cmdline:
            found.append(int(entry))
    return sorted(found)


def orphans(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie has ended)."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] != "Z":
                    alive.append(pid)
        except FileNotFoundError:
            pass
    return alive


def attempt(work: Any, *args: Any) -> Any:
    """One item's summary; an item that raises is recorded (not correct), and the child goes on to
    the others and to its exit, which is what this benchmark tests."""
    try:
        return work(*args)
    except Exception as exc:
        return {"correct": False, "error": f"{type(exc).__name__}: {exc}"[:500]}


def once() -> dict[str, Any]:
    """The work of one child; what ran goes to stdout as one JSON line."""
    from numba import cuda

    devices = len(cuda.gpus)
    rng = np.random.default_rng(0)
    A = rng.integers(-8, 8, (N, N)).astype(np.float32)
    want = tropical.reference.matmul(A, A)
    names = [g.name.decode() if isinstance(g.name, bytes) else str(g.name) for g in cuda.gpus]
    summary: dict[str, Any] = {"devices": devices, "pid": os.getpid(), "gpus": names}
    summary["numba"] = attempt(numba_work, devices, A, want)
    summary["numba_jit"] = attempt(numba_jit_work, devices, A, want)
    summary["lazy"] = attempt(lazy_work, devices, A)
    modules = []
    for name, work in (("cupy", cupy_work), ("torch", torch_work)):
        try:
            module = __import__(name)
        except ImportError:
            summary[name] = "not installed"
            continue
        summary[name] = attempt(work, devices, A, want)
        modules.append(module)
    try:
        import dask.array  # noqa: F401

        have_cupy = "cupy" in [m.__name__ for m in modules]
        summary["dask"] = attempt(dask_work, devices, A, want) if have_cupy else "needs cupy"
    except ImportError:
        summary["dask"] = "not installed"
    summary["planner"] = attempt(planner_work)
    summary["spread"] = attempt(spread_work, modules[0]) if modules else "needs cupy or torch"
    return summary


CRASH_MARKS = ("double free", "corrupted size", "Fatal Python error", "Segmentation fault", "free(): invalid")


def clean(rc: int, stderr: str) -> bool:
    """Exit code 0 and nothing of a crash printed (faulthandler, glibc's heap checks)."""
    return rc == 0 and not any(mark in stderr for mark in CRASH_MARKS)


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("numba-cuda", "numba", "cuda-core", "cuda-bindings", "cupy-cuda12x", "cupy-cuda13x", "torch", "dask"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def repeat(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if args.without_teardown:
        env["LAZYKERN_EXIT_TEARDOWN"] = "0"
    if args.dealloc_count is not None:
        env["NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT"] = str(args.dealloc_count)

    def one(i: int) -> dict[str, Any]:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), "--once"],
            capture_output=True,
            text=True,
            env=env,
            timeout=args.timeout,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        summary = json.loads(lines[-1]) if lines else None
        spread = summary.get("spread") if isinstance(summary, dict) else None
        time.sleep(0.5)  # PR_SET_PDEATHSIG's kill is asynchronous
        left = orphans(spread.get("workers", [])) if isinstance(spread, dict) else []
        run = {
            "run": i,
            "rc": proc.returncode,
            "clean": clean(proc.returncode, proc.stderr) and not left,
            "workers_left_running": left,
            "seconds": round(time.perf_counter() - start, 2),
            "summary": summary,
            "stderr_tail": proc.stderr[-2000:],
        }
        print(f"run {i}: rc {proc.returncode} in {run['seconds']} s", file=sys.stderr, flush=True)
        return run

    with ThreadPoolExecutor(max_workers=max(args.parallel, 1)) as pool:  # each child is its own process
        runs = list(pool.map(one, range(args.repeat)))
    record = {
        "command": " ".join(sys.argv),
        "teardown": not args.without_teardown,
        "dealloc_count": args.dealloc_count,
        "parallel": args.parallel,
        "passed": all(r["clean"] for r in runs),
        "exit_codes": [r["rc"] for r in runs],
        "runs": runs,
        "python": platform.python_version(),
        "versions": versions(),
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(args.out, "w") as fh:
        json.dump(record, fh, indent=2)
    print(f"{sum(r['clean'] for r in runs)}/{len(runs)} exited clean; written to {args.out}", file=sys.stderr)
    return 0 if record["passed"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true", help="one process: use every GPU, then exit")
    parser.add_argument("--repeat", type=int, default=20, help="child processes to run one after the other")
    parser.add_argument("--out", help="JSON file for --repeat")
    parser.add_argument("--without-teardown", action="store_true", help="LAZYKERN_EXIT_TEARDOWN=0 in the children")
    parser.add_argument("--parallel", type=int, default=1, help="children running at once (each exits on its own)")
    parser.add_argument(
        "--dealloc-count", type=int, help="NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT in the children (0: flush at once)"
    )
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
