"""The `lazykern` command, through typer's CliRunner, against temporary caches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lazykern import KernelCache, KernelFamily, tropical
from lazykern.store.cache import set_default_cache
from lazykern.tools.cli import app
from tests.test_demo import assert_whole_table

runner = CliRunner()
POOL = "tests._tropical_like:pool_family"
ROOT = Path(__file__).resolve().parent.parent

# External text that Rich would eat as markup: NVRTC echoes the failing line into its log.
MARKUP = KernelFamily("markup_like")
MARKUP.add(
    "a_kernel_name_long_enough_to_be_cut_at_80_columns",
    'extern "C" __global__ void k(float *a) { int i = 0; a[i]=t(a[i]); /* [bold]x[/bold] */ }',
    symbol="k",
)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private cache dir, and consoles 80 columns wide as in a default terminal."""
    from lazykern.tools.cli import _common

    path = tmp_path / "cache"
    KernelCache(path).close()  # an empty store: `cache info` on a path holding none is an error (test_settings.py)
    monkeypatch.setattr(_common.console, "width", 80)
    monkeypatch.setattr(_common.err_console, "width", 80)
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(path))
    monkeypatch.delenv("LAZYKERN_LOG", raising=False)
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
    assert invoke("demo", "--seed", "-1").exit_code == 2
    assert invoke("warm", "-j", "-1").exit_code == 2
    both = invoke("warm", "--all", "-k", "max*")
    assert both.exit_code == 2 and "--all" in both.output
    assert ls_json() == []  # refused before any work


def test_unknown_arch_is_refused_up_front_with_the_valid_ones(cache_dir):
    from lazykern.compile.compiler import supported_archs

    result = invoke("warm", "--family", POOL, "--arch", "sm_80,sm_999")
    assert result.exit_code == 2
    text = " ".join(result.output.replace("│", " ").split())
    assert "sm_999" in text and "sm_80" in text and supported_archs()[-1] in text
    assert "compiling" not in text and ls_json() == []


def test_version_and_python_m_lazykern():
    from lazykern import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.output.strip() == f"lazykern {__version__}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "lazykern", "--help"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "Usage: lazykern" in proc.stdout, proc.stderr


def test_a_lazykern_error_is_one_line_and_exit_1(cache_dir):
    result = invoke("warm", "--family", "nope[bold]x[/bold]")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert result.output.startswith("error: unknown family 'nope[bold]x[/bold]'")


@pytest.mark.parametrize("how", ["plain", "--debug", "LAZYKERN_LOG=DEBUG"])
def test_an_unexpected_error_is_short_unless_debug_is_asked(cache_dir, monkeypatch, how):
    from lazykern.tools.cli import _cache

    def broken(repair: bool = False):
        raise RuntimeError("disk [red]on fire[/red]\nsecond line")

    monkeypatch.setattr(_cache, "info_dict", broken)
    args = ["cache", "info"]
    if how == "--debug":
        args.insert(0, "--debug")
    elif how != "plain":
        monkeypatch.setenv("LAZYKERN_LOG", "DEBUG")
    result = invoke(*args)
    assert result.exit_code == 1
    assert "error: unexpected RuntimeError: disk [red]on fire[/red]" in result.output
    if how == "plain":
        assert "Traceback" not in result.output and "--debug" in result.output
        assert "second line" not in result.output
    else:
        assert "Traceback (most recent call last)" in result.output and "in broken" in result.output


def test_compiler_text_paths_and_names_are_never_markup(cache_dir, tmp_path):
    failed = invoke("warm", "--family", "tests.test_cli:MARKUP", "--arch", "sm_90", "-j", "1")
    assert failed.exit_code == 1
    assert "a[i]=t(a[i])" in failed.output and "[bold]x[/bold]" in failed.output
    assert invoke("warm", "--family", POOL, "--kernels", "maxplus_f32", "--arch", "sm_90").exit_code == 0
    # deeper than 80 columns whatever tmp_path is, so Rich would fold it mid-name if it wrapped the line
    bundle = tmp_path / ("d" * 80) / "x[bold]y.tar.gz"
    bundle.parent.mkdir()
    out = invoke("cache", "export", str(bundle))
    assert out.exit_code == 0 and str(bundle) in out.output and bundle.exists()


