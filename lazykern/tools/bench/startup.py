"""Start-up cost: what a process pays before its first tropical product, cold and warm, lazy and eager.

Every scenario runs in a fresh process (``sys.executable -c``) with its own
``LAZYKERN_CACHE_DIR``; the child times itself with ``perf_counter`` and
reports import time separately from the work. Medians over the repeats.

With a GPU (the default family, ``lazykern.tropical:family``):

* cold: empty cache, first ``tropical.matmul`` of f32 max-plus 1024^3 (compile included);
* warm: the cache the cold run filled, a new process (load only);
* in-process: the second call in that process;
* eager: every fragment of the family as one translation unit through NVRTC,
  as the Rust crate tropical-gemm does at every start-up;
* lazy: the fragments a forward + backward f32 max-plus user actually needs
  (found by running both), NVRTC time only.

Without a GPU the same comparison is compile-only: cold compile vs warm load of
cubins through ``family.get(name, arch)``, eager vs lazy NVRTC time.

    python -m benchmarks.startup [--quick] [--out DIR]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lazykern.compile import compiler
from lazykern.errors import LazykernError
from lazykern.families import resolve as resolve_family

from . import _report, device

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_FAMILY = "tropical"
DEFAULT_OUT = os.path.join("benchmarks", "results")
# --quick compiles this many core fragments as the eager unit: all 50 tropical ones take ~22 s of NVRTC on a CPU,
# and a smoke run must finish in seconds. The row says it is a sample and what the whole set would cost at that rate.
QUICK_EAGER_FRAGMENTS = 4
_MARK = "LAZYKERN_BENCH_RESULT "  # the child's last line; _CHILD prints the same prefix

REFERENCE_FIGURES: dict[str, Any] = {
    "note": "reference figures measured earlier, not in this run (H100 SXM, NVRTC 13.0; see DESIGN.md)",
    "NVRTC, all 31 tropical instantiations as one translation unit (eager), s": 13.6,
    "NVRTC, one instantiation alone (lazy), s": 0.43,
    "loading one cubin into a context, s": 0.0002,
    "tropical-gemm (Rust crate): NVRTC of its whole .cu at context creation, s": 17.2,
    "tropical-gemm (Rust crate): driver JIT of its PTX for 31 kernels, every process, s": 7.3,
}

# The child measures itself; it imports nothing of the benchmark so import time is the user's.
_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
cfg = json.loads(sys.argv[1])
import lazykern
lazykern_import = time.perf_counter() - t0
from lazykern.families import resolve
family = resolve(cfg["family"])
out = {"lazykern_import_seconds": lazykern_import}
mode, arch = cfg["mode"], cfg["arch"]
if mode in ("first_call", "fwd_bwd"):
    import numpy as np
    from numba import cuda
    from lazykern import tropical
    out["import_seconds"] = time.perf_counter() - t0
    t = time.perf_counter()
    cuda.current_context()
    rng = np.random.default_rng(0)
    n = cfg["size"]
    A = cuda.to_device(rng.standard_normal((n, n), dtype=np.float32))
    B = cuda.to_device(rng.standard_normal((n, n), dtype=np.float32))
    cuda.synchronize()
    out["setup_seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    if mode == "first_call":
        tropical.matmul(A, B, semiring="maxplus")
    else:
        C, K = tropical.matmul(A, B, semiring="maxplus", argmax=True)
        tropical.matmul_backward(C, K, A.shape, B.shape)
    cuda.synchronize()
    out["seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    if mode == "first_call":
        tropical.matmul(A, B, semiring="maxplus")
    cuda.synchronize()
    out["second_seconds"] = time.perf_counter() - t
    names = family.compiled()
elif mode == "get":
    out["import_seconds"] = time.perf_counter() - t0
    names = cfg["names"]
    t = time.perf_counter()
    for name in names:
        family.get(name, arch)
    out["seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    for name in names:
        family.get(name, arch)
    out["second_seconds"] = time.perf_counter() - t
elif mode == "eager":
    from lazykern import compiler
    out["import_seconds"] = time.perf_counter() - t0
    result = compiler.compile_source(
        family.source.all_in_one(cfg.get("names") or family.core_names()),
        name=family.name + "_all",
        arch=arch,
        options=family.source.options,
    )
    out["seconds"] = result.seconds
    out["cubin_bytes"] = len(result.code)
    names = []
else:
    raise SystemExit("unknown mode " + repr(mode))
out["kernels"] = [dict(family.get(n, arch).meta, name=n) for n in names]
out["compile_calls"] = family.compile_calls
print("LAZYKERN_BENCH_RESULT " + json.dumps(out, default=str))
"""


