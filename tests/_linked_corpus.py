"""Linked CUDA C++ of ``@lazy_kernel``s and one-input mutations of what NVRTC reads for them (issue 35).

Each case is a ``.cu`` file (linked through ``cuda.declare_device``) whose code depends on a header
reached in a way only the preprocessor's view shows: an include spelled across a splice, a
``__has_include`` spelled across a splice, through an alias, between comments, a header found on
numba-cuda's extra search path, a header included by a header, a header holding a ``#line`` that
names another existing file, an include through an object-like macro. Mutations edit a header's bytes or
make a header appear in an earlier search place. A probe whose operand a macro supplies must keep
its kernel in memory.

:func:`main` runs in a fresh process (``python -m tests._linked_corpus TREE STORE``, with the tree
as working directory and ``NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS=TREE/incA:TREE/incB``): per case it
asks the shared store (served or compiled), compiles again in memory, and prints whether the store
compiled, whether the entry is memory-only, and the sha256 of both binaries.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

ARCH = "sm_80"
_FN = 'extern "C" __device__ int {fn}(float *r, float x) {{ *r = ({value}) * x; return 0; }}\n'

# case -> (files relative to the tree, the value the function returns times x)
CASES: dict[str, tuple[dict[str, str], str]] = {
    "splice_include": ({"work/s.cu": '#inc\\\nlude "s.h"\n', "work/s.h": "#define S_VAL 2.0f\n"}, "S_VAL"),
    "probe_splice": (
        {"work/p.cu": '#if __has_inc\\\nlude("p.h")\n#include "p.h"\n#else\n#define P_VAL 1.0f\n#endif\n'},
        "P_VAL",
    ),
    "probe_alias_comment": (
        {
            "work/q.cu": (
                "#define HI __has_\\\ninclude\n#if HI /* a comment */ ( <q.h> ) // and one after\n"
                "#include <q.h>\n#else\n#define Q_VAL 1.0f\n#endif\n"
            )
        },
        "Q_VAL",
    ),
    "probe_comment_splice": (
        {"work/r.cu": '#if __has_include /* c */ \\\n ( "r.h" )\n#include "r.h"\n#else\n#define R_VAL 1.0f\n#endif\n'},
        "R_VAL",
    ),
    "search_path": (
        {"work/t.cu": "#include <t.h>\n", "incB/t.h": "#include <t2.h>\n", "incB/t2.h": "#define T_VAL 4.0f\n"},
        "T_VAL",
    ),
    "line_name": (
        {
            "work/l.cu": '#include /* a comment */ "l.h"\n',
            "work/l.h": '#line 1 "decoy.h"\n#define L_VAL 2.5f\n',
            "work/decoy.h": "#define L_VAL 9.0f\n",
        },
        "L_VAL",
    ),
    "macro_include": ({"work/n.cu": "#define NH <n.h>\n#include NH\n", "incB/n.h": "#define N_VAL 3.5f\n"}, "N_VAL"),
    "macro_probe": (
        {
            "work/m.cu": '#define NAME "m.h"\n#if __has_include(NAME)\n#include NAME\n'
            "#else\n#define M_VAL 1.0f\n#endif\n"
        },
        "M_VAL",
    ),
}

# (label, path, text or None to delete): each applied alone to a fresh copy of the tree
MUTATIONS: list[tuple[str, str, str]] = [
    ("header edited behind a spliced include", "work/s.h", "#define S_VAL 3.0f\n"),
    ("probed header appears (splice in the keyword)", "work/p.h", "#define P_VAL 5.0f\n"),
    ("probed header appears (alias, comments)", "incA/q.h", "#define Q_VAL 6.0f\n"),
    ("probed header appears (comments, splice before the parenthesis)", "work/r.h", "#define R_VAL 7.0f\n"),
    ("header appears earlier on the search path", "incA/t.h", "#define T_VAL 8.0f\n"),
    ("nested header edited", "incB/t2.h", "#define T_VAL 9.0f\n"),
    ("nested header appears earlier on the search path", "incA/t2.h", "#define T_VAL 10.0f\n"),
    (
        "header holding a #line edited (its #line names another file)",
        "work/l.h",
        '#line 1 "decoy.h"\n#define L_VAL 12.0f\n',
    ),
    ("header of an object-like macro include appears earlier", "incA/n.h", "#define N_VAL 13.0f\n"),
    ("macro-probed header appears", "work/m.h", "#define M_VAL 11.0f\n"),
]


def write(tree: Path, mutation: int) -> str:
    """Write every case into ``tree`` with mutation number ``mutation`` applied (0: none); its label."""
    for d in ("work", "incA", "incB"):
        (tree / d).mkdir(parents=True, exist_ok=True)
    for case, (files, value) in CASES.items():
        for rel, text in files.items():
            if rel.endswith(".cu"):
                text += _FN.format(fn=f"f_{case}", value=value)
            (tree / rel).write_text(text)
    if mutation == 0:
        return ""
    label, rel, text = MUTATIONS[mutation - 1]
    (tree / rel).write_text(text)
    return label


def main(tree: str, store: str) -> None:
    from numba import cuda, float32

    from lazykern import KernelCache, lazy_kernel
    from tests._numba_corpus import _same_names

    shared, fresh = KernelCache(store), KernelCache(enabled=False)
    _same_names()
    report = {}
    for case, (files, _value) in CASES.items():
        cu = next(os.path.join(tree, rel) for rel in files if rel.endswith(".cu"))
        # module-level kernels of distinct names (as _numba_corpus: one function per qualified name)
        globals()[f"f_{case}"] = cuda.declare_device(f"f_{case}", "float32(float32)", link=[cu])
        exec(f"def kern_{case}(x):\n    x[0] = f_{case}(x[0])\n", globals())
        kern = globals()[f"kern_{case}"]
        types = (float32[::1],)
        served, compiled = lazy_kernel(kern, cache=shared)._entry(types, ARCH, relax=False)
        again, _ = lazy_kernel(kern, cache=fresh)._entry(types, ARCH, relax=False)
        report[case] = {
            "compiled": compiled,
            "memory_only": served.meta.get("memory_only", ""),
            "served": hashlib.sha256(served.code).hexdigest(),
            "fresh": hashlib.sha256(again.code).hexdigest(),
        }
    print("JSON:" + json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
