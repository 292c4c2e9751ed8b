from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import diskcache
import pytest

from lazykern import KernelCache, KernelFamily, LazykernWarning, make_key
from lazykern.compile.compiler import compile_source
from lazykern.store import _entry, _keys, _later

from .conftest import FRAGMENTS, PREAMBLE

SRC = 'extern "C" __global__ void k(int *a) { *a = 1; }'


def test_key_depends_on_every_input(monkeypatch):
    base = make_key(SRC, arch="sm_90", options=["-std=c++17", "-DA=1"])
    assert base == make_key(SRC, arch="sm_90", options=["-std=c++17", "-DA=1"])
    others = [
        make_key(SRC + " ", arch="sm_90", options=["-std=c++17", "-DA=1"]),
        make_key(SRC, arch="sm_80", options=["-std=c++17", "-DA=1"]),
        make_key(SRC, arch="sm_90", options=["-std=c++17", "-DA=2"]),
        make_key(SRC, arch="sm_90", options=["-DA=1", "-std=c++17"]),
        make_key(SRC, arch="sm_90", options=["-std=c++17", "-DA=1"], target="ptx"),
        make_key(SRC, arch="sm_90", options=["-std=c++17", "-DA=1"], route="lto"),
    ]
    assert len({base, *others}) == len(others) + 1
    monkeypatch.setattr(_keys, "SCHEMA_VERSION", 999)
    assert make_key(SRC, arch="sm_90", options=["-std=c++17", "-DA=1"]) != base


def test_key_changes_with_nvrtc_version(monkeypatch):
    from lazykern.compile import compiler

    base = make_key(SRC, arch="sm_90")
    compiler.toolchain_fingerprint.cache_clear()
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: (99, 9))
    try:
        assert make_key(SRC, arch="sm_90") != base
    finally:
        compiler.toolchain_fingerprint.cache_clear()


def test_program_cache_resource_roundtrip(cache):
    from cuda.core import Program, ProgramOptions

    prog = Program(SRC, "c++", options=ProgramOptions(arch="sm_80"))
    first = prog.compile("cubin", cache=cache)
    again = Program(SRC, "c++", options=ProgramOptions(arch="sm_80")).compile("cubin", cache=cache)
    assert bytes(first.code) == bytes(again.code)
    assert len(cache) == 1
    assert cache.get(b"missing") is None
    with pytest.raises(KeyError):
        del cache["missing"]


def test_values_must_be_bytes(cache):
    from lazykern import CacheError

    with pytest.raises(CacheError, match="bytes"):
        cache["k"] = {"not": "bytes"}


def _write_raw(directory, key, value):
    with diskcache.Cache(str(directory)) as raw:
        raw[key] = value


def test_corrupt_entries_are_recompiled_with_one_warning(family, cache):
    first = family.get("scale_f32", "sm_80")
    _later.wait_all()  # stored (after its traced pass): then corrupted below
    key = family.key("scale_f32", "sm_80")
    for bad in (first.code[:-100] + b"", b"random garbage bytes", b"LZK\x01" + b"\xff" * 40):
        _write_raw(cache.directory, key, bad)
        fresh = KernelFamily("tiny", PREAMBLE, cache=KernelCache(cache.directory))
        fresh.add("scale_f32", FRAGMENTS["scale_f32"])
        with pytest.warns(LazykernWarning, match="unreadable"):
            k = fresh.get("scale_f32", "sm_80")
        assert fresh.compile_calls == 1 and k.code == first.code
        _later.wait_all()  # the recompile is stored before the next corruption


def test_truncated_blob_file_is_detected(cache):
    big = os.urandom(200_000)  # above diskcache's inline limit: stored as a file
    cache.store("big", big, {"kernel": "big"})
    files = [os.path.join(r, f) for r, _, fs in os.walk(cache.directory) for f in fs if f.endswith(".val")]
    assert len(files) == 1
    with open(files[0], "r+b") as fh:
        fh.truncate(1000)
    with pytest.warns(LazykernWarning):
        assert cache.lookup("big") is None


