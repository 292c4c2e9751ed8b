"""The `lazykern` command, through typer's CliRunner, against temporary caches."""

from __future__ import annotations

import json
import sys
import tarfile

import pytest
from typer.testing import CliRunner

from lazykern import tropical
from lazykern.cache import set_default_cache
from lazykern.cli import app

runner = CliRunner()
POOL = "tests._tropical_like:pool_family"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private cache dir; monkeypatch restores LAZYKERN_CACHE_DIR, which --cache-dir sets."""
    from lazykern.cli import _common

    path = tmp_path / "cache"
    monkeypatch.setattr(_common.console, "width", 200)
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(path))
    set_default_cache(None)
    yield path
    set_default_cache(None)


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)


def ls_json(*args: str) -> list[dict]:
    result = invoke("cache", "ls", "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.parametrize(
    "cmd",
    [
        [],
        ["cache"],
        ["cache", "info"],
        ["cache", "ls"],
        ["cache", "clear"],
        ["cache", "prune"],
        ["cache", "export"],
        ["cache", "import"],
        ["warm"],
        ["bench"],
        ["bench", "startup"],
        ["demo"],
    ],
)
def test_help_everywhere(cmd):
    result = invoke(*cmd, "--help")
    assert result.exit_code == 0 and "Usage" in result.output


def test_usage_errors_exit_2(cache_dir):
    assert invoke("no-such-command").exit_code == 2
    assert invoke("cache", "prune").exit_code == 2
    assert invoke("cache", "prune", "--older-than", "soon").exit_code == 2
    assert invoke("demo", "--side", "1").exit_code == 2


def test_info_on_an_empty_cache(cache_dir):
    result = invoke("cache", "info", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["location"] == str(cache_dir) and data["entries"] == 0
    assert data["nvrtc"].count(".") == 1 and data["numba_cuda"] != "not installed"
    table = invoke("cache", "info")
    assert table.exit_code == 0 and "NVRTC" in table.output and "health" in table.output


def test_info_reports_damage_and_repairs_it(cache_dir):
    import os
    import time

    assert invoke("cache", "info", "--json").exit_code == 0  # creates the store
    orphan = cache_dir / "ab" / "cd" / "0123456789abcdef0123456789ab.val"  # diskcache blob naming
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"left behind by a killed writer")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    set_default_cache(None)
    found = json.loads(invoke("cache", "info", "--json").output)["health"]
    assert found != "ok" and found.get("orphan_files") == 1 and orphan.exists()
    set_default_cache(None)
    repaired = json.loads(invoke("cache", "info", "--repair", "--json").output)["health"]
    assert repaired.startswith("ok") and not orphan.exists()


def test_warm_in_parallel_then_everything_is_cached(cache_dir):
    result = invoke("warm", "--family", POOL, "--kernels", "*argmax", "--arch", "sm_80,sm_90", "-j", "2")
    assert result.exit_code == 0, result.output
    assert "compiled" in result.output
    rows = ls_json()
    assert sorted((r["kernel"], r["arch"]) for r in rows) == [
        ("maxplus_f32_argmax", "sm_80"),
        ("maxplus_f32_argmax", "sm_90"),
        ("minplus_f32_argmax", "sm_80"),
        ("minplus_f32_argmax", "sm_90"),
    ]
    assert all(r["family"] == "tropical_like_pool" and r["compile_seconds"] > 0 for r in rows)
    again = invoke("warm", "--family", POOL, "--kernels", "*argmax", "--arch", "sm_80", "--arch", "sm_90")
    assert again.exit_code == 0
    from lazykern.cli._warm import warm

    summary = warm(POOL, patterns=["*argmax"], archs=["sm_80", "sm_90"])
    assert summary.count("cached") == 4 and summary.count("compiled") == 0
    assert len(ls_json("--arch", "sm_80")) == 2 and ls_json("--family", "nope") == []
    info = json.loads(invoke("cache", "info", "--json").output)
    assert info["entries"] == 4 and info["compiles"] >= 4


def test_warm_reports_compile_failures_and_exits_1(cache_dir):
    result = invoke("warm", "--family", "tests._tropical_like:broken", "--arch", "sm_90", "-j", "1")
    assert result.exit_code == 1
    assert "failures" in result.output and "undefined_name" in result.output
    assert [r["kernel"] for r in ls_json()] == ["good"]


def test_warm_unknown_family_and_empty_selection(cache_dir):
    bad = invoke("warm", "--family", "nope")
    assert bad.exit_code == 1 and "unknown family" in bad.output
    none = invoke("warm", "--family", POOL, "--kernels", "zzz*")
    assert none.exit_code == 1 and "no kernel" in none.output


def test_ls_table_clear_and_prune(cache_dir):
    assert invoke("warm", "--family", "tests._tropical_like:family", "--arch", "sm_90", "-j", "1").exit_code == 0
    table = invoke("cache", "ls")
    assert table.exit_code == 0 and "minplus_f32_argmax" in table.output and "4 cached kernels" in table.output
    refused = invoke("cache", "clear", "--family", "tropical_like", input="n\n")
    assert refused.exit_code == 1 and len(ls_json()) == 4
    assert invoke("cache", "clear", "--family", "other", "--yes").exit_code == 0 and len(ls_json()) == 4
    assert invoke("cache", "prune", "--older-than", "30d").exit_code == 0 and len(ls_json()) == 4
    one = ls_json()[0]["kernel"]
    assert invoke("cache", "prune", "--max-size", "1").exit_code == 0 and len(ls_json()) < 4
    assert invoke("cache", "prune", "--older-than", "0s").exit_code == 0 and ls_json() == []
    assert one
    assert invoke("warm", "--family", "tests._tropical_like:family", "--arch", "sm_90", "-j", "1").exit_code == 0
    assert invoke("cache", "clear", input="y\n").exit_code == 0 and ls_json() == []


def test_export_import_round_trip_and_refusal(cache_dir, tmp_path, monkeypatch):
    assert invoke("warm", "--family", POOL, "--kernels", "maxplus_f32", "--arch", "sm_90").exit_code == 0
    bundle = tmp_path / "warm.tar.zst"
    out = invoke("cache", "export", str(bundle), "--family", "tropical_like_pool")
    assert out.exit_code == 0 and "exported 1 entries" in out.output
    other = tmp_path / "other"
    result = invoke("--cache-dir", str(other), "cache", "import", str(bundle))
    assert result.exit_code == 0 and "imported 1" in result.output
    assert [r["kernel"] for r in ls_json()] == ["maxplus_f32"]

    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        info = tarfile.TarInfo("../../etc/cron.d/x")
        tar.addfile(info)
    refused = invoke("cache", "import", str(evil))
    assert refused.exit_code == 1 and "unsafe path" in refused.output
    assert invoke("cache", "import", str(tmp_path / "missing.tar")).exit_code == 2


def test_bench_wiring_reports_a_missing_suite_cleanly(cache_dir, monkeypatch):
    import lazykern.bench

    monkeypatch.delattr(lazykern.bench, "gemm", raising=False)
    monkeypatch.setitem(sys.modules, "lazykern.bench.gemm", None)  # as if the suite were not installed
    result = invoke("bench", "--quick")
    assert result.exit_code == 1 and "error" in result.output


@pytest.mark.slow
def test_warm_tropical_two_kernels(cache_dir):
    names = tropical.family.names()[:2]
    result = invoke("warm", "--kernels", ",".join(names), "--arch", "sm_90", "-j", "2")
    assert result.exit_code == 0, result.output
    assert sorted(r["kernel"] for r in ls_json("--family", "tropical")) == sorted(names)


@pytest.mark.slow
def test_demo_end_to_end_cold_then_warm(cache_dir):
    cold = invoke("demo", "--side", "12")
    assert cold.exit_code == 0, cold.output
    assert "all checks passed" in cold.output and "compiled" in cold.output
    fresh = invoke("demo", "--side", "12", "--fresh-cache")
    assert fresh.exit_code == 0 and "fresh temporary cache" in fresh.output
