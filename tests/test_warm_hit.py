"""A warm hit does no avoidable work: one SQLite statement, no toolchain recomputation, no write.

Each test opens the filled store as a new process would (a new ``KernelCache``, this
process's toolchain memo forgotten) and counts what the first lookup does.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time

import pytest

from lazykern import KernelCache, KernelFamily
from lazykern.compile import compiler
from lazykern.errors import LazykernWarning
from lazykern.store import _store_read, _toolchain_memo

from .conftest import FRAGMENTS, PREAMBLE


@pytest.fixture
def counted(monkeypatch):
    """Counts calls that compute the toolchain, and every SQLite statement of new connections."""
    calls = {"fingerprint": 0, "files": 0}
    statements: list[str] = []
    real_fp, real_files = compiler.toolchain_fingerprint, compiler.toolchain_files

    def fingerprint():
        calls["fingerprint"] += 1
        return real_fp()

    def files():
        calls["files"] += 1
        return real_files()

    monkeypatch.setattr(compiler, "toolchain_fingerprint", fingerprint)
    monkeypatch.setattr(compiler, "toolchain_files", files)
    real_connect = sqlite3.connect

    def connect(*args, **kwargs):
        con = real_connect(*args, **kwargs)
        con.set_trace_callback(statements.append)
        return con

    # diskcache and the reader both call sqlite3.connect through the module attribute.
    monkeypatch.setattr(sqlite3, "connect", connect)
    _toolchain_memo.forget()
    yield calls, statements
    _toolchain_memo.forget()


def _family(cache: KernelCache) -> KernelFamily:
    return KernelFamily("warmhit", PREAMBLE, fragments={"scale_f32": FRAGMENTS["scale_f32"]}, cache=cache)


def _fill(directory) -> None:
    kc = KernelCache(directory)
    _family(kc).get("scale_f32", "sm_80")
    kc.close()


def test_warm_hit_is_one_select_and_no_toolchain_work(tmp_path, counted):
    _fill(tmp_path / "c")
    calls, statements = counted
    _toolchain_memo.forget()
    calls.update(fingerprint=0, files=0)
    statements.clear()
    kc = KernelCache(tmp_path / "c")
    fam = _family(kc)
    kernel = fam.get("scale_f32", "sm_80")
    assert fam.compile_calls == 0 and kernel.code.startswith(b"\x7fELF")
    assert calls == {"fingerprint": 0, "files": 0}, "the toolchain was recomputed on a warm hit"
    assert len(statements) == 1 and statements[0].lstrip().upper().startswith("SELECT"), statements
    # The hit is counted in memory and written later (here: by the counters' reader).
    assert kc.stats()["hits"] == 1
    assert kc.persistent_counters()["hits"] == 1
    kc.close()


def test_a_fresh_process_hits_and_exits_without_opening_diskcache(tmp_path):
    """The hit is one SELECT; at exit its counts are added in place (once their rows exist)."""
    import subprocess

    _fill(tmp_path / "c")
    child = (
        "import json, sqlite3, sys\n"
        "seen = []\n"
        "real = sqlite3.connect\n"
        "def connect(*a, **k):\n"
        "    con = real(*a, **k); con.set_trace_callback(seen.append); return con\n"
        "sqlite3.connect = connect\n"
        "from lazykern import KernelCache, KernelFamily\n"
        "from tests.conftest import FRAGMENTS, PREAMBLE\n"
        "kc = KernelCache(sys.argv[1])\n"
        "fam = KernelFamily('warmhit', PREAMBLE, fragments={'scale_f32': FRAGMENTS['scale_f32']}, cache=kc)\n"
        "fam.get('scale_f32', 'sm_80'); assert fam.compile_calls == 0\n"
        "hit = list(seen)\n"
        "kc._write_pending()  # what runs when kc is collected or the process exits\n"
        "print(json.dumps([hit, seen[len(hit):]]))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    runs = []
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", child, str(tmp_path / "c")], check=True, env=env, timeout=120, capture_output=True
        )
        runs.append(json.loads(proc.stdout.splitlines()[-1]))
    assert all(len(hit) == 1 and hit[0].startswith("SELECT") for hit, _ in runs)
    # The counter rows exist by now: two in-place additions, nothing else. (SQLite traces a statement
    # again for each trigger it fires: diskcache's Settings bookkeeping.)
    at_exit = list(dict.fromkeys(runs[-1][1]))
    assert len(at_exit) == 3 and at_exit[0].startswith("PRAGMA synchronous"), at_exit
    assert all(s.startswith("UPDATE Cache SET value = value +") for s in at_exit[1:])
    assert KernelCache(tmp_path / "c").persistent_counters()["hits"] == 3


def test_a_collected_cache_writes_its_hits(tmp_path):
    _fill(tmp_path / "c")
    kc = KernelCache(tmp_path / "c")
    _family(kc).get("scale_f32", "sm_80")
    del kc  # no close(): the counts are written when the cache is collected
    assert KernelCache(tmp_path / "c").persistent_counters()["hits"] == 1


def test_memo_recomputes_when_a_toolchain_file_changes(tmp_path, counted, monkeypatch):
    calls, _ = counted
    lib = tmp_path / "libnvrtc.so.13"
    lib.write_bytes(b"v1")
    monkeypatch.setattr(compiler, "toolchain_files", lambda: (calls.__setitem__("files", calls["files"] + 1), [lib])[1])
    os.utime(lib, ns=(1, 1))  # older than the memo's computation: recordable
    store = str(tmp_path / "store")
    os.makedirs(store)
    first = _toolchain_memo.fingerprint(store)
    assert calls["fingerprint"] == 1
    _toolchain_memo.forget()
    assert _toolchain_memo.fingerprint(store) == first and calls["fingerprint"] == 1  # stat matched
    lib.write_bytes(b"v2")  # new size, mtime and ctime: an upgrade in place
    os.utime(lib, ns=(2, 2))
    _toolchain_memo.forget()
    _toolchain_memo.fingerprint(store)
    assert calls["fingerprint"] == 2


def test_memo_is_per_environment_and_ignores_garbage(tmp_path, counted, monkeypatch):
    calls, _ = counted
    store = str(tmp_path / "store")
    os.makedirs(store)
    _toolchain_memo.fingerprint(store)
    (memo,) = [n for n in os.listdir(store) if n.startswith("toolchain-")]
    monkeypatch.setenv("CUDA_HOME", "/opt/other-cuda")  # another environment: its own memo
    _toolchain_memo.forget()
    _toolchain_memo.fingerprint(store)
    assert calls["fingerprint"] == 2 and len([n for n in os.listdir(store) if n.startswith("toolchain-")]) == 2
    monkeypatch.delenv("CUDA_HOME")
    for garbage in (b"\x00not json", json.dumps({"format": 1, "fingerprint": "0" * 64}).encode()):
        (tmp_path / "store" / memo).write_bytes(garbage)
        _toolchain_memo.forget()
        heard: list[str] = []
        value = _toolchain_memo.fingerprint(store, heard.append)
        assert heard and "unreadable" in heard[0] and value != "0" * 64
        _toolchain_memo.forget()
        assert _toolchain_memo.fingerprint(store, heard.append) == value and len(heard) == 1  # rewritten


def test_a_memo_that_is_too_large_a_directory_or_a_fifo_is_replaced_without_waiting(tmp_path, counted):
    """The memo is read with plain bounded reads: more than 64 KiB, a directory or a FIFO (no writer:
    never waited for) in its place is one "unreadable" message and a recomputed, rewritten memo."""
    store = str(tmp_path / "store")
    os.makedirs(store)
    value = _toolchain_memo.fingerprint(store)
    (memo,) = [n for n in os.listdir(store) if n.startswith("toolchain-")]
    path = os.path.join(store, memo)
    real = open(path, "rb").read()

    def too_large() -> None:
        with open(path, "wb") as fh:
            fh.write(real[:-1] + b" " * (1 << 16) + b"}")

    def directory() -> None:
        os.mkdir(path)

    for make in (too_large, directory, lambda: os.mkfifo(path)):
        os.unlink(path)
        make()
        _toolchain_memo.forget()
        heard: list[str] = []
        start = time.monotonic()
        assert _toolchain_memo.fingerprint(store, heard.append) == value
        assert time.monotonic() - start < 30 and len(heard) == 1 and "unreadable" in heard[0], heard
        if os.path.isdir(path):  # the rename over a directory fails: the memo stays unwritten
            os.rmdir(path)
            _toolchain_memo.forget()
            _toolchain_memo.fingerprint(store)
        assert open(path, "rb").read() == real  # rewritten as it was


def test_reader_moves_access_time_only_when_old(tmp_path, counted, monkeypatch):
    _, statements = counted
    kc = KernelCache(tmp_path / "c")
    kc.store("k", b"\x7fELF code")
    kc.close()
    kc = KernelCache(tmp_path / "c")
    statements.clear()
    assert kc.lookup("k") is not None
    assert not any("UPDATE" in s.upper() for s in statements)
    monkeypatch.setattr(_store_read, "TOUCH_AFTER", -1.0)
    before = time.time()
    assert kc.lookup("k") is not None
    assert any(s.upper().startswith("UPDATE CACHE SET ACCESS_TIME") for s in statements), statements
    used = {r[0]: r[3] for r in kc._rows()}["k"]
    assert used >= before
    kc.close()


def test_read_only_store_is_opened_at_once(tmp_path):
    """A directory lazykern cannot write is found at open, not at the first write: it is served read-only.
    (Run as a plain user only: root writes anywhere. It asked for a reader attribute that the read-only
    backend has never had, unnoticed while the suite ran as root.)"""
    if os.geteuid() == 0:
        pytest.skip("root can write to a read-only directory")
    directory = tmp_path / "ro"
    _fill(directory)
    os.chmod(directory, 0o500)
    try:
        with pytest.warns(LazykernWarning, match="cannot be written"):
            kc = KernelCache(directory)
        assert kc.backend == "read-only"
        fam = _family(kc)
        assert fam.get("scale_f32", "sm_80") is not None and fam.compile_calls == 0  # served from the store
        kc.close()
    finally:
        os.chmod(directory, 0o700)


_SEARCH_CHILD = r"""
import json, sys
import cuda.pathfinder
from lazykern import KernelCache, KernelFamily
preamble, fragment = json.loads(sys.argv[2])
before = "numba_cuda" in sys.modules
kc = KernelCache(sys.argv[1])
fam = KernelFamily('warmhit', preamble, fragments={'scale_f32': fragment}, cache=kc)
searched = []
real = cuda.pathfinder.locate_nvidia_header_directory
cuda.pathfinder.locate_nvidia_header_directory = lambda name: searched.append(name) or real(name)
fam.get('scale_f32', 'sm_80')
print(json.dumps({"compiles": fam.compile_calls, "searched": searched,
                  "imported_numba_cuda": not before and "numba_cuda" in sys.modules}))
