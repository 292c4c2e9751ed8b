"""Would NVRTC's precompiled headers make a cold tropical kernel cheaper? (CPU only: NVRTC needs no GPU.)

Compiles one tropical fragment three ways and prints NVRTC's own phase times (``--time``):
the translation unit as lazykern builds it (preamble inline), the preamble as a header that
``--create-pch`` precompiles, and the fragment compiled ``--use-pch`` against it, in this
process and in a second one. Checks that every route gives the same cubin.

    python3 -m benchmarks.nvrtc_pch [--kernel maxplus_f32] [--arch sm_90]

Measured on the CPU machine (NVRTC 13.5, 2026-11-25), maxplus_f32 for sm_90: about 0.5 s a
compile, of which the front end (the only phase a PCH skips) is 22-38 ms; NVVM's optimizer
(~260 ms) and PTX -> SASS (~190 ms) are the rest. The 64^3 product's kernel (maxplus_f32_s):
0.14 s quiet (front end 36-47 ms), and ``--use-pch`` in the same process changed nothing
measurable (front end 65-89 ms against 66-99 ms inline, machine loaded). A PCH made by another process is refused
(warning 20282-D: "incompatible precompiled header (PCH) heap allocation address ... not
created by the same dynamic instance of the NVRTC library"), so a PCH kept in the store
would not serve a later process either.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time


def compile_once(source: str, options: list[str], timing: str) -> dict:
    """One NVRTC compile: wall seconds, NVRTC's phase milliseconds, the cubin's digest, the log."""
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"fragment.cu", 0, [], [])
    start = time.perf_counter()
    opts = [o.encode() for o in [*options, f"--time={timing}"]]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    seconds = time.perf_counter() - start
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(log.decode(errors="replace"))
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    nvrtc.nvrtcDestroyProgram(prog)
    with open(timing) as fh:
        phases = {row.split(",")[1].strip(): float(row.split(",")[2]) for row in fh.read().splitlines()[1:] if row}
    return {
        "seconds": round(seconds, 4),
        "phases_ms": phases,
        "cubin": hashlib.sha256(cubin).hexdigest()[:16],
        "log": log.decode(errors="replace").strip("\0 \n")[:200],
    }


def run(kernel: str, arch: str, work: str) -> dict:
    from lazykern import compiler, tropical

    source = tropical.family.source
    unit = source.translation_unit(kernel)
    code = source.fragment(kernel).code
    preamble = unit[: unit.index(code)]
    header = os.path.join(work, "preamble.cuh")
    with open(header, "w") as fh:
        fh.write("#pragma once\n" + preamble)
    base = [f"-arch={arch}", *source.options_for(kernel), *(f"-I{d}" for d in compiler.system_include_dirs())]
    with_header = [*base, f"-I{work}"]
    split = '#include "preamble.cuh"\n' + code
    pch = os.path.join(work, "preamble.pch")
    out = {
        "inline (as lazykern compiles it)": compile_once(unit, base, os.path.join(work, "t0.csv")),
        "preamble as a header, no PCH": compile_once(split, with_header, os.path.join(work, "t1.csv")),
        "--create-pch": compile_once(split, [*with_header, f"--create-pch={pch}"], os.path.join(work, "t2.csv")),
        "--use-pch, same process": compile_once(
            split, [*with_header, f"--use-pch={pch}"], os.path.join(work, "t3.csv")
        ),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", default="maxplus_f32")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--use-pch-in", default=None, help=argparse.SUPPRESS)  # the second process
    args = parser.parse_args(argv)
    if args.use_pch_in:
        from lazykern import compiler, tropical

        source = tropical.family.source
        opts = [f"-arch={args.arch}", *source.options_for(args.kernel), f"-I{args.use_pch_in}"]
        opts += [f"-I{d}" for d in compiler.system_include_dirs()]
        opts.append(f"--use-pch={os.path.join(args.use_pch_in, 'preamble.pch')}")
        split = '#include "preamble.cuh"\n' + source.fragment(args.kernel).code
        print(json.dumps(compile_once(split, opts, os.path.join(args.use_pch_in, "t4.csv"))))
        return 0
    with tempfile.TemporaryDirectory(prefix="lazykern-pch-") as work:
        rows = run(args.kernel, args.arch, work)
        child = subprocess.run(
            [sys.executable, "-m", "benchmarks.nvrtc_pch", "--kernel", args.kernel, "--arch", args.arch,
             "--use-pch-in", work],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        rows["--use-pch, another process"] = json.loads(child.stdout.splitlines()[-1])
    for name, row in rows.items():
        phases = ", ".join(f"{k} {v:.0f}" for k, v in row["phases_ms"].items())
        note = f"  [{row['log'][:90]}]" if row["log"] else ""
        print(f"{name:<34} {row['seconds']:.3f} s  ({phases} ms)  cubin {row['cubin']}{note}")
    same = len({row["cubin"] for row in rows.values()}) == 1
    print("every route gives the same cubin" if same else "THE CUBINS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
