"""``python -m benchmarks.startup [--quick] [--out DIR]``: see :mod:`lazykern.tools.bench.startup`.

``python -m benchmarks.startup --table [--out DIR]``: issue 28's table, see :mod:`benchmarks.startup_table`.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from lazykern.tools.bench.startup import DEFAULT_FAMILY, DEFAULT_OUT, run, table


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--table"]:  # issue 28's table (warm start, launch floors, CuPy beside each)
        from benchmarks.startup_table import main as table_main

        return table_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.startup",
        description="Start-up cost: cold vs warm, eager vs lazy compilation, in fresh processes.",
    )
    parser.add_argument("--quick", action="store_true", help="one repeat instead of three")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"directory for the JSON and PNG (default {DEFAULT_OUT})")
    parser.add_argument("--family", default=DEFAULT_FAMILY, help="module:attribute of the KernelFamily to time")
    parser.add_argument("--cpu", action="store_true", help="compile-only figures even where a GPU is present")
    parser.add_argument("--arch", default=None, help="arch to compile for in compile-only mode (default: current)")
    parser.add_argument("--names", nargs="*", default=None, help="fragments the lazy user needs (compile-only mode)")
    parser.add_argument("--no-eager", action="store_true", help="skip the all-in-one compile")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    result = run(
        args.out,
        quick=args.quick,
        repeats=args.repeats,
        family=args.family,
        gpu=False if args.cpu else None,
        lazy_names=args.names,
        arch=args.arch,
        eager=not args.no_eager,
        progress=lambda msg: console.log(msg),
        argv=None if argv is None else ["-m", "benchmarks.startup", *argv],
    )
    Console().print(table(result))
    for path in filter(None, result.get("files", {}).values()):
        console.print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
