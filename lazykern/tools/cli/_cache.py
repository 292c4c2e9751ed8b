"""``lazykern cache ...``: look into, trim and ship the kernel store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from ...config import SIZE_ACCEPTED, default_cache_dir, invalid_value
from ...errors import LazykernError
from ._common import (
    console,
    count,
    err_console,
    esc,
    human_bytes,
    open_cache,
    open_cache_if_any,
    open_existing_cache,
    parse_duration,
    plain,
    print_json,
    when,
)

if TYPE_CHECKING:
    from ...store.cache import KernelCache

app = typer.Typer(help="Inspect, prune, clear, export and import the kernel cache.", no_args_is_help=True)


def _version(dist: str) -> str:
    import importlib.metadata  # import on first use: startup time

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _health(cache: Any, repair: bool = False) -> Any:
    """``"ok"``, or the check report's findings (what is wrong and how much)."""
    try:
        report = cache.check(repair=repair)
    except Exception as exc:  # a health probe must never break `cache info`
        return f"check failed: {type(exc).__name__}: {exc}"
    problems = (
        "store_problems",
        "missing_files",
        "orphan_files",
        "bad_entries",
        "foreign_rows",
        "stale_locks",
        "quarantined_files",
        "unfixed",
    )
    found = {k: report[k] for k in problems if report.get(k)}
    if report.get("integrity") not in (None, "ok"):
        found["integrity"] = report["integrity"]
    if report.get("ok", False):
        if cache.degraded:
            return f"degraded: {cache.degraded}"
        return "ok" + (f" (repaired: {_listing(found)})" if repair and found else "")
    if repair and report.get("fixed"):
        found["fixed"] = report["fixed"]
    return found or report


def _listing(found: dict[str, Any]) -> str:
    """``{"orphan_files": 1}`` -> ``"1 orphan file"``, readable in one line."""
    parts = []
    for key, value in found.items():
        what = key.replace("_", " ")
        if isinstance(value, int) and not isinstance(value, bool):
            parts.append(f"{value} {what[:-1] if value == 1 and what.endswith('s') else what}")
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            parts.append(f"{what}: {'; '.join(value)}")
        else:
            parts.append(f"{what}: {value}")
    return ", ".join(parts)


def info_dict(repair: bool = False) -> dict[str, Any]:
    """What `cache info` shows; where no store is made yet (a fresh machine) the store's part is empty."""
    from ... import __version__
    from ...compile.compiler import current_arch, nvrtc_version, toolchain_fingerprint
    from ...config import cache_size_limit

    cache = open_cache_if_any()
    try:
        nvrtc = ".".join(map(str, nvrtc_version()))
        toolchain = toolchain_fingerprint()[:16]
    except Exception as exc:  # report a broken toolchain instead of dying on it
        nvrtc, toolchain = f"unavailable ({exc})", "-"
    counters = cache.persistent_counters() if cache is not None else {}
    stats = cache.stats() if cache is not None else {"entries": 0, "bytes": 0}
    return {
        "location": (cache.directory or "memory") if cache is not None else default_cache_dir(),
        "exists": cache is not None,
        "backend": cache.backend if cache is not None else "none yet",
        "degraded": cache.degraded if cache is not None else None,
        "entries": stats["entries"],
        "size_bytes": stats["bytes"],
        "size_limit_bytes": cache.size_limit if cache is not None else cache_size_limit(),
        "hits": counters.get("hits", 0),
        "misses": counters.get("misses", 0),
        "compiles": counters.get("compiles", 0),
        "compile_seconds": counters.get("compile_ms", 0) / 1000,
        "seconds_saved": counters.get("saved_ms", 0) / 1000,
        "corrupt_dropped": counters.get("corrupt", 0),
        "arch": current_arch(),
        "nvrtc": nvrtc,
        "toolchain": toolchain,
        "numba_cuda": _version("numba-cuda"),
        "cuda_core": _version("cuda-core"),
        "lazykern": __version__,
        "health": _health(cache, repair) if cache is not None else f"empty: {NOT_YET}",
    }


NOT_YET = "no store yet; it is made when a kernel is first compiled (or by `lazykern warm`, `lazykern cache import`)"