"""


def test_a_fresh_process_warm_hit_searches_no_directory(tmp_path):
    """The toolkit's header directories (part of every key) come from the toolchain memo: a warm
    hit in a new process asks cuda.pathfinder for nothing (a search through site-packages) and
    imports no numba-cuda for its version."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # The memo belongs to one environment (its import path): the store is filled by a process with
    # the very same environment as the one that then hits it.
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    code = json.dumps([PREAMBLE, FRAGMENTS["scale_f32"]])
    args = [sys.executable, "-c", _SEARCH_CHILD, str(tmp_path / "c"), code]
    runs = [
        json.loads(subprocess.run(args, check=True, env=env, timeout=120, capture_output=True).stdout.splitlines()[-1])
        for _ in range(2)
    ]
    assert runs[0]["compiles"] == 1
    run = runs[1]
    assert run["compiles"] == 0
    assert run["searched"] == [], run["searched"]
    assert not run["imported_numba_cuda"]


def test_memo_remembers_header_directories_until_one_changes(tmp_path, counted, monkeypatch):
    """A memo read in a fresh process gives the header directories it recorded; a directory whose
    stat changed (replaced, moved) sends the process to search again and rewrite the memo."""
    inc = tmp_path / "include"
    inc.mkdir()
    os.utime(inc, ns=(1, 1))  # older than the memo's computation: recordable
    searches = []

    def find() -> tuple[str, ...]:
        searches.append(1)
        return (str(inc),)

    monkeypatch.setattr(compiler, "_find_system_include_dirs", find)
    monkeypatch.setattr(compiler, "toolchain_files", lambda: [])
    store = str(tmp_path / "store")
    os.makedirs(store)
    first = _toolchain_memo.fingerprint(store)
    assert compiler.system_include_dirs() == (str(inc),) and len(searches) == 1
    _toolchain_memo.forget()  # a fresh process
    assert _toolchain_memo.fingerprint(store) == first
    assert compiler.system_include_dirs() == (str(inc),) and len(searches) == 1  # from the memo
    os.rmdir(inc)
    inc.mkdir()  # another directory at that path: new inode
    _toolchain_memo.forget()
    _toolchain_memo.fingerprint(store)
    assert compiler.system_include_dirs() == (str(inc),) and len(searches) == 2
