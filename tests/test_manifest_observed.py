"""A stored entry is one observation (issue 43): the binary and the manifest that keys it come from the
same compile of the user's exact bytes, with failed lookups recorded, and a model may only add.

Round 7's repros, each asked of the store as a second process would (a new store connection and
family, lazykern's per-process header memo cleared): after the change, what is served must be what
compiling now gives. Changes inside the compile window are made deterministic: in the compile server
before its compile (a hook), or in this process just before the record is taken.
"""

from __future__ import annotations

import os

import pytest

from lazykern import KernelCache, KernelFamily
from lazykern.compile import _manifest, _tracer, compiler
from lazykern.store import _later

from . import _servers
from ._file_clock import settled, step_past

KERNEL = 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    _manifest._digests.clear()
    settled(tmp_path / "work")  # a probe of work/ in the mkdir's clock tick would (rightly) not be stored
    yield tmp_path
    _later.wait_all()


def _write(path, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)
    step_past()  # a change in the compile's clock tick is not trusted


def _get(store, source: str, options: list[str]) -> tuple[KernelFamily, bytes]:
    _manifest._digests.clear()
    fam = KernelFamily("obs", "", options=options, cache=KernelCache(store))
    fam.add("k", source)
    code = fam.get("k", "sm_80").code
    _later.wait_all()
    return fam, code


def _fresh(source: str, options: list[str]) -> bytes:
    return compiler.compile_source(source, name="k", arch="sm_80", options=options).code


def _served_right(store, source: str, options: list[str]) -> bool:
    """Whether the store served (no compile); asserts that what came is what compiling now gives."""
    fam, code = _get(store, source, options)
    assert code == _fresh(fam.source.translation_unit("k"), options), "a stale binary was served"
    return fam.compile_calls == 0


def _entry(store, source: str, options: list[str]) -> dict:
    fam = KernelFamily("obs", "", options=options, cache=KernelCache(store))
    fam.add("k", source)
    [row] = [r for r in KernelCache(store).entries() if r["key"] == fam.key("k", "sm_80")]
    return row


def _places(manifest: dict) -> set[str]:
    out = {f[0] for f in manifest["files"]} | set(manifest["absent"]) | set(manifest["present"])
    return out | {os.path.join(d, n) for d, _, names in manifest["absent_dirs"] for n in names}


# -- the model may only add: constructs that hid a directive from it --------------------------------
RAW_SPLICE = (
    '__device__ const char *s = R"(a)\\\n'
    '" /*)";\n'
    "#include <b.h>\n"
    "// */ ;\n"
    "#ifndef VAL\n#define VAL 1\n#endif\n" + KERNEL
)


def test_a_raw_string_splice_cannot_hide_an_include_from_the_record(tree):
    """Whether a splice in a raw string is reverted (C++) or not (the preprocessor model), the
    include of b.h is recorded, and editing b.h never serves the old binary."""
    store, opts = tree / "store", [f"-I{tree}/inc"]
    _write(tree / "inc" / "b.h", "#define VAL 7\n")
    _get(store, RAW_SPLICE, opts)
    assert f"{tree}/inc/b.h" in _places(_entry(store, RAW_SPLICE, opts)["headers"])
    _write(tree / "inc" / "b.h", "#define VAL 8\n")
    _served_right(store, RAW_SPLICE, opts)


TRIGRAPH = (
    '__device__ const char *q = "??/" /* ";\n'
    "#if __has_include(<flag.h>)\n#define VAL 2\n#else\n#define VAL 1\n#endif\n"
    '__device__ const char *e = "*/";\n' + KERNEL
)


def test_a_trigraph_under_cxx14_cannot_hide_a_probe(tree):
    """Under -std=c++14 ``"??/"`` is ``"\\"``: the string goes on and the probe is real; the model
    read a comment there. flag.h appearing later must not serve the old binary."""
    store, opts = tree / "store", [f"-I{tree}/inc", "-std=c++14"]
    (tree / "inc").mkdir()
    step_past()  # a change in the compile's clock tick is not trusted
    assert not _served_right(store, TRIGRAPH, opts)
    assert f"{tree}/inc/flag.h" in _places(_entry(store, TRIGRAPH, opts)["headers"])
    assert _served_right(store, TRIGRAPH, opts)
    _write(tree / "inc" / "flag.h", "\n")
    assert not _served_right(store, TRIGRAPH, opts)
    assert _served_right(store, TRIGRAPH, opts)


