"""Result files and tables: JSON (every figure), PNG (a plot), rich tables (what a person reads).

Writers take plain result dicts, so they are testable with a made-up result set.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

from .device import slug

if TYPE_CHECKING:
    from rich.table import Table

log = logging.getLogger("lazykern")


def result_stem(suite: str, device: str, when: datetime.datetime | None = None) -> str:
    """``gemm-NVIDIA-H100-80GB-HBM3-20250101-120000``: suite, device, local date and time.

    >>> result_stem("gemm", "NVIDIA H100", datetime.datetime(2025, 1, 2, 3, 4, 5))
    'gemm-NVIDIA-H100-20250102-030405'
    """
    when = when or datetime.datetime.now()
    return f"{suite}-{slug(device)}-{when:%Y%m%d-%H%M%S}"


def write_json(result: dict[str, Any], path: str | os.PathLike[str]) -> str:
    """Write ``result`` as indented JSON; a reader never sees half a file (temporary name, then rename)."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a result file is meant to be shared
        with os.fdopen(fd, "w") as fh:
            json.dump(result, fh, indent=1, default=_jsonable, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)


@overload
def clean(value: dict[str, Any]) -> dict[str, Any]: ...
@overload
def clean(value: Any) -> Any: ...
def clean(value: Any) -> Any:
    """NaN/inf become None (JSON has neither), recursively.

    >>> clean({"a": float("nan"), "b": [1.0, float("inf")]})
    {'a': None, 'b': [1.0, None]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def write_png(writer: Callable[[dict[str, Any], str], str], result: dict[str, Any], path: str) -> str | None:
    """``writer(result, path)`` where matplotlib is installed; None (and a log line) where it is not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        log.warning("matplotlib is not installed: no plot written (pip install matplotlib)")
        return None
    return writer(result, path)


def save(
    result: dict[str, Any],
    out: str | os.PathLike[str],
    suite: str,
    device: str,
    png_writer: Callable[[dict[str, Any], str], str],
) -> dict[str, Any]:
    """Write ``result`` as ``<out>/<suite>-<device>-<time>.json`` plus a PNG beside it."""
    stem = os.path.join(out, result_stem(suite, device))
    result["files"] = {"json": stem + ".json", "png": stem + ".png"}
    result["files"]["png"] = write_png(png_writer, result, stem + ".png")
    write_json(result, stem + ".json")
    return result


def _pyplot() -> Any:  # matplotlib.pyplot (mypy does not read matplotlib: it is optional)
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def series_label(case: dict[str, Any]) -> str:
    """One plotted line: implementation, op, semiring, dtype."""
    op = case["op"] + ("+argmax" if case.get("argmax") else "")
    return f"{case['impl']} {op} {case['semiring']} {case['dtype']}"


