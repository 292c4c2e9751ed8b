"""Issue 28's table: warm start, first product, launch floors and one cold kernel, CuPy beside each.

Fresh-process probes (each a new ``python -c``, medians of ``--repeats``), measured by
the child itself after its imports and CUDA context, so only the work counts:

* warm store -> kernel ready: ``tropical.family.get(name)`` + loading the cubin
  (``Kernel.function()``), the store filled by a cold probe; CuPy: ``RawModule`` of
  the same translation unit with its kernel cache (``CUPY_CACHE_DIR``) filled, then
  ``get_function``;
* first ``tropical.matmul`` 64^3 with a warm store: the call and a synchronize, with where its
  time went ("of which": the lookup, the cubin load, the output allocation, the launch, the
  synchronize, and the rest, by wrapping those steps in the probe: :func:`first_call_parts`);
  beside its allocation, the first allocation of the same output (64^3 f32) by CuPy's and by
  torch's allocator in a fresh process of their own, after the same set-up (imports, context,
  two operands uploaded; torch's CUDA state initialised);
* one kernel cold: the same as "ready" with an empty store (CuPy: an empty cache),
  page cache warm (``--drop-caches`` also runs it after dropping the page cache, as
  root where ``/proc/sys/vm/drop_caches`` is writable).

In one process, interleaved (``benchmarks/launch_overhead.py``,
``benchmarks/tropical_launch.py``): host cost of a ``Kernel`` launch (3 pointers +
int) against CuPy RawKernel and ``cuda.core.launch``, ``@lazy_kernel``, and
``tropical.matmul`` 64^3 ``out=`` / allocating / argmax against the ``Kernel`` floor.

Without a GPU (``--cpu``, or none found) only the CPU side is timed: the warm and
cold ``family.get(name, arch)`` of the probes (no load).

    python3 -m benchmarks.startup_table --out benchmarks/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
N = 64  # the product of the table: 64^3 f32 max-plus
_MARK = "STARTUP_TABLE "

# The child: imports and context first (not timed), then the one thing the mode measures.
_CHILD = r"""
import json, sys, time
cfg = json.loads(sys.argv[1])
mode, gpu, n = cfg["mode"], cfg["gpu"], cfg["n"]
import numpy as np
from lazykern import tropical
from lazykern.tropical.plan import make_plan
if gpu:
    from numba import cuda
    ctx = cuda.current_context()
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
else:
    sms = 132
name = make_plan("maxplus", "f32", False, "nn", 1, n, n, n, False, sms=sms).name
out = {"kernel": name}
if mode == "lazykern":
    t = time.perf_counter()
    k = tropical.family.get(name, None if gpu else cfg["arch"])
    out["lookup_seconds"] = time.perf_counter() - t
    if gpu:
        k.function()
    out["seconds"] = time.perf_counter() - t
    out["compiled_now"] = bool(k.meta.get("compiled_now"))
elif mode == "matmul":
    from benchmarks.startup_table import first_call_parts
    A = cuda.to_device(np.ones((n, n), np.float32))
    B = cuda.to_device(np.ones((n, n), np.float32))
    cuda.synchronize()
    parts = first_call_parts()
    t = time.perf_counter()
    tropical.matmul(A, B)
    synced = time.perf_counter()
    cuda.synchronize()
    out["seconds"] = time.perf_counter() - t
    parts["synchronize"] = out["seconds"] - (synced - t)
    parts["rest"] = out["seconds"] - sum(parts.values())
    out["parts"] = parts
elif mode in ("cupy_alloc", "torch_alloc"):
    A = cuda.to_device(np.ones((n, n), np.float32))
    B = cuda.to_device(np.ones((n, n), np.float32))
    if mode == "cupy_alloc":
        import cupy
        cupy.cuda.Device(0).use()
        empty = lambda: cupy.empty((n, n), cupy.float32)
    else:
        import torch
        torch.cuda.init()
        torch.cuda.current_stream()
        empty = lambda: torch.empty((n, n), dtype=torch.float32, device="cuda")
    cuda.synchronize()
    t = time.perf_counter()
    C = empty()
    out["seconds"] = time.perf_counter() - t
elif mode == "cupy":
    import cupy
    cupy.cuda.Device(0).use()
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(1))  # CuPy's context is Numba's primary one
    src = tropical.family.source.translation_unit(name)
    symbol = tropical.family.source.fragment(name).symbol
    t = time.perf_counter()
    cupy.RawModule(code=src, options=tuple(tropical.family.source.options_for(name))).get_function(symbol)
    out["seconds"] = time.perf_counter() - t
