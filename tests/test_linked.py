"""The headers a ``@lazy_kernel``'s linked ``.cu`` files read (lazykern._numba.linked, issues 13 and 35).

numba-cuda compiles linked CUDA C++ with its own NVRTC call (no trace), so their manifest comes from
the preprocessor model alone (``_manifest.record`` with no trace events: ``_include_graph`` over
``_pp``'s tokens). It is checked against NVRTC itself: each case builds a tree of headers that each
announce their own path, compiles with NVRTC, and requires the header NVRTC chose to be in the
manifest, and the manifest to change when that header changes.
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazykern import KernelFamily
from lazykern.compile import _manifest
from lazykern.compile.compiler import compile_source, system_include_dirs
from lazykern.errors import CompileError

from ._file_clock import step_past

EXAMPLES = int(os.environ.get("LAZYKERN_FUZZ_EXAMPLES", "6"))
KERNEL = 'extern "C" __global__ void k(int *a) { *a = 1; }\n'


def _announce(path, tag: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(f'#pragma message("WHICH=" "{tag}")\n')


def _nvrtc_choice(source: str, options: list[str]) -> set[str]:
    """The tags of the headers NVRTC actually read, from its own log."""
    try:
        log = compile_source(source + KERNEL, name="k", arch="sm_80", options=options).log
    except CompileError as exc:
        log = exc.log or ""
    return set(re.findall(r"WHICH=([^\s\"]+)", log))


def _record(source: str, options: list[str]) -> tuple[dict | None, str]:
    from lazykern.compile.compiler import parse_options

    parsed = parse_options(options)
    dirs = [*parsed.get("include_path", []), *system_include_dirs()]
    # A compile "started" later than every header here: the trees are written just before.
    later = time.time_ns() + 10**12
    return _manifest.record(
        (),
        source=source,
        main_dir="",
        search_dirs=dirs,
        started=later,
        pinned_dirs=system_include_dirs(),
        defines=parsed.get("define_macro", []),
    )


def _key(source: str, options: list[str]) -> str:
    """What a load compares: each header's path and digest, the empty places, the probes' finds."""
    manifest, why = _record(source + KERNEL, options)
    if manifest is None:
        return f"memory only: {why}"
    files = sorted(f[:2] for f in manifest["files"])
    empty = [*manifest["absent"], *(os.path.join(d, n) for d, _, names in manifest["absent_dirs"] for n in names)]
    return json.dumps([files, sorted(empty), manifest["present"]])


def _paths(source: str, options: list[str]) -> set[str]:
    manifest, why = _record(source, options)
    assert manifest is not None, why
    return {f[0] for f in manifest["files"]}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def _edit_changes_key(source: str, options: list[str], header) -> None:
    before = _key(source, options)
    assert _key(source, options) == before
    with open(header, "a") as fh:
        fh.write("// edited\n")
    assert _key(source, options) != before, header


def test_absolute_include(tree):
    _announce(tree / "abs" / "a.h", "abs")
    src = f'#include "{tree}/abs/a.h"\n'
    assert _nvrtc_choice(src, []) == {"abs"}
    _edit_changes_key(src, [], tree / "abs" / "a.h")


def test_header_in_a_symlinked_subdirectory_of_an_include_dir(tree):
    _announce(tree / "real" / "sub" / "s.h", "s")
    (tree / "inc").mkdir()
    os.symlink(tree / "real" / "sub", tree / "inc" / "link")
    src, opts = '#include "link/s.h"\n', [f"-I{tree}/inc"]
    assert _nvrtc_choice(src, opts) == {"s"}
    _edit_changes_key(src, opts, tree / "real" / "sub" / "s.h")


def test_header_found_in_the_working_directory(tree):
    _announce(tree / "work" / "w.h", "cwd")
    _announce(tree / "inc" / "w.h", "inc")
    src, opts = '#include "w.h"\n', [f"-I{tree}/inc"]
    assert _nvrtc_choice(src, opts) == {"cwd"}
    _edit_changes_key(src, opts, tree / "work" / "w.h")
    os.remove(tree / "work" / "w.h")  # now the -I one is read: another key
    assert _nvrtc_choice(src, opts) == {"inc"}
    _edit_changes_key(src, opts, tree / "inc" / "w.h")


def test_nested_includes_relative_to_the_including_file(tree):
    inc = tree / "inc"
    _announce(inc / "deep" / "leaf.h", "leaf")
    (inc / "top.h").write_text('#include "deep/mid.h"\n')
    (inc / "deep" / "mid.h").write_text('#include "leaf.h"\n#include "../side.h"\n')
    _announce(inc / "side.h", "side")
    src, opts = "#include <top.h>\n", [f"-I{inc}"]
    assert _nvrtc_choice(src, opts) == {"leaf", "side"}
    for header in ("top.h", "deep/mid.h", "deep/leaf.h", "side.h"):
        _edit_changes_key(src, opts, inc / header)


def test_a_new_header_that_shadows_another_changes_the_key(tree):
    _announce(tree / "b" / "x.h", "b")
    src, opts = "#include <x.h>\n", [f"-I{tree}/a", f"-I{tree}/b"]
    before = _key(src, opts)
    _announce(tree / "a" / "x.h", "a")
    assert _nvrtc_choice(src, opts) == {"a"}
    assert _key(src, opts) != before


def test_has_include_and_macro_includes(tree):
    src = '#if __has_include("maybe.h")\n#include "maybe.h"\n#endif\n'
    before = _key(src, [])
    _announce(tree / "work" / "maybe.h", "maybe")
    assert _key(src, []) != before
    _announce(tree / "inc" / "m.h", "m")
    src, opts = "#define HDR <m.h>\n#include HDR\n", [f"-I{tree}/inc"]
    assert _nvrtc_choice(src, opts) == {"m"}
    _edit_changes_key(src, opts, tree / "inc" / "m.h")
    src, opts = "#include HDR2\n", [f"-I{tree}/inc", '-DHDR2="m.h"']
    assert _nvrtc_choice(src, opts) == {"m"}
    _edit_changes_key(src, opts, tree / "inc" / "m.h")


def test_an_include_spelled_across_a_splice_is_followed_in_a_file_that_says_include_nowhere(tree):
    _announce(tree / "inc" / "m.h", "m")
    src, opts = "#inc\\\nlude <m.h>\n", [f"-I{tree}/inc"]
    assert _nvrtc_choice(src, opts) == {"m"}
    _edit_changes_key(src, opts, tree / "inc" / "m.h")


def test_an_include_that_cannot_be_expanded_keeps_the_kernel_in_memory(tree):
    _announce(tree / "inc" / "m.h", "m")
    src, opts = "#define PICK(x) <x>\n#include PICK(m.h)\n", [f"-I{tree}/inc"]
    assert _nvrtc_choice(src, opts) == {"m"}
    manifest, why = _record(src, opts)
    assert manifest is None and "PICK" in why, why  # the construct is named


def test_include_next_keys_every_match(tree):
    _announce(tree / "b" / "q.h", "b")
    (tree / "a").mkdir()
    (tree / "a" / "q.h").write_text("#include_next <q.h>\n")
    src, opts = "#include <q.h>\n", [f"-I{tree}/a", f"-I{tree}/b"]
    assert _nvrtc_choice(src, opts) == {"b"}
    _edit_changes_key(src, opts, tree / "b" / "q.h")


# -- the resolver agrees with NVRTC on random trees ------------------------------------------
_PLACES = ("work", "inc1", "inc2", "real")


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    spots=st.lists(st.sampled_from(_PLACES), min_size=1, max_size=4, unique=True),
    angle=st.booleans(),
    nested=st.booleans(),
)
def test_manifest_holds_what_nvrtc_reads_on_random_trees(tmp_path_factory, spots, angle, nested):
    root = tmp_path_factory.mktemp("tree")
    old = os.getcwd()
    (root / "work").mkdir()
    os.chdir(root / "work")
    try:
        (root / "inc2").mkdir()
        os.symlink(root / "real", root / "inc2" / "real")  # a symlinked subdirectory
        for place in spots:
            rel = "real/h.h" if place == "real" else f"{place}/h.h"
            _announce(root / rel, place)
        name = "h.h"
        if nested:
            (root / "inc1").mkdir(exist_ok=True)
            (root / "inc1" / "outer.h").write_text(f"#include {'<h.h>' if angle else chr(34) + 'h.h' + chr(34)}\n")
            src = '#include "outer.h"\n'
        else:
            src = f"#include <{name}>\n" if angle else f'#include "{name}"\n'
        opts = [f"-I{root}/inc1", f"-I{root}/inc2", f"-I{root}/inc2/real"]
        chosen = _nvrtc_choice(src, opts)
        paths = _paths(src, opts)
        for tag in chosen:
            expected = root / ("real" if tag == "real" else tag) / "h.h"
            assert any(os.path.samefile(p, expected) for p in paths if os.path.exists(p)), (tag, paths)
            _edit_changes_key(src, opts, expected)
    finally:
        os.chdir(old)


# -- special files never hang or flood key computation ---------------------------------------
def _finishes(fn, seconds: float = 20.0):
    result: list = []
    t = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert result, "key computation hung"
    return result[0]


@pytest.mark.parametrize(
    ("include_dir", "names"),
    [
        ("/dev", ["zero", "stdin", "null", "urandom", "fd/0"]),
        ("/proc/self", ["environ", "mem", "fd/0", "maps"]),
        ("/proc", ["kcore", "self/status"]),
    ],
)
def test_special_include_dirs_do_not_hang(include_dir, names):
    src = "".join(f'#include "{n}"\n' for n in names) + "#include <cuda/std/limits>\n"
    _finishes(lambda: _key(src, [f"-I{include_dir}"]))


def test_fifo_in_an_include_dir_does_not_hang(tree):
    (tree / "inc").mkdir()
    os.mkfifo(tree / "inc" / "pipe.h")
    _announce(tree / "inc2" / "pipe.h", "after")
    src = '#include "pipe.h"\n'
    key = _finishes(lambda: _key(src, [f"-I{tree}/inc", f"-I{tree}/inc2"]))
    assert key == _key(src, [f"-I{tree}/inc", f"-I{tree}/inc2"])


def test_a_huge_include_dir_is_not_walked(tree):
    # The old key walked every -I directory; "/" would take minutes. Now only named headers are opened.
    start = time.perf_counter()
    _key("#include <cuda/std/limits>\n", ["-I/", "-I/usr", "-I/proc"])
    assert time.perf_counter() - start < 1.0


def test_key_computation_is_fast_with_toolchain_headers():
    src = "#include <cuda/std/limits>\n#include <cuda/std/cstdint>\n#include <cuda_fp16.h>\n"
    _key(src, [])
    start = time.perf_counter()
    for _ in range(20):
        _key(src, [])
    per_key = (time.perf_counter() - start) / 20
    # CCCL is pinned by the toolchain, not read file by file. A record (taken once per compile, never
    # on a warm hit) also walks every directory on every path it checks (ccache's rule): ~3 ms alone.
    assert per_key < 0.015, per_key


def test_a_family_recompiles_after_an_included_header_changes(tree, cache):
    header = tree / "abs" / "val.h"
    header.parent.mkdir()
    header.write_text("#define VAL 1\n")
    code = f'#include "{header}"\nextern "C" __global__ void setv(int *a) {{ *a = VAL; }}\n'
    first = KernelFamily("hdr", "", cache=cache)
    first.add("setv", code)
    k1 = first.get("setv", "sm_80")
    header.write_text("#define VAL 2\n")
    second = KernelFamily("hdr", "", cache=cache)  # as a second process would
    second.add("setv", code)
    k2 = second.get("setv", "sm_80")
    assert second.compile_calls == 1 and k2.code != k1.code


def test_linked_cuda_source_headers_are_checked_on_load_not_lexed_for_the_key(tree, cache, monkeypatch):
    from numba import cuda, float32

    from lazykern import KernelCache, lazy_kernel
    from lazykern.compile import _pp

    header = tree / "work" / "quad.h"
    header.write_text("#define FACTOR 4.25f\n")
    os.utime(header, ns=(1, 1))  # written before the compile started
    cu = tree / "quad.cu"
    cu.write_text('#include "quad.h"\nextern "C" __device__ int quad(float *r, float x) { *r = FACTOR * x; return 0; }')
    quad = cuda.declare_device("quad", "float32(float32)", link=[str(cu)])
    step_past()  # files whose ctime falls within a clock tick of the compile's start are never stored

    def kern(x):
        x[0] = quad(x[0])

    types = (float32[::1],)
    first, compiled = lazy_kernel(kern, cache=cache)._entry(types, "sm_80", relax=False)
    found = [f[0] for f in first.meta["manifest"]["linked"][0][1]["files"]]
    assert compiled and found == ["quad.h"]  # in the working directory, as NVRTC finds it
    lexed = []
    with monkeypatch.context() as m:
        m.setattr(_pp, "scan", lambda *a: lexed.append(a) or pytest.fail("a warm lookup lexed a source"))
        again, compiled = lazy_kernel(kern, cache=KernelCache(cache.directory))._entry(types, "sm_80", relax=False)
    assert not compiled and again.code == first.code and lexed == []
    header.write_text("#define FACTOR 5.25f\n")
    os.utime(header, ns=(2, 2))
    third, compiled = lazy_kernel(kern, cache=KernelCache(cache.directory))._entry(types, "sm_80", relax=False)
    assert compiled and struct.pack("<f", 4.25) in first.code and struct.pack("<f", 5.25) in third.code


# -- mutations of what linked CUDA C++ reads, each asked of the store in a fresh process ------------
def _corpus_round(tmp_path, mutation: int) -> tuple[str, dict]:
    import shutil
    import subprocess
    import sys

    from tests import _linked_corpus as corpus

    tree = tmp_path / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    label = corpus.write(tree, mutation)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {
        **os.environ,
        "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS": f"{tree}/incA:{tree}/incB",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "tests._linked_corpus", str(tree), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree / "work",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in reversed(proc.stdout.splitlines()) if x.startswith("JSON:"))
    return label, json.loads(line[5:])


@pytest.mark.slow
def test_every_linked_header_mutation_recompiles_or_serves_what_compiling_now_gives(tmp_path):
    from tests import _linked_corpus as corpus

    _, clean = _corpus_round(tmp_path, 0)
    assert not clean["macro_probe"]["compiled"] or clean["macro_probe"]["memory_only"]
    survivors, effective = [], 0
    for i in range(1, len(corpus.MUTATIONS) + 1):
        label, report = _corpus_round(tmp_path, i)
        effective += any(r["fresh"] != clean[case]["fresh"] for case, r in report.items())
        for case, r in report.items():
            if not r["compiled"] and r["served"] != r["fresh"]:
                survivors.append(f"{label}: {case}")
        # a probe whose operand a macro supplies is never stored: always compiled, named in the reason
        assert report["macro_probe"]["compiled"] and "__has_include" in report["macro_probe"]["memory_only"]
    assert effective == len(corpus.MUTATIONS), "a mutation changed no binary: it tests nothing"
    assert survivors == []


_WARM_CHILD = r"""
import json, os, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
from numba import cuda, float32
from lazykern import KernelCache, lazy_kernel
from lazykern.compile import _pp
quad = cuda.declare_device("quad", "float32(float32)", link=[sys.argv[2]])
def kern(x):
    x[0] = quad(x[0])