def test_missing_nvrtc_is_one_line_everywhere(tmp_path):
    """No venv needed: a fresh process whose library loader cannot find NVRTC."""
    script = textwrap.dedent(
        """
        import json
        import cuda.pathfinder as pf
        import cuda.pathfinder._dynamic_libs.load_nvidia_dynamic_lib as loader

        real = loader.load_nvidia_dynamic_lib

        def hidden(name, *args, **kwargs):
            if name == "nvrtc":
                raise pf.DynamicLibNotFoundError("Failure finding libnvrtc.so: hidden by the test")
            return real(name, *args, **kwargs)

        pf.load_nvidia_dynamic_lib = loader.load_nvidia_dynamic_lib = hidden

        from typer.testing import CliRunner
        from lazykern import CompileError
        from lazykern.tools.cli import app
        from tests._tropical_like import make_family

        out = {}
        try:
            make_family("no_nvrtc")["maxplus_f32"]
        except CompileError as exc:
            out["family"] = str(exc)
        runner = CliRunner()
        for args in (["warm", "-j", "1", "-k", "maxplus_f32"], ["demo", "--yes"], ["cache", "info"]):
            r = runner.invoke(app, args)
            out[args[0]] = [r.exit_code, r.output]
        print(json.dumps(out))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_ENABLE_CUDASIM")}
    env.update(
        LAZYKERN_CACHE_DIR=str(tmp_path / "c"),
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        COLUMNS="200",
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    missing = "NVRTC is missing: install lazykern[cu13]"
    assert out["family"].startswith(missing) and "\n" not in out["family"]
    for command in ("warm", "demo"):
        code, text = out[command]
        assert code == 1 and missing in text and "Traceback" not in text, text
        assert text.strip().count("\n") == 0, text
    code, text = out["cache"]
    assert code == 0 and "NVRTC is missing" in text


def test_degraded_location_is_not_health_ok_and_warnings_are_one_line(tmp_path, monkeypatch):
    from lazykern.tools.cli import _common

    store = tmp_path / "cache"
    (store / "cache.db").mkdir(parents=True)  # a store whose database cannot be opened (a path holding none is refused)
    monkeypatch.setattr(_common.console, "width", 80)
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(store))
    set_default_cache(None)
    try:
        result = invoke("cache", "info")
    finally:
        set_default_cache(None)
    assert result.exit_code == 0
    health = result.output[result.output.index("health") :]
    assert ("degraded" in health or "store problems" in health) and " ok " not in health
    assert result.output.startswith("warning: lazykern cache directory")
    assert "warnings.warn" not in result.output and "KernelCache(" not in result.output


def test_info_on_an_empty_cache(cache_dir):
    result = invoke("cache", "info", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["location"] == str(cache_dir) and data["entries"] == 0
    assert data["nvrtc"].count(".") == 1 and data["numba_cuda"] != "not installed"
    table = invoke("cache", "info")
    assert table.exit_code == 0 and "NVRTC" in table.output and "health" in table.output


def test_cache_stats_shows_the_counters_of_info(cache_dir):
    """`cache stats` is what a user types first for the counters (it was "No such command")."""
    info = json.loads(invoke("cache", "info", "--json").output)
    result = invoke("cache", "stats", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data == {k: info[k] for k in data} and {"hits", "misses", "compiles", "seconds_saved"} <= set(data)
    table = invoke("cache", "stats")
    assert table.exit_code == 0 and "hits" in table.output and "compiles" in table.output


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
    table = invoke("cache", "info")
    assert "1 orphan file" in table.output and "--repair" in table.output and "{" not in table.output
    set_default_cache(None)
    repaired = invoke("cache", "info", "--repair")
    assert repaired.exit_code == 0 and "ok (repaired: 1 orphan file)" in repaired.output
    assert "{" not in repaired.output and not orphan.exists()


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
    from lazykern.families.warm import warm

    summary = warm(POOL, patterns=["*argmax"], archs=["sm_80", "sm_90"])
    assert summary.count("cached") == 4 and summary.count("compiled") == 0
    assert len(ls_json("--arch", "sm_80")) == 2 and ls_json("--family", "tropical") == []  # declared, none cached
    assert invoke("cache", "ls", "--json", "--family", "nope").exit_code == 1  # no family has that name
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
    assert out.exit_code == 0 and "exported 1 entry to" in out.output
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
    import lazykern.tools.bench

    monkeypatch.delattr(lazykern.tools.bench, "gemm", raising=False)
    monkeypatch.setitem(sys.modules, "lazykern.tools.bench.gemm", None)  # as if the suite were not installed
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


def test_ls_at_80_columns_keeps_every_name_whole_including_lazy_kernels(cache_dir):
    from numba import float32

    from tests._lazy_kernels import saxpy

    long_name = "a_long_kernel_name_cut_before_at_80_col"
    good = KernelFamily("markup_like")
    good.add(long_name, 'extern "C" __global__ void k(float *a) { a[0] = 1.0f; }', symbol="k")
    good.get(long_name, "sm_90")
    saxpy.warm([(float32, float32[:], float32[:], float32[:])], arch="sm_90")
    assert invoke("warm", "--family", POOL, "--kernels", "*argmax", "--arch", "sm_90").exit_code == 0
    result = invoke("cache", "ls")
    assert result.exit_code == 0
    assert_whole_table(result.output)
    for name in (long_name, "saxpy", "maxplus_f32_argmax", "minplus_f32_argmax"):
        assert name in result.output, result.output
    assert "…" not in result.output


def test_progress_is_transient_on_a_terminal_and_plain_lines_elsewhere(monkeypatch):
    from rich.console import Console

    from lazykern.tools.cli import _common
    from lazykern.tools.cli._progress import PlainProgress

    with _common.progress() as shown:
        assert isinstance(shown, PlainProgress)  # CliRunner's stderr is no terminal (tests/test_cli_progress.py)
    monkeypatch.setattr(_common, "err_console", Console(force_terminal=True, width=80, file=open(os.devnull, "w")))
    with pytest.raises(RuntimeError), _common.progress() as shown:
        assert shown.live.transient and not shown.disable
        raise RuntimeError("the display is gone before the error is printed")
    assert not shown.live.is_started


def test_bench_without_a_gpu_points_at_the_startup_command(cache_dir, monkeypatch):
    from numba import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: False)
    result = invoke("bench", "--quick")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "lazykern bench startup" in result.output and "python -m benchmarks" not in result.output


def test_bench_startup_prints_a_table(cache_dir, monkeypatch):
    import functools

    from lazykern.tools.bench import startup

    seen = []
    real = startup.run
    # The tropical family's eager compile takes 25 s on a CPU: the small tests family shows the same table.
    small = functools.partial(real, family="tests._tropical_like:family", gpu=False, lazy_names=["maxplus_f32"])

    def run(*, progress, **kwargs):
        return small(**kwargs, progress=lambda msg: (seen.append(msg), progress(msg)))

    monkeypatch.setattr(startup, "run", run)
    result = invoke("bench", "startup", "--quick")
    assert result.exit_code == 0, result.output
    assert "lazykern start-up" in result.output and "cold:" in result.output and "eager:" in result.output
    assert "'suite'" not in result.output and "{" not in result.output
    assert any("fresh process" in m for m in seen) and any("eager" in m for m in seen)
