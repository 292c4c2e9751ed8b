"""benchmarks/startup_table.py: the CPU probes run in fresh processes, and the table reads a GPU result."""

from __future__ import annotations

import json

from benchmarks import startup_table


def test_cpu_probes_time_a_cold_compile_and_a_warm_lookup(tmp_path, capsys):
    assert startup_table.main(["--cpu", "--repeats", "1", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("startup-table-cpu-*.json")
    result = json.loads(path.read_text())
    medians = result["fresh_process"]["medians_s"]
    assert set(medians) == {"cold", "ready", "cold_lookup", "ready_lookup"}
    assert 0 < medians["ready_lookup"] <= medians["ready"] < medians["cold"]
    printed = capsys.readouterr().out
    assert "warm store -> kernel ready" in printed and "<= 2 ms" in printed


def test_table_from_a_gpu_result_gives_ratios_against_the_floors():
    result = {
        "fresh_process": {"medians_s": {"ready": 0.0015, "cupy_ready": 0.025, "first_matmul": 0.004, "cold": 0.3}},
        "launches": {
            "launch_us": {"lazykern Kernel": 4.0, "CuPy RawKernel": 6.0, "lazy_kernel": 4.4, "cuda.core.launch": 7.0},
            "tropical_us": {"Kernel (floor)": 4.0, "matmul out=": 4.2, "matmul allocating": 5.6,
                            "matmul argmax allocating": 6.0, "CuPy matmul out=": 5.0},
        },
    }  # fmt: skip
    rows = {r[0]: r[1:] for r in startup_table.table_rows(result)}
    assert rows["fresh process, warm store -> kernel ready"][:2] == ("1.50 ms", "25.00 ms")
    assert rows["Kernel launch, 3 pointers + int (host us)"][:2] == ("4.00 (0.67x)", "6.00")
    assert rows["@lazy_kernel launch (host us)"][0] == "4.40 (1.10x)"
    assert rows["tropical.matmul out= 64^3 (host us)"][:2] == ("4.20 (1.05x)", "5.00")
    assert rows["tropical.matmul argmax allocating 64^3 (host us)"][0] == "6.00 (1.50x)"


def test_a_first_calls_parts_are_timed_and_shown_under_it(monkeypatch):
    import importlib
    import time

    for module, attr, _ in startup_table._FIRST_CALL_STEPS:  # fakes in place of the real steps, put back after
        *outer, name = attr.split(".")
        owner = importlib.import_module(module)
        for o in outer:
            owner = getattr(owner, o)
        monkeypatch.setattr(owner, name, lambda *args, _name=name: time.sleep(0.001) or _name)
    parts = startup_table.first_call_parts()
    from lazykern.launch import kernel, memory
    from lazykern.tropical import _hot, api

    assert api.loaded_kernel("k", 0) == "loaded_kernel" and kernel.Kernel._load(None) == "_load"
    assert memory.allocate() == "allocate" and _hot.launch_packed() == "launch_packed"
    assert set(parts) == {"lookup", "load", "allocate", "launch"} and min(parts.values()) >= 0.001
    medians = {"first_matmul": 0.01, "first_matmul_lookup": 0.003, "first_matmul_rest": 0.002}
    rows = [r[:2] for r in startup_table.table_rows({"fresh_process": {"medians_s": medians}})]
    at = rows.index(("first tropical.matmul 64^3, warm store", "10.00 ms"))
    assert rows[at + 1 : at + 3] == [("  of which lookup", "3.00 ms"), ("  of which rest", "2.00 ms")]


def test_the_first_allocation_of_cupy_and_torch_stand_beside_the_first_call():
    medians = {"first_matmul": 0.004, "first_matmul_allocate": 0.0002, "first_alloc_cupy": 0.0009}
    rows = [r[:2] for r in startup_table.table_rows({"fresh_process": {"medians_s": medians}})]
    at = rows.index(("first tropical.matmul 64^3, warm store", "4.00 ms"))
    assert rows[at + 1 : at + 3] == [
        ("  of which allocate", "0.20 ms"),
        ("  beside it: CuPy's first allocation of C", "0.90 ms"),
    ]
