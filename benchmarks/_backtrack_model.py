"""The backtracking of a spin-glass configuration priced from its plan alone, as ``ground_state``'s
defaults would split a device's ``--free`` bytes (``_Network.backtracking``): which argmax it keeps,
its checkpoints, segments and the multiply-adds it recomputes beside the forward contraction's (no
contraction runs: the shuffled 32 x 32 lattice of the defaults table is priced on the CPU machine).

    python3 benchmarks/_backtrack_model.py --side 32 --free 79e9
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spin_glass import edge_list_instance  # noqa: E402

from lazykern.tn import _cost, _recompute  # noqa: E402
from lazykern.tn import networks as nw  # noqa: E402
from lazykern.tn._backend import Backend  # noqa: E402

einsum = importlib.import_module("lazykern.tn.einsum")


def price(side: int, free: int) -> dict[str, Any]:
    sg = edge_list_instance(["square", side], shuffle=True, positions=False)
    Backend.free_bytes = lambda self: free  # type: ignore[method-assign]  # the host priced as the device
    labels, tensors = sg.network(dtype=np.float32)
    plan = nw.plan(sg, dtype=np.float32)
    net = einsum.build_network(labels, (), tensors, "maxplus", einsum.Algebra)
    keep, save, budget = net.backtracking(plan, free)
    forward = plan.flops
    segments, recomputed = _recompute.recomputed(labels, net.sizes, plan.path, keep, save, budget, net.entry_bytes)
    return {
        "plan": f"10^{math.log10(plan.flops):.2f}, 2^{math.log2(plan.largest):.0f}, {plan.nslices} slices",
        "keep": keep,
        "checkpoints": len(save),
        "peak_gb": net.peak(plan, keep, save=save) / 1e9,
        "segment_gb": budget / 1e9,
        "segments": segments,
        "recomputed_over_forward": recomputed / forward,
        "forward_seconds": _cost.seconds(einsum.plan_steps(labels, (), net.sizes, plan.path, plan.sliced),
                                         plan.nslices, 4, _cost.H100_F32),  # fmt: skip
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=32)
    parser.add_argument("--free", type=float, default=79e9)
    args = parser.parse_args()
    for key, value in price(args.side, int(args.free)).items():
        print(f"{key:26} {value}")