def run(
    out: str | os.PathLike[str] | None = None,
    *,
    quick: bool = False,
    repeats: int | None = None,
    family: str = DEFAULT_FAMILY,
    gpu: bool | None = None,
    lazy_names: Sequence[str] | None = None,
    arch: str | None = None,
    eager: bool = True,
    size: int = 1024,
    progress: Callable[[str], None] | None = None,
    argv: list[str] | None = None,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """Run the scenarios; write JSON and PNG into ``out`` (nothing written when None); return the result.

    ``family`` is a registered family name or ``"module:attribute"`` naming a
    KernelFamily (or a function returning one) that a fresh process can import. ``gpu=None`` detects a GPU;
    ``gpu=False`` gives the compile-only figures. ``lazy_names`` are the
    fragments compiled in compile-only mode (default: the forward-with-argmax
    and backward f32 max-plus fragments, found by name).
    """
    repeats = repeats or (1 if quick else 3)
    if gpu is None:
        gpu = compiler.device_compute_capability() is not None
    if gpu and family != DEFAULT_FAMILY:
        raise ValueError(f"the GPU scenarios call lazykern.tropical; pass gpu=False to time family {family!r}")
    arch = compiler.normalize_arch(arch)
    fam = resolve_family(family)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lazykern-bench-startup-") as tmp:
        runner = _Runner(tmp, family, arch, timeout, progress)
        if gpu:
            rows, lazy = _gpu_rows(runner, repeats, size)
        else:
            names = list(lazy_names) if lazy_names else guess_fwd_bwd_names(fam.names())
            rows, lazy = _cpu_rows(runner, repeats, names)
        if eager:
            rows.append(_eager_row(runner, repeats, fam.core_names(), QUICK_EAGER_FRAGMENTS if quick else None))
        rows.append(lazy)
    result: dict[str, Any] = {
        "suite": "startup",
        "mode": ("gpu" if gpu else "compile-only") + (" quick" if quick else ""),
        "family": family,
        "fragments": len(fam.names()),
        "core_fragments": len(fam.core_names()),
        "arch": arch,
        "repeats": repeats,
        "rows": rows,
        "summary": _summary(rows),
        "environment": device.environment(argv),
        "reference_figures": REFERENCE_FIGURES,
        "wall_seconds": time.perf_counter() - started,
    }
    where = "cpu"
    if gpu:
        spec = device.device_spec()
        result["device"] = spec.as_dict()
        where = spec.name
    result = _report.clean(result)
    if out is not None:
        _report.save(result, out, "startup", where, _report.write_startup_png)
    return result


def table(result: dict[str, Any]) -> Table:
    """The rich table of a result (for the CLI)."""
    return _report.startup_table(result)


def guess_fwd_bwd_names(names: Sequence[str]) -> list[str]:
    """The f32 max-plus forward-with-argmax and backward fragments, picked by name.

    Used where no GPU can run the product to say which fragments it needs.
    Falls back to the first fragment when the names follow no such pattern.

    >>> guess_fwd_bwd_names(["matmul_maxplus_f32", "matmul_maxplus_f32_argmax", "backward_f32", "bmm_f64"])
    ['matmul_maxplus_f32_argmax', 'backward_f32']
    """
    low = {n: n.lower() for n in names}

    def f32(text: str) -> bool:
        return "f32" in text or "float32" in text or "float" in text and "64" not in text

    fwd = [n for n, t in low.items() if "maxplus" in t and "argmax" in t and "backward" not in t and f32(t)]
    bwd = [n for n, t in low.items() if ("backward" in t or "bwd" in t) and f32(t)]
    bwd = [n for n in bwd if "maxplus" in low[n]] or bwd
    picked = [*fwd[:1], *bwd[:1]]
    return picked or list(names[:1])


_STEPS = {
    "first_call": "first matmul in a fresh process",
    "fwd_bwd": "forward + backward in a fresh process",
    "get": "compile or load in a fresh process",
    "eager": "eager: the core fragments as one NVRTC unit (the slow one)",
}


class _Runner:
    """Starts the children: one fresh process per run, a cache directory chosen per scenario."""

    def __init__(
        self, tmp: str, family: str, arch: str, timeout: float, progress: Callable[[str], None] | None
    ) -> None:
        self.tmp = tmp
        self.family = family
        self.arch = arch
        self.timeout = timeout
        self.progress = progress
        self._dirs = 0

    def fresh_dir(self) -> str:
        self._dirs += 1
        path = os.path.join(self.tmp, f"cache-{self._dirs}")
        os.makedirs(path, mode=0o700)
        return path

    def __call__(self, mode: str, cache_dir: str, **cfg: Any) -> dict[str, Any]:
        if self.progress:
            self.progress(f"start-up: {_STEPS.get(mode, mode)} ({os.path.basename(cache_dir)})")
        return run_child({"mode": mode, "family": self.family, "arch": self.arch, **cfg}, cache_dir, self.timeout)


def run_child(cfg: dict[str, Any], cache_dir: str, timeout: float = 900.0) -> dict[str, Any]:
    """One fresh Python process running the measuring child with ``cfg``; returns what it measured."""
    env = dict(os.environ, LAZYKERN_CACHE_DIR=cache_dir, LAZYKERN_CACHE="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(cfg)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise LazykernError(f"start-up child {cfg['mode']!r} ran past {timeout:.0f} s; raise timeout=") from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise LazykernError(
            f"start-up child {cfg['mode']!r} (family {cfg['family']}) failed with exit code {proc.returncode}:\n{tail}"
        )
    measured: dict[str, Any] = json.loads(lines[-1][len(_MARK) :])
    return measured


def _row(scenario: str, what: str, runs: list[dict[str, Any]], key: str = "seconds") -> dict[str, Any]:
    return {
        "scenario": scenario,
        "what": what,
        "import_seconds": _report.medians_of(runs, "import_seconds"),
        "setup_seconds": _report.medians_of(runs, "setup_seconds"),
        "seconds": _report.medians_of(runs, key),
        "compile_calls": max((r.get("compile_calls", 0) for r in runs), default=0),
        "runs": runs,
    }


def _nvrtc_seconds(run: dict[str, Any]) -> float:
    """NVRTC time of the kernels a run compiled (not loaded)."""
    seconds: float = sum(k.get("compile_seconds", 0.0) for k in run.get("kernels", []) if k.get("compiled_now"))
    return seconds


def _gpu_rows(runner: _Runner, repeats: int, size: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cold, warm, lazy = [], [], []
    shared = ""
    for _ in range(repeats):
        shared = runner.fresh_dir()
        cold.append(runner("first_call", shared, size=size))
    for _ in range(repeats):
        warm.append(runner("first_call", shared, size=size))
    for _ in range(repeats):
        run = runner("fwd_bwd", runner.fresh_dir(), size=size)
        run["nvrtc_seconds"] = _nvrtc_seconds(run)
        lazy.append(run)
    shape = f"{size}^3"
    names = lazy[-1]["kernels"] if lazy else []
    rows = [
        _row(f"cold: first matmul {shape}", "fresh process, empty cache: compile + load + run", cold),
        _row(f"warm: first matmul {shape}", "fresh process, cache filled by the cold run: load + run", warm),
        {
            **_row("in-process: second matmul", "the same process's next call", warm, "second_seconds"),
            "import_seconds": None,
            "setup_seconds": None,
        },
    ]
    lazy_row = _row(
        f"lazy: {len(names)} fragments (fwd+bwd f32 maxplus)",
        "NVRTC time of what forward-with-argmax + backward compiled: " + ", ".join(k["name"] for k in names),
        lazy,
        "nvrtc_seconds",
    )
    return rows, {**lazy_row, "import_seconds": None, "setup_seconds": None}


def _cpu_rows(runner: _Runner, repeats: int, names: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    cold, warm = [], []
    shared = ""
    for _ in range(repeats):
        shared = runner.fresh_dir()
        run = runner("get", shared, names=names)
        run["nvrtc_seconds"] = _nvrtc_seconds(run)
        cold.append(run)
    for _ in range(repeats):
        warm.append(runner("get", shared, names=names))
    listed = ", ".join(names)
    rows = [
        _row("cold: compile", f"fresh process, empty cache: NVRTC + store of {listed}", cold),
        _row("warm: load cubins", "fresh process, cache filled by the cold run: read from disk only", warm),
        {
            **_row("in-process: second get", "the same process asks again (memoized)", warm, "second_seconds"),
            "import_seconds": None,
        },
    ]
    lazy_row = _row(f"lazy: {len(names)} fragments", f"NVRTC time of {listed} alone", cold, "nvrtc_seconds")
    return rows, {**lazy_row, "import_seconds": None}


def _eager_row(runner: _Runner, repeats: int, core: Sequence[str], sample: int | None = None) -> dict[str, Any]:
    """NVRTC of the core fragments as one unit; with ``sample``, of the first ``sample`` of them only (--quick)."""
    names = list(core[:sample]) if sample is not None and sample < len(core) else list(core)
    what = "NVRTC of the family's core kernels as one unit, as tropical-gemm does at every start-up"
    if len(names) < len(core):
        scenario = f"eager: {len(names)} of {len(core)} fragments, one unit (quick)"
        what = f"NVRTC of {len(names)} of the family's {len(core)} core kernels as one unit (--quick samples them)"
    else:
        scenario = f"eager: all {len(core)} fragments, one unit"
    try:
        runs = [runner("eager", runner.fresh_dir(), names=names) for _ in range(repeats)]
    except LazykernError as exc:  # the family's fragments may not compile as one unit: say so, keep the rest
        return {"scenario": scenario, "what": f"failed: {exc}", "seconds": None, "error": str(exc), "runs": []}
    row = _row(scenario, what, runs)
    if len(names) < len(core) and row["seconds"]:
        row["estimated_all_seconds"] = row["seconds"] * len(core) / len(names)
        row["what"] += f"; all {len(core)} at this rate: about {row['estimated_all_seconds']:.0f} s"
    return {**row, "compile_calls": 1, "import_seconds": None}  # NVRTC time against NVRTC time


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, Any] = {r["scenario"].split(":")[0]: r.get("estimated_all_seconds") or r.get("seconds") for r in rows}
    out: dict[str, Any] = {}
    if any(r.get("estimated_all_seconds") for r in rows):
        out["eager_estimated"] = True  # --quick timed a sample of the fragments and scaled it
    if by.get("cold") and by.get("warm"):
        out["cold_over_warm"] = by["cold"] / by["warm"]
    if by.get("eager") and by.get("lazy"):
        out["eager_over_lazy"] = by["eager"] / by["lazy"]
    return out
