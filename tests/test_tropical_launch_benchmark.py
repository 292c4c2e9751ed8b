"""benchmarks/tropical_launch.py: the chain it builds, and a clean refusal where there is no GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import tropical_launch
from lazykern.tropical.api import gpu_available

ROOT = Path(__file__).resolve().parent.parent


def test_chain_steps_cover_the_sizes_and_mix_argmax():
    steps = tropical_launch.chain_steps(10_000, tropical_launch.SIZES)
    assert len(steps) == 10_000
    assert {m for m, _, _, _ in steps} == set(tropical_launch.SIZES)
    assert sum(am for *_, am in steps) == 3334
    assert steps == tropical_launch.chain_steps(10_000, tropical_launch.SIZES)  # same chain every run


def test_the_figure_draws_both_panels(tmp_path):
    pytest.importorskip("matplotlib")
    record = {
        "n": 64,
        "device": "test GPU",
        "sizes": [16, 128],
        "host_us_per_call": {"Kernel (floor)": 6.0, "matmul out=": 7.5},
        "chain": {"contractions": 10, "eager_s": 0.2, "graph_replay_s": 0.05, "sum_kernel_s": 0.04,
                  "torch_broadcast_s": None},
    }  # fmt: skip
    assert tropical_launch._plot(record, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 1000


@pytest.mark.skipif(gpu_available(), reason="checks the refusal on a machine without a GPU")
def test_without_a_gpu_it_says_so_and_exits_1(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "tropical_launch.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert run.returncode == 1
    assert "needs a CUDA GPU" in run.stderr and "Traceback" not in run.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
def test_quick_run_writes_the_record(tmp_path):
    assert tropical_launch.main(["--quick", "--out", str(tmp_path)]) == 0
    (record_path,) = tmp_path.glob("*.json")
    record = json.loads(record_path.read_text())
    assert {"date", "command", "driver", "versions", "device", "host_us_per_call", "chain"} <= set(record)
    assert record["host_us_per_call"]["matmul out="] > 0
    assert record["chain"]["contractions"] == 200


def test_every_route_is_a_ratio_to_the_floor_measured_beside_it():
    ratios = tropical_launch.ratios_to_floor({"Kernel (floor)": 5.0, "matmul out=": 5.5, "matmul allocating": 7.5})
    assert ratios == {"Kernel (floor)": 1.0, "matmul out=": 1.1, "matmul allocating": 1.5}
    assert set(tropical_launch.TARGETS) <= {"matmul out=", "matmul allocating", "matmul argmax allocating"}