def test_pickled_value_is_never_unpickled(cache, tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    key = make_key(SRC, arch="sm_80")
    with diskcache.Cache(cache.directory) as raw:
        raw.set(key, Evil())  # default Disk pickles it
        raw.set("text-key", "a str value")
    with pytest.warns(LazykernWarning, match="unpickle|unreadable"):
        assert cache.lookup(key) is None
    assert not marker.exists()
    entry, fresh = cache.get_or_compile(key, lambda: (compile_source(SRC, name="k", arch="sm_80").code, {}))
    assert fresh and entry.code[:4] == b"\x7fELF" and not marker.exists()
    assert list(cache.entries())  # listing skips/deletes poisoned rows without unpickling
    assert not marker.exists()
    assert pickle.dumps(1)  # (pickle itself still works; we just never call it)


def test_read_only_directory_degrades_to_memory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    if os.access(ro, os.W_OK):  # root ignores permissions
        pytest.skip("running as root: cannot make a read-only directory")
    with pytest.warns(LazykernWarning, match="unusable"):
        kc = KernelCache(ro / "cache")
    assert kc.backend == "memory"


def test_unwritable_database_degrades_to_memory(tmp_path, monkeypatch):
    # Root ignores chmod, so simulate what SQLite says on a read-only mount.
    import sqlite3

    def refuse(self, *a, **k):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(diskcache.Cache, "__init__", refuse)
    with pytest.warns(LazykernWarning, match="readonly"):
        kc = KernelCache(tmp_path / "c")
    assert kc.backend == "memory"
    entry, fresh = kc.get_or_compile("k", lambda: (b"code", {}))
    assert fresh and kc.lookup("k").code == b"code"


def test_cache_dir_that_is_a_file_degrades_to_memory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.warns(LazykernWarning, match="unusable"):
        kc = KernelCache(f)
    assert kc.backend == "memory" and kc.directory is None


def test_disabled_cache_keeps_memory_only(monkeypatch, tmp_path):
    monkeypatch.setenv("LAZYKERN_CACHE", "off")
    kc = KernelCache(tmp_path / "c")
    assert kc.backend == "memory" and not (tmp_path / "c").exists()
    kc["a"] = b"x"
    assert kc["a"] == b"x"


def test_size_limit_evicts_least_recently_used(tmp_path):
    kc = KernelCache(tmp_path / "c", size_limit="600K")
    for i in range(8):
        kc.store(f"k{i}", os.urandom(100_000), {"kernel": f"k{i}"})
        kc.lookup("k0")  # keep k0 hot
    keys = {e["key"] for e in kc.entries()}
    assert "k0" in keys and len(keys) < 8


def test_new_directory_is_private(tmp_path):
    KernelCache(tmp_path / "fresh")
    assert (os.stat(tmp_path / "fresh").st_mode & 0o777) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o770, 0o2770])
def test_directory_others_can_write_to_is_refused(tmp_path, mode):
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, mode)
    with pytest.warns(LazykernWarning, match="other users can write to it") as caught:
        kc = KernelCache(d)
    assert len(caught) == 1 and kc.backend == "memory" and not os.listdir(d)


def test_sticky_world_writable_directory_is_used(tmp_path):
    d = tmp_path / "tmp-like"
    d.mkdir()
    os.chmod(d, 0o1777)
    assert KernelCache(d).backend == "disk"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_directory_of_another_user_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir(mode=0o700)
    os.chown(d, 12345, 12345)
    with pytest.warns(LazykernWarning, match="owned by uid 12345, not by you") as caught:
        kc = KernelCache(d)
    assert len(caught) == 1 and kc.backend == "memory" and not os.listdir(d)
    kc["k"] = b"kept in memory"
    assert kc["k"] == b"kept in memory"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_shared_cache_setting_opts_in(tmp_path, monkeypatch):
    d = tmp_path / "team"
    d.mkdir()
    os.chown(d, 12345, 12345)
    os.chmod(d, 0o2775)
    monkeypatch.setenv("LAZYKERN_SHARED_CACHE", "1")
    assert KernelCache(d).backend == "disk"
    monkeypatch.setenv("LAZYKERN_SHARED_CACHE", "maybe")  # not a yes: refused, and the value is reported
    with pytest.warns(LazykernWarning) as caught:
        assert KernelCache(d).backend == "memory"
    assert any("LAZYKERN_SHARED_CACHE" in str(w.message) for w in caught)


