"""One GPU against every GPU of the host, with the other GPUs' work in worker processes (issue 45).

    python3 benchmarks/spread_procs.py --out benchmarks/results/spread-procs.json
    python3 benchmarks/spread_procs.py --quick --out /tmp/spread.json     # 8 x 8, NumPy workers (a CPU)

The +-J L x L lattice (default 32) from a shuffled edge list, no positions, ``module=cupy`` and the
defaults, as a user builds it (benchmarks/spin_glass.py's ``edge_list_instance``). In one process, for
each quantity (``energy``: ground_state_energy; ``count``: degeneracy, exact):

* ``devices=[0]``: one untimed call (kernels, plan), then --repeats timed calls;
* ``devices="all"``: the first call timed alone (it starts the worker processes: interpreter, imports,
  CUDA context, kernel loads), then --repeats timed calls with the workers warm, all inside
  ``lazykern.tn.keep_workers()`` (without it each call's workers end with it: every call pays the first's start).

Each row: every call's seconds, their median, the answer, the spread profiles logged (slices over
groups) and the worker pids; the record: speed-ups of the medians and whether the answers agree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from multigpu_exit import worker_pids  # noqa: E402  (this process's spread workers, read from /proc)
from spin_glass import edge_list_instance  # noqa: E402

import lazykern.tn  # noqa: E402
from lazykern.tn import networks as nw  # noqa: E402


class Profiles(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        profile = getattr(record, "spread_profile", None)
        if profile is not None:
            self.seen.append(profile)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--L", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quantities", nargs="+", default=["energy", "count"])
    parser.add_argument("--quick", action="store_true", help="8 x 8, NumPy operands in worker processes")
    args = parser.parse_args()
    module: Any
    if args.quick:
        args.L = 8
        os.environ["LAZYKERN_SPREAD"] = "processes"
        module = np
    else:
        import cupy

        module = cupy
    sg = edge_list_instance(["square", args.L], shuffle=True, positions=False)
    slices = [0, 1] if args.quick else ()  # the defaults plan no slices for a small lattice
    profiles = Profiles()
    logger = logging.getLogger("lazykern")
    logger.addHandler(profiles)
    logger.setLevel(logging.DEBUG)
    record: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "instance": f"+-J {args.L}x{args.L}, shuffled edge list, no positions, defaults",
        "module": getattr(module, "__name__", str(module)),
        "spread_mode": os.environ.get("LAZYKERN_SPREAD", "default (processes for GPU operands)"),
        "rows": [],
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

    def call(quantity: str, devices: Any) -> Any:
        if quantity == "count":
            E, count = nw.degeneracy(sg, module=module, slices=slices, devices=devices)
            return [E, str(count)]
        return nw.ground_state_energy(sg, module=module, slices=slices, devices=devices)

    def timed(quantity: str, devices: Any) -> tuple[float, Any, list[dict[str, Any]]]:
        profiles.seen = []
        t0 = time.perf_counter()
        answer = call(quantity, devices)
        return time.perf_counter() - t0, answer, profiles.seen

    def save() -> None:
        with open(args.out, "w") as fh:
            json.dump(record, fh, indent=2)

    for quantity in args.quantities:
        for devices in ([0], "all"):
            row: dict[str, Any] = {"quantity": quantity, "devices": devices}
            # A call's workers end when it returns; keep_workers() keeps them between the repeats (without
            # it every call pays the first call's start)
            kept = lazykern.tn.keep_workers() if devices == "all" else contextlib.nullcontext()
            kept.__enter__()
            first, answer, profile = timed(quantity, devices)
            row["first_call_seconds"] = round(first, 3)
            row["first_call_note"] = (
                "starts the worker processes (interpreter, imports, CUDA context, kernel loads)"
                if devices == "all"
                else "untimed warm-up of the one-GPU path (kernels, plan); not in the median"
            )
            seconds, answers = [], [answer]
            for _ in range(args.repeats):
                took, answer, profile = timed(quantity, devices)
                seconds.append(round(took, 3))
                answers.append(answer)
            row |= {
                "seconds": seconds,
                "median_seconds": round(statistics.median(seconds), 3),
                "answer": answers[-1],
                "answers_agree": len({json.dumps(a) for a in answers}) == 1,
                "profile_last_call": profile,
                "workers": worker_pids(),
            }
            kept.__exit__(None, None, None)
            row["workers_after_keep_workers"] = worker_pids()  # none: ended when keep_workers closed
            record["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "profile_last_call"}), file=sys.stderr, flush=True)
            save()
        one, every = record["rows"][-2], record["rows"][-1]
        record[f"{quantity}_speedup_median"] = round(one["median_seconds"] / every["median_seconds"], 3)
        record[f"{quantity}_answers_agree"] = json.dumps(one["answer"]) == json.dumps(every["answer"])
    save()
    return 0 if all(record.get(f"{q}_answers_agree") for q in args.quantities) else 1


if __name__ == "__main__":
    sys.exit(main())
