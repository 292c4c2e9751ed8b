"""Exact spin-glass ground states with tropical tensor networks, at the scale of Liu, Wang, Zhang (PRL 2021).

    python3 benchmarks/spin_glass.py --out benchmarks/results/spin-glass-h100.json
    python3 benchmarks/spin_glass.py --quick --out /tmp/sg.json          # tiny sizes, runs on a CPU

Workloads (each timed end to end: network build, contraction order search, contraction):
  energy      +-J square lattice L x L (L = 32), float32
  config      one optimal configuration, L = 32, 28, 24 until one fits (every argmax kept; then only
              those of steps under memory-limit / 4 entries, recomputing the larger ones)
  chimera     the 512-qubit chimera graph (8 x 8 cells of K4,4), +-J
  regular     random 3-regular graphs, n stepped up until the time budget (default 600 s) runs out
  degeneracy  ground-state count of +-J square lattices, L = 16 and up
  peers       lazykern vs torch (broadcast + amax per contraction) vs the NumPy CPU path, same plan
  graph       eager vs CUDA-graph-captured contraction of a network of many small tensors

Orders come from cotengra (hyper-optimized trees, sliced so no intermediate exceeds
--memory-limit entries) when it is installed, else from opt_einsum's greedy search
(unsliced: large lattices then need far more memory). The JSON at --out holds the
device, driver, versions, command line, date and every figure; each contraction's row
has its plan (slices, log2 of the largest intermediate, flops) and its time split
(plan_seconds: the order search, once; contract_seconds: every slice, kernels compiled
on first use included).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from lazykern import tropical
from lazykern.tropical import networks as nw
from lazykern.tropical.einsum import contract_network


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


def make_optimizer(memory_limit: int, plan_seconds: float, repeats: int, parallel: Any = "auto") -> Any:
    try:
        import cotengra
    except ImportError:
        return "greedy"
    return cotengra.HyperOptimizer(
        max_repeats=repeats,
        max_time=plan_seconds,
        minimize="flops",
        slicing_reconf_opts={"target_size": memory_limit},
        parallel=parallel,
        progbar=False,
    )


def plan_network(sg: nw.SpinGlass, opt: Any, memory_limit: int) -> tuple[tropical.ContractionPlan, dict[str, Any]]:
    """The contraction plan of sg's network (the solvers take it as ``optimize=``) and its
    figures: slices, log2 of the largest intermediate (entries, one slice), the flops
    (tropical multiply-adds, the steps every slice shares counted once)."""
    labels, _ = sg.network()
    plan = tropical.contraction_plan(labels, (), dict.fromkeys(range(sg.n), 2), optimize=opt, memory_limit=memory_limit)
    stats = {
        "slices": plan.nslices,
        "sliced_spins": len(plan.sliced),
        "log2_largest": round(math.log2(max(plan.largest, 1)), 2),
        "flops": plan.flops,
        "log10_flops": round(math.log10(max(plan.flops, 1)), 2),
    }
    return plan, stats


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

    def plan(self, sg: nw.SpinGlass) -> tuple[dict[str, Any], dict[str, Any]]:
        """(keyword arguments for the solvers: the plan as optimize=, the plan's figures), timed."""
        a = self.args
        opt = make_optimizer(a.memory_limit, a.plan_seconds, a.plan_repeats, False if a.quick else "auto")
        (plan, stats), seconds = timed(lambda: plan_network(sg, opt, a.memory_limit))
        return {"optimize": plan}, stats | {"plan_seconds": round(seconds, 3)}

    def energy(self, sg: nw.SpinGlass) -> dict[str, Any]:
        kwargs, stats = self.plan(sg)
        E, seconds = timed(lambda: nw.ground_state_energy(sg, module=self.module, dtype=self.dtype, **kwargs))
        total = stats["plan_seconds"] + seconds
        return (
            {"graph": sg.name, "n": sg.n, "energy": E, "contract_seconds": round(seconds, 3)}
            | stats
            | {"seconds": round(total, 3)}
        )

    def config(self, sizes: list[int]) -> list[dict[str, Any]]:
        rows = []
        for L in sizes:
            sg = nw.square_lattice(L, seed=L)
            for checkpoint in (False, self.args.memory_limit // 4):

                def go(sg=sg, checkpoint=checkpoint) -> dict[str, Any]:
                    kwargs, stats = self.plan(sg)
                    (E, spins), seconds = timed(
                        lambda: nw.ground_state(
                            sg, module=self.module, dtype=self.dtype, checkpoint=checkpoint, **kwargs
                        )
                    )
                    row = {"energy": E, "energy_of_config": sg.energy(spins), "contract_seconds": round(seconds, 3)}
                    return row | stats

                row = {"graph": sg.name, "checkpoint": checkpoint} | attempt(go)
                rows.append(row)
                if "error" not in row:
                    return rows
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

    def degeneracy(self, sizes: list[int]) -> list[dict[str, Any]]:
        rows = []
        for L in sizes:
            sg = nw.square_lattice(L, seed=L)

            def go(sg=sg) -> dict[str, Any]:
                count_dtype = np.int64 if sg.n <= 400 else np.float64  # int64 wraps past 2^63
                kwargs, stats = self.plan(sg)
                (E, count), seconds = timed(
                    lambda: nw.degeneracy(sg, module=self.module, dtype=self.dtype, count_dtype=count_dtype, **kwargs)
                )
                return {
                    "energy": E,
                    "degeneracy": count,
                    "count_dtype": str(np.dtype(count_dtype)),
                    "contract_seconds": round(seconds, 3),
                } | stats

            rows.append({"graph": sg.name} | attempt(go))
        return rows

    def peers(self, sizes: list[int]) -> list[dict[str, Any]]:
        """The same contraction order, three engines: lazykern, torch broadcast + amax, NumPy CPU."""
        rows = []
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
        "config_L": [6, 5] if q else [32, 28, 24],
        "chimera": (2, 2, 4) if q else (8, 8, 4),
        "regular": (12, 4, args.budget) if q else (60, 20, args.budget),
        "degeneracy_L": [5, 6] if q else [16, 20, 24],
        "peers_L": [3, 4] if q else [8, 12, 16],
        "graph_L": 4 if q else 8,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CPU-friendly smoke run)")
    parser.add_argument("--module", default="auto", choices=["auto", "numpy", "cupy", "torch"])
    parser.add_argument("--memory-limit", type=int, default=2**28, help="largest intermediate, entries")
    parser.add_argument("--plan-seconds", type=float, default=20.0, help="cotengra search time per network")
    parser.add_argument("--plan-repeats", type=int, default=128)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the random-regular sweep")
    parser.add_argument("--graph-repeats", type=int, default=20)
    parser.add_argument("--only", nargs="*", default=None, help="workloads to run (default: all)")
    args = parser.parse_args(argv)
    if args.quick:
        args.memory_limit = min(args.memory_limit, 2**5)  # small enough that the 6 x 6 lattice is sliced
        args.plan_seconds = min(args.plan_seconds, 1.0)
        args.plan_repeats = min(args.plan_repeats, 2)
        args.budget = min(args.budget, 3.0)
    from lazykern.tools.bench.device import environment

    run = Run(args)
    sizes = plan(args)
    record = run.record
    record |= environment(argv) | {
        "module": getattr(run.module, "__name__", str(run.module)),
        "device": _device_name(run.module),
        "memory_limit": args.memory_limit,
        "planner": "opt_einsum greedy (cotengra not installed)"
        if isinstance(make_optimizer(1, 1, 1), str)
        else "cotengra",
        "sizes": sizes,
        "results": {},
    }
    m, n, t = sizes["chimera"]
    work = {
        "energy": lambda: attempt(lambda: run.energy(nw.square_lattice(sizes["energy_L"], seed=sizes["energy_L"]))),
        "config": lambda: run.config(sizes["config_L"]),
        "chimera": lambda: attempt(lambda: run.energy(nw.chimera(m, n, t, seed=1))),
        "regular": lambda: run.regular(*sizes["regular"], record["results"].setdefault("regular", [])),
        "degeneracy": lambda: run.degeneracy(sizes["degeneracy_L"]),
        "peers": lambda: run.peers(sizes["peers_L"]),
        "graph": lambda: attempt(lambda: run.graph(sizes["graph_L"])),
    }
    for name, fn in work.items():
        if args.only and name not in args.only:
            continue
        record["results"][name] = fn()
        print(name, json.dumps(record["results"][name], default=str)[:400], flush=True)
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
