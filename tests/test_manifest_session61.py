"""The store's C++ promise against session 61's hostile round: a clock read through a ``-D`` value, a
header rewritten through a shared mapping (no new mtime), a ``-G``/``-lineinfo`` cubin that names the
working directory, an NVRTC patch release that ``nvrtcVersion()`` does not tell apart."""

from __future__ import annotations

import mmap
import os

from lazykern.compile import _manifest, compiler
from lazykern.store import _keys

from .test_manifest import KERNEL, _get, _served, _write, tree  # noqa: F401  (tree: the fixture)

CLOCK_KERNEL = (
    'extern "C" __global__ void k(char *a) { const char s[] = STAMP; for (int i = 0; i < 8; ++i) a[i] = s[i]; }\n'
)


def test_a_clock_read_through_a_d_value_is_never_persisted(tree, cache):  # noqa: F811
    for options, source in (
        (["-DSTAMP=__TIME__"], CLOCK_KERNEL),
        ([f"-I{tree}/inc", "-DSTAMP0=__DATE__"], '#include "s.h"\n' + CLOCK_KERNEL),
    ):
        _write(tree / "inc" / "s.h", "#define STAMP STAMP0\n")
        fam, _ = _get(cache, source, options)
        assert fam.compile_calls == 1
        again, _ = _get(cache, source, options)
        assert again.compile_calls == 1, options  # kept in memory only: the next process compiles


def test_a_header_mapped_for_writing_is_not_persisted(tree, cache):  # noqa: F811
    header = tree / "inc" / "v.h"
    _write(header, "#define VAL 1\n")
    src = "#include <v.h>\n" + KERNEL
    with open(header, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as view:
        view[0:1] = b"#"  # a write through the mapping: later ones to this dirty page leave the mtime alone
        st = os.stat(header)
        assert _manifest.mapped_for_writing(st.st_dev, st.st_ino) == os.getpid()
        fam, _ = _get(cache, src, [f"-I{tree}/inc"])
        view[-2:-1] = b"7"  # "#define VAL 7": same size, and (on Linux) the same mtime and ctime
        view.flush()
    assert not _served(cache, src, [f"-I{tree}/inc"])  # compiled again: the binary reads VAL 7
    assert _served(cache, src, [f"-I{tree}/inc"])  # unmapped now: stored, then served
    st = os.stat(header)
    assert _manifest.mapped_for_writing(st.st_dev, st.st_ino) is None


def test_line_info_keys_the_working_directory(tree, monkeypatch):  # noqa: F811
    source = 'extern "C" __global__ void k(int *a) { *a = 1; }\n'
    keys = {}
    for where in ("a", "b"):
        (tree / where).mkdir()
        monkeypatch.chdir(tree / where)
        for options in (["-G"], ["--generate-line-info"], ["-lineinfo"], ["-O3"]):
            keys[where, options[0]] = _keys.make_key(source, arch="sm_80", options=options)
    assert all(keys["a", o] != keys["b", o] for o in ("-G", "--generate-line-info", "-lineinfo"))
    assert keys["a", "-O3"] == keys["b", "-O3"]  # no line table: the directory is not in the binary


def test_the_nvrtc_build_is_part_of_the_toolchain(monkeypatch, tmp_path):
    libraries = [tmp_path / "libnvrtc.so.13"]
    libraries[0].write_bytes(b"\x7fELF" + b"V13.4.59" * 1000)
    monkeypatch.setattr(compiler, "_nvrtc_library_files", lambda: libraries)
    compiler.toolchain_fingerprint.cache_clear()  # once per process (the store's memo: per toolchain stat)
    before = compiler.toolchain_fingerprint()
    libraries[0].write_bytes(b"\x7fELF" + b"V13.4.92" * 1000)  # a patch release: nvrtcVersion() is 13.4 for both
    compiler.toolchain_fingerprint.cache_clear()
    try:
        assert compiler.toolchain_fingerprint() != before
    finally:
        compiler.toolchain_fingerprint.cache_clear()
