"""Why a repeated ``CountingMax(2)`` call is slower in a fresh process than after other GPU work
(issue 47, n = 150): time the calls in a fresh process, then after the f32 GEMM yardstick, then after a
sleep, with a cProfile of one call before and after, and CuPy's pool figures at each point.

Usage: python3 benchmarks/gtn_fresh.py --out F.json [--n 150] [--prop countingmax2]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _calls(run: Any, sync: Any, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        out.append(round(time.perf_counter() - start, 4))
    return out


def _profile(run: Any, sync: Any, top: int = 35) -> str:
    prof = cProfile.Profile()
    prof.enable()
    run()
    sync()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()[-9000:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--prop", default="countingmax2")
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args(argv)
    import cupy

    from benchmarks.gtn import independent_set, prop_of, regular_graph
    from benchmarks.gtn_profile import gemm_yardstick
    from lazykern.tn import solve

    def sync() -> None:
        cupy.cuda.runtime.deviceSynchronize()

    pool = cupy.get_default_memory_pool()
    problem, _ = independent_set(regular_graph(args.n))
    prop = prop_of(args.prop)

    def run() -> Any:
        return solve(problem, prop, module="cupy")

    rec: dict[str, Any] = {"n": args.n, "prop": args.prop, "command": " ".join(sys.argv)}
    start = time.perf_counter()
    rec["answer"] = str(run())[:200]
    sync()
    rec["first"] = round(time.perf_counter() - start, 4)
    rec["fresh"] = _calls(run, sync, args.repeats)
    rec["pool_fresh"] = [pool.used_bytes(), pool.total_bytes()]
    rec["profile_fresh"] = _profile(run, sync)
    rec["gemm"] = gemm_yardstick()
    rec["after_gemm"] = _calls(run, sync, args.repeats)
    rec["pool_after_gemm"] = [pool.used_bytes(), pool.total_bytes()]
    rec["profile_after_gemm"] = _profile(run, sync)
    time.sleep(3)
    rec["after_sleep"] = _calls(run, sync, args.repeats)
    for key in ("fresh", "after_gemm", "after_sleep"):
        rec[key + "_median"] = statistics.median(rec[key])
    Path(args.out).write_text(json.dumps(rec, indent=1))
    print({k: v for k, v in rec.items() if not k.startswith("profile")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
