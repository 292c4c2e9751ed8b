"""benchmarks/gtn.judge: each ratio to SizeMax both ways (repeated calls and first calls), a failed row none."""

from __future__ import annotations

from benchmarks.gtn import judge


def test_ratios_to_sizemax_from_repeated_and_from_first_calls():
    results = {
        "sizemax_n100": {"first": 2.0, "again": 0.02},
        "countingmax2_n100": {"first": 1.0, "again": 0.05},
        "polynomial_n100": {"error": "killed after 60 s"},
    }
    verdict = judge(results, {}, [100])
    assert verdict["countingmax2_n100"]["ratio"] == 0.05 / 0.02
    assert verdict["countingmax2_n100"]["first_ratio"] == 0.5 and verdict["countingmax2_n100"]["target_ratio"] == 2.0
    assert verdict["polynomial_n100"]["ratio"] is None and verdict["polynomial_n100"]["first_ratio"] is None