def write_gemm_png(result: dict[str, Any], path: str | os.PathLike[str]) -> str:
    """Two panels: throughput against size (a line per implementation/semiring/dtype over the square
    shapes, labelled points for the skinny and batched ones), and a bar per case at the most-measured shape."""
    import collections

    plt = _pyplot()
    measured = [c for c in result["cases"] if c.get("tmacs") is not None and c["op"] != "backward"]
    common = collections.Counter(c["shape"] for c in measured).most_common(1)
    focus = common[0][0] if common else None
    bars = [c for c in measured if c["shape"] == focus]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(16, max(6, 0.28 * len(bars) + 2)), width_ratios=(3, 2))
    series: dict[str, list[tuple[float, float]]] = {}
    for case in measured:
        if case.get("group") == "square":
            series.setdefault(series_label(case), []).append((case["macs"], case["tmacs"]))
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    for case in measured:
        if case.get("group") in ("skinny", "batched"):
            marker = "s" if case["impl"] == "lazykern" else "^"
            ax.scatter([case["macs"]], [case["tmacs"]], marker=marker, color="black", zorder=3)
            ax.annotate(f"{case['impl']} {case['shape']}", (case["macs"], case["tmacs"]), fontsize="x-small")
    limits = {d: v for d, v in (result.get("limits") or {}).items() if d in ("float32", "float64") and v}
    for dtype, limit in limits.items():
        ax.axhline(limit, linestyle="--", linewidth=1, color="grey")
        ax.annotate(f"{dtype} issue limit {limit:.1f} T", (0.01, limit), xycoords=("axes fraction", "data"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tropical MACs per call (m x n x k x batch); squares: lines, skinny/batched: labelled points")
    ax.set_ylabel("T tropical MAC/s")
    ax.set_title(f"Tropical GEMM throughput on {result.get('device', {}).get('name', '?')}")
    if series:
        ax.legend(fontsize="small", loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    labels = [series_label(c) for c in bars]
    bx.barh(labels, [c["tmacs"] for c in bars])
    for y, case in enumerate(bars):
        if case.get("pct_limit") is not None:
            bx.annotate(f" {case['pct_limit']:.0f}%", (case["tmacs"], y), va="center", fontsize="x-small")
    for limit in limits.values():
        bx.axvline(limit, linestyle="--", linewidth=1, color="grey")
    bx.invert_yaxis()
    bx.tick_params(axis="y", labelsize="small")
    bx.set_xlabel("T tropical MAC/s (dashed: f32 and f64 issue limits)")
    bx.set_title(f"every case at {focus}" if focus else "no case measured")
    return _save(fig, plt, path)


def write_startup_png(result: dict[str, Any], path: str | os.PathLike[str]) -> str:
    """One stacked bar per start-up scenario (medians): import, setup (context, inputs), work."""
    plt = _pyplot()
    rows = [r for r in result["rows"] if r.get("seconds") is not None]
    fig, ax = plt.subplots(figsize=(9, 0.6 * len(rows) + 1.5))
    labels = [r["scenario"] for r in rows]
    left = [0.0] * len(rows)
    for key, name, color in (
        ("import_seconds", "import", "lightgrey"),
        ("setup_seconds", "setup (context, inputs)", "silver"),
        ("seconds", "work (compile / load / call)", None),
    ):
        widths = [r.get(key) or 0.0 for r in rows]
        ax.barh(labels, widths, left=left, color=color, label=name)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set_xlabel("seconds (median)")
    ax.set_title(f"lazykern start-up, {result.get('mode', '?')} mode")
    ax.legend(fontsize="small")
    return _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: str | os.PathLike[str]) -> str:
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _fmt(value: Any, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    return format(value, spec)


def gemm_table(result: dict[str, Any]) -> Table:
    """A rich Table of every case: impl, op, dtype, shape, T MAC/s, % limit, GB/s, ms, check."""
    from rich.table import Table
    from rich.text import Text

    # Text, not markup, for everything measured or reported by the device and the library.
    table = Table(title=Text(f"tropical GEMM on {result.get('device', {}).get('name', '?')} ({result.get('mode')})"))
    for col in ("impl", "op", "semiring", "dtype", "shape", "T MAC/s", "% limit", "GB/s", "ms", "check"):
        table.add_column(col, justify="right" if col in ("T MAC/s", "% limit", "GB/s", "ms") else "left")
    for case in result["cases"]:
        check = case.get("check") or {}
        status = "error" if case.get("error") else ("ok" if check.get("ok") else "WRONG" if check else "-")
        op = case["op"] + ("+argmax" if case.get("argmax") else "")
        table.add_row(
            Text(str(case["impl"])),
            Text(op),
            Text(str(case["semiring"])),
            Text(str(case["dtype"])),
            Text(str(case["shape"])),
            _fmt(case.get("tmacs"), ".3f"),
            _fmt(case.get("pct_limit"), ".1f"),
            _fmt(case.get("gb_s"), ".0f"),
            _fmt(case.get("ms"), ".4g"),
            Text(status if not case.get("error") else f"error: {case['error'][:60]}"),
        )
    lazy = result.get("laziness") or {}
    if lazy:
        used, total = lazy.get("compiled_count") or 0, lazy.get("fragments") or 0
        table.caption = Text(
            f"this run used {used} of {total} fragments ({lazy.get('compile_calls')} compiled now by NVRTC, "
            f"the rest loaded from the cache); {total - used} were never compiled"
        )
    return table


def startup_table(result: dict[str, Any]) -> Table:
    """A rich Table of the start-up scenarios (medians); each row says what it measured under its name."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"lazykern start-up ({result.get('mode')}, {result.get('repeats')} repeats, medians)")
    table.add_column("scenario", ratio=1, overflow="fold")
    for col in ("import s", "setup s", "work s", "total s", "NVRTC calls"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in result["rows"]:
        total = None
        if row.get("seconds") is not None:
            total = row["seconds"] + (row.get("import_seconds") or 0.0) + (row.get("setup_seconds") or 0.0)
        # Text, not markup: kernel names and error messages are shown as they are.
        scenario = Text(str(row["scenario"]), style="bold")
        scenario.append("\n" + str(row.get("what", "")), style="dim")
        table.add_row(
            scenario,
            _fmt(row.get("import_seconds"), ".3f"),
            _fmt(row.get("setup_seconds"), ".3f"),
            _fmt(row.get("seconds"), ".3f"),
            _fmt(total, ".3f"),
            _fmt(row.get("compile_calls"), "d"),
        )
    return table


def format_shape(m: int, k: int, n: int, batch: int = 1) -> str:
    """``m x k x n``, with the batch in front when there is one.

    >>> format_shape(4096, 4096, 4096), format_shape(64, 64, 64, batch=1024)
    ('4096x4096x4096', '1024 x 64x64x64')
    """
    base = f"{m}x{k}x{n}"
    return f"{batch} x {base}" if batch > 1 else base


def medians_of(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """Median of ``key`` over rows that have it; None where none do."""
    from ._timing import median

    values = [r[key] for r in rows if r.get(key) is not None]
    return median(values) if values else None