print("STARTUP_TABLE " + json.dumps(out))
"""


# Where a first tropical.matmul's time goes (the "of which" rows under it): each step's function is
# wrapped to add its time to a part; "rest" is the Python around them (keys, checks, planning).
_FIRST_CALL_STEPS = (
    ("lazykern.tropical.api", "loaded_kernel", "lookup"),  # family.get: key, store read, Kernel
    ("lazykern.launch.kernel", "Kernel._load", "load"),  # the cubin into the context
    ("lazykern.launch.memory", "allocate", "allocate"),  # the output buffer (a first one: the driver)
    ("lazykern.tropical._hot", "launch_packed", "launch"),  # cuLaunchKernel (the first: the kernel's lazy load)
)


def first_call_parts() -> dict[str, float]:
    """Wrap the steps of a first tropical call; the dict they add their seconds to (in this process)."""
    import importlib

    parts: dict[str, float] = {}
    for module, attr, part in _FIRST_CALL_STEPS:
        owner: Any = importlib.import_module(module)
        *outer, name = attr.split(".")
        for o in outer:
            owner = getattr(owner, o)
        setattr(owner, name, _timed(getattr(owner, name), part, parts))
    return parts


def _timed(fn: Any, part: str, parts: dict[str, float]) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            parts[part] = parts.get(part, 0.0) + time.perf_counter() - start

    return timed


def probe(mode: str, cache: str, *, gpu: bool, arch: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One fresh process measuring ``mode`` with the store (or CuPy cache) at ``cache``."""
    cfg = {"mode": mode, "gpu": gpu, "n": N, "arch": arch}
    full = dict(os.environ, LAZYKERN_CACHE_DIR=cache, CUPY_CACHE_DIR=os.path.join(cache, "cupy"), **(env or {}))
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cfg)], env=full, capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"probe {mode} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len(_MARK) :])


def _drop_page_cache() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


def fresh_process_rows(repeats: int, *, gpu: bool, arch: str, cupy: bool, drop: bool) -> dict[str, Any]:
    """Medians (seconds) of the fresh-process probes, and every sample."""
    samples: dict[str, list[float]] = {}

    def add(key: str, run: dict[str, Any]) -> None:
        samples.setdefault(key, []).append(run["seconds"])
        if "lookup_seconds" in run:  # where a kernel's time went: the store (or NVRTC), then the driver
            samples.setdefault(key + "_lookup", []).append(run["lookup_seconds"])
        for part, seconds in run.get("parts", {}).items():  # where a first call's time went
            samples.setdefault(f"{key}_{part}", []).append(seconds)

    with tempfile.TemporaryDirectory(prefix="lazykern-startup-table-") as tmp:
        for i in range(repeats):
            store = os.path.join(tmp, f"store-{i}")
            os.makedirs(store)
            cold = probe("lazykern", store, gpu=gpu, arch=arch)
            assert cold["compiled_now"], "a cold probe found the kernel in an empty store"
            add("cold", cold)
            warm = probe("lazykern", store, gpu=gpu, arch=arch)
            assert not warm["compiled_now"], "a warm probe compiled"
            add("ready", warm)
            if gpu:
                add("first_matmul", probe("matmul", store, gpu=gpu, arch=arch))
                for peer, importable in (("cupy", cupy), ("torch", _has_torch())):
                    if importable:
                        add(f"first_alloc_{peer}", probe(f"{peer}_alloc", store, gpu=gpu, arch=arch))
            if cupy:
                add("cupy_cold", probe("cupy", store, gpu=gpu, arch=arch))
                add("cupy_ready", probe("cupy", store, gpu=gpu, arch=arch))
            if drop and _drop_page_cache():
                fresh = os.path.join(tmp, f"store-dropped-{i}")
                os.makedirs(fresh)
                _drop_page_cache()
                add("cold_page_cache_dropped", probe("lazykern", fresh, gpu=gpu, arch=arch))
    return {"medians_s": {k: statistics.median(v) for k, v in samples.items()}, "samples_s": samples}


def launch_rows(gpu: bool) -> dict[str, Any]:
    """Host microseconds per launch: the Kernel floor and its peers, the tropical calls (GPU only)."""
    if not gpu:
        return {}
    from benchmarks.launch_overhead import steady_state
    from benchmarks.tropical_launch import host_costs

    steady = steady_state(4096, 2000, 15)
    tropical_us = host_costs(N, 2000, 15)
    return {"launch_us": {k: v["median_us"] for k, v in steady.items()}, "tropical_us": tropical_us}