opened.clear()
entry, compiled = lazy_kernel(kern, cache=KernelCache(sys.argv[1]))._entry((float32[::1],), "sm_80", relax=False)
print(json.dumps({"compiled": compiled, "headers_opened": [p for p in opened if os.path.basename(p) in ("a.h", "b.h")],
                  "lexed": _pp._lexer.cache_info().currsize}))
"""


def test_a_fresh_process_warm_hit_opens_no_linked_header_and_lexes_nothing(tree):
    import subprocess
    import sys

    (tree / "work" / "a.h").write_text('#include "b.h"\n#define A 1.0f\n')
    (tree / "work" / "b.h").write_text("#define B 2.0f\n")
    for h in ("a.h", "b.h"):
        os.utime(tree / "work" / h, ns=(1, 1))
    cu = tree / "q.cu"
    cu.write_text('#include "a.h"\nextern "C" __device__ int quad(float *r, float x) { *r = (A + B) * x; return 0; }\n')
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [sys.executable, "-c", _WARM_CHILD, str(tree / "store"), str(cu)]
    runs = [
        json.loads(
            subprocess.run(
                args, check=True, env=env, cwd=tree / "work", capture_output=True, text=True, timeout=300
            ).stdout.splitlines()[-1]
        )
        for _ in range(2)
    ]
    assert runs[0]["compiled"] and runs[0]["lexed"] == 1
    assert runs[1] == {"compiled": False, "headers_opened": [], "lexed": 0}, runs[1]


def test_a_linked_file_edited_in_the_process_compiles_as_it_is_now(tree):
    from numba import cuda, float32

    from lazykern import KernelCache, lazy_kernel

    cu = tree / "e.cu"
    cu.write_text('extern "C" __device__ int fe(float *r, float x) { *r = 2.75f * x; return 0; }\n')
    fe = cuda.declare_device("fe", "float32(float32)", link=[str(cu)])

    def kern(x):
        x[0] = fe(x[0])

    types = (float32[::1],)
    first, _ = lazy_kernel(kern, cache=KernelCache(enabled=False))._entry(types, "sm_80", relax=False)
    cu.write_text('extern "C" __device__ int fe(float *r, float x) { *r = 3.25f * x; return 0; }\n')
    second, _ = lazy_kernel(kern, cache=KernelCache(enabled=False))._entry(types, "sm_80", relax=False)
    # the constant is in the code as an immediate: numba-cuda's per-process read of the file is not reused
    assert struct.pack("<f", 2.75) in first.code and struct.pack("<f", 3.25) in second.code


def test_a_linked_file_written_during_its_compile_is_not_stored(tree):
    from numba import cuda, float32

    from lazykern import KernelCache, lazy_kernel

    cu = tree / "w.cu"
    cu.write_text('extern "C" __device__ int fw(float *r, float x) { *r = 2.75f * x; return 0; }\n')
    later = time.time_ns() + 10**12
    os.utime(cu, ns=(later, later))  # as a file written after the compile started
    fw = cuda.declare_device("fw", "float32(float32)", link=[str(cu)])

    def kern(x):
        x[0] = fw(x[0])

    entry, compiled = lazy_kernel(kern, cache=KernelCache(tree / "store"))._entry((float32[::1],), "sm_80")
    assert compiled and "w.cu' changed while it was compiled" in entry.meta["memory_only"]


# -- issue 43: a linked .cu's record only adds; the compile window holds no second look ----------------
def _linked_places(source: str, inc: str) -> set[str]:
    """Every place the record of a linked ``.cu`` names (files, empty places, probe finds)."""
    from lazykern._numba import linked

    dirs, pinned = linked.search_dirs()
    manifest, why = _manifest.record(
        (), source=source, main_dir="", search_dirs=[*dirs, inc], started=time.time_ns() + 10**12,
        pinned_dirs=pinned, follow_pinned=True,
    )  # fmt: skip
    assert manifest is not None, why
    out = {f[0] for f in manifest["files"]} | set(manifest["absent"]) | set(manifest["present"])
    return out | {os.path.join(d, n) for d, _, names in manifest["absent_dirs"] for n in names}


def test_a_linked_sources_record_keeps_what_the_model_hid(tree):
    """Round 7: a line splice in a raw string, a trigraph under c++14 and CCCL's probe of the search
    path cannot hide a lookup from a linked ``.cu``'s record: the scan that only adds finds them."""
    inc = str(tree / "inc")
    os.makedirs(inc)
    raw = 'auto s = R"(a)\\\n" /*)";\n#include <b.h>\n// */ ;\n'
    trigraph = 'auto q = "??/" /* ";\n#if __has_include(<flag.h>)\n#endif\nauto e = "*/";\n'
    assert f"{inc}/b.h" in _linked_places(raw, inc)
    assert f"{inc}/flag.h" in _linked_places(trigraph, inc)
    assert f"{inc}/version" in _linked_places("#include <cuda/std/limits>\n", inc)


