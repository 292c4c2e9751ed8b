"""Every byte in the cache directory is untrusted: each class of bad input costs a recompile, never a crash.

One test per class (issue 13, items 1 and 4 to 8), each over several examples of the class.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
import threading
import time
import warnings

import diskcache
import filelock
import pytest

from lazykern import KernelCache, LazykernWarning
from lazykern.store import _keys as cache_mod  # where the schema version is (store/_keys.py)

from . import _forge
from ._families import synthetic_family

ARCH = "sm_90"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Two kernels compiled once into a template directory: their bytes are what a fresh compile gives."""
    directory = str(tmp_path_factory.mktemp("template") / "c")
    kc = KernelCache(directory)
    fam = synthetic_family(kc, n=2)
    codes = {n: fam.get(n, ARCH).code for n in fam.names()}
    keys = {n: fam.key(n, ARCH) for n in fam.names()}
    kc.close()
    return directory, codes, keys


@pytest.fixture
def store(reference, tmp_path):
    import shutil

    template, codes, keys = reference
    directory = str(tmp_path / "c")
    shutil.copytree(template, directory)
    return directory, codes, keys


def _serve_all(directory: str, codes: dict[str, bytes]) -> tuple[int, list[str]]:
    """Ask a fresh family for every kernel; returns (compiles, LazykernWarnings). Asserts no wrong bytes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fam = synthetic_family(KernelCache(directory, lock_timeout=1), n=2)
        for name, code in codes.items():
            assert fam.get(name, ARCH).code == code, f"{name}: served bytes differ from a fresh compile"
    return fam.compile_calls, [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]


# -- 1: an entry is served only if its header fully matches the request -------------------------------------
@pytest.mark.parametrize("field", ["family", "kernel", "symbol", "arch", "options", "route", "toolchain", "key"])
@pytest.mark.parametrize("how", ["stripped", "other value"])
def test_header_that_does_not_fully_match_is_never_served(store, field, how):
    directory, codes, keys = store
    # add_1's code under add_0's key, its header rewritten to claim add_0 except for one field.
    header, _ = _forge.decode_unchecked(_forge.row_value(directory, keys["add_0"]))
    _, other_code = _forge.decode_unchecked(_forge.row_value(directory, keys["add_1"]))
    if how == "stripped":
        del header[field]
    else:
        header[field] = ["-O0"] if field == "options" else "x" + str(header[field])
    _forge.set_row_value(directory, keys["add_0"], _forge.entry_with_header(other_code, header))
    compiles, messages = _serve_all(directory, codes)
    assert compiles == 1 and len(messages) == 1 and field in messages[0], messages


# -- 4: listing, exporting and inspecting never delete; other versions' entries are listed as stale ----------
def test_read_only_commands_never_delete(store, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from lazykern.tools.cli import app

    directory, _, _ = store
    monkeypatch.setattr(cache_mod, "SCHEMA_VERSION", 1)
    KernelCache(directory).store("0" * 64, b"\x7fELF other version", {"family": "old"})
    monkeypatch.undo()
    con = _forge.db(directory)
    con.execute(
        "INSERT INTO Cache (key, raw, store_time, access_time, mode, value, size) VALUES (?, 1, 0, 0, 1, ?, 9)",
        ("1" * 64, b"LZK\x01" + b"\x00" * 60),
    )  # format-1 entry of an older lazykern
    con.execute(
        "INSERT INTO Cache (key, raw, store_time, access_time, mode, value, size) VALUES (?, 1, 0, 0, 1, ?, 9)",
        ("2" * 64, b"garbage"),
    )
    before = con.execute("SELECT key, value FROM Cache ORDER BY key").fetchall()
    con.close()
    runner = CliRunner()
    for args in (
        ["cache", "ls"],
        ["cache", "ls", "--json"],
        ["cache", "info"],
        ["cache", "info", "--json"],
        ["cache", "export", str(tmp_path / "b.tar.gz")],
    ):
        result = runner.invoke(app, ["--cache-dir", directory, *args])
        assert result.exit_code == 0, (args, result.output)
        with _forge.db(directory) as con:
            assert con.execute("SELECT key, value FROM Cache ORDER BY key").fetchall() == before, args
    rows = json.loads(runner.invoke(app, ["--cache-dir", directory, "cache", "ls", "--json"]).output)
    assert sorted((r["key"][:1], r["stale"]) for r in rows if r["stale"]) == [("0", True), ("1", True)]
    assert (
        "left out 2 entries of other lazykern versions"
        in runner.invoke(app, ["--cache-dir", directory, "cache", "export", str(tmp_path / "c.tar")]).output
    )


# -- 5: headers are covered by the digest and parsed with a strict schema -------------------------------------
BAD_HEADERS = [
    b'{"key": 5}',
    b'{"arch": null}',
    b'{"options": "-O3"}',
    b'{"options": [1, 2]}',
    b'{"compile_seconds": NaN}',
    b'{"compile_seconds": "fast"}',
    b'{"compile_seconds": 1e999}',
    b'{"created": -1}',
    b'{"schema": "2"}',
    b'{"schema": true}',
    b'{"extra": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    # Long strings and big lists are legitimate (long -D values, 1,100 options, header manifests):
    # only the header's total size bounds them (test_cache.py: ..._over_the_old_header_limits_persist).
    b'{"n": 123456789012345678901234567890}',
    b"[1, 2]",
    b'"text"',
    b"\xff\xfe not utf-8",
    b'{"a": 1, "a": }',
]


@pytest.mark.parametrize("bad", BAD_HEADERS, ids=range(len(BAD_HEADERS)))
def test_malformed_header_is_a_corrupt_entry(store, bad):
    directory, codes, keys = store
    header, code = _forge.decode_unchecked(_forge.row_value(directory, keys["add_0"]))
    if bad.startswith(b"{") and bad.endswith(b"}"):  # merge the bad field into an otherwise complete header
        raw = json.dumps(header, sort_keys=True).encode()[:-1] + b"," + bad[1:]
    else:
        raw = bad
    _forge.set_row_value(directory, keys["add_0"], _forge.entry_with_raw_header(code, raw))
    kc = KernelCache(directory)
    assert not kc.check(min_age=0)["ok"]
    compiles, messages = _serve_all(directory, codes)
    assert compiles == 1 and len(messages) == 1, messages
    assert KernelCache(directory).check(min_age=0)["ok"]


def test_digest_covers_the_header(store):
    directory, codes, keys = store
    blob = bytearray(_forge.row_value(directory, keys["add_0"]))
    at = blob.index(b'"arch":"sm_90"') + 12
    blob[at] = ord("8")  # sm_80: a header edit that would otherwise pass every check but the digest
    _forge.set_row_value(directory, keys["add_0"], bytes(blob))
    compiles, messages = _serve_all(directory, codes)
    assert compiles == 1 and "digest" in messages[0]


# -- 6: rows, settings and Disk classes the store did not write ------------------------------------------------
FOREIGN_VALUES = [b"\x00garbage", "text", 1.5, float("inf"), -7, 2**63 - 1, pickle.dumps({"a": [1]})]


@pytest.mark.parametrize("value", FOREIGN_VALUES, ids=[type(v).__name__ + str(i) for i, v in enumerate(FOREIGN_VALUES)])
@pytest.mark.parametrize("row", ["lazykern:stat:hits", "lazykern:stat:compile_ms", "lazykern:toolchain:"])
def test_garbage_in_the_stores_own_rows(store, row, value):
    directory, codes, keys = store
    mode = 4 if isinstance(value, bytes) and value.startswith(b"\x80") else 1
    con = _forge.db(directory)
    con.execute("UPDATE Cache SET value = ?, mode = ? WHERE key LIKE ?", (value, mode, row + "%"))
    con.close()
    for _ in range(2):  # repaired by the first process: the second one is silent
        compiles, messages = _serve_all(directory, codes)
        assert compiles == 0 and len(messages) <= 1, messages
        kc = KernelCache(directory)
        counters = kc.persistent_counters()
        assert all(type(v) is int and v >= 0 for v in counters.values()), counters
        assert kc.stats()["entries"] == 2 and kc.check(min_age=0)["ok"]
    assert not messages


def test_other_diskcache_users_in_the_directory(store):
    directory, codes, _ = store
    with diskcache.Cache(directory) as other:
        other.set(7, b"int-keyed bytes")
        other.set(2.5, "float key")
        other.set(b"bytes-key", 1)
    with diskcache.Cache(directory, disk=diskcache.JSONDisk, disk_compress_level=3) as other:
        other.set("json", {"a": [1, 2]})
        other.set(12345, "int key")
    compiles, messages = _serve_all(directory, codes)
    assert compiles == 0
    kc = KernelCache(directory)
    assert kc.stats()["entries"] == 2 and len(list(kc.entries())) == 2
    assert kc.check(repair=True, min_age=0)["ok"]


SETTINGS = [
    ("sqlite_mmap_size", "garbage; DROP TABLE Cache"),
    ("sqlite_journal_mode", "nonsense"),
    ("sqlite_cache_size", b"\x00\x01"),
    ("sqlite_synchronous", 1e300),
    ("sqlite_not_a_pragma", "1 2 3"),
    ("disk_compress_level", 9),
    ("disk_min_file_size", "big"),
    ("size_limit", "none"),
    ("eviction_policy", "random"),
    ("count", "many"),
    ("size", -(2**62)),
    ("_disk", "x"),
    ("get", 1),
]


@pytest.mark.parametrize("key,value", SETTINGS, ids=[k for k, _ in SETTINGS])
def test_garbage_settings_are_reset_on_open(store, key, value):
    directory, codes, _ = store
    con = _forge.db(directory)
    con.execute("INSERT OR REPLACE INTO Settings VALUES (?, ?)", (key, value))
    con.close()
    compiles, messages = _serve_all(directory, codes)
    assert compiles == 0 and len(messages) <= 1, messages
    kc = KernelCache(directory)
    assert kc.backend == "disk" and kc.stats()["entries"] == 2
    assert _serve_all(directory, codes) == (0, [])  # repaired for every later process


# -- 7: only regular files are read, never more than the entry declares ----------------------------------------
def _big_entry(directory: str) -> str:
    """Store an entry large enough for diskcache to keep in its own file; return that file's path."""
    KernelCache(directory).store("big", os.urandom(100_000), {"kernel": "big"})
    with _forge.db(directory) as con:
        ((filename,),) = con.execute("SELECT filename FROM Cache WHERE key = 'big'").fetchall()
    return os.path.join(directory, filename)