@app.command()
def info(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    repair: bool = typer.Option(False, "--repair", help="Also repair what the health check finds."),
) -> None:
    """Where the cache is, how big, its counters, the toolchain, and its health."""
    try:
        data = info_dict(repair=repair)
    except Exception as exc:
        if as_json:  # a script reading --json gets JSON whatever happened; the error line goes to stderr
            print_json({"location": default_cache_dir(), "error": str(exc) or type(exc).__name__})
        raise
    if as_json:
        print_json(data)
    else:
        _info_table(data)
    if repair and isinstance(data["health"], dict) and data["health"].get("unfixed"):
        for line in data["health"]["unfixed"]:
            err_console.print(plain(f"not repaired: {line}", "yellow"))
        raise typer.Exit(1)


COUNTERS = ("location", "entries", "hits", "misses", "compiles", "compile_seconds", "seconds_saved", "corrupt_dropped")


@app.command()
def stats(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """The counters alone: hits, misses, compiles, compile time saved (`cache info` shows them with the rest)."""
    data = {k: v for k, v in info_dict().items() if k in COUNTERS}
    if as_json:
        print_json(data)
        return
    table = Table(title="lazykern cache counters", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for k, v in data.items():
        table.add_row(k.replace("_", " "), plain(f"{v:.2f}" if isinstance(v, float) else v))
    console.print(table)


def _info_table(data: dict[str, Any]) -> None:
    table = Table(title="lazykern cache", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    size = f"{human_bytes(data['size_bytes'])} of {human_bytes(data['size_limit_bytes'])}"
    location = plain(data["location"])
    if not data["exists"]:
        location.append("  (empty: no store yet)", style="green")
    if data["degraded"]:
        location.append(f"  (degraded: {data['degraded']})", style="yellow")
    rows = [
        ("location", location),
        ("entries", str(data["entries"])),
        ("size", size),
        ("hits / misses", f"{data['hits']} / {data['misses']}"),
        ("compiles", f"{data['compiles']} ({data['compile_seconds']:.2f} s compiling)"),
        ("compile time saved by hits", f"{data['seconds_saved']:.2f} s"),
        ("corrupt entries dropped", str(data["corrupt_dropped"])),
        ("arch here", data["arch"]),
        ("NVRTC", plain(f"{data['nvrtc']} (toolchain {data['toolchain']})")),
        ("numba-cuda / cuda-core", f"{data['numba_cuda']} / {data['cuda_core']}"),
        ("lazykern", data["lazykern"]),
        ("health", _health_text(data["health"])),
    ]
    for k, v in rows:
        table.add_row(k, v if isinstance(v, Text) else plain(v))
    console.print(table)


def _health_text(health: Any) -> Text:
    if isinstance(health, str) and health.startswith(("ok", "empty")):
        return plain(health, "green")
    if isinstance(health, (list, tuple)):
        return plain("; ".join(map(str, health)), "yellow")
    if isinstance(health, dict):
        text = plain(_listing(health), "yellow")
        text.append(" (run `lazykern cache info --repair`)")
        return text
    return plain(health, "yellow")


def _rows(
    cache: KernelCache | None, family: str | None, arch: str | None, *, known_family: bool = False
) -> list[dict[str, Any]]:
    """The entries of ``cache`` (None: no store yet) to show or act on, sorted; ``known_family``: a ``family``
    that names no family is an error."""
    every = list(cache.entries()) if cache is not None else []
    if known_family and family is not None and not any(r.get("family") == family for r in every):
        _check_family_known(family, {str(r.get("family")) for r in every})
    rows = [
        r for r in every if (family is None or r.get("family") == family) and (arch is None or r.get("arch") == arch)
    ]
    return sorted(rows, key=lambda r: (str(r.get("family")), str(r.get("kernel")), str(r.get("arch"))))


def _check_family_known(family: str, stored: set[str]) -> None:
    """``--family`` naming no family at all is a mistake to say (exit 1), not an empty table; a family that is
    declared (tropical, a package's entry point) but has nothing cached is just empty. Raises LazykernError."""
    from ...families import declared  # import on first use: startup time

    if family in declared():
        return
    known = ", ".join(sorted(stored | set(declared())))
    raise LazykernError(
        f"no kernel family is named {family!r}: none in the cache, none declared; known families: {known}"
    )


def _arch_filter(value: str | None) -> str | None:
    """``--arch`` of ls/clear/export, normalized (``90`` -> ``sm_90``); a mistyped one is refused, not matched to
    nothing (any arch an older NVRTC compiled for may be in the cache, so only the form is checked)."""
    if value is None:
        return None
    from ...compile.compiler import normalize_arch  # import on first use: startup time

    try:
        return normalize_arch(value)
    except ValueError:
        raise typer.BadParameter(invalid_value("--arch", value, "an arch such as sm_80, sm_90 or 90")) from None


FamilyOpt = typer.Option(None, "--family", "-f", help="Only entries of this kernel family.")
ArchOpt = typer.Option(
    None, "--arch", "-a", callback=_arch_filter, help="Only entries compiled for this arch, e.g. sm_90."
)


@app.command("ls")
def ls(
    family: str | None = FamilyOpt,
    arch: str | None = ArchOpt,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """One row per cached kernel: names, arch, options, size, compile time, dates."""
    cache = open_cache_if_any()
    rows = _rows(cache, family, arch, known_family=True)
    if as_json:
        print_json([_row_json(r) for r in rows])
        return
    if not rows:
        what = "cached kernels" + (f" of family {family!r}" if family else "") + (f" for {arch}" if arch else "")
        where = default_cache_dir()
        console.print(plain(f"no {what} in {where}" + ("" if cache is not None else f": {NOT_YET}")))
        return
    console.print(_ls_table(rows))


def _row_json(row: dict[str, Any]) -> dict[str, Any]:
    """An entry as `ls --json` shows it: the header manifest (hundreds of KB with CUB) as its count."""
    out = {k: v for k, v in row.items() if k not in ("sha256", "headers")}
    if isinstance(row.get("headers"), dict):
        out["headers_read"] = len(row["headers"].get("files") or [])
    return out


def _ls_table(rows: list[dict[str, Any]]) -> Table:
    """Columns by terminal width, the kernel name first: it never shrinks below its length
    (up to 40 characters; longer ones fold onto a second line, never cut)."""
    from ...families.warm import kernel_label  # import on first use: startup time (the warm engine)

    width = console.width
    wide, medium = width >= 150, width >= 100
    longest = max((len(kernel_label(r)) for r in rows), default=6)
    stale = sum(1 for r in rows if r.get("stale"))
    title = count(len(rows), "cached kernel") + (
        f" ({stale} of other lazykern versions, marked stale)" if stale else ""
    )
    table = Table(title=title)
    if medium:
        table.add_column("family", overflow="fold")
    table.add_column("kernel", min_width=min(longest, 40), overflow="fold")
    table.add_column("arch", no_wrap=True)
    if wide:
        table.add_column("options", overflow="fold")
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("compile s", justify="right", no_wrap=True)
    if wide:
        table.add_column("created", no_wrap=True)
    if medium:
        table.add_column("last used", no_wrap=True)
    if wide:
        table.add_column("key", no_wrap=True)
    else:
        table.caption = "kernels grouped by family; a wider terminal or --json shows every field"
    family = None
    for r in rows:
        if not medium and r.get("family") != family:
            family = r.get("family")
            if table.rows:
                table.add_section()
            table.add_row(plain(f"{family if family is not None else '-'}:", "bold"))
        label = plain(kernel_label(r))
        if r.get("stale"):
            label.append(" (stale)", style="yellow")
        if r.get("memory_only"):  # a marker: the code holds an address of its process, never stored
            label.append(" (memory only)", style="yellow")
        cells: list[RenderableType] = [label, plain(r.get("arch", "-"))]
        if wide:
            cells.append(plain(" ".join(map(str, r.get("options") or []))))
        cells += [human_bytes(_number(r.get("bytes"))), f"{_number(r.get('compile_seconds')):.2f}"]
        if wide:
            cells.append(when(r.get("created")))
        if medium:
            cells = [plain(r.get("family", "-")), *cells, when(r.get("last_used"))]
        if wide:
            cells.append(plain(str(r.get("key", ""))[:12]))
        table.add_row(*cells)
    return table


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


@app.command()
def clear(
    family: str | None = FamilyOpt,
    arch: str | None = ArchOpt,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
) -> None:
    """Delete cached kernels (all of them, or one family / arch)."""
    cache = open_existing_cache()
    rows = _rows(cache, family, arch)
    what = "every cached kernel" if family is None and arch is None else count(len(rows), "cached kernel")
    if not yes:
        typer.confirm(f"Delete {what} from {cache.directory or 'memory'}?", abort=True)
    if family is None and arch is None:
        cache.clear()
    else:
        for r in rows:
            cache.delete(r["key"])
    console.print(f"removed {count(len(rows), 'entry', 'entries')}")


@app.command()
def prune(
    older_than: str | None = typer.Option(
        None, "--older-than", help="Delete entries not used for this long: 30d, 12h."
    ),
    max_size: str | None = typer.Option(None, "--max-size", help="Evict least recently used entries down to: 500M."),
) -> None:
    """Delete entries unused for a while, or shrink the cache to a size."""
    from ...config import parse_size

    if older_than is None and max_size is None:
        raise typer.BadParameter("give --older-than DURATION and/or --max-size SIZE")
    age = parse_duration(older_than) if older_than is not None else None  # checked before the cache is opened
    limit = None
    if max_size is not None:
        try:
            limit = parse_size(max_size)
        except ValueError:
            raise typer.BadParameter(invalid_value("--max-size", max_size, SIZE_ACCEPTED)) from None
    cache = open_existing_cache()
    before = cache.stats()
    removed = 0
    if age is not None:
        cutoff = time.time() - age
        for r in list(cache.entries()):
            if (r.get("last_used") or r.get("stored") or 0) < cutoff and cache.delete(r["key"]):
                removed += 1
    if limit is not None:
        removed += cache.cull(limit)
    after = cache.stats()
    console.print(
        f"removed {count(removed, 'entry', 'entries')}, freed {human_bytes(before['bytes'] - after['bytes'])}; "
        f"{count(after['entries'], 'entry', 'entries')}, {human_bytes(after['bytes'])} left"
    )


@app.command("export")
def export(
    bundle: Path = typer.Argument(..., help="Output file: NAME.tar.zst, NAME.tar.gz or NAME.tar."),
    family: str | None = FamilyOpt,
    arch: str | None = ArchOpt,
) -> None:
    """Write cached kernels to a bundle, to warm CI machines or a cluster."""
    from ...errors import CacheError
    from ...scale.bundle import export_bundle

    cache = open_existing_cache()
    if not _rows(cache, family, arch):
        held = sorted({str(r.get("family")) for r in cache.entries()})
        chosen = " ".join(f"{flag} {v}" for flag, v in (("--family", family), ("--arch", arch)) if v) or "the cache"
        raise CacheError(
            f"nothing to export: no cached kernel matches {chosen} in {cache.directory or 'memory'} "
            f"(families cached: {', '.join(held) or 'none'}); no bundle written"
        )
    report = export_bundle(cache, bundle, family=family, arch=arch)
    console.print(
        plain(
            f"exported {count(len(report.keys), 'entry', 'entries')} to {report.path} "
            f"({human_bytes(report.bytes)}, {report.compression})"
        ),
        soft_wrap=True,  # a long path stays whole (copyable); the terminal wraps it, Rich does not fold it
    )
    if report.stale:
        console.print(
            f"left out {count(len(report.stale), 'entry', 'entries')} of other lazykern versions (kept in the cache)"
        )


@app.command("import")
def import_(
    bundle: Path = typer.Argument(..., exists=True, dir_okay=False, help="A bundle from `cache export`."),
) -> None:
    """Verify and load the entries of a bundle into this machine's cache.

    Exits 1 when any entry was skipped or did not persist (each is listed with the reason).
    """
    from ...scale.bundle import import_bundle

    report = import_bundle(open_cache(), bundle)
    for w in report.warnings:
        console.print(f"[yellow]warning:[/] {esc(w)}")
    console.print(
        f"imported {len(report.imported)}, already present {len(report.present)}, skipped {len(report.skipped)}"
        + (f", not persisted {len(report.not_persisted)}" if report.not_persisted else "")
    )
    problems = {**report.skipped, **report.not_persisted}
    if problems:
        table = Table("key", "not imported because")
        for key, why in sorted(problems.items()):
            table.add_row(plain(key[:16]), plain(why))
        console.print(table)
        err_console.print(
            f"[bold red]error:[/] {len(problems)} of the bundle's entries are not in the cache "
            f"({len(report.skipped)} failed verification, {len(report.not_persisted)} did not persist)"
        )
        raise typer.Exit(1)