def test_stats_count_hits_misses_and_seconds(family, cache):
    family.get("scale_f32", "sm_80")
    family.get("scale_i32", "sm_80")
    again = KernelFamily("tiny", PREAMBLE, cache=cache)
    again.add("scale_f32", FRAGMENTS["scale_f32"])
    again.get("scale_f32", "sm_80")
    s = cache.stats()
    assert (s["compiles"], s["misses"], s["hits"], s["entries"]) == (2, 2, 1, 2)
    assert s["compile_seconds"] > 0 and s["seconds_saved"] > 0
    assert cache.persistent_counters()["compiles"] == 2


def test_threads_compile_a_key_once(cache):
    key = make_key(SRC, arch="sm_80")
    calls = []
    lock = threading.Lock()

    def compile_fn():
        with lock:
            calls.append(1)
        return compile_source(SRC, name="k", arch="sm_80").code, {}

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda _: cache.get_or_compile(key, compile_fn)[0].code, range(16)))
    assert len(calls) == 1 and len(set(codes)) == 1


WORKER = textwrap.dedent(
    """
    import sys, json
    from concurrent.futures import ThreadPoolExecutor
    from lazykern import KernelCache, KernelFamily
    sys.path.insert(0, {tests!r})
    from conftest import PREAMBLE, FRAGMENTS
    fam = KernelFamily("tiny", PREAMBLE, cache=KernelCache({directory!r}))
    fam.add("scale_f32", FRAGMENTS["scale_f32"])
    with ThreadPoolExecutor({threads}) as pool:
        codes = list(pool.map(lambda _: fam.get("scale_f32", "sm_90").code, range({threads})))
    import hashlib
    digests = sorted({{hashlib.sha256(c).hexdigest() for c in codes}})
    print(json.dumps({{"compiles": fam.compile_calls, "digests": digests}}))
    """
)


def _run_workers(directory, processes, threads):
    script = WORKER.format(tests=os.path.dirname(__file__), directory=str(directory), threads=threads)
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    import json

    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_second_process_compiles_nothing_and_gets_identical_bytes(tmp_path):
    (first,) = _run_workers(tmp_path / "c", 1, 1)
    (second,) = _run_workers(tmp_path / "c", 1, 1)
    assert first["compiles"] == 1 and second["compiles"] == 0
    assert first["digests"] == second["digests"]


@pytest.mark.slow
def test_processes_and_threads_share_one_compile(tmp_path):
    results = _run_workers(tmp_path / "c", 4, 8)
    total = sum(r["compiles"] for r in results)
    assert len({d for r in results for d in r["digests"]}) == 1
    assert total == 1, f"{total} compiles for one key across 4 processes x 8 threads"


def _cache_rows(directory) -> list[tuple]:
    import sqlite3

    con = sqlite3.connect(os.path.join(directory, "cache.db"))
    try:
        return con.execute("SELECT key, store_time, access_time, access_count FROM Cache ORDER BY key").fetchall()
    finally:
        con.close()


