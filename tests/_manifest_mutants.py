"""Child process of tests/test_manifest_mutations.py: mutate, one at a time, every input a compile read.

Run as ``python -m tests._manifest_mutants ROOT [--blind] [--cases=a,b]``; prints one JSON line:
``{"mutations": N, "survivors": [...], "by_kind": {...}}``. A survivor is a mutation after which the
store served a binary (no compile) that differs from what compiling now gives (or serves one where
compiling now fails). Each lookup builds a new store connection and family and clears lazykern's
per-process header memo, as a fresh process would start. ``--blind`` turns the manifest check off
and runs the first case only: the mutations must then find survivors (the test tests itself).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import sys

from lazykern import KernelCache, KernelFamily
from lazykern.compile import _manifest, compiler
from lazykern.errors import CompileError
from lazykern.tropical import _family as tropical_family
from lazykern.tropical import fragments
from tests._file_clock import step_past

ARCH = "sm_80"


@dataclasses.dataclass
class Case:
    name: str
    preamble: str
    source: str
    options: list[str]
    headers: list[str]  # files the compile reads: each is byte-mutated
    places: list[str]  # search places where a same-named header may appear
    # (link, another target): ``ln -sfn`` to it; (directory, another one): ``mv`` swaps them (issue 43)
    retargets: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    swaps: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def corpus(root: str, toolkit: str) -> list[Case]:
    inc1, inc2, inc3, work = (os.path.join(root, d) for d in ("inc1", "inc2", "inc3", "work"))
    files = {
        f"{inc1}/top.h": '#include "sub/mid.h"\n',
        f"{inc1}/sub/mid.h": '#include "../leaf.h"\n#include <other.h>\n#define VAL (LEAF + OTHER)\n',
        f"{inc1}/leaf.h": "#define LEAF 1\n",
        f"{inc2}/other.h": "#define OTHER 2\n",
        f"{inc3}/pick.h": "#define HDR <a.h>\n",
        f"{inc3}/a.h": "#define VAL 3\n",
        f"{inc3}/b.h": "#define VAL 4\n",
    }
    for path, text in files.items():
        _write(path, text.encode())
    kernel = 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'
    dirs = [work, inc1, inc2, inc3]
    return [
        Case(
            "nested",
            "",
            "#include <top.h>\n" + kernel,
            [f"-I{inc1}", f"-I{inc2}"],
            [f"{inc1}/top.h", f"{inc1}/sub/mid.h", f"{inc1}/leaf.h", f"{inc2}/other.h"],
            [os.path.join(d, n) for d in dirs for n in ("top.h", "sub/mid.h", "leaf.h", "other.h")],
        ),
        Case(
            "macro",
            "",
            '#include "pick.h"\n#include HDR\n' + kernel,
            [f"-I{inc3}"],
            [f"{inc3}/pick.h", f"{inc3}/a.h"],
            [os.path.join(d, n) for d in (work, inc1) for n in ("pick.h", "a.h")],
        ),
        Case(
            "defines",
            "#define ONE 1\n",
            "%:include VALHDR\n" + kernel.replace("VAL;", "VAL + EXTRA + ONE;"),
            [f"-I{inc3}", "-DVALHDR=<b.h>", "-DEXTRA=5", "-std=c++17"],
            [f"{inc3}/b.h"],
            [os.path.join(d, "b.h") for d in (work, inc1, inc2)],
        ),
        Case(
            "toolkit",
            "",
            "#include <cuda_fp16.h>\n#define VAL ((int)__half2float(__float2half(3.0f)))\n" + kernel,
            [f"-I{inc2}"],
            [os.path.join(toolkit, "cuda_fp16.h")],
            [os.path.join(d, "cuda_fp16.h") for d in (work, inc2)],
        ),
        Case(
            "has_include",
            "",
            '#if __has_include("opt.h")\n#include "opt.h"\n#else\n#define VAL 5\n#endif\n' + kernel,
            [f"-I{inc2}"],
            [],
            [os.path.join(d, "opt.h") for d in (work, inc2, toolkit)],
        ),
        *edge_cases(root, toolkit),
        *round7_cases(root, toolkit),
        Case(
            "tropical",
            tropical_family.preamble(),
            fragments.fragment("maxplus_f32")[0],
            list(tropical_family.OPTIONS),
            [],
            [],
        ),
    ]


def edge_cases(root: str, toolkit: str) -> list[Case]:
    """Issue 35: what the preprocessor sees, not what the text looks like (splices, comments, aliases),
    and trace names that are not paths (``#line`` and line markers naming existing or no files)."""
    gen, inc2, work, other = (os.path.join(root, d) for d in ("gen", "inc2", "work", "elsewhere"))
    files = {
        f"{gen}/v.h": "#define VAL 1\n",
        f"{other}/o.h": "#define UNUSED 1\n",
        f"{gen}/named.h": f'#line 1 "{other}/o.h"\n#define VAL 2\n',
        f"{gen}/x.h": "#pragma once\n#define X 3\n",
        f"{gen}/two.h": f'#line 1 "{gen}/x.h"\n#include "x.h"\n#line 9 "{other}/o.h"\n#define VAL (X + 1)\n',
        f"{gen}/sub/s.h": f'#line 1 "{other}/o.h"\n#include "y.h"\n',
        f"{inc2}/y.h": "#define VAL 4\n",
        f"{gen}/tk.h": '#line 1 "tk.t"\n#include <cuda_fp16.h>\n#define VAL ((int)__half2float(__float2half(3.f)))\n',
        f"{gen}/tmpl.h": '# 1 "gen.tmpl"\n# 1 "<built-in>"\n#define VAL 5\n# 3 "gen.tmpl" 2\n#line 7 "no/such.tmpl"\n',
    }
    for path, text in files.items():
        _write(path, text.encode())
    kernel = 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'
    probe = '#include "opt.h"\n#else\n#define VAL 6\n#endif\n' + kernel
    opt_places = [os.path.join(d, "opt.h") for d in (work, inc2, toolkit)]
    opts = [f"-I{gen}", f"-I{inc2}"]

    def places(*names: str) -> list[str]:
        return [os.path.join(d, n) for d in (work, gen, inc2) for n in names]

    return [
        Case("splice_include", "", "#inc\\\nlude <v.h>\n" + kernel, opts, [f"{gen}/v.h"], places("v.h")),
        Case(
            "comment_include", "", "# /* a\n */ include /* b */ <v.h>\n" + kernel, opts, [f"{gen}/v.h"], places("v.h")
        ),
        Case("probe_splice", "", '#if __has_\\\ninclude("opt.h")\n' + probe, [f"-I{inc2}"], [], opt_places),
        Case(
            "probe_alias_comment",
            "#define HI __has_include\n#define HJ HI\n",
            '#if HJ /* c */ ("opt.h")\n' + probe,
            [f"-I{inc2}"],
            [],
            opt_places,
        ),
        Case(
            "probe_comment_splice",
            "",
            '#if __has_include /* c */ \\\n("opt.h")\n' + probe,
            [f"-I{inc2}"],
            [],
            opt_places,
        ),
        Case("line_existing", "", "#include <named.h>\n" + kernel, opts, [f"{gen}/named.h"], places("named.h")),
        Case("line_two", "", "#include <two.h>\n" + kernel, opts, [f"{gen}/two.h", f"{gen}/x.h"], places("two.h")),
        Case(
            "line_sub",
            "",
            "#include <sub/s.h>\n" + kernel,
            opts,
            [f"{gen}/sub/s.h", f"{inc2}/y.h"],
            [f"{gen}/sub/y.h", f"{gen}/y.h", f"{work}/sub/s.h"],
        ),
        Case("line_generated", "", "#include <tmpl.h>\n" + kernel, opts, [f"{gen}/tmpl.h"], places("tmpl.h")),
        Case(
            "line_toolkit",
            "",
            "#include <tk.h>\n" + kernel,
            opts,
            [f"{gen}/tk.h", os.path.join(toolkit, "cuda_fp16.h")],
            places("tk.h", "cuda_fp16.h"),
        ),
    ]


def round7_cases(root: str, toolkit: str) -> list[Case]:
    """Issue 43: what a model of the preprocessor got wrong (a line splice in a raw string, a trigraph
    under -std=c++14), a probe inside a toolkit header that searches the user's directories first, and
    a header reached through a link that is retargeted or an -I directory swapped with ``mv``."""
    r7, inc2, work = (os.path.join(root, d) for d in ("r7", "inc2", "work"))
    files = {
        f"{r7}/rb.h": "#define VAL 7\n",
        f"{root}/targets/one.h": "#define VAL 1\n",
        f"{root}/targets/two.h": "#define VAL 2\n",
        f"{root}/swap_a/s.h": "#define VAL 3\n",
        f"{root}/swap_b/s.h": "#define VAL 4\n",
    }
    for path, text in files.items():
        _write(path, text.encode())
    os.makedirs(f"{r7}/links", exist_ok=True)
    if not os.path.islink(f"{r7}/links/l.h"):
        os.symlink(f"{root}/targets/one.h", f"{r7}/links/l.h")
    kernel = 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'
    raw = '__device__ const char *s = R"(a)\\\n" /*)";\n#include <rb.h>\n// */ ;\n#ifndef VAL\n#define VAL 1\n#endif\n'
    trigraph = (
        '__device__ const char *q = "??/" /* ";\n#if __has_include(<flag.h>)\n#define VAL 2\n#else\n#define VAL 1\n'
        '#endif\n__device__ const char *e = "*/";\n'
    )
    cccl = "#include <cuda/std/limits>\n#define VAL (cuda::std::numeric_limits<int>::max() - 1)\n"
    return [
        Case("raw_splice", "", raw + kernel, [f"-I{r7}"], [f"{r7}/rb.h"], [f"{work}/rb.h", f"{toolkit}/rb.h"]),
        Case(
            "trigraph",
            "",
            trigraph + kernel,
            [f"-I{r7}", "-std=c++14"],
            [],
            [os.path.join(d, "flag.h") for d in (r7, toolkit)],
        ),
        Case("cccl_probe", "", cccl + kernel, [f"-I{inc2}"], [], [f"{inc2}/version"]),
        Case(
            "link_and_swap",
            "",
            "#include <l.h>\n#include <s.h>\n" + kernel.replace("VAL;", "VAL + 0;"),
            [f"-I{r7}/links", f"-I{root}/swap_a"],
            [],
            [],
            retargets=[(f"{r7}/links/l.h", f"{root}/targets/two.h")],
            swaps=[(f"{root}/swap_a", f"{root}/swap_b")],
        ),
    ]


def _family(case: Case, store: str, options: list[str]) -> KernelFamily:
    fam = KernelFamily(f"mut_{case.name}", case.preamble, options=options, cache=KernelCache(store))
    fam.add("k", case.source)
    return fam


def lookup(case: Case, store: str, options: list[str]) -> tuple[bytes | None, bool]:
    """(binary, compiled) as a fresh process would get it; (None, True) when the compile fails."""
    _manifest._digests.clear()
    fam = _family(case, store, options)
    try:
        code = fam.get("k", ARCH).code
    except CompileError:
        return None, True
    finally:
        fam.cache.close()
    return code, fam.compile_calls > 0


def fresh(case: Case, options: list[str]) -> set[bytes | None]:
    """What compiling now gives: the untraced binary (a compile's own) and the observed one (what the
    store keeps; NVRTC's trace flag can change a register or two)."""
    fam = KernelFamily(f"mut_{case.name}", case.preamble, options=options)
    fam.add("k", case.source)
    source = fam.source.translation_unit("k")
    try:
        served = compiler.compile_source(source, name="k", arch=ARCH, options=options).code
        with compiler.observed_only():
            observed, _ = compiler.compile_deferred(source, name="k", arch=ARCH, options=options)
        return {served, observed.code}
    except CompileError:
        return {None}


def _mutants(case: Case):
    """(kind, options, apply, undo) for every mutation of the case's inputs."""
    for path in case.headers:
        with open(path, "rb") as fh:
            original = fh.read()
        for pos in sorted({0, len(original) // 2, len(original) - 2}):
            data = bytearray(original)
            byte = data[pos]
            data[pos] = ord("7") if chr(byte).isdigit() and byte != ord("7") else ord("X") if byte != ord("X") else 1
            yield (
                "header byte",
                case.options,
                (lambda p=path, d=bytes(data): _write(p, d)),
                (lambda p=path, d=original: _write(p, d)),
            )
    for place in case.places:
        if os.path.exists(place):
            continue
        yield (
            "header appears on the search path",
            case.options,
            (lambda p=place: _write(p, b"#define VAL 99\n#define LEAF 99\n#define OTHER 99\n#define HDR <b.h>\n")),
            (lambda p=place: os.remove(p)),
        )
    for i, opt in enumerate(case.options):
        variant = opt[:-1] + ("8" if opt[-1] != "8" else "9")
        for options in (case.options[:i] + case.options[i + 1 :], case.options[:i] + [variant] + case.options[i + 1 :]):
            yield "option", options, (lambda: None), (lambda: None)
    yield "option", [*case.options, "-DMUTANT=1"], (lambda: None), (lambda: None)
    for link, other in case.retargets:
        before = os.readlink(link)
        yield (
            "link retargeted",
            case.options,
            (lambda a=link, b=other: _relink(a, b)),
            (lambda a=link, b=before: _relink(a, b)),
        )
    for first, second in case.swaps:
        yield (
            "directory swapped",
            case.options,
            (lambda a=first, b=second: _swap(a, b)),
            (lambda a=first, b=second: _swap(a, b)),
        )


def _relink(link: str, target: str) -> None:
    """``ln -sfn target link``: a new link renamed over the old one."""
    os.symlink(target, link + ".new")
    os.replace(link + ".new", link)


def _swap(a: str, b: str) -> None:
    """``mv a tmp; mv b a; mv tmp b``."""
    os.rename(a, a + ".tmp")
    os.rename(b, a)
    os.rename(a + ".tmp", b)


def main(root: str, blind: bool = False, only: str = "") -> None:
    work = os.path.join(root, "work")
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    real = compiler.system_include_dirs()
    toolkit = os.path.join(root, "toolkit")  # a copy of the cudart headers lazykern uses: ours to mutate
    fp16 = next(os.path.join(d, "cuda_fp16.h") for d in real if os.path.isfile(os.path.join(d, "cuda_fp16.h")))
    with open(fp16, "rb") as fh:
        _write(os.path.join(toolkit, "cuda_fp16.h"), fh.read())
    compiler.system_include_dirs = lambda: (toolkit, *(d for d in real if d != os.path.dirname(fp16)))  # type: ignore[assignment]
    store = os.path.join(root, "store")
    survivors: list[str] = []
    kinds: collections.Counter[str] = collections.Counter()
    cases = corpus(root, toolkit)
    if blind:
        _manifest.verify = lambda manifest: (None, None)  # type: ignore[assignment]
        cases = cases[:1]
    if only:
        cases = [c for c in cases if c.name in only.split(",")]
    for case in cases:
        for kind, options, apply, undo in _mutants(case):
            step_past()  # past the clock tick of the last write: the warm entry is persisted
            lookup(case, store, case.options)  # the store holds the entry of the unmutated inputs
            apply()
            try:
                served, compiled = lookup(case, store, options)
                now = fresh(case, options)
                kinds[kind] += 1
                if not compiled and served not in now:
                    survivors.append(f"{case.name}: {kind} {options}")
            finally:
                undo()
    print(json.dumps({"mutations": sum(kinds.values()), "survivors": survivors, "by_kind": kinds}))


if __name__ == "__main__":
    chosen = next((a.split("=", 1)[1] for a in sys.argv[2:] if a.startswith("--cases=")), "")
    main(sys.argv[1], "--blind" in sys.argv[2:], chosen)
