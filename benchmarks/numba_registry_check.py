"""CPU cost of a ``@lazy_kernel`` warm hit's manifest check, before and after issue 43.4.

Fresh processes, no GPU: one builds a store of the registry test cases' kernels
(tests/_numba_registry_cases.py: user casts, constants, typeof, attribute wrappers, data models,
overload_method), then each round runs a fresh process per tree that asks the store for every
kernel and times ``resolved.verify`` (the check a hit runs: functions, frozen values and, after
43.4, the registry walk), the first call of the process and the calls after it, and the whole
warm ``_entry`` of the first kernel, in CPU time (``process_time``: the figure that does not
depend on what else the machine runs). Trees: this checkout ("new") and ``--base DIR`` (another
checkout, e.g. ``git archive 4686773 | tar -x -C DIR``).

    python3 -m benchmarks.numba_registry_check --base /tmp/base --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import importlib, json, sys, time
src, store, tests = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, src)
sys.path.insert(0, tests)  # this checkout's cases, whichever tree is timed
import _numba_registry_cases as cases
modules = [importlib.import_module(cases.module_name(c)) for c in cases.CASES]
from lazykern import KernelCache, lazy_kernel
from lazykern._numba import resolved
from lazykern._numba.signature import normalize_signature
calls = []
real = resolved.verify
def timed(manifest, py_func):
    t = time.process_time()
    why = real(manifest, py_func)
    calls.append(time.process_time() - t)
    return why
resolved.verify = timed
cache = KernelCache(store)
types = normalize_signature(cases.SIG)
out = {"compiled": [], "entry_first": None}
for m in modules:
    t = time.process_time()
    _, compiled = lazy_kernel(m.kern, cache=cache)._entry(types, cases.ARCH, relax=False)
    if out["entry_first"] is None:
        out["entry_first"] = time.process_time() - t
    out["compiled"].append(compiled)
out["verify"] = calls
print("JSON:" + json.dumps(out))
"""


def _child(tree: Path, src: Path, store: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    args = [sys.executable, "-c", _CHILD, str(src), str(store), str(ROOT / "tests")]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=tree)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(next(li for li in proc.stdout.splitlines() if li.startswith("JSON:"))[5:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests import _numba_registry_cases as cases

    trees = {"new": ROOT, **({"base": args.base.resolve()} if args.base else {})}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "src")
        src.mkdir()
        cases.write(src, 0)
        samples: dict[str, dict[str, list[float]]] = {}
        for name, tree in trees.items():
            store = Path(tmp, f"store-{name}")
            _child(tree, src, store)  # builds the store
            samples[name] = {"verify_first_ms": [], "verify_later_ms": [], "entry_first_ms": []}
        for _ in range(args.rounds):
            for name, tree in trees.items():
                r = _child(tree, src, Path(tmp, f"store-{name}"))
                if any(r["compiled"]):
                    raise SystemExit(f"{name}: a warm store compiled {r['compiled']}")
                samples[name]["verify_first_ms"].append(r["verify"][0] * 1e3)
                samples[name]["verify_later_ms"] += [v * 1e3 for v in r["verify"][1:]]
                samples[name]["entry_first_ms"].append(r["entry_first"] * 1e3)
    report = {
        name: {k: round(statistics.median(v), 3) for k, v in s.items()} | {"kernels": len(cases.CASES)}
        for name, s in samples.items()
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