def table_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(measure, lazykern, CuPy same run, target) of each row that was measured."""
    med = result["fresh_process"]["medians_s"]
    ms = lambda key: f"{med[key] * 1e3:.2f} ms" if key in med else "-"  # noqa: E731
    rows = [
        ("fresh process, warm store -> kernel ready", ms("ready"), ms("cupy_ready"), "<= 2 ms"),
        ("  of which the lookup (no driver)", ms("ready_lookup"), "-", "-"),
        ("first tropical.matmul 64^3, warm store", ms("first_matmul"), "-", "<= 5 ms"),
        *(
            (f"  of which {part}", ms(f"first_matmul_{part}"), "-", "-")
            for *_, part in (*_FIRST_CALL_STEPS, ("", "", "synchronize"), ("", "", "rest"))
            if f"first_matmul_{part}" in med
        ),
        *(
            (f"  beside it: {label}'s first allocation of C", ms(f"first_alloc_{peer}"), "-", "-")
            for peer, label in (("cupy", "CuPy"), ("torch", "torch"))
            if f"first_alloc_{peer}" in med
        ),
        ("one kernel cold (empty store), page cache warm", ms("cold"), ms("cupy_cold"), "<= 0.1 s"),
    ]
    if "cold_page_cache_dropped" in med:
        rows.append(("one kernel cold, page cache dropped", ms("cold_page_cache_dropped"), "-", "<= 0.1 s"))
    launch = result.get("launches", {}).get("launch_us", {})
    trop = result.get("launches", {}).get("tropical_us", {})
    if launch:
        floor = launch["lazykern Kernel"]
        cupy = launch.get("CuPy RawKernel")
        ratio = f" ({floor / cupy:.2f}x)" if cupy else ""
        rows.append(("Kernel launch, 3 pointers + int (host us)", f"{floor:.2f}{ratio}", _us(cupy), "<= 0.7x CuPy"))
        rows.append(("cuda.core.launch, same kernel (host us)", _us(launch.get("cuda.core.launch")), "-", "-"))
        lazy = launch["lazy_kernel"]
        rows.append(("@lazy_kernel launch (host us)", f"{lazy:.2f} ({lazy / floor:.2f}x)", "-", "<= 1.15x Kernel"))
    if trop:
        tfloor = trop["Kernel (floor)"]
        for key, peer, target in (
            ("matmul out=", "CuPy matmul out=", "<= 1.15x floor"),
            ("matmul allocating", "CuPy matmul allocating", "<= 1.5x floor"),
            ("matmul argmax allocating", "CuPy matmul argmax allocating", "<= 1.6x floor"),
        ):
            value = trop[key]
            rows.append(
                (f"tropical.{key} 64^3 (host us)", f"{value:.2f} ({value / tfloor:.2f}x)", _us(trop.get(peer)), target)
            )
    return rows


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _has_gpu() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def _has_torch() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _has_cupy() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="directory for the JSON (default: print only)")
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per probe (medians)")
    parser.add_argument("--cpu", action="store_true", help="CPU side only, even where a GPU is present")
    parser.add_argument("--arch", default="sm_90", help="arch of the CPU-only probes")
    parser.add_argument(
        "--drop-caches", action="store_true", help="also time a cold kernel after dropping the page cache"
    )
    args = parser.parse_args(argv)
    gpu = not args.cpu and _has_gpu()
    cupy = gpu and _has_cupy()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "suite": "startup-table",
        "mode": "gpu" if gpu else "cpu (lookup only, no load)",
        "repeats": args.repeats,
        "fresh_process": fresh_process_rows(args.repeats, gpu=gpu, arch=args.arch, cupy=cupy, drop=args.drop_caches),
        "launches": launch_rows(gpu),
    }
    from lazykern.tools.bench.device import environment

    result["environment"] = environment(argv)
    result["wall_seconds"] = time.perf_counter() - started
    rows = table_rows(result)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'lazykern':>16}  {'CuPy, same run':>14}  target")
    for measure, ours, peer, target in rows:
        print(f"{measure:<{width}}  {ours:>16}  {peer:>14}  {target}")
    result["table"] = [dict(zip(("measure", "lazykern", "cupy", "target"), r)) for r in rows]
    if args.out:
        from lazykern.tools.bench.device import device_spec, slug

        where = slug(device_spec().name) if gpu else "cpu"
        path = Path(args.out) / f"startup-table-{where}-{datetime.date.today().isoformat()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {path} ({result['wall_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
