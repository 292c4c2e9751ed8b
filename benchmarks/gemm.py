"""``python -m benchmarks.gemm [--quick] [--out DIR]``: see :mod:`lazykern.tools.bench.gemm`."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from lazykern import LazykernError
from lazykern.tools.bench.gemm import DEFAULT_OUT, run, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gemm",
        description="Tropical GEMM throughput against the issue limit, torch side by side.",
    )
    parser.add_argument("--quick", action="store_true", help="f32 max-plus on a few shapes + one of each other kind")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"directory for the JSON and PNG (default {DEFAULT_OUT})")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch baseline")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    try:
        result = run(
            args.quick,
            args.out,
            torch=not args.no_torch,
            seed=args.seed,
            progress=lambda msg: console.log(msg),
            argv=None if argv is None else ["-m", "benchmarks.gemm", *argv],
        )
    except LazykernError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    Console().print(table(result))
    for path in filter(None, result.get("files", {}).values()):
        console.print(f"wrote {path}")
    wrong = [c for c in result["cases"] if c.get("error") or not (c.get("check") or {}).get("ok", False)]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
