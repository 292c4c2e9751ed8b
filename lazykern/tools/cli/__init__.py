"""The ``lazykern`` command.

Exit status: 0 success, 1 failure (a compile failed, a bundle was refused, a
check did not hold), 2 usage error. Failures print one line; ``--debug`` (or
``LAZYKERN_LOG=DEBUG``) adds the traceback. Heavy modules are imported inside
each command so ``lazykern --help`` is instant.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import typer
from rich.table import Table

from ... import __version__, config
from . import _cache
from ._common import LazykernGroup, console, count, err_console, error_line, esc, listed, plain, progress

if TYPE_CHECKING:
    from ...families.warm import WarmResult, WarmSummary

app = typer.Typer(
    name="lazykern",
    cls=LazykernGroup,
    help="Lazily compiled, cached CUDA kernels: inspect the cache, warm it, benchmark, run the demo.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: rendering it through rich took 60 ms of a 0.16 s --help
)
app.add_typer(_cache.app, name="cache")


def _print_version(value: bool) -> None:
    if value:
        console.print(f"lazykern {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        envvar="LAZYKERN_CACHE_DIR",
        readable=False,  # the cache decides: an unreadable directory is one warning and memory, like a read-only one
        help="Cache directory (default: the user cache dir).",
    ),
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback when a command fails."),
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print lazykern's version and exit."
    ),
) -> None:
    """Lazily compiled, cached CUDA kernels."""
    if cache_dir is not None:
        from ...store.cache import set_default_cache  # import on first use: startup time (NumPy, diskcache)

        os.environ["LAZYKERN_CACHE_DIR"] = os.fspath(cache_dir)  # worker processes inherit it
        set_default_cache(None)


@app.command()
def warm(
    family: str = typer.Option(
        "tropical",
        "--family",
        "-f",
        help="A registered family (tropical, or one a package declares) or 'package.module:attribute'.",
    ),
    kernels: list[str] | None = typer.Option(
        None,
        "--kernels",
        "-k",
        help="Glob(s) of kernel names, comma-separated or repeated (default: the family's core set).",
    ),
    all_kernels: bool = typer.Option(False, "--all", help="Every kernel of the family, not just its core set."),
    arch: list[str] | None = typer.Option(
        None, "--arch", "-a", help="Arch(es) to compile for, e.g. sm_80,sm_90 (default: this machine's)."
    ),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Worker processes (0: one per CPU core)."),
) -> None:
    """Compile a family's kernels ahead of time, in parallel; no GPU needed.

    Exits 1 when a kernel failed or when the binaries could not be stored on disk (cache off,
    read-only or too small); Ctrl-C or SIGTERM stops the workers, keeps what they stored and
    exits 130 / 143.
    """
    from ...families.warm import warm as run_warm  # import on first use: startup time (the warm engine, the registry)

    patterns = listed(kernels, "--kernels", "kernel names or globs, comma-separated or repeated (e.g. 'maxplus_*')")
    if all_kernels and patterns:
        raise typer.BadParameter("--all selects every kernel, --kernels some of them: give one", param_hint="--all")
    archs = checked_archs(listed(arch, "--arch", "archs such as sm_80,sm_90"))
    n_jobs = jobs if jobs > 0 else config.cores()
    done: list[WarmResult] = []
    todo = [0]
    began = time.monotonic()
    try:
        with progress(counts=True) as shown:
            task = shown.add_task("checking the cache", total=None)

            def started(n: int) -> None:
                todo[0] = n
                workers = min(n_jobs, n)
                how = f"{workers} worker processes" if workers > 1 else "this process"
                what = f"compiling {count(n, 'kernel')} in {how}" if n else "every kernel is already cached"
                shown.update(task, total=n, description=what)

            def finished(r: WarmResult) -> None:
                done.append(r)
                shown.update(task, advance=1, description=esc(f"{r.status:8} {r.name} ({r.arch})"))

            summary = run_warm(
                family,
                patterns=patterns,
                archs=archs,
                jobs=n_jobs,
                everything=all_kernels,
                on_start=started,
                on_result=finished,
            )
    except KeyboardInterrupt:
        _print_stopped(done, todo[0], time.monotonic() - began)
        raise
    _print_warm(summary)
    if not summary.ok:
        raise typer.Exit(1)
    lost = _not_persisted(summary)
    if lost:
        error_line(lost)
        raise typer.Exit(1)


def _print_stopped(done: list[WarmResult], todo: int, seconds: float) -> None:
    """What a warm stopped by a signal did: its workers are gone, what they stored stays."""
    stored = sum(1 for r in done if r.status != "failed" and r.stored)
    failed = sum(1 for r in done if r.status == "failed")
    what = (
        f"{stored} of {count(todo, 'kernel')} compiled and stored, {failed} failed, {todo - len(done)} not compiled"
        if todo
        else "while checking the cache, before compiling anything"
    )
    err_console.print(
        plain(f"warm stopped after {seconds:.1f} s: {what}. What was stored stays; run the same command to finish."),
        soft_wrap=True,
    )


def _not_persisted(summary: WarmSummary) -> str:
    """Why the binaries are not all on disk ("" when they are): warm exists to persist them."""
    lost = summary.not_stored()
    if not lost:
        return ""
    said = [w for r in lost for w in r.warnings] + list(summary.warnings)
    reason = summary.why or (said[0] if said else "the store refused the writes")
    if summary.where in ("memory", "nowhere"):
        return (
            f"nothing was persisted: the kernel cache is not on disk ({reason}); {count(len(lost), 'kernel')} "
            "went nowhere (kept in memory until this command ended). "
            "Set LAZYKERN_CACHE=1 and LAZYKERN_CACHE_DIR to a writable directory."
        )
    stored = f"{len(lost)} of {count(len(summary.results), 'kernel')} {'was' if len(lost) == 1 else 'were'} not stored"
    return f"{stored} in {summary.where}: {reason}"


def checked_archs(archs: Sequence[str]) -> list[str | None]:
    """The ``--arch`` values, normalized and checked against what NVRTC compiles for, before any work.

    Raises ``typer.BadParameter`` (a usage error) naming the valid archs; ``[None]``
    (this machine's arch) when none are given.
    """
    from ...compile.compiler import check_arch  # import on first use: startup time

    out: list[str | None] = []
    for arch in archs:
        try:
            out.append(check_arch(arch))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--arch") from None
    return out or [None]


def _print_warm(summary: WarmSummary) -> None:
    table = Table(title=plain(f"lazykern warm {summary.family} ({summary.seconds:.1f} s)"))
    table.add_column("compiled", justify="right")
    table.add_column("already cached", justify="right")
    table.add_column("failed", justify="right")
    table.add_column("binaries in")
    table.columns[-1].overflow = "fold"
    where = summary.where if summary.persisted else f"{summary.where} (not stored)"
    table.add_row(
        str(summary.count("compiled")), str(summary.count("cached")), str(summary.count("failed")), plain(where)
    )
    console.print(table)
    failed = [r for r in summary.results if r.status == "failed"]
    if failed:
        errors = Table("kernel", "arch", "first lines of the error", title="failures", title_style="bold red")
        errors.columns[0].overflow = "fold"
        for r in failed:
            errors.add_row(plain(r.name), plain(r.arch), plain(r.first_lines()))
        console.print(errors)


bench_app = typer.Typer(help="Benchmarks (tropical GEMM by default; `startup` for start-up costs).")
app.add_typer(bench_app, name="bench")

QuickOpt = typer.Option(False, "--quick", help="Small sizes, few repeats: a smoke run.")
OutOpt = typer.Option(None, "--out", help="Directory for the results (JSON/CSV/plots).")


class _Suite(Protocol):
    """A benchmark module (``bench.gemm``, ``bench.startup``): runs, then tabulates its result."""

    def run(self, *, quick: bool, out: Path | None, progress: Callable[[str], None]) -> dict[str, Any]: ...

    def table(self, result: dict[str, Any]) -> Table: ...


def _bench(suite: _Suite, quick: bool, out: Path | None) -> None:
    """Run one suite with a spinner that shows its steps, then print its table and files."""
    from ..bench._progress import steps  # import on first use: startup time

    with steps(err_console) as report:
        result = suite.run(quick=quick, out=out, progress=report)
    console.print(suite.table(result))
    for path in filter(None, (result.get("files") or {}).values()):
        console.print(plain(f"wrote {path}"))


@bench_app.callback(invoke_without_command=True)
def bench(ctx: typer.Context, quick: bool = QuickOpt, out: Path | None = OutOpt) -> None:
    """Tropical GEMM throughput (runs when no sub-command is given)."""
    if ctx.invoked_subcommand is not None:
        return
    from ..bench import gemm  # import on first use: startup time

    _bench(gemm, quick, out)


@bench_app.command()
def startup(quick: bool = QuickOpt, out: Path | None = OutOpt) -> None:
    """Start-up cost: eager compile of every kernel vs lazy compile vs warm cache."""
    from ..bench import startup as startup_bench  # import on first use: startup time

    _bench(startup_bench, quick, out)


@app.command()
def demo(
    fresh_cache: bool = typer.Option(False, "--fresh-cache", help="Use an empty temporary cache: a cold start."),
    side: int = typer.Option(24, "--side", min=2, max=64, help="Road grid side (side x side nodes)."),
    seed: int = typer.Option(7, "--seed", min=0, help="Seed of the generated graph and HMM samples."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before a long run on the CPU."),
) -> None:
    """Shortest paths (min-plus) and a Viterbi decode (max-plus) on the tropical family."""
    from ._demo import run_and_render  # import on first use: startup time (NumPy, Numba)

    if not run_and_render(fresh_cache=fresh_cache, side=side, seed=seed, yes=yes):
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``lazykern`` console script (and of ``python -m lazykern``)."""
    app(prog_name="lazykern")


if __name__ == "__main__":
    main()
