"""One kernel cold on the CPU: when it is served, and when its entry is stored (issue 35's traced pass).

Fresh processes, each with an empty store, ``tropical.family.get(name, arch)`` of the table's 64^3
f32 max-plus kernel (what ``startup_table --cpu`` times), interleaved round by round over the trees
given: this checkout ("new"), ``--base DIR`` (another checkout, e.g. ``git archive 3f5041e | tar -x
-C DIR``) and "floor" (this checkout with no traced pass at all: the untraced compile alone). For
each: the median time until ``get`` returns, until the entry is stored (``_later.wait_all()``; a
tree without it stores before ``get`` returns), and a warm ``get`` in a fresh process afterwards.

    python3 -m benchmarks.cold_store --base /tmp/base --rounds 7
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
import json, os, sys, time
from lazykern import tropical
from lazykern.compile import compiler
from lazykern.tropical.plan import make_plan
if os.environ.get("COLD_STORE_FLOOR"):
    compiler._traces_headers = lambda: False
name = make_plan("maxplus", "f32", False, "nn", 1, 64, 64, 64, False, sms=132).name
t = time.perf_counter()
k = tropical.family.get(name, sys.argv[1])
got = time.perf_counter() - t
try:
    from lazykern.store import _later
    _later.wait_all()
except ImportError:  # a tree that stores before get returns
    pass
stored = time.perf_counter() - t
print("COLD_STORE " + json.dumps({"s": got, "stored": stored, "now": bool(k.meta.get("compiled_now"))}))
"""


def probe(tree: str, store: str, arch: str, floor: bool = False) -> dict[str, float]:
    env = dict(os.environ, LAZYKERN_CACHE_DIR=store, PYTHONPATH=tree)
    if floor:
        env["COLD_STORE_FLOOR"] = "1"
    proc = subprocess.run([sys.executable, "-c", _CHILD, arch], env=env, cwd=tree, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("COLD_STORE ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"probe in {tree} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    out: dict[str, float] = json.loads(lines[-1][len("COLD_STORE ") :])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=None, help="another checkout to time beside this one")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    trees = {"new": (str(ROOT), False), "floor": (str(ROOT), True)}
    if args.base:
        trees["base"] = (os.path.abspath(args.base), False)
    samples: dict[str, dict[str, list[float]]] = {k: {"cold": [], "stored": [], "warm": []} for k in trees}
    with tempfile.TemporaryDirectory(prefix="lazykern-cold-store-") as tmp:
        for i in range(args.rounds):
            for label, (tree, floor) in trees.items():
                store = os.path.join(tmp, f"{label}-{i}")
                cold = probe(tree, store, args.arch, floor)
                assert cold["now"], f"{label}: a cold probe found the kernel in an empty store"
                samples[label]["cold"].append(cold["s"])
                samples[label]["stored"].append(cold["stored"])
                if not floor:  # the floor stores entries no traced process would serve
                    warm = probe(tree, store, args.arch)
                    assert not warm["now"], f"{label}: the next process compiled again"
                    samples[label]["warm"].append(warm["s"])
    medians = {
        label: {k: round(statistics.median(v) * 1000, 1) for k, v in parts.items() if v}
        for label, parts in samples.items()
    }
    print(json.dumps({"medians_ms": medians, "rounds": args.rounds}, indent=1))


if __name__ == "__main__":
    main()
