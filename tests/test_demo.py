"""The demo's algorithms, checked on their own, and the whole demo on CPU."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern import KernelCache, tropical
from lazykern.tools import demo
from lazykern.tropical import reference
from tests import _tropical_like


def _minplus(a, b):
    return reference.matmul(a, b, "minplus", argmax=True)


def _maxplus(a, b):
    return reference.matmul(a, b, "maxplus", argmax=True)


def test_road_graph_is_deterministic_and_road_like():
    g1, g2 = demo.road_graph(8, seed=1), demo.road_graph(8, seed=1)
    assert np.array_equal(g1.weights, g2.weights)
    assert g1.n == 64 and g1.weights.dtype == np.float32
    assert np.all(np.diag(g1.weights) == 0)
    finite = g1.weights[np.isfinite(g1.weights) & ~np.eye(64, dtype=bool)]
    assert finite.min() > 0 and 100 < g1.edges < 64 * 8  # about 4 neighbours each
    assert not np.array_equal(g1.weights, g1.weights.T)  # some one-way streets
    assert not np.array_equal(g1.weights, demo.road_graph(8, seed=2).weights)


def test_apsp_matches_dijkstra_and_paths_add_up():
    g = demo.road_graph(9, seed=4)
    res = demo.apsp(g.weights, _minplus)
    for s in (0, 17, 80):
        truth = demo.dijkstra(g.weights.astype(np.float64), s)
        np.testing.assert_allclose(res.dist[s], truth, rtol=1e-5)
        for t in np.flatnonzero(np.isfinite(truth)):
            p = res.path(s, int(t))
            assert p[0] == s and p[-1] == t
            assert sum(float(g.weights[a, b]) for a, b in zip(p, p[1:])) == pytest.approx(truth[t], rel=1e-5)
    check = demo.check_apsp(g, res, reference=_tropical_like.namespace().reference)
    assert check.ok and check.paths_checked > 0 and check.reference_rows == 64


def test_apsp_unreachable_and_fixed_steps():
    w = np.full((4, 4), np.inf, dtype=np.float32)
    w[0, 1], w[1, 2], w[2, 3] = 1, 2, 3
    res = demo.apsp(w, _minplus, steps=3)
    assert res.steps == 3
    assert res.dist[0, 3] == 6 and res.path(0, 3) == [0, 1, 2, 3]
    assert np.isinf(res.dist[3, 0]) and res.path(3, 0) == []


def test_viterbi_by_maxplus_matches_brute_force_on_a_short_sequence():
    hmm = demo.casino()
    states, obs = demo.sample_hmm(hmm, 3, 7, seed=5)
    assert states.shape == obs.shape == (3, 7) and obs.max() < 6
    path = demo.viterbi(hmm, obs, _maxplus)
    import itertools

    for b in range(3):
        best, best_score = None, -np.inf
        for cand in itertools.product(range(2), repeat=7):
            score = hmm.log_start[cand[0]] + hmm.log_emit[cand[0], obs[b, 0]]
            for t in range(1, 7):
                score += hmm.log_trans[cand[t - 1], cand[t]] + hmm.log_emit[cand[t], obs[b, t]]
            if score > best_score:
                best, best_score = cand, score
        assert tuple(path[b]) == best


def test_demo_runs_on_cpu_compiles_only_what_it_needs(tmp_path, monkeypatch):
    from lazykern.store.cache import set_default_cache

    set_default_cache(KernelCache(tmp_path / "c"))
    try:
        ns = _tropical_like.namespace()
        stages = []
        cold = demo.run(side=8, tropical=ns, progress=lambda s, d, t: stages.append(s))
        assert cold.ok and not cold.gpu and cold.timing is None
        assert {k.status for k in cold.kernels} == {"compiled"}
        assert sorted(cold.compiled) == ["maxplus_f32_argmax", "minplus_f32_argmax"] and cold.family_size == 4
        assert cold.apsp_check.ok and cold.viterbi_matches_numpy and cold.viterbi_accuracy > 0.6
        assert any("squaring" in s for s in stages)
        # A new process (here: a new family object) finds both kernels in the cache.
        warm = demo.run(side=8, tropical=_tropical_like.namespace())
        assert {k.status for k in warm.kernels} == {"loaded from cache"}
        assert all(k.compile_seconds > 0 for k in warm.kernels)
        from rich.console import Console

        from lazykern.tools.cli import _demo

        console = Console(record=True, width=80)
        monkeypatch.setattr(_demo, "console", console)
        _demo.render(warm)
        text = console.export_text()
        assert "2 of 4 tropical_like kernels" in text and "No GPU found" in text and "all checks passed" in text
        assert "maxplus_f32_argmax" in text and "minplus_f32_argmax" in text
    finally:
        set_default_cache(None)


def test_fresh_cache_uses_a_temporary_directory(tmp_path, monkeypatch):
    from lazykern.store.cache import default_cache, set_default_cache

    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(tmp_path / "kept"))
    set_default_cache(None)
    report = demo.run(side=6, tropical=_tropical_like.namespace(), fresh_cache=True)
    assert report.ok and "lazykern-demo-" in report.cache_dir
    assert {k.status for k in report.kernels} == {"compiled"}
    import os

    assert not os.path.exists(report.cache_dir)
    assert default_cache().directory == str(tmp_path / "kept")  # the default cache is back


@pytest.mark.slow
def test_real_tropical_demo_on_cpu(tmp_path, monkeypatch):
    report = demo.run(side=16, fresh_cache=True)
    assert report.ok, report
    x = np.empty((256, 256), np.float32)
    d, t = np.empty((32, 2), np.float32), np.empty((2, 2), np.float32)
    wanted = tropical.kernels_for(x, x, "minplus", argmax=True) + tropical.kernels_for(d, t, "maxplus", argmax=True)
    assert [k.name for k in report.kernels] == wanted and len(wanted) < report.family_size


@pytest.mark.gpu
def test_demo_on_gpu_times_graph_against_eager():
    report = demo.run(side=24)
    assert report.gpu and report.ok, report
    assert report.timing is not None and report.timing.same_answer, report.timing_skipped
    assert all(k.load_ms is not None for k in report.kernels)


@pytest.mark.parametrize("gpu", [False, True])
def test_the_kernel_table_keeps_the_longest_tropical_names_whole_at_80_columns(gpu):
    import types

    from rich.console import Console

    from lazykern import tropical
    from lazykern.tools.cli import _demo

    names = sorted(tropical.family.names(), key=len)[-3:]
    kernels = [demo.KernelUse(n, "sm_90", "loaded from cache", 1.234, 0.41, 81234, 0.2) for n in names]
    kernels[0].status, kernels[0].seconds = "compiled", 2.3114
    report = types.SimpleNamespace(compiled=names, family_size=746, family="tropical", kernels=kernels, gpu=gpu)
    console = Console(record=True, width=80)
    console.print(_demo.kernel_table(report))
    text = console.export_text()
    assert_whole_table(text)
    for name in names:
        assert name in text
    assert ("load: into the GPU" in text) == gpu and "2.31 s" in text and "cached" in text


def assert_whole_table(text: str) -> None:
    """Rich crops a table wider than the console: every bordered line must end in a border."""
    for line in text.splitlines():
        if line[:1] in "┏┃┡│└":
            assert line.rstrip()[-1] in "┓┃┩│┘", line


def test_squarings_run_in_row_blocks_with_steady_progress():
    ns = _tropical_like.namespace()
    ticks = []
    meter = demo._SquaringMeter(ns, lambda stage, done, total: ticks.append((stage, done, total)), limit=2, blocks=4)
    d = demo.road_graph(4, seed=2).weights
    for _ in range(2):
        got, k = meter(d, d)
        want, want_k = _minplus(d, d)
        assert np.array_equal(got, want) and np.array_equal(k, want_k)
    assert [t[1] for t in ticks] == list(range(1, 9)) and {t[2] for t in ticks} == {8}
    assert ticks[0][0] == "min-plus squaring 1/2" and ticks[-1][0] == "min-plus squaring 2/2"


def test_a_long_cpu_run_is_estimated_and_asks_first(monkeypatch):
    import typer
    from typer.testing import CliRunner

    from lazykern.tools.cli import _demo, app

    monkeypatch.setattr(_demo, "gpu_present", lambda: False)
    seconds = demo.estimate_cpu_seconds(64)
    assert seconds > 10 * 60  # the 20-minute run of the report, and more
    assert demo.estimate_cpu_seconds(6) < 60
    refused = CliRunner().invoke(app, ["demo", "--side", "64"], input="n\n")
    said = " ".join(refused.output.split())
    assert refused.exit_code == 1 and "--side 64 (4096 nodes) would take about" in said
    assert "--yes" in said and "Aborted" in said
    ran = []

    def stop_here(**kwargs):
        ran.append(kwargs)
        raise typer.Exit(0)

    monkeypatch.setattr(_demo, "estimate_cpu_seconds", lambda side: 3600.0)
    monkeypatch.setattr(_demo, "run", stop_here)
    straight = CliRunner().invoke(app, ["demo", "--side", "64", "--yes"])  # --yes goes straight to the run
    assert straight.exit_code == 0 and "Run it anyway" not in straight.output
    assert ran and ran[0]["side"] == 64
