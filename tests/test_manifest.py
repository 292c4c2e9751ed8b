"""A C++ kernel's entry is served only while the headers NVRTC read still read the same (issue 25, items 5-6).

Each test compiles through a ``KernelFamily`` (NVRTC reports the headers it read), then
changes one thing on disk and asks a *second* family, as another process would, whether
the entry is served (``compile_calls == 0``) or compiled again. Served binaries are
compared with a fresh compile where it matters.
"""

from __future__ import annotations

import os

import pytest

from lazykern import KernelCache, KernelFamily
from lazykern.compile import _manifest, compiler
from lazykern.store import _later

from ._file_clock import settled, step_past

KERNEL = 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'


@pytest.fixture
def tree(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    _manifest._digests.clear()
    settled(work)  # a probe of work/ in the mkdir's clock tick would (rightly) not be stored
    return tmp_path


def _write(path, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)
    step_past()  # a header written in the compile's clock tick is not trusted (it may be changing)


def _remove(path) -> None:
    os.remove(path)
    step_past()  # its directory changed: a compile in the same clock tick is not stored


def _get(cache: KernelCache, source: str, options: list[str]) -> tuple[KernelFamily, bytes]:
    fam = KernelFamily("hdr", "", options=options, cache=cache)
    fam.add("k", source)
    code = fam.get("k", "sm_80").code
    _later.wait_all()  # stored now (it waits for the traced pass): the tests below change what it recorded
    return fam, code


def _served(cache, source, options) -> bool:
    fam, code = _get(cache, source, options)
    fresh = compiler.compile_source(fam.source.translation_unit("k"), name="k", arch="sm_80", options=options)
    assert code == fresh.code  # served or recompiled, the binary is what compiling now gives
    return fam.compile_calls == 0


def _check(cache, source, options, change, *, served_after: bool) -> None:
    _get(cache, source, options)
    assert _served(cache, source, options), "a warm lookup with nothing changed must be served"
    change()
    assert _served(cache, source, options) is served_after
    assert _served(cache, source, options), "the recompile replaced the entry: served again"


def test_edited_header_recompiles(tree, cache):
    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    src = "#include <v.h>\n" + KERNEL
    _check(cache, src, [f"-I{tree}/inc"], lambda: _write(tree / "inc" / "v.h", "#define VAL 2\n"), served_after=False)


def test_touched_header_with_same_content_is_served_after_one_rehash(tree, cache, monkeypatch):
    header = tree / "inc" / "v.h"
    _write(header, "#define VAL 1\n")
    src = "#include <v.h>\n" + KERNEL
    _get(cache, src, [f"-I{tree}/inc"])
    _write(header, "#define VAL 1\n")  # same bytes, new mtime and ctime
    reads = []
    real = _manifest._read
    monkeypatch.setattr(_manifest, "_read", lambda p: reads.append(p) or real(p))
    step_past()  # a header touched in the lookup's own clock tick is not trusted yet
    for _ in range(3):
        fam, _ = _get(cache, src, [f"-I{tree}/inc"])
        assert fam.compile_calls == 0
        _manifest._digests.clear()  # as a fresh process: the entry's refreshed stat vouches for it
    assert reads == [str(header)], reads  # hashed once; the memo answers the second lookup


def test_macro_include_follows_d_u_and_other_headers(tree, cache):
    _write(tree / "inc" / "a.h", "#define VAL 1\n")
    _write(tree / "inc" / "b.h", "#define VAL 2\n")
    _write(tree / "inc" / "pick.h", "#define HDR <a.h>\n")
    # -D picks the header: each option is its own key, each served with its own header
    src = "#include HDR\n" + KERNEL
    for hdr, val in (("a.h", 1), ("b.h", 2)):
        _get(cache, src, [f"-I{tree}/inc", f"-DHDR=<{hdr}>"])
        assert _served(cache, src, [f"-I{tree}/inc", f"-DHDR=<{hdr}>"]), val
    # the macro comes from another header, redefined there: recompiled
    src = '#include "pick.h"\n#include HDR\n' + KERNEL
    opts = [f"-I{tree}/inc"]
    _check(cache, src, opts, lambda: _write(tree / "inc" / "pick.h", "#define HDR <b.h>\n"), served_after=False)
    # defined in the source, undefined by -U, then defined by a header that is edited
    src = '#define HDR <a.h>\n#undef HDR\n#include "pick.h"\n#include HDR\n' + KERNEL
    _check(cache, src, opts, lambda: _write(tree / "inc" / "pick.h", "#define HDR <a.h>\n"), served_after=False)
    src = "#ifndef HDR\n#define HDR <a.h>\n#endif\n#include HDR\n" + KERNEL
    _get(cache, src, [*opts, "-UHDR"])
    _check(cache, src, [*opts, "-UHDR"], lambda: _write(tree / "inc" / "a.h", "#define VAL 3\n"), served_after=False)


def test_digraph_include(tree, cache):
    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    src = "%:include <v.h>\n" + KERNEL
    _check(cache, src, [f"-I{tree}/inc"], lambda: _write(tree / "inc" / "v.h", "#define VAL 5\n"), served_after=False)


def test_nested_relative_includes_in_subdirectories(tree, cache):
    inc = tree / "inc"
    _write(inc / "top.h", '#include "deep/mid.h"\n')
    _write(inc / "deep" / "mid.h", '#include "leaf.h"\n#include "../side.h"\n#define VAL (LEAF + SIDE)\n')
    _write(inc / "deep" / "leaf.h", "#define LEAF 1\n")
    _write(inc / "side.h", "#define SIDE 1\n")
    src, opts = "#include <top.h>\n" + KERNEL, [f"-I{inc}"]
    for header in ("deep/leaf.h", "side.h", "deep/mid.h"):
        text = (inc / header).read_text()
        _check(cache, src, opts, lambda h=header, t=text: _write(inc / h, t + "// edited\n"), served_after=False)
    # a file of the same name appearing next to the includer shadows the -I one: recompiled
    _write(inc / "deep" / "side.h", "#define SIDE 7\n")  # not searched for "../side.h": served
    assert _served(cache, src, opts)


def test_header_appearing_in_an_earlier_include_dir(tree, cache):
    _write(tree / "b" / "v.h", "#define VAL 1\n")
    src, opts = "#include <v.h>\n" + KERNEL, [f"-I{tree}/a", f"-I{tree}/b"]
    _check(cache, src, opts, lambda: _write(tree / "a" / "v.h", "#define VAL 2\n"), served_after=False)
    # a quoted include searches the working directory before every -I directory
    src = '#include "w.h"\n' + KERNEL.replace("VAL", "W")
    _write(tree / "b" / "w.h", "#define W 1\n")
    _check(cache, src, opts, lambda: _write(tree / "work" / "w.h", "#define W 2\n"), served_after=False)


def test_has_include_probe_that_starts_to_find_a_file(tree, cache):
    src = '#if __has_include("opt.h")\n#include "opt.h"\n#else\n#define VAL 1\n#endif\n' + KERNEL
    _check(cache, src, [], lambda: _write(tree / "work" / "opt.h", "#define VAL 2\n"), served_after=False)
    _check(cache, src, [], lambda: _remove(tree / "work" / "opt.h"), served_after=False)


def test_toolkit_headers_are_verified_like_any_other(tree, cache, monkeypatch):
    """A CUDA wheel upgrade, simulated: the toolkit include directory is a copy we may edit.

    ``system_include_dirs`` is pointed at a copy of the real cudart directory holding
    ``cuda_fp16.h`` (which includes nothing else under NVRTC), CCCL stays the real one.
    This proves headers NVRTC finds in the toolkit directories are recorded and verified;
    it does not edit the installed toolkit.
    """
    real = compiler.system_include_dirs()
    fp16 = next(os.path.join(d, "cuda_fp16.h") for d in real if os.path.isfile(os.path.join(d, "cuda_fp16.h")))
    toolkit = tree / "toolkit"
    _write(toolkit / "cuda_fp16.h", open(fp16).read())
    monkeypatch.setattr(compiler, "system_include_dirs", lambda: (str(toolkit), *real[1:]))
    src = "#include <cuda_fp16.h>\n#define VAL 1\n" + KERNEL
    fam, _ = _get(cache, src, [])
    entry = cache.lookup(fam.key("k", "sm_80"))
    assert [f[0] for f in entry.meta["headers"]["files"]] == [str(toolkit / "cuda_fp16.h")]
    _check(cache, src, [], lambda: _write(toolkit / "cuda_fp16.h", open(fp16).read() + "\n"), served_after=False)
    # another environment's toolkit directory (a second venv), while this one's header stays as it was
    other = tree / "toolkit2"
    _write(other / "cuda_fp16.h", open(fp16).read() + "// another release\n")
    monkeypatch.setattr(compiler, "system_include_dirs", lambda: (str(other), *real[1:]))
    assert not _served(cache, src, [])
    monkeypatch.setattr(compiler, "system_include_dirs", lambda: (str(toolkit), *real[1:]))
    # a user -I directory now shadowing a toolkit header
    _check(cache, src, [f"-I{tree}/inc"], lambda: _write(tree / "inc" / "cuda_fp16.h", "\n"), served_after=False)


def test_a_header_that_is_not_a_regular_file_is_never_read(tree, cache):
    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    src, opts = "#include <v.h>\n" + KERNEL, [f"-I{tree}/inc"]

    def to_fifo():
        os.remove(tree / "inc" / "v.h")
        os.mkfifo(tree / "inc" / "v.h")

    _get(cache, src, opts)
    to_fifo()
    fam = KernelFamily("hdr", "", options=opts, cache=cache)
    fam.add("k", src)
    assert cache.lookup(fam.key("k", "sm_80"), headers=True) is None  # returns at once: no read of the FIFO


def test_header_changing_during_the_compile_is_served_not_stored(tree, cache, monkeypatch):
    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    src, opts = "#include <v.h>\n" + KERNEL, [f"-I{tree}/inc"]
    real = _manifest.record

    def edit_meanwhile(*args, **kwargs):
        with open(tree / "inc" / "v.h", "a") as fh:
            fh.write("// edited while NVRTC read it\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(_manifest, "record", edit_meanwhile)
    fam, code = _get(cache, src, opts)
    assert code and "changed while it was compiled" in _recorded(cache)
    assert _no_code_stored(cache)


def test_line_directives_are_not_headers(tree, cache):
    fam, _ = _get(cache, '#line 1 "no-such-file.cu"\n#define VAL 1\n' + KERNEL, [])
    assert cache.stats()["entries"] == 1


def test_forged_manifest_is_dropped(tree, cache):
    fam, _ = _get(cache, "#define VAL 1\n" + KERNEL, [])
    key = fam.key("k", "sm_80")
    entry = cache.lookup(key)
    cache.store(key, entry.code, {**entry.meta, "headers": {"files": [["x"]], "absent": []}})
    with pytest.warns(Warning, match="malformed"):
        assert cache.lookup(key) is None
    cache.store(key, entry.code, {k: v for k, v in entry.meta.items() if k != "headers"})
    assert cache.lookup(key) is not None  # an entry of a cache user that records no headers
    assert cache.lookup(key, headers=True) is None  # a family's must: dropped
    assert cache.peek(key) is None


_WARM_HIT = r"""
import json, os, re, sys
from lazykern import KernelCache, KernelFamily
inc, cache_dir = sys.argv[1], sys.argv[2]
src = "#include <v.h>\n#include <cuda_fp16.h>\n" + 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'
fam = KernelFamily("warm", "", options=[f"-I{inc}"], cache=KernelCache(cache_dir))
fam.add("k", src)
opened, compiled = [], []
real_compile, real__compile = re.compile, re._compile
re.compile = lambda *a, **k: compiled.append(str(a[0])) or real_compile(*a, **k)
re._compile = lambda *a, **k: compiled.append(str(a[0])) or real__compile(*a, **k)
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        opened.append(os.fsdecode(args[0]))
sys.addaudithook(hook)
fam.get("k", "sm_80")
re.compile, re._compile = real_compile, real__compile
print(json.dumps({"compiles": fam.compile_calls, "opened": opened, "regex": compiled}))
"""


def test_a_warm_hit_reads_no_header_and_compiles_no_regex(tree):
    """In a fresh process, a warm hit of a kernel including a user and a toolkit header opens
    neither header (the stat memo answers) and calls neither ``re.compile`` nor ``re._compile``."""
    import json
    import subprocess
    import sys

    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [sys.executable, "-c", _WARM_HIT, str(tree / "inc"), str(tree / "cache")]
    runs = [
        json.loads(subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, check=True).stdout)
        for _ in range(2)
    ]
    assert runs[0]["compiles"] == 1 and runs[1]["compiles"] == 0
    headers = [str(tree / "inc"), *compiler.system_include_dirs()]
    assert not [p for p in runs[1]["opened"] if p.startswith(tuple(headers))], runs[1]["opened"]
    assert runs[1]["regex"] == [], runs[1]["regex"]


@pytest.mark.parametrize("why", ["nvrtc cannot trace", "no compile server"])
def test_without_a_header_trace_only_sources_with_no_include_persist(tree, cache, monkeypatch, why):
    from lazykern.compile import _tracer

    if why == "nvrtc cannot trace":
        monkeypatch.setattr(compiler, "_traces_headers", lambda: False)
    else:
        _tracer.shutdown()
        refuse = lambda self, nice=True: (_ for _ in ()).throw(OSError(24, "no fds"))  # noqa: E731
        monkeypatch.setattr(_tracer._Server, "__init__", refuse)
    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    fam, _ = _get(cache, "#include <v.h>\n" + KERNEL, [f"-I{tree}/inc"])
    assert _recorded(cache) and _no_code_stored(cache)
    _get(cache, "#define VAL 1\n" + KERNEL, [])
    assert sum(not e.get("memory_only") for e in cache.entries()) == 1


def test_a_dangling_link_whose_target_appears_is_a_new_header(tree, cache):
    """A link in an earlier -I directory, dangling at compile time: its target appearing changes
    nothing in that directory, so it is checked on its own (not vouched for by the directory's stat)."""
    _write(tree / "b" / "v.h", "#define VAL 1\n")
    (tree / "a").mkdir()
    os.symlink(tree / "elsewhere" / "v.h", tree / "a" / "v.h")
    step_past()  # a directory changed in the compile's clock tick is not trusted
    src, opts = "#include <v.h>\n" + KERNEL, [f"-I{tree}/a", f"-I{tree}/b"]
    _check(cache, src, opts, lambda: _write(tree / "elsewhere" / "v.h", "#define VAL 2\n"), served_after=False)


def test_a_line_directive_naming_another_directory_changes_no_search_place(tree, cache):
    """`#line` renames the file but NVRTC still searches the real one's directory (the working
    directory here): a header appearing there is a new header, whatever the #line says."""
    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    src, opts = '#line 1 "/elsewhere/frag.cu"\n#include "v.h"\n' + KERNEL, [f"-I{tree}/inc"]
    _check(cache, src, opts, lambda: _write(tree / "work" / "v.h", "#define VAL 2\n"), served_after=False)


_LINE_STRESS = r"""
import os, random, sys
from lazykern.compile.compiler import compile_source
inc = sys.argv[1]
rnd = random.Random(2)
for i in range(24):
    lines = "".join(f'#line 1 "{rnd.choice("abc")}{rnd.randint(0, 2)}"\n' for _ in range(rnd.randint(0, 4)))
    body = "#include <v.h>\n" if rnd.random() < 0.7 else "#define VAL 2\n"
    src = lines + body + 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'
    r = compile_source(src, name=rnd.choice(["k", "j"]), arch="sm_80", options=[f"-I{inc}"])
    assert r.headers is not None, r.memory_only
print("ok")
"""


def test_traced_compiles_with_line_directives_do_not_crash_nvrtc(tree):
    """NVRTC 13.5 aborts when traced compiles in one process meet `#line` file names in some orders
    (a 3-#line source, then a 2-#line one). A crash here kills a child process, not the test run."""
    import subprocess
    import sys

    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", _LINE_STRESS, str(tree / "inc")], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("where", ["source", "header"])
def test_a_compile_that_reads_the_clock_is_never_stored(tree, cache, where):
    _write(tree / "inc" / "v.h", "#define VAL 1\n" + ("#define WHEN __TIME__\n" if where == "header" else ""))
    src = "#include <v.h>\n" + ("#define WHEN __TIME__\n" if where == "source" else "") + KERNEL
    fam, _ = _get(cache, src + "__device__ const char *when = WHEN;\n", [f"-I{tree}/inc"])
    assert "__TIME__" in _recorded(cache) and _no_code_stored(cache)


def _recorded(cache) -> str:
    """Why the compiles were kept in memory, as their stored markers say (the store decides once the
    traced pass has answered, after the kernel was served)."""
    return "; ".join(e["memory_only"] for e in cache.entries() if e.get("memory_only"))


def _no_code_stored(cache) -> bool:
    """Nothing but memory-only markers (no code, never served: `lazykern cache ls` shows them) was stored."""
    return all(e.get("memory_only") for e in cache.entries())


# Issue 35, classes 1-5: decisions from the preprocessor's view (splices, comments, tokens), trace
# names that are not paths, and a traced compile that crashes.


def _memory_only(cache, source, options) -> str:
    _get(cache, source, options)
    return _recorded(cache)


@pytest.mark.parametrize(
    "directive", ["#inc\\\nlude <v.h>\n", "#\\\ninclude <v.h>\n", "# /* a\n comment */ include <v.h>\n"]
)
def test_an_include_spelled_across_a_splice_or_comment_is_followed(tree, cache, directive):
    _write(tree / "inc" / "v.h", "#define VAL 1\n")
    src, opts = directive + KERNEL, [f"-I{tree}/inc"]
    _check(cache, src, opts, lambda: _write(tree / "inc" / "v.h", "#define VAL 2\n"), served_after=False)


@pytest.mark.parametrize(
    "probe",
    [
        '__has_\\\ninclude("opt.h")',
        '__has_include /* why */ ("opt.h")',
        '__has_include\\\n("opt.h")',
        'HI("opt.h")',
        'HJ ( "opt.h" )',
    ],
)
def test_a_has_include_the_preprocessor_sees_is_a_probe(tree, cache, probe):
    head = "#define HI __has_include\n#define HJ HI\n"
    src = f'{head}#if {probe}\n#include "opt.h"\n#else\n#define VAL 1\n#endif\n' + KERNEL
    _check(cache, src, [], lambda: _write(tree / "work" / "opt.h", "#define VAL 2\n"), served_after=False)


@pytest.mark.parametrize(
    "head, probe",
    [
        ('#define N "opt.h"\n', "__has_include(N)"),
        ("#define H(x) __has_include(x)\n", 'H("opt.h")'),
        ("#define CAT(a, b) a##b\n", 'CAT(__has_, include)("opt.h")'),
    ],
)
def test_a_probe_a_macro_spells_is_unknown_and_kept_in_memory(tree, cache, head, probe):
    src = f'{head}#if {probe}\n#include "opt.h"\n#else\n#define VAL 1\n#endif\n' + KERNEL
    assert _memory_only(cache, src, [])
    assert _no_code_stored(cache)


def test_a_probe_in_a_header_searches_that_headers_directory(tree, cache):
    _write(tree / "inc" / "sub" / "p.h", '#if __has_include("opt.h")\n#include "opt.h"\n#else\n#define VAL 1\n#endif\n')
    src, opts = "#include <sub/p.h>\n" + KERNEL, [f"-I{tree}/inc"]
    _check(cache, src, opts, lambda: _write(tree / "inc" / "sub" / "opt.h", "#define VAL 2\n"), served_after=False)


def test_a_line_name_that_is_an_existing_file_is_not_taken_for_the_header(tree, cache):
    _write(tree / "other" / "o.h", "#define UNUSED 1\n")
    _write(tree / "inc" / "h.h", f'#line 1 "{tree}/other/o.h"\n#define VAL 1\n')
    src, opts = "#include <h.h>\n" + KERNEL, [f"-I{tree}/inc"]
    _check(cache, src, opts, lambda: _write(tree / "inc" / "h.h", "#define VAL 2\n"), served_after=False)


def test_a_header_with_two_line_directives_naming_files_is_in_the_manifest(tree, cache):
    _write(tree / "inc" / "x.h", "#pragma once\n#define X 1\n")
    _write(
        tree / "inc" / "gen.h", f'#line 1 "{tree}/inc/x.h"\n#include "x.h"\n#line 9 "{tree}/inc/x.h"\n#define VAL X\n'
    )
    src, opts = "#include <gen.h>\n" + KERNEL, [f"-I{tree}/inc"]
    fam, _ = _get(cache, src, opts)
    files = [f[0] for f in cache.lookup(fam.key("k", "sm_80")).meta["headers"]["files"]]
    assert f"{tree}/inc/gen.h" in files, files
    _check(cache, src, opts, lambda: _write(tree / "inc" / "gen.h", "#define VAL 2\n"), served_after=False)


def test_a_header_in_sub_whose_line_names_elsewhere_searches_its_own_directory(tree, cache):
    _write(tree / "elsewhere" / "e.h", "\n")
    _write(tree / "inc" / "sub" / "s.h", f'#line 1 "{tree}/elsewhere/e.h"\n#include "y.h"\n')
    _write(tree / "inc2" / "y.h", "#define VAL 1\n")
    src, opts = "#include <sub/s.h>\n" + KERNEL, [f"-I{tree}/inc", f"-I{tree}/inc2"]
    _check(cache, src, opts, lambda: _write(tree / "inc" / "sub" / "y.h", "#define VAL 2\n"), served_after=False)


@pytest.mark.parametrize(
    "generated",
    ['#line 1 "gen.tmpl"\n#define VAL 1\n', '# 1 "gen.tmpl"\n# 1 "<built-in>"\n#define VAL 1\n# 3 "gen.tmpl" 2\n'],
)
def test_generated_headers_hit_a_warm_store_and_recompile_when_edited(tree, cache, generated):
    _write(tree / "inc" / "g.h", generated)
    src, opts = "#include <g.h>\n" + KERNEL, [f"-I{tree}/inc"]
    assert not _memory_only(cache, src, opts)
    _check(
        cache, src, opts, lambda: _write(tree / "inc" / "g.h", generated.replace("VAL 1", "VAL 2")), served_after=False
    )
