"""benchmarks/spin_glass.py --quick runs on the CPU and writes a complete, correct record."""

from __future__ import annotations

import json
import time

import pytest

from benchmarks import spin_glass
from lazykern.tn import networks as nw

from ._processes import children
from ._spin_oracles import transfer_matrix


@pytest.mark.slow
def test_quick_run_writes_every_workload(tmp_path):
    out = tmp_path / "sg.json"
    assert spin_glass.main(["--quick", "--out", str(out), "--plan-seconds", "0.1", "--budget", "0.5"]) == 0
    record = json.loads(out.read_text())
    assert {"date", "command", "driver", "versions", "device", "planner"} <= set(record)
    res = record["results"]
    assert set(res) == {"energy", "config", "chimera", "regular", "degeneracy", "latency", "peers", "graph", "defaults"}
    L = record["sizes"]["energy_L"]
    for which, seed in (("first", L), ("again", L + 1)):
        row = res["energy"][which]
        assert row["energy"] == transfer_matrix(nw.square_lattice(L, seed=seed), L)[0]
        assert row["log2_largest"] <= 5  # --quick slices to 2^5 entries
        assert {"plan_seconds", "contract_seconds", "log2_flops", "tps", "gemm_ratio", "peak_gpu_bytes"} <= set(row)
    assert "skipped" in record["gemm"]
    for run in res["latency"]["runs"]:  # fresh processes, NumPy path: the sweep, no planner, no cotengra
        assert run["energy"] == transfer_matrix(nw.square_lattice(4, seed=4), 4)[0] and run["loaded"] == []
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


def test_chimera_is_stopped_at_its_budget_and_leaves_a_row(tmp_path):
    """The chimera row runs in a child process group killed at --chimera-seconds: the run goes on and the
    row says where it stopped (here the budget is shorter than the child's start-up)."""
    out = tmp_path / "sg.json"
    before = children()  # an xdist worker may hold children of earlier tests (a resource tracker ...)
    start = time.monotonic()
    argv = ["--quick", "--out", str(out), "--only", "chimera", "--chimera-seconds", "0.05"]
    assert spin_glass.main(argv) == 0
    assert time.monotonic() - start < 20
    row = json.loads(out.read_text())["results"]["chimera"]
    assert "budget of 0.05 s" in row["error"] and row["budget_seconds"] == 0.05
    assert not children() - before  # the killed child was reaped, nothing of this run is left


def test_rows_are_saved_as_they_come(tmp_path, monkeypatch):
    """A run stopped during a later row (an interrupt, which no workload catches) leaves the earlier
    rows on disk, the first energy row among them."""
    out = tmp_path / "sg.json"
    energy = spin_glass.Run.energy
    calls = []

    def second_interrupted(self, sg, planned=None):
        calls.append(sg.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return energy(self, sg, planned)

    monkeypatch.setattr(spin_glass.Run, "energy", second_interrupted)
    with pytest.raises(KeyboardInterrupt):
        spin_glass.main(["--quick", "--out", str(out), "--only", "energy", "--plan-seconds", "0.1"])
    rows = json.loads(out.read_text())["results"]["energy"]
    assert set(rows) == {"first"} and rows["first"]["energy"] < 0
