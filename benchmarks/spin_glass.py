"""Exact spin-glass ground states with tropical tensor networks, at the scale of Liu, Wang, Zhang (PRL 2021).

    python3 benchmarks/spin_glass.py --out benchmarks/results/spin-glass-h100.json
    python3 benchmarks/spin_glass.py --quick --out /tmp/sg.json          # tiny sizes, runs on a CPU

Workloads (each timed end to end: plan, contraction; figures below):
  energy      +-J square lattice L x L (L = 32), float32 (exact: +-J energies are integers), twice:
              "first" plans from nothing, "again" with the plan (and kernels) already in the store
  config      one optimal configuration, L = 24, 20 until one fits (every argmax kept; then only
              those of steps under memory-limit / 4 entries, recomputing the larger ones)
  chimera     the 512-qubit chimera graph (8 x 8 cells of K4,4), +-J, in a child process killed after
              --chimera-seconds (default 240, planning included): a row either way
  regular     random 3-regular graphs, n stepped up until the time budget (default 600 s) runs out
  degeneracy  ground-state count of +-J square lattices, L = 16 and up
  latency     an 8 x 8 lattice's energy in fresh processes with a warm store, after imports (numba-cuda's
              too) and the CUDA context: plan_seconds + contract_seconds, again_seconds (same process)
  peers       lazykern vs torch (broadcast + amax per contraction) vs the NumPy CPU path, same plan
  graph       eager vs CUDA-graph-captured contraction of a network of many small tensors
  defaults    issue 39's table: the public API with default arguments on instances built from edge lists
              (spins renumbered at random, no positions), each row a fresh process: 32 x 32 energy with
              an empty store and with the plan stored, a configuration, the degeneracy, chimera 8 x 8 x 4
              (killed after --row-seconds), plan quality of relabelled copies, 8 x 8 latency; predicted
              (lazykern.tn._cost) and measured seconds and peak bytes side by side

Orders: lattices and chimera start from the boundary sweep of their geometry
(lazykern.tn.orders), used as is when its largest intermediate fits the device, else refined
and sliced by cotengra for --plan-seconds; other graphs are searched by cotengra (opt_einsum's greedy
without it). --memory-limit (entries) defaults to what fits the device's free memory.
Each contraction row has: plan_seconds, contract_seconds, log2_flops / log10_flops (tropical
multiply-adds, steps every slice shares counted once), log2_largest, slices, tps (achieved tera
multiply-adds per second) and gemm_ratio (tps over the f32 max-plus GEMM rate measured at the start
of the same run, "gemm" in the record, beside the device copy bandwidth), peak_gpu_bytes (the
CuPy / torch pool's high-water mark over the workload). The JSON at --out also holds the device,
driver, versions, command line and date; it is rewritten after every row, so a failure or a kill
later keeps the rows before it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lazykern import tropical
from lazykern.tn import networks as nw
from lazykern.tn.einsum import contract_network

ROOT = Path(__file__).resolve().parent.parent


def pick_module(name: str) -> Any:
    """The array library the contractions run in: numpy (CPU), cupy or torch (GPU)."""
    if name == "auto":
        from lazykern.tropical.api import gpu_available

        if not gpu_available():
            return np
        for candidate in ("cupy", "torch"):
            try:
                return __import__(candidate)
            except ImportError:
                continue
        return np
    return np if name == "numpy" else __import__(name)


def plan_network(
    sg: nw.SpinGlass, module: Any, dtype: Any, args: argparse.Namespace, count_dtype: Any = None
) -> tuple[tropical.ContractionPlan, dict[str, Any]]:
    """The contraction plan of sg's network (the solvers take it as ``optimize=``) and its figures:
    slices, log2 of the largest intermediate (entries, one slice), the flops (tropical multiply-adds,
    the steps every slice shares counted once), how it was found."""
    if sg.order is not None:
        how = args.optimize
    else:
        how = "cotengra" if _has("cotengra") else "greedy"
    plan = nw.plan(
        sg,
        module=module,
        dtype=dtype,
        count_dtype=count_dtype,
        optimize=how,
        memory_limit=args.memory_limit,
        max_time=args.plan_seconds,
    )
    stats = {
        "optimize": how,
        "slices": plan.nslices,
        "sliced_spins": len(plan.sliced),
        "log2_largest": round(math.log2(max(plan.largest, 1)), 2),
        "flops": plan.flops,
        "log2_flops": round(math.log2(max(plan.flops, 1)), 2),
        "log10_flops": round(math.log10(max(plan.flops, 1)), 2),
    }
    return plan, stats


def _has(name: str) -> bool:
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def attempt(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one workload; an exception (out of memory, say) is recorded instead of ending the run."""
    try:
        return fn()
    except Exception as exc:  # the record says what failed; the next workload still runs
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.record: dict[str, Any] = {}
        self.module = pick_module(args.module)
        self.dtype = np.float32 if self.module is not np else np.float64

    def save(self) -> None:
        with open(self.args.out, "w") as fh:  # a killed run keeps what it finished
            json.dump(self.record, fh, indent=2, default=_plain)

    def plan(self, sg: nw.SpinGlass, count_dtype: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """(keyword arguments for the solvers: the plan as optimize=, the plan's figures), timed."""
        (plan, stats), seconds = timed(lambda: plan_network(sg, self.module, self.dtype, self.args, count_dtype))
        return {"optimize": plan}, stats | {"plan_seconds": round(seconds, 3)}

    def measure(self, fn: Callable[[], Any], stats: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Run one contraction (its result read back to the host, so the GPU has finished): its seconds,
        achieved rate, that rate over this run's GEMM rate, and the GPU memory pool's high-water mark."""
        reset_peak(self.module)
        out, seconds = timed(fn)
        tps = stats["flops"] / seconds / 1e12 if seconds > 0 else None
        gemm = self.record.get("gemm", {}).get("tps")
        row = {"contract_seconds": round(seconds, 3), "tps": None if tps is None else round(tps, 4)}
        row["gemm_ratio"] = round(tps / gemm, 4) if tps and gemm else None
        row["peak_gpu_bytes"] = peak_bytes(self.module)
        return out, row

    def energy(self, sg: nw.SpinGlass, planned: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """One graph's energy row; ``planned`` is told the plan's figures before the contraction starts."""
        kwargs, stats = self.plan(sg)
        if planned is not None:
            planned(stats)
        E, row = self.measure(lambda: nw.ground_state_energy(sg, module=self.module, dtype=self.dtype, **kwargs), stats)
        total = stats["plan_seconds"] + row["contract_seconds"]
        return {"graph": sg.name, "n": sg.n, "energy": E} | row | stats | {"seconds": round(total, 3)}

    def config(self, sizes: list[int], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for L in sizes:
            sg = nw.square_lattice(L, seed=L)
            for checkpoint in (False, (self.args.memory_limit or 2**28) // 4):

                def go(sg=sg, checkpoint=checkpoint) -> dict[str, Any]:
                    kwargs, stats = self.plan(sg)
                    (E, spins), row = self.measure(
                        lambda: nw.ground_state(
                            sg, module=self.module, dtype=self.dtype, checkpoint=checkpoint, **kwargs
                        ),
                        stats,
                    )
                    return {"energy": E, "energy_of_config": sg.energy(spins)} | row | stats

                row = {"graph": sg.name, "checkpoint": checkpoint} | attempt(go)
                rows.append(row)
                self.save()
                if "error" not in row:
                    return rows
        return rows

    def energies(self, L: int, rows: dict[str, Any]) -> dict[str, Any]:
        """The L x L energy twice: "first" plans from nothing, "again" (same structure) finds the plan stored."""
        for which, seed in (("first", L), ("again", L + 1)):
            rows[which] = attempt(lambda seed=seed: self.energy(nw.square_lattice(L, seed=seed)))
            self.save()
        return rows

    def regular(self, start: int, step: int, budget: float, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Fills ``rows`` (saved as they come: a killed sweep keeps the sizes it finished)."""
        spent, n, last = 0.0, start, 0.0
        while spent + 2 * last <= budget:  # the next n takes at least as long as the last: stop before overrunning
            row = attempt(lambda n=n: self.energy(nw.random_regular(n, 3, seed=n)))
            rows.append({"n": n} | row)
            self.save()
            if "error" in row:
                break
            last = row["seconds"]
            spent += last
            n += step
        return rows

    def degeneracy(self, sizes: list[int], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for L in sizes:
            sg = nw.square_lattice(L, seed=L)

            def go(sg=sg) -> dict[str, Any]:
                count_dtype = np.int64 if sg.n <= 400 else np.float64  # int64 wraps past 2^63
                kwargs, stats = self.plan(sg, count_dtype)
                (E, count), row = self.measure(
                    lambda: nw.degeneracy(sg, module=self.module, dtype=self.dtype, count_dtype=count_dtype, **kwargs),
                    stats,
                )
                return {"energy": E, "degeneracy": count, "count_dtype": str(np.dtype(count_dtype))} | row | stats

            rows.append({"graph": sg.name} | attempt(go))
            self.save()
        return rows

    def peers(self, sizes: list[int], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The same contraction order, three engines: lazykern, torch broadcast + amax, NumPy CPU."""
        for L in sizes:
            sg = nw.square_lattice(L, seed=L)
            labels, host = sg.network(np.float32)
            path = greedy_path(sg)
            row: dict[str, Any] = {"graph": sg.name, "tensors": len(host)}
            engines: dict[str, tuple[Any, Callable[..., Any]]] = {"numpy": (np, contract_network)}
            if self.module is not np:
                engines["lazykern"] = (self.module, contract_network)
            try:
                import torch

                if torch.cuda.is_available():
                    engines["torch"] = (torch, broadcast_contract)
            except ImportError:
                row["torch"] = "not installed"
            for name, (module, engine) in engines.items():
                _, tensors = sg.network(np.float32, module)

                def go(tensors=tensors, engine=engine, labels=labels, path=path) -> float:
                    out = engine(labels, (), tensors, optimize=path)
                    return -float(out.item() if hasattr(out, "item") else out)

                go()  # compile / warm up
                E, seconds = timed(go)
                row[name] = {"energy": E, "seconds": round(seconds, 4)}
            rows.append(row)
            self.save()
        return rows

    def graph(self, L: int) -> dict[str, Any]:
        """Eager vs captured contraction of a small lattice (hundreds of tiny products)."""
        try:
            import cupy
        except ImportError:
            return {"skipped": "graph capture of einsum is measured with CuPy arrays; CuPy is not installed"}
        if self.module is np:
            return {"skipped": "needs a GPU"}
        from numba import cuda

        from lazykern import graph

        sg = nw.square_lattice(L, seed=L)
        labels, tensors = sg.network(np.float32, cupy)
        path = greedy_path(sg)
        stream = cuda.stream()
        with cupy.cuda.ExternalStream(int(stream.handle.value if hasattr(stream.handle, "value") else stream.handle)):

            def go() -> Any:
                return contract_network(labels, (), tensors, optimize=path)

            go()
            stream.synchronize()
            reps = self.args.graph_repeats
            start = time.perf_counter()
            for _ in range(reps):
                out = go()
            stream.synchronize()
            eager = (time.perf_counter() - start) / reps
            with graph.capture(stream) as g:
                out = go()
            g.keep(out, *tensors)
            start = time.perf_counter()
            for _ in range(reps):
                g.replay()
            stream.synchronize()
            replay = (time.perf_counter() - start) / reps
        return {
            "graph": sg.name,
            "steps": len(path),
            "eager_ms": round(eager * 1e3, 3),
            "replay_ms": round(replay * 1e3, 3),
            "energy": -float(out.item()),
        }


CHILD = "import json, sys\nfrom benchmarks import spin_glass\nspin_glass.child_energy(json.loads(sys.argv[1]))\n"


def child_energy(spec: dict[str, Any]) -> None:
    """In a child process: one graph's energy, printing the plan's figures as soon as they are known
    (a parent that stops the child at its budget still records them), then the row."""
    run = Run(argparse.Namespace(**spec["args"]))
    kind, *shape = spec["graph"]
    sg = getattr(nw, kind)(*shape, seed=spec["seed"])
    row = run.energy(sg, planned=lambda stats: print(json.dumps({"plan": stats}), flush=True))
    print(json.dumps({"row": row}, default=_plain), flush=True)


def bounded_energy(run: Run, graph: tuple[Any, ...], seed: int, budget: float) -> dict[str, Any]:
    """An energy row computed in a child process stopped (killed, with whatever it started) after
    ``budget`` seconds: a search or contraction that would run for hours costs the budget and leaves a
    row saying so, with the plan's figures when planning finished."""
    release(run.module)  # the child plans against the device's free memory: hand back this process's pool
    spec = {"args": vars(run.args), "graph": list(graph), "seed": seed}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=ROOT,
            env=env,
            start_new_session=True,  # its own process group: killed as one, planner workers included
        )
        got: dict[str, Any] = {}
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                while "row" not in got:
                    left = budget - (time.monotonic() - start)
                    if left <= 0 or not sel.select(timeout=left):
                        break
                    line = proc.stdout.readline()
                    if not line:
                        break
                    got |= json.loads(line)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace")
    seconds = round(time.monotonic() - start, 1)
    if "row" in got:
        row = got["row"]
        gemm = run.record.get("gemm", {}).get("tps")
        row["gemm_ratio"] = round(row["tps"] / gemm, 4) if row.get("tps") and gemm else None
        return row | {"process_seconds": seconds}
    stats = got.get("plan", {})
    if proc.returncode not in (None, -signal.SIGKILL) and tail:
        return {"error": f"the child process failed (exit {proc.returncode}): {tail}"} | stats
    return {
        "error": f"stopped at the budget of {budget:g} s ({'contracting' if stats else 'planning'} still)",
        "budget_seconds": budget,
    } | stats


def release(module: Any) -> None:
    """Return the array library's cached device memory to the driver."""
    name = getattr(module, "__name__", "")
    if name == "cupy":
        module.get_default_memory_pool().free_all_blocks()
    elif name == "torch":
        module.cuda.empty_cache()


def reset_peak(module: Any) -> None:
    name = getattr(module, "__name__", "")
    if name == "cupy":
        release(module)  # the pool grows to the workload's high-water mark
    elif name == "torch":
        module.cuda.reset_peak_memory_stats()


def peak_bytes(module: Any) -> int | None:
    name = getattr(module, "__name__", "")
    if name == "cupy":
        return int(module.get_default_memory_pool().total_bytes())
    if name == "torch":
        return int(module.cuda.max_memory_allocated())
    return None


def gemm_rate(module: Any, n: int) -> dict[str, Any]:
    """f32 max-plus n^3 through tropical.matmul on this device, and the device copy bandwidth: the
    yardsticks each contraction's rate is held against (same run, same card)."""
    if module is np:
        return {"skipped": "CPU run"}
    from numba import cuda

    rng = np.random.default_rng(0)
    A, B = (cuda.to_device(rng.standard_normal((n, n)).astype(np.float32)) for _ in range(2))
    C = cuda.device_array((n, n), np.float32)
    tropical.matmul(A, B, out=C)
    cuda.synchronize()
    reps = 5
    start = time.perf_counter()
    for _ in range(reps):
        tropical.matmul(A, B, out=C)
    cuda.synchronize()
    seconds = (time.perf_counter() - start) / reps
    row: dict[str, Any] = {"shape": [n, n, n], "seconds": round(seconds, 5), "tps": round(n**3 / seconds / 1e12, 3)}
    if getattr(module, "__name__", "") == "cupy":
        x = module.ones(1 << 28, dtype=module.float32)
        y = module.empty_like(x)
        y[...] = x
        module.cuda.runtime.deviceSynchronize()
        start = time.perf_counter()
        for _ in range(reps):
            y[...] = x
        module.cuda.runtime.deviceSynchronize()
        row["copy_gbps"] = round(2 * x.nbytes * reps / (time.perf_counter() - start) / 1e9, 1)
        del x, y
    return row


LATENCY = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import {module} as xp
from lazykern.tn import networks as nw
gpu = xp is not np
if gpu:
    import numba.cuda  # lazykern's GPU route runs on numba-cuda: an import like the others
t1 = time.perf_counter()
if gpu:
    xp.zeros(1, device="cuda") + 1 if xp.__name__ == "torch" else xp.zeros(1) + 1
    numba.cuda.current_context()  # the CUDA context (the array library's primary one, shared with numba)
t2 = time.perf_counter()
dtype = np.float32
sg = nw.square_lattice({L}, seed={L})
t = time.perf_counter()
plan = nw.plan(sg, module=xp, dtype=dtype)
t_plan = time.perf_counter() - t
t = time.perf_counter()
E = nw.ground_state_energy(sg, module=xp, dtype=dtype, optimize=plan)
t_contract = time.perf_counter() - t
t = time.perf_counter()
nw.ground_state_energy(nw.square_lattice({L}, seed={L} + 1), module=xp, dtype=dtype)
t_again = time.perf_counter() - t
t = time.perf_counter()
nw.ground_state_energy(nw.square_lattice({L}, seed={L} + 2), module=xp)  # the defaults, a new lattice
t_default = time.perf_counter() - t
loaded = [m for m in ("cotengra", "kahypar", "opt_einsum") if m in sys.modules]
print(json.dumps(dict(energy=E, seconds=t_plan + t_contract, plan_seconds=t_plan, contract_seconds=t_contract,
                      again_seconds=t_again, default_seconds=t_default, imports_seconds=t1 - t0,
                      context_seconds=t2 - t1, steps=len(plan.path), loaded=loaded)))
"""


LATENCY_FIRST = """
import json, sys, time
import numpy as np
import {module} as xp
from lazykern.tn import networks as nw
if xp is not np:
    import numba.cuda
    xp.zeros(1, device="cuda") + 1 if xp.__name__ == "torch" else xp.zeros(1) + 1
    numba.cuda.current_context()
sg = nw.square_lattice({L}, seed={L})
t = time.perf_counter()
E = nw.ground_state_energy(sg, module=xp)
print(json.dumps(dict(energy=E, first_seconds=time.perf_counter() - t)))
"""


def latency(L: int, module_name: str, timeout: float = 90.0) -> dict[str, Any]:
    """An L x L energy in fresh processes: the second one finds plan and kernels in the store.
    ``seconds``: after imports (numba-cuda's too on a GPU) and the CUDA context, the work lazykern adds
    to a short script: ``plan_seconds`` (the order) + ``contract_seconds`` (the first contraction, which
    loads its kernels from the store); ``again_seconds``: another lattice of the same size in the same
    process (plan and kernels in memory: the per-step floor); ``default_seconds``: then a third lattice
    through ``ground_state_energy(sg, module=...)`` with every default. ``first_runs``: other fresh
    processes whose first lazykern call is that defaults call (the route a user's script takes;
    ``first_warm_seconds``: its figure in the last of them)."""
    rows, first = [], []
    for code, into in ((LATENCY, rows), (LATENCY_FIRST, first)):
        for _ in range(3):
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", code.format(module=module_name, L=L)],
                capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
            if out.returncode:
                return {"error": out.stderr[-2000:], "runs": rows, "first_runs": first}
            row = json.loads(out.stdout.splitlines()[-1])
            row = {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
            into.append(row | {"process_seconds": round(time.perf_counter() - start, 3)})
    return {
        "graph": f"square {L}x{L}",
        "module": module_name,
        "runs": rows,
        "warm_seconds": rows[-1]["seconds"],
        "first_runs": first,
        "first_warm_seconds": first[-1]["first_seconds"],
    }


# ---------------------------------------------------------------- defaults --
# Issue 39's table: the public API with default arguments on instances a user builds from an edge list
# (the lattice's own edges and couplings, spins renumbered at random, no positions, no order), each in a
# fresh process (a child) so "empty store" and "plan stored" mean what they say.
DEFAULTS_CHILD = """
import json, logging, sys, time
spec = json.loads(sys.argv[1])
notes = []  # the library's own account of its argmax split (kept choices, checkpoints)
class Notes(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("argmax"):
            notes.append(record.getMessage())
logging.getLogger("lazykern").addHandler(Notes())
logging.getLogger("lazykern").setLevel(logging.INFO)
sys.path.insert(0, spec["bench_dir"])
import numpy as np
import {module} as xp
from lazykern.tn import networks as nw, _cost
from lazykern.tn.einsum import plan_steps
import spin_glass as bench
peak = [0]
if xp.__name__ == "cupy":
    pool = xp.get_default_memory_pool()
    def malloc(size):  # the pool's own allocator, with its high-water mark of bytes in use
        mem = pool.malloc(size)
        peak[0] = max(peak[0], pool.used_bytes())
        return mem
    xp.cuda.set_allocator(malloc)
    xp.zeros(1) + 1
sg = bench.edge_list_instance(spec["graph"], shuffle=spec["shuffle"], positions=spec["positions"])
kw = dict(module=xp) | ({{"dtype": getattr(np, spec["dtype"])}} if spec["dtype"] else {{}})
passes = []  # counting: (moduli, seconds) of each whole contraction (int64 first, then residues modulo primes)
if spec["kind"] == "degeneracy":
    from lazykern.tn import counting
    one_pass = counting.contract_network
    def timed_pass(*a, **k):
        t0 = time.perf_counter()
        out = one_pass(*a, **k)
        if xp.__name__ == "cupy":
            xp.cuda.Device().synchronize()
        passes.append([list(k["algebra"].moduli), round(time.perf_counter() - t0, 3)])
        return out
    counting.contract_network = timed_pass
t = time.perf_counter()
if spec["kind"] == "energy":
    answer = nw.ground_state_energy(sg, **kw)
elif spec["kind"] == "config":
    answer, spins = nw.ground_state(sg, **kw)
else:
    answer = list(nw.degeneracy(sg, **kw))
seconds = time.perf_counter() - t
dtype = kw.get("dtype") or sg.resolve(xp, None, warn=False)[1]  # the default dtype follows the couplings
count = 8 if spec["kind"] == "degeneracy" else 0
plan = nw.plan(sg, module=xp, dtype=dtype, count_dtype=np.int64 if count else None)  # memoized: the same plan
steps = plan_steps(sg.labels(), (), dict.fromkeys(range(sg.n), 2), plan.path, plan.sliced)
itemsize = np.dtype(dtype).itemsize
rates = _cost.rates_for(xp is np, itemsize)
predicted = _cost.seconds(steps, plan.nslices, itemsize, rates)
leaves = 4 * len(sg.edges) + 2 * sg.n
predicted_peak = _cost.peak_bytes(steps, leaves, itemsize + count, 0, inplace=bool(count))
if count:  # the widths a count's passes may take: int64, then 1 to 4 residues modulo primes (int32 each)
    passes_peak = {{w: _cost.peak_bytes(steps, leaves, itemsize + w, 0, inplace=True) for w in (4, 8, 12, 16)}}
print(json.dumps(dict(answer=answer, seconds=seconds, predicted_contract_seconds=predicted,
    predicted_peak_bytes=predicted_peak, measured_peak_bytes=peak[0] or None,
    log10_flops=float(np.log10(plan.flops)), log2_largest=float(np.log2(plan.largest)),
    slices=plan.nslices, steps=len(plan.path), counting_passes=passes or None,
    predicted_peak_by_count_bytes=passes_peak if count else None)
    | (dict(configuration_energy=float(sg.energy(np.asarray(spins))), argmax=notes)
       if spec["kind"] == "config" else {{}})))
"""


def edge_list_instance(graph: list[Any], *, shuffle: bool, positions: bool) -> nw.SpinGlass:
    """A spin glass as a user builds one from an edge list: the library lattice's edges and couplings,
    its spins renumbered at random (``shuffle``), positions only if asked, no geometry order."""
    kind, *dims = graph
    sg = nw.square_lattice(dims[0], seed=dims[0]) if kind == "square" else nw.chimera(*dims, seed=1)
    perm = np.random.default_rng(7).permutation(sg.n) if shuffle else np.arange(sg.n)
    pos = np.empty_like(sg.positions)
    pos[perm] = sg.positions
    h = np.empty_like(sg.h)
    h[perm] = sg.h  # spin i is now spin perm[i]
    name = f"{sg.name} edge list{' shuffled' if shuffle else ''}{'' if positions else ' no positions'}"
    return nw.SpinGlass(sg.n, perm[sg.edges], sg.J, h, pos if positions else None, name)  # type: ignore[arg-type]


def default_row(spec: dict[str, Any], module: str, cache: str, timeout: float) -> dict[str, Any]:
    """One workload of the defaults table in a child process with store ``cache``."""
    spec = spec | {"bench_dir": str(Path(__file__).resolve().parent)}
    env = dict(os.environ, LAZYKERN_CACHE_DIR=cache)
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", DEFAULTS_CHILD.format(module=module), json.dumps(spec)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return spec | {"error": f"no answer within {timeout:g} s (the child was killed)"}
    if out.returncode:
        return spec | {"error": out.stderr[-1500:]}
    row = json.loads(out.stdout.splitlines()[-1])
    return (
        spec
        | {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
        | {"process_seconds": round(time.perf_counter() - start, 2)}
    )


def defaults_table(args: argparse.Namespace, rows: list[dict[str, Any]], save: Callable[[], None]) -> list[Any]:
    """Issue 39's rows, each saved as it finishes: 32 x 32 energy with an empty store then with the plan
    stored (default dtype, and float32), a configuration, the degeneracy, chimera 8 x 8 x 4, plan quality
    of relabelled / position-less copies (CPU work) and the 8 x 8 fresh-process latency."""
    module = getattr(pick_module(args.module), "__name__", "numpy")
    L, ch = (6, [1, 2, 4]) if args.quick else (32, [8, 8, 4])
    cache = tempfile.mkdtemp(prefix="lk-defaults-")
    t = args.row_seconds
    # float32 first: the default for +-J couplings once the dtype follows the couplings (issue 39);
    # then this branch's float64 default once.
    work = [
        ("energy float32 empty store", {"kind": "energy", "graph": ["square", L], "dtype": "float32"}, t),
        ("energy float32 plan stored", {"kind": "energy", "graph": ["square", L], "dtype": "float32"}, t),
        ("energy default dtype", {"kind": "energy", "graph": ["square", L], "dtype": None}, 1.5 * t),
        ("configuration float32", {"kind": "config", "graph": ["square", L], "dtype": "float32"}, t),
        ("degeneracy float32", {"kind": "degeneracy", "graph": ["square", L], "dtype": "float32"}, t),
        ("chimera energy float32", {"kind": "energy", "graph": ["chimera", *ch], "dtype": "float32"}, t),
    ]
    wanted = set(args.defaults_rows or ["all"])

    def asked(name: str) -> bool:
        return "all" in wanted or name.split()[0] in wanted  # energy, configuration, degeneracy, chimera, ...

    for name, spec, timeout in work:
        if not asked(name):
            continue
        rows.append({"row": name} | default_row(spec | {"shuffle": True, "positions": False}, module, cache, timeout))
        print(json.dumps(rows[-1])[:600], flush=True)
        save()
    if asked("plan quality"):
        rows.append({"row": "plan quality"} | plan_quality([6, 8] if args.quick else [16, 20, 32], ch))
        save()
    if asked("latency"):
        rows.append({"row": "latency 8x8"} | latency(4 if args.quick else 8, module))
        save()
    return rows


def plan_quality(sides: list[int], ch: list[int]) -> dict[str, Any]:
    """log10 multiply-adds and log2 largest intermediate of each graph's plan as the library builds it
    (geometry order) and as a user's copies get it (shuffled numbering, with / without positions)."""
    out = {}
    graphs = [["square", L] for L in sides] + [["chimera", *ch]]
    for graph in graphs:
        kind, *dims = graph
        base = nw.square_lattice(dims[0]) if kind == "square" else nw.chimera(*dims)
        row = {}
        for name, sg in [("library", base)] + [
            (f"shuffled{'' if pos else ' no positions'}", edge_list_instance(graph, shuffle=True, positions=pos))
            for pos in (True, False)
        ]:
            t = time.perf_counter()
            p = nw.plan(sg, dtype=np.float32, memory_limit=2**40)
            row[name] = {
                "log10_flops": round(math.log10(p.flops), 3),
                "log2_largest": round(math.log2(p.largest), 1),
                "plan_seconds": round(time.perf_counter() - t, 3),
            }
        out[" ".join(map(str, graph))] = row
    return out


def greedy_path(sg: nw.SpinGlass) -> list[tuple[int, ...]]:
    labels, _ = sg.network()
    return list(tropical.contraction_plan(labels, (), dict.fromkeys(range(sg.n), 2), optimize="greedy").path)


def broadcast_contract(labels: list[tuple[int, ...]], output: tuple, tensors: list[Any], optimize: list) -> Any:
    """The torch peer, sharing no code with lazykern: each step of the path as a broadcast sum
    of the picked tensors and an amax over the labels no other tensor carries (to a scalar)."""
    terms = [(tuple(t), x) for t, x in zip(labels, tensors)]
    for step in optimize:
        picked = [terms[i] for i in step]
        for i in sorted(step, reverse=True):
            terms.pop(i)
        order = list(dict.fromkeys(lab for t, _ in picked for lab in t))
        sizes = {lab: n for t, x in picked for lab, n in zip(t, x.shape)}
        total = None
        for t, x in picked:
            x = x.permute(*sorted(range(len(t)), key=lambda i, t=t: order.index(t[i])))
            x = x.reshape([sizes[lab] if lab in t else 1 for lab in order])
            total = x if total is None else total + x
        kept = {lab for t, _ in terms for lab in t} | set(output)
        drop = tuple(i for i, lab in enumerate(order) if lab not in kept)
        terms.append((tuple(lab for lab in order if lab in kept), total.amax(dim=drop) if drop else total))
    ((t, x),) = terms
    return x.amax() if t else x


def plan(args: argparse.Namespace) -> dict[str, Any]:
    q = args.quick
    return {
        "energy_L": 6 if q else 32,
        "config_L": [6, 5] if q else [24, 20],  # every argmax of a 2^L boundary kept: 32 does not fit
        "chimera": (1, 2, 4) if q else (8, 8, 4),
        "regular": (12, 4, args.budget) if q else (60, 20, args.budget),
        "degeneracy_L": [5, 6] if q else [16, 20, 24, 28],
        "latency_L": 4 if q else 8,
        "peers_L": [3, 4] if q else [8, 12, 16],
        "graph_L": 4 if q else 8,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CPU-friendly smoke run)")
    parser.add_argument("--module", default="auto", choices=["auto", "numpy", "cupy", "torch"])
    parser.add_argument(
        "--memory-limit", type=int, default=None, help="largest intermediate, entries (default: from free memory)"
    )
    parser.add_argument("--plan-seconds", type=float, default=10.0, help="cotengra search time per network (max_time)")
    parser.add_argument(
        "--optimize", default="auto", choices=["auto", "cotengra"], help="lattices: the sweep, or cotengra seeded by it"
    )
    parser.add_argument("--gemm-n", type=int, default=4096, help="side of the f32 GEMM that sets the yardstick rate")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the random-regular sweep")
    parser.add_argument("--graph-repeats", type=int, default=20)
    parser.add_argument(
        "--chimera-seconds",
        type=float,
        default=240.0,
        help="budget of the chimera row, planning included (a child process)",
    )
    parser.add_argument("--only", nargs="*", default=None, help="workloads to run (default: all)")
    parser.add_argument("--row-seconds", type=float, default=60.0, help="defaults table: a row's child is killed after")
    parser.add_argument(
        "--defaults-rows",
        nargs="*",
        default=None,
        help="defaults table rows by first word: energy configuration degeneracy chimera plan latency (default all)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.memory_limit = min(args.memory_limit or 2**5, 2**5)  # small enough that the 6 x 6 lattice is sliced
        args.plan_seconds = min(args.plan_seconds, 1.0)
        args.budget = min(args.budget, 3.0)
        args.chimera_seconds = min(args.chimera_seconds, 60.0)
        args.gemm_n = min(args.gemm_n, 256)
    from lazykern.tools.bench.device import environment

    run = Run(args)
    sizes = plan(args)
    record = run.record
    record |= environment(argv) | {
        "module": getattr(run.module, "__name__", str(run.module)),
        "device": _device_name(run.module),
        "memory_limit": args.memory_limit,
        "planner": "geometry sweep, cotengra refines" if _has("cotengra") else "geometry sweep, opt_einsum greedy",
        "plan_seconds": args.plan_seconds,
        "sizes": sizes,
        "results": {},
    }
    record["gemm"] = attempt(lambda: gemm_rate(run.module, args.gemm_n))
    print("gemm", json.dumps(record["gemm"]), flush=True)
    results = record["results"]
    work: dict[str, tuple[Callable[[Any], Any], Any]] = {
        "energy": (lambda rows: run.energies(sizes["energy_L"], rows), {}),
        "config": (lambda rows: run.config(sizes["config_L"], rows), []),
        "chimera": (lambda _: bounded_energy(run, ("chimera", *sizes["chimera"]), 1, args.chimera_seconds), {}),
        "regular": (lambda rows: run.regular(*sizes["regular"], rows), []),
        "degeneracy": (lambda rows: run.degeneracy(sizes["degeneracy_L"], rows), []),
        "latency": (lambda _: latency(sizes["latency_L"], getattr(run.module, "__name__", "numpy")), {}),
        "peers": (lambda rows: run.peers(sizes["peers_L"], rows), []),
        "graph": (lambda _: run.graph(sizes["graph_L"]), {}),
        "defaults": (lambda rows: defaults_table(args, rows, run.save), []),
    }
    for name, (fn, rows) in work.items():
        if args.only and name not in args.only:
            continue
        results[name] = rows  # filled and saved row by row: a failure or a kill later keeps them
        try:
            results[name] = fn(rows)
        except Exception as exc:  # recorded beside the rows already made; the next workload still runs
            error = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            if isinstance(rows, list):
                rows.append(error)
            else:
                rows.update(error)
        print(name, json.dumps(results[name], default=str)[:400], flush=True)
        run.save()
    return 0


def _device_name(module: Any) -> str:
    if module is np:
        return "CPU (NumPy path)"
    from numba import cuda

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    return f"{name} (sm_{dev.compute_capability[0]}{dev.compute_capability[1]})"


def _plain(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return str(x)


if __name__ == "__main__":
    sys.exit(main())
