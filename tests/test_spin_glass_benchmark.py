"""benchmarks/spin_glass.py --quick runs on the CPU and writes a complete, correct record."""

from __future__ import annotations

import json

import pytest

from benchmarks import spin_glass
from lazykern.tropical import networks as nw

from ._spin_oracles import transfer_matrix


@pytest.mark.slow
def test_quick_run_writes_every_workload(tmp_path):
    out = tmp_path / "sg.json"
    assert spin_glass.main(["--quick", "--out", str(out), "--plan-seconds", "0.1", "--budget", "0.5"]) == 0
    record = json.loads(out.read_text())
    assert {"date", "command", "driver", "versions", "device", "planner"} <= set(record)
    res = record["results"]
    assert set(res) == {"energy", "config", "chimera", "regular", "degeneracy", "latency", "peers", "graph"}
    L = record["sizes"]["energy_L"]
    for which, seed in (("first", L), ("again", L + 1)):
        row = res["energy"][which]
        assert row["energy"] == transfer_matrix(nw.square_lattice(L, seed=seed), L)[0]
        assert row["log2_largest"] <= 5  # --quick slices to 2^5 entries
        assert {"plan_seconds", "contract_seconds", "log2_flops", "tps", "gemm_ratio", "peak_gpu_bytes"} <= set(row)
    assert "skipped" in record["gemm"] and "skipped" in res["latency"]
    E0, _ = transfer_matrix(nw.square_lattice(L, seed=L), L)
    config = res["config"][-1]
    assert config["energy"] == config["energy_of_config"] == E0
    for row in res["degeneracy"]:
        size = int(row["graph"].split("x")[-1])
        assert (row["energy"], row["degeneracy"]) == transfer_matrix(nw.square_lattice(size, seed=size), size)
    assert res["regular"] and all("energy" in r for r in res["regular"])
    assert res["chimera"]["n"] == 16
    assert all(row["numpy"]["energy"] < 0 for row in res["peers"])
    assert "skipped" in res["graph"]