def _within(seconds: float, fn):
    out: list = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s (hang)"
    return out[0]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "link-to-entry", "bigger-than-declared"])
def test_special_blob_files_are_refused(store, tmp_path, kind):
    directory, _, _ = store
    path = _big_entry(directory)
    original = open(path, "rb").read()
    os.unlink(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "link-to-entry":
        (tmp_path / "elsewhere").write_bytes(original)
        os.symlink(tmp_path / "elsewhere", path)
    else:
        with open(path, "wb") as fh:
            fh.write(original + b"\x00" * 1_000_000)
    kc = KernelCache(directory)
    report = _within(10, lambda: kc.check(min_age=0))
    assert report["bad_entries"] == ["big"] or report["missing_files"] == 1
    with pytest.warns(LazykernWarning, match="big"):
        assert _within(10, lambda: kc.lookup("big")) is None


# -- 8: lock problems degrade to compiling without the lock ----------------------------------------------------
def _compile_once(directory: str, timeout: float) -> tuple[float, list[str], bool]:
    kc = KernelCache(directory, lock_timeout=timeout)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entry, fresh = kc.get_or_compile("k" * 64, lambda: (b"\x7fELF fresh", {}))
    messages = [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]
    return time.perf_counter() - start, messages, entry.code == b"\x7fELF fresh" and fresh


def _lock_path(directory: str) -> str:
    import hashlib

    return os.path.join(directory, "locks", hashlib.sha256(b"k" * 64).hexdigest()[:40] + ".lock")


@pytest.mark.parametrize(
    "problem", ["lock is a directory", "locks is a file", "held by a stuck process", "unreadable lock file"]
)
def test_lock_failures_degrade_with_one_warning(tmp_path, monkeypatch, problem):
    directory = str(tmp_path / "c")
    KernelCache(directory)
    os.makedirs(os.path.join(directory, "locks"), exist_ok=True)
    holder = None
    if problem == "lock is a directory":
        os.mkdir(_lock_path(directory))
    elif problem == "locks is a file":
        os.rmdir(os.path.join(directory, "locks"))
        open(os.path.join(directory, "locks"), "w").close()
    elif problem == "unreadable lock file":  # another user's 0644 lock file; root ignores modes, so simulate EACCES
        open(_lock_path(directory), "w").close()

        def denied(self, *args, **kwargs):
            raise PermissionError(13, "Permission denied", self.lock_file)

        monkeypatch.setattr(filelock.FileLock, "acquire", denied)
    else:
        holder = filelock.FileLock(_lock_path(directory), is_singleton=False)
        holder.acquire()
    try:
        seconds, messages, ok = _within(30, lambda: _compile_once(directory, 0.5))
    finally:
        if holder is not None:
            holder.release()
    assert ok and len(messages) == 1 and "without it" in messages[0], messages
    assert seconds < 10


def test_store_files_take_the_directorys_permissions(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYKERN_SHARED_CACHE", "1")  # a group-shared team cache, on purpose
    directory = tmp_path / "shared"
    directory.mkdir()
    os.chmod(directory, 0o2770)  # group-shared: setgid, group rwx
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LazykernWarning)  # (it warns that the group can write there)
        _, messages, ok = _compile_once(str(directory), 5)
    assert ok and not messages
    lock = _lock_path(str(directory))
    assert stat.S_IMODE(os.stat(lock).st_mode) == 0o660
    assert stat.S_IMODE(os.stat(os.path.dirname(lock)).st_mode) & 0o070 == 0o070
    kc = KernelCache(directory)
    kc.store("big", os.urandom(100_000))  # a blob file in two levels of directories
    files = [os.path.join(r, f) for r, _, fs in os.walk(directory) for f in fs if not f.endswith(".lock")]
    assert files and all(stat.S_IMODE(os.stat(f).st_mode) == 0o660 for f in files), files
    blob_dirs = [r for r, _, fs in os.walk(directory) if any(f.endswith(".val") for f in fs)]
    assert all(stat.S_IMODE(os.stat(d).st_mode) & 0o070 == 0o070 for d in blob_dirs)