@pytest.mark.parametrize("kind", ["swap", "retarget"])
def test_a_linked_header_changed_before_its_record_keeps_the_kernel_in_memory(tree, cache, monkeypatch, kind):
    """``mv`` of the header's directory or ``ln -sfn`` of the header between numba-cuda's compile and
    the record: the record would read other bytes than NVRTC did. The kernel stays in memory, with
    the reason, and the next process compiles what is there now."""
    from numba import float32

    from lazykern import lazy_kernel

    (tree / "targets").mkdir()
    (tree / "targets" / "a.h").write_text("#define FACTOR 4.25f\n")
    (tree / "targets" / "b.h").write_text("#define FACTOR 5.25f\n")
    (tree / "work" / "hdr").mkdir()
    os.symlink(tree / "targets" / "a.h", tree / "work" / "hdr" / "quad.h")
    (tree / "other").mkdir()
    (tree / "other" / "quad.h").write_text("#define FACTOR 5.25f\n")
    kern = _quad_kernel(tree, "hdr/quad.h")
    real = _manifest.record

    def change_then_record(*args, **kwargs):
        if kind == "swap":
            os.rename(tree / "work" / "hdr", tree / "hdr_old")
            os.rename(tree / "other", tree / "work" / "hdr")
        else:
            os.symlink(tree / "targets" / "b.h", tree / "work" / "hdr" / "new.h")
            os.replace(tree / "work" / "hdr" / "new.h", tree / "work" / "hdr" / "quad.h")
        return real(*args, **kwargs)

    monkeypatch.setattr(_manifest, "record", change_then_record)
    first, compiled = lazy_kernel(kern, cache=cache)._entry((float32[::1],), "sm_80", relax=False)
    monkeypatch.setattr(_manifest, "record", real)
    assert compiled and "changed while it was compiled" in first.meta.get("memory_only", ""), first.meta
    step_past()
    again, compiled = lazy_kernel(kern, cache=cache)._entry((float32[::1],), "sm_80", relax=False)
    assert compiled and struct.pack("<f", 5.25) in again.code  # what is there now, never the old binary