def test_looking_changes_no_entry(family, cache, monkeypatch):
    """peek, entries, check, stats, `cache ls`, `info` and `export` leave every row as it was (last-used too)."""
    from typer.testing import CliRunner

    from lazykern.store.cache import set_default_cache
    from lazykern.tools.cli import app

    family.get("scale_f32", "sm_80")
    _later.wait_all()  # its store waits for the traced pass; the rows are read raw below
    key = family.key("scale_f32", "sm_80")
    time.sleep(0.01)
    before = _cache_rows(cache.directory)
    assert cache.peek(key) is not None
    list(cache.entries())
    cache.check()
    cache.stats()
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", cache.directory)
    set_default_cache(None)
    try:
        bundle = os.path.join(os.path.dirname(cache.directory), "b.tar.gz")
        looks = (["cache", "ls"], ["cache", "ls", "--json"], ["cache", "info"], ["cache", "info", "--json"])
        for args in (*looks, ["cache", "export", bundle]):
            result = CliRunner().invoke(app, args, catch_exceptions=False)
            assert result.exit_code == 0, result.output
    finally:
        set_default_cache(None)
    assert _cache_rows(cache.directory) == before
    assert cache.lookup(key) is not None  # a lookup that serves does mark it used
    assert _cache_rows(cache.directory) != before


@pytest.mark.parametrize(
    "options",
    [
        [f"-DOPT{i}={i}" for i in range(1100)],  # 1,100 options
        ["-DLONG=" + "1+" * 20_000 + "1"],  # a 40 KB -D value
    ],
    ids=["1100-options", "long-define"],
)
def test_legitimate_kernels_over_the_old_header_limits_persist(cache, options):
    fam = KernelFamily("big_options", "", options=options, cache=cache)
    fam.add("k", 'extern "C" __global__ void k(int *a) { *a = 1; }')
    fam.get("k", "sm_80")
    again = KernelFamily("big_options", "", options=options, cache=cache)
    again.add("k", 'extern "C" __global__ void k(int *a) { *a = 1; }')
    again.get("k", "sm_80")
    assert again.compile_calls == 0


def test_a_record_signature_with_many_fields_persists(cache):
    record = "Record(" + ",".join(f"f{i}[type=float64;offset={8 * i}]" for i in range(200)) + ")"
    entry, fresh = cache.get_or_compile("r" * 64, lambda: (b"\x7fELF", {"signature": [record] * 3}))
    assert fresh and cache.lookup("r" * 64).meta["signature"] == [record] * 3


def test_an_entry_over_the_limits_is_served_from_memory_with_one_warning(cache):
    huge = {"note": "x" * (_entry.MAX_HEADER + 1)}
    with pytest.warns(LazykernWarning, match="cannot persist") as caught:
        for key in ("a" * 64, "b" * 64):
            entry, fresh = cache.get_or_compile(key, lambda: (b"\x7fELF", huge))
            assert fresh and entry.code == b"\x7fELF"
    assert len(caught) == 1 and cache.lookup("a" * 64) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_files_left_by_another_user_in_an_own_directory_are_not_trusted(tmp_path):
    d = tmp_path / "was-shared"
    kc = KernelCache(d)
    kc.store("b" * 64, b"\x7fELF" + os.urandom(100_000))  # a blob file of its own
    kc.close()
    blob = next(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f.endswith(".val"))
    os.chown(blob, 12345, 12345)
    with pytest.warns(LazykernWarning, match="belongs to uid 12345"):
        assert KernelCache(d).lookup("b" * 64) is None
    os.chown(d / "cache.db", 12345, 12345)
    with pytest.warns(LazykernWarning, match="cache.db is owned by uid 12345"):
        assert KernelCache(d).backend == "memory"


def test_a_directory_root_owns_is_trusted_like_ssh_does(tmp_path, monkeypatch):
    """A store an administrator (root) provides, e.g. read-only for every user, is not refused."""
    d = tmp_path / "system-store"
    KernelCache(d).close()
    if os.stat(d).st_uid != 0:
        pytest.skip("needs a root-owned directory")
    monkeypatch.setattr(os, "geteuid", lambda: 4242)  # as an ordinary user would see it
    assert KernelCache(d).backend == "disk"
