"""Rendering of ``lazykern demo``: a progress bar while it runs, then tables."""

from __future__ import annotations

from rich.panel import Panel
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..demo import DemoReport, run
from ._common import console, human_bytes


def run_and_render(*, fresh_cache: bool, side: int, seed: int) -> bool:
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("starting", total=1)

        def tick(stage: str, done: int, total: int) -> None:
            progress.update(task, description=stage, completed=done, total=max(total, 1))

        report = run(side=side, seed=seed, fresh_cache=fresh_cache, progress=tick)
    render(report, fresh_cache=fresh_cache)
    return report.ok


def _ok(flag: bool) -> str:
    return "[green]ok[/]" if flag else "[bold red]FAILED[/]"


def render(r: DemoReport, *, fresh_cache: bool = False) -> None:
    where = "a fresh temporary cache" if fresh_cache else f"cache {r.cache_dir or 'in memory'}"
    if r.gpu:
        console.print(f"GPU: [bold]{r.device}[/] ({r.arch}); {where}")
    else:
        console.print(
            Panel(
                f"No GPU found: kernels are compiled to real {r.arch} cubins with NVRTC and cached, "
                "but the answers are computed by the NumPy reference.",
                title="no GPU",
                style="yellow",
            )
        )
        console.print(where)

    kt = Table(title=f"{len(r.compiled)} of {r.family_size} {r.family} kernels compiled or loaded; the rest were not")
    for col in ("kernel", "arch", "this run", "took", "compile (recorded)", "size", "load into GPU"):
        kt.add_column(col, justify="left" if col in ("kernel", "arch", "this run") else "right")
    for k in r.kernels:
        style = "yellow" if k.status == "compiled" else "green"
        kt.add_row(
            k.name,
            k.arch,
            f"[{style}]{k.status}[/]",
            f"{k.seconds * 1e3:.1f} ms",
            f"{k.compile_seconds:.2f} s",
            human_bytes(k.bytes),
            "-" if k.load_ms is None else f"{k.load_ms:.2f} ms",
        )
    console.print(kt)
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
        at.add_row("squaring loop: eager vs CUDA graph", f"skipped: {r.timing_skipped}", "")
    console.print(at)
    for note in r.notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"demo finished in {r.seconds:.1f} s: " + ("[green]all checks passed[/]" if r.ok else _ok(False)))
