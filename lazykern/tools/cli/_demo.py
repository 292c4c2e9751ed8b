"""Rendering of ``lazykern demo``: an estimate (and a question) before a long CPU run,
progress with an ETA while it runs, then tables."""

from __future__ import annotations

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..demo import DemoReport, estimate_cpu_seconds, gpu_present, run
from ._common import console, esc, plain, progress

LONG_RUN_SECONDS = 60.0


def run_and_render(*, fresh_cache: bool, side: int, seed: int, yes: bool = False) -> bool:
    if not yes and not gpu_present():
        seconds = estimate_cpu_seconds(side)
        if seconds > LONG_RUN_SECONDS:
            console.print(
                f"No GPU found: the NumPy reference computes the answers, and --side {side} "
                f"({side * side} nodes) would take about {_duration(seconds)} on this CPU."
            )
            typer.confirm("Run it anyway? (--yes skips this question)", abort=True)
    with progress() as shown:
        task = shown.add_task("starting", total=1)

        def tick(stage: str, done: int, total: int) -> None:
            shown.update(task, description=esc(stage), completed=done, total=max(total, 1))

        report = run(side=side, seed=seed, fresh_cache=fresh_cache, progress=tick)
    render(report, fresh_cache=fresh_cache)
    return report.ok


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


_STATUS = {"loaded from cache": "cached", "already in memory": "in memory"}


def kernel_table(r: DemoReport) -> Table:
    """Fits 80 columns with whole kernel names: the arch goes in the title when there is one,
    the load column only where there is a GPU to load into."""
    archs = sorted({k.arch for k in r.kernels})
    title = f"{len(r.compiled)} of {r.family_size} {r.family} kernels compiled or loaded; the rest were not"
    kt = Table(title=plain(title + (f" (arch {archs[0]})" if len(archs) == 1 else "")), pad_edge=False)
    longest = max((len(k.name) for k in r.kernels), default=6)
    kt.add_column("kernel", min_width=min(longest, 40), overflow="fold")
    if len(archs) > 1:
        kt.add_column("arch", no_wrap=True)
    kt.add_column("this run", no_wrap=True)
    for col in ("took", "compile", "size") + (("load",) if r.gpu else ()):
        kt.add_column(col, justify="right", no_wrap=True)
    for k in r.kernels:
        row: list[Text | str] = [plain(k.name), *([plain(k.arch)] if len(archs) > 1 else [])]
        row += [
            plain(_STATUS.get(k.status, k.status), "yellow" if k.status == "compiled" else "green"),
            _ms_or_s(k.seconds),
            f"{k.compile_seconds:.2f} s",
            f"{k.bytes / 1024:.0f} KiB",
        ]
        if r.gpu:
            row.append("-" if k.load_ms is None else f"{k.load_ms:.2f} ms")
        kt.add_row(*row)
    kt.caption = "compile: what compiling it cost when it was compiled" + ("; load: into the GPU" if r.gpu else "")
    return kt


def _ms_or_s(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


def _ok(flag: bool) -> str:
    return "[green]ok[/]" if flag else "[bold red]FAILED[/]"


def render(r: DemoReport, *, fresh_cache: bool = False) -> None:
    where = "a fresh temporary cache" if fresh_cache else f"cache {r.cache_dir or 'in memory'}"
    if r.gpu:
        console.print(f"GPU: [bold]{esc(r.device)}[/] ({esc(r.arch)}); {esc(where)}")
    else:
        console.print(
            Panel(
                plain(
                    f"No GPU found: kernels are compiled to real {r.arch} cubins with NVRTC and cached, "
                    "but the answers are computed by the NumPy reference."
                ),
                title="no GPU",
                style="yellow",
            )
        )
        console.print(plain(where))

    console.print(kernel_table(r))
    if any(k.status == "compiled" for k in r.kernels):
        console.print("Cold cache: run [bold]lazykern demo[/] again to see the same kernels load from the cache.")

    c = r.apsp_check
    at = Table(title="results", show_header=True)
    at.add_column("what")
    at.add_column("answer")
    at.add_column("check")
    path = r.example_path
    shown = " -> ".join(map(str, path[:6])) + (" -> ... -> " + str(path[-1]) if len(path) > 6 else "")
    at.add_row(
        "all-pairs shortest paths",
        f"{r.graph.n} nodes, {r.graph.edges} roads, {r.apsp.steps} min-plus squarings, {r.apsp_seconds:.2f} s",
        f"{_ok(c.max_rel_error < 1e-4)} vs Dijkstra from {c.sources} sources ({c.pairs} pairs, "
        f"{c.paths_checked} paths re-summed, max rel. error {c.max_rel_error:.1e})",
    )
    at.add_row(
        "one more squaring",
        f"first {c.reference_rows} rows" if c.reference_rows else "skipped",
        f"{_ok(c.reference_ok)} vs tropical.reference (D is a fixpoint)",
    )
    cost = float(r.apsp.dist[0, -1])
    at.add_row("path 0 -> last", f"{len(path)} nodes, cost {cost:.2f}: {shown}" if path else "unreachable", "")
    at.add_row(
        "Viterbi decode (max-plus)",
        f"{r.viterbi_batch} sequences x {r.viterbi_length} rolls, {r.viterbi_seconds:.2f} s; "
        f"{r.viterbi_accuracy:.0%} of hidden states recovered",
        f"{_ok(r.viterbi_matches_numpy)} vs NumPy Viterbi",
    )
    if r.timing is not None:
        t = r.timing
        at.add_row(
            "squaring loop: eager vs CUDA graph",
            f"{t.eager_ms:.3f} ms vs {t.graph_ms:.3f} ms ({t.speedup:.1f}x), {t.steps} launches",
            f"{_ok(t.same_answer)} same answer",
        )
    else:
        at.add_row("squaring loop: eager vs CUDA graph", plain(f"skipped: {r.timing_skipped}"), "")
    console.print(at)
    for note in r.notes:
        console.print(f"[yellow]note:[/] {esc(note)}")
    console.print(f"demo finished in {r.seconds:.1f} s: " + ("[green]all checks passed[/]" if r.ok else _ok(False)))