def _quad_kernel(tree, header: str):
    """A kernel calling ``quad``, linked from ``tree/quad.cu``, which includes ``header`` (FACTOR)."""
    from numba import cuda

    cu = tree / "quad.cu"
    cu.write_text(
        f'#include "{header}"\nextern "C" __device__ int quad(float *r, float x) {{ *r = FACTOR * x; return 0; }}'
    )
    quad = cuda.declare_device("quad", "float32(float32)", link=[str(cu)])
    step_past()

    def kern(x):
        x[0] = quad(x[0])

    return kern


def test_a_file_added_above_the_working_directory_during_a_linked_compile_is_let_be(tree, cache, monkeypatch):
    """Anyone may add a file beside the directories above a linked compile's working directory
    (another pytest's run in ``/tmp/pytest-of-root``): the entry is stored, and served to the next
    process. Only their replacement (the swap above) keeps a kernel in memory."""
    from numba import float32

    from lazykern import KernelCache, lazy_kernel

    (tree / "work" / "quad.h").write_text("#define FACTOR 4.25f\n")
    kern = _quad_kernel(tree, "quad.h")
    real = _manifest.record

    def add_then_record(*args, **kwargs):
        (tree / "neighbour").write_text("another run's file\n")  # tree/ is above the working directory
        (tree.parent / f"{tree.name}-sibling").mkdir()  # and so is its parent
        return real(*args, **kwargs)

    monkeypatch.setattr(_manifest, "record", add_then_record)
    first, compiled = lazy_kernel(kern, cache=cache)._entry((float32[::1],), "sm_80", relax=False)
    monkeypatch.setattr(_manifest, "record", real)
    assert compiled and "memory_only" not in first.meta, first.meta
    again, compiled = lazy_kernel(kern, cache=KernelCache(cache.directory))._entry(
        (float32[::1],), "sm_80", relax=False
    )
    assert not compiled and again.code == first.code
