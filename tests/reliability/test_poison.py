"""Poisoned stores: nothing but raw bytes is ever decoded, so no stored pickle can run code."""

from __future__ import annotations

import os
import pickle
import sqlite3

import diskcache
import pytest

from lazykern import KernelCache, LazykernWarning


class Evil:
    """Unpickling this creates a marker file: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def poisoned(tmp_path):
    """A cache directory holding every kind of non-bytes row diskcache can write."""
    marker = str(tmp_path / "pwned")
    directory = str(tmp_path / "c")
    KernelCache(directory).store("good", b"\x7fELF fine", {"kernel": "good"})
    with diskcache.Cache(directory) as raw:
        raw.set("inline-pickle", Evil(marker))
        raw.set("file-pickle", [Evil(marker)] + [b"x" * 1000] * 100)  # > 32 KB: pickled into a .val file
        raw.set(("pickled", "key"), b"bytes under a pickled key")
        raw.set(Evil(marker), b"bytes under an evil key")
        raw.set("text-file", "t" * 100_000)  # MODE_TEXT file
        raw.set("text-inline", "short str")
        raw.set("a-float", 1.5)
    with sqlite3.connect(os.path.join(directory, "cache.db")) as con:
        modes = {m for (m,) in con.execute("SELECT mode FROM Cache")}
    assert {1, 2, 3, 4} <= modes or {1, 3, 4} <= modes  # raw, (binary,) text and pickle rows exist
    return directory, marker


def test_no_lookup_unpickles(poisoned):
    directory, marker = poisoned
    kc = KernelCache(directory)
    for key in ("inline-pickle", "file-pickle", "text-file", "text-inline", "a-float"):
        with pytest.warns(LazykernWarning):
            assert kc.lookup(key) is None
        assert kc.lookup(key) is None  # dropped, and reported only once
    assert kc.lookup("good").code == b"\x7fELF fine"
    assert not os.path.exists(marker)


def test_listing_and_stats_never_unpickle(poisoned):
    directory, marker = poisoned
    kc = KernelCache(directory)
    keys = [e["key"] for e in kc.entries()]
    assert keys == ["good"]
    assert len(kc.check(min_age=0)["bad_entries"]) == 5  # listed past, never deleted by a listing
    assert kc.stats()["entries"] >= 1 and len(kc) == 1
    assert kc.persistent_counters()["hits"] == 0
    assert not os.path.exists(marker)


def test_check_drops_poisoned_rows_without_reading_them(poisoned):
    directory, marker = poisoned
    kc = KernelCache(directory)
    report = kc.check(repair=True, min_age=0)
    assert report["foreign_rows"] == 2  # the two pickled keys
    assert set(report["bad_entries"]) == {"inline-pickle", "file-pickle", "text-file", "text-inline", "a-float"}
    assert kc.check(min_age=0)["ok"]
    assert not os.path.exists(marker)
    with sqlite3.connect(os.path.join(directory, "cache.db")) as con:
        assert con.execute("SELECT COUNT(*) FROM Cache WHERE mode IN (3, 4) OR raw = 0").fetchone()[0] == 0


def test_get_or_compile_replaces_a_pickle(poisoned):
    directory, marker = poisoned
    kc = KernelCache(directory)
    with pytest.warns(LazykernWarning, match="unpickle|poisoned"):
        entry, fresh = kc.get_or_compile("inline-pickle", lambda: (b"\x7fELF new", {}))
    assert fresh and kc.lookup("inline-pickle").code == b"\x7fELF new"
    assert not os.path.exists(marker)


def test_cache_refuses_to_write_anything_but_bytes(tmp_path):
    from lazykern import CacheError

    kc = KernelCache(tmp_path / "c")
    for value in ({"a": 1}, Evil(str(tmp_path / "m")), 3.5, None, ["x"]):
        with pytest.raises(CacheError):
            kc["k"] = value
    with pytest.raises(TypeError):
        kc.lookup(("tuple", "key"))
    assert pickle.dumps(1)  # pickle itself still works; lazykern never calls it