CCCL = "#include <cuda/std/limits>\n#define VAL (cuda::std::numeric_limits<int>::max() - 1)\n" + KERNEL.replace(
    "*a = VAL", "*a = VAL"
)


def test_a_probe_inside_a_toolkit_header_is_recorded(tree):
    """CCCL's ``__has_include(<version>)`` searches the user's -I directories first: a ``version``
    created there later is a different compile."""
    store, opts = tree / "store", [f"-I{tree}/inc"]
    (tree / "inc").mkdir()
    step_past()  # a change in the compile's clock tick is not trusted
    _get(store, CCCL, opts)
    assert f"{tree}/inc/version" in _places(_entry(store, CCCL, opts)["headers"])
    assert _served_right(store, CCCL, opts)
    _write(tree / "inc" / "version", "\n")
    assert not _served_right(store, CCCL, opts)


# -- the compile window: one observation, not a second look -----------------------------------------
def _swap_dir(tree) -> None:
    os.rename(tree / "inc", tree / "inc_old")
    os.rename(tree / "inc_new", tree / "inc")


def _retarget(tree) -> None:
    os.symlink(tree / "v2.h", tree / "inc" / "tmp.h")
    os.rename(tree / "inc" / "tmp.h", tree / "inc" / "v.h")  # ln -sfn: a new link renamed over the old


def _window_tree(tree, kind: str) -> None:
    if kind == "swap":
        _write(tree / "inc" / "v.h", "#define VAL 1\n")
        _write(tree / "inc_new" / "v.h", "#define VAL 2\n")
    else:
        _write(tree / "v1.h", "#define VAL 1\n")
        _write(tree / "v2.h", "#define VAL 2\n")
        (tree / "inc").mkdir()
        os.symlink(tree / "v1.h", tree / "inc" / "v.h")
        step_past()  # a change in the compile's clock tick is not trusted


@pytest.mark.parametrize("kind", ["swap", "retarget"])
def test_a_change_after_the_compile_before_the_record_is_not_stored(tree, monkeypatch, kind):
    """mv of an -I directory or ``ln -sfn`` of a header between the compile and its record: the
    record would read other files than the compile did. The moved inode's (the new link's) ctime
    says so: the kernel stays in memory, and the next process compiles what is there now."""
    _window_tree(tree, kind)
    store, src, opts = tree / "store", "#include <v.h>\n" + KERNEL, [f"-I{tree}/inc"]
    real = _manifest.record

    def change_then_record(*args, **kwargs):
        (_swap_dir if kind == "swap" else _retarget)(tree)
        return real(*args, **kwargs)

    monkeypatch.setattr(_manifest, "record", change_then_record)
    _get(store, src, opts)
    monkeypatch.setattr(_manifest, "record", real)
    assert "changed while it was compiled" in _entry(store, src, opts)["memory_only"]
    step_past()  # a change in the compile's clock tick is not trusted
    assert not _served_right(store, src, opts)
    assert _served_right(store, src, opts)


@pytest.mark.parametrize("kind", ["swap", "retarget"])
def test_a_change_before_the_observed_compile_never_pairs_two_moments(tree, kind):
    """The same change made in the compile server before it compiles: the served binary (this
    process's) saw the old header, the observed one the new. Whatever is stored is one compile's."""
    _window_tree(tree, kind)
    store, src, opts = tree / "store", "#include <v.h>\n" + KERNEL, [f"-I{tree}/inc"]
    change = (
        f"os.rename({str(tree / 'inc')!r}, {str(tree / 'inc_old')!r}); "
        f"os.rename({str(tree / 'inc_new')!r}, {str(tree / 'inc')!r})"
        if kind == "swap"
        else f"os.symlink({str(tree / 'v2.h')!r}, {str(tree / 'inc' / 't.h')!r}); "
        f"os.rename({str(tree / 'inc' / 't.h')!r}, {str(tree / 'inc' / 'v.h')!r})"
    )
    _tracer.shutdown()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_tracer, "_BOOT", _servers.boot(tree, change))
        try:
            _, served = _get(store, src, opts)
        finally:
            _tracer.shutdown()
    assert served == _fresh(src.replace("#include <v.h>\n", "#define VAL 1\n"), [])  # the old header's
    row = _entry(store, src, opts)
    assert row.get("memory_only") or row["bytes"] > 0
    step_past()  # a change in the compile's clock tick is not trusted
    _served_right(store, src, opts)  # asserts no stale binary, stored or not
