"""Damaged stores: each fault is detected, reported once, recompiled; no crash, no wrong kernel."""

from __future__ import annotations

import os
import random
import sqlite3
import warnings

import diskcache
import pytest

from lazykern import KernelCache, LazykernWarning
from lazykern.store import _later
from lazykern.store._entry import MAGIC, encode

from ._families import synthetic_family

ARCH = "sm_90"


def _blob_files(directory) -> list[str]:
    return [os.path.join(r, f) for r, _, fs in os.walk(directory) for f in fs if f.endswith(".val")]


def _payload(i: int, size: int) -> bytes:
    return bytes((i * 31 + j) % 251 for j in range(size))


def _fill(directory, n: int, size: int) -> dict[str, bytes]:
    kc = KernelCache(directory)
    data = {f"k{i}": _payload(i, size) for i in range(n)}
    for key, code in data.items():
        kc.store(key, code, {"kernel": key, "arch": ARCH})
    kc.close()
    return data


def _get_all(kc: KernelCache, data: dict[str, bytes]) -> tuple[int, int]:
    """Fetch every key through get_or_compile; returns (recompiled, wrong)."""
    recompiled = wrong = 0
    for key, code in data.items():
        entry, fresh = kc.get_or_compile(key, lambda code=code, key=key: (code, {"kernel": key, "arch": ARCH}))
        recompiled += fresh
        wrong += entry.code != code
    return recompiled, wrong


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_damaged_blob_file_is_recompiled_once(tmp_path, damage):
    data = _fill(tmp_path / "c", 4, 100_000)  # above diskcache's 32 KB inline limit: one file each
    rng = random.Random(damage)
    for path in _blob_files(tmp_path / "c"):
        if damage == "truncate":
            os.truncate(path, rng.randrange(1, 100_000))
        elif damage == "flip":
            with open(path, "r+b") as fh:
                where = rng.randrange(os.path.getsize(path))
                fh.seek(where)
                byte = fh.read(1)
                fh.seek(where)
                fh.write(bytes([byte[0] ^ 0x40]))
        else:
            os.unlink(path)
    kc = KernelCache(tmp_path / "c")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _get_all(kc, data) == (4, 0)
        assert _get_all(kc, data) == (0, 0)  # repaired for good
    messages = [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]
    assert len(messages) == 4 and len({m[:40] for m in messages}) == 4, messages  # once per entry
    assert kc.stats()["corrupt"] == 4


def test_flipped_inline_value_is_caught(tmp_path):
    data = _fill(tmp_path / "c", 3, 2000)  # inline in SQLite
    con = sqlite3.connect(tmp_path / "c" / "cache.db")
    (value,) = con.execute("SELECT value FROM Cache WHERE key = 'k1'").fetchone()
    flipped = bytearray(value)
    flipped[-10] ^= 1
    con.execute("UPDATE Cache SET value = ? WHERE key = 'k1'", (bytes(flipped),))
    con.commit()
    con.close()
    kc = KernelCache(tmp_path / "c")
    with pytest.warns(LazykernWarning, match="digest"):
        assert _get_all(kc, data) == (1, 0)


def _overwrite_pages(db: str, pages: list[int], seed: int) -> None:
    rng = random.Random(seed)
    with sqlite3.connect(db) as con:
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
    with open(db, "r+b") as fh:
        for page in pages:
            fh.seek(page * page_size)
            fh.write(rng.randbytes(page_size))


@pytest.mark.parametrize("seed", range(6))
def test_garbage_sqlite_pages_are_quarantined(tmp_path, seed):
    directory = tmp_path / "c"
    data = _fill(directory, 60, 1500)  # inline rows spread over ~25 pages
    db = str(directory / "cache.db")
    n_pages = os.path.getsize(db) // 4096
    with sqlite3.connect(db) as con:
        (table_root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'Cache'").fetchone()
    rng = random.Random(seed)
    pages = [0] if seed == 0 else sorted(rng.sample(range(1, n_pages), k=1 + seed % 3))  # 0-based offsets
    _overwrite_pages(db, pages, seed)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kc = KernelCache(directory)
        recompiled, wrong = _get_all(kc, data)
        assert _get_all(kc, data) == (0, 0)
    assert wrong == 0
    db_warnings = [w for w in caught if "database" in str(w.message) and "corrupt" in str(w.message)]
    assert len(db_warnings) == 1, [str(w.message) for w in caught]
    report = kc.check()
    assert report["integrity"] == "ok" and report["backend"] == "disk"
    assert len(report["quarantined_files"]) == 1  # kept for inspection
    print(f"\npages {pages}: {recompiled} of {len(data)} entries recompiled, {len(data) - recompiled} salvaged")
    if 0 not in pages and table_root - 1 not in pages:  # the table's root gone: every row is unreachable
        assert recompiled < len(data), "intact rows of the broken database should have been salvaged"


def test_check_repair_finds_every_fault(tmp_path):
    directory = tmp_path / "c"
    data = _fill(directory, 6, 50_000)
    with sqlite3.connect(directory / "cache.db") as con:
        (k0_file,) = con.execute("SELECT filename FROM Cache WHERE key = 'k0'").fetchone()
    os.unlink(directory / k0_file)  # a row without its file
    orphan = directory / "ab" / "cd" / ("0" * 28 + ".val")
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"left by a killed writer")
    (directory / "locks").mkdir(exist_ok=True)
    (directory / "locks" / "stale.lock").write_text("")
    with diskcache.Cache(str(directory)) as raw:
        raw.set(("pickled", "key"), b"x")  # a row whose key is a pickle
    kc = KernelCache(directory)
    kc.store("k1", b"other bytes")  # fine entry; then forge k2's header digest
    forged = bytearray(encode(b"good", {"kernel": "k2"}))
    forged[-1] ^= 1
    with diskcache.Cache(str(directory)) as raw:
        raw.set("k2", bytes(forged))

    report = kc.check(repair=False, min_age=0)
    assert not report["ok"]
    assert report["missing_files"] == 1 and report["orphan_files"] == 1
    assert sorted(report["bad_entries"]) == ["k0", "k2"] and report["foreign_rows"] == 1 and report["stale_locks"] >= 1
    assert orphan.exists()  # nothing changed without repair

    fixed = kc.check(repair=True, min_age=0)
    assert fixed["missing_files"] == 1 and not orphan.exists()
    again = kc.check(min_age=0)
    assert again["ok"] and again["stale_locks"] == 0, again
    assert not (directory / "locks" / "stale.lock").exists()
    assert {e["key"] for e in kc.entries()} == set(data) - {"k0", "k2"}


def test_check_leaves_young_files_and_held_locks_alone(tmp_path):
    import filelock

    directory = tmp_path / "c"
    _fill(directory, 1, 10)
    young = directory / "ab" / "cd" / ("1" * 28 + ".val")
    young.parent.mkdir(parents=True)
    young.write_bytes(b"a writer is about to insert its row")
    held = filelock.FileLock(str(directory / "locks" / "held.lock"))
    (directory / "locks").mkdir(exist_ok=True)
    with held:
        os.utime(directory / "locks" / "held.lock", (0, 0))
        kc = KernelCache(directory)
        report = kc.check(repair=True)  # default min_age: 60 s
        assert young.exists() and (directory / "locks" / "held.lock").exists()
        assert report["orphan_files"] == 0 and report["stale_locks"] == 0


def test_swapped_entry_is_not_loaded(tmp_path):
    kc = KernelCache(tmp_path / "c")
    fam = synthetic_family(kc, n=2)
    a, b = (fam.key(n, ARCH) for n in fam.names())
    good_a = fam.get("add_0", ARCH).code
    fam.get("add_1", ARCH)
    _later.wait_all()  # a fresh compile is stored once its traced pass answers: read the store after
    with diskcache.Cache(kc.directory) as raw:
        raw.set(a, raw.get(b))  # add_1's record under add_0's key
    fresh = synthetic_family(KernelCache(tmp_path / "c"), n=2)
    with pytest.warns(LazykernWarning, match="swapped"):
        k = fresh.get("add_0", ARCH)
    assert k.code == good_a and fresh.compile_calls == 1


def test_header_must_match_the_request(cache):
    cache.store("k", b"\x7fELF kernel f", {"kernel": "f", "arch": "sm_80"})
    assert cache.lookup("k", expect={"kernel": "f", "arch": "sm_80"}).code == b"\x7fELF kernel f"
    with pytest.warns(LazykernWarning, match="arch='sm_80', asked for 'sm_90'"):
        entry, fresh = cache.get_or_compile(
            "k", lambda: (b"\x7fELF sm_90", {"arch": "sm_90"}), expect={"arch": "sm_90"}
        )
    assert fresh and entry.code == b"\x7fELF sm_90"
    cache.store("bare", b"code", {})  # a header without an expected field is refused, never trusted
    with pytest.warns(LazykernWarning, match="lacks 'kernel'"):
        assert cache.lookup("bare", expect={"kernel": "g"}) is None


def test_forged_blob_path_cannot_read_or_delete_other_files(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(MAGIC + b"not yours")
    directory = tmp_path / "c"
    kc = KernelCache(directory)
    kc.store("k", os.urandom(40_000))
    con = sqlite3.connect(directory / "cache.db")
    con.execute("UPDATE Cache SET filename = '../victim.txt' WHERE key = 'k'")
    con.commit()
    con.close()
    with pytest.warns(LazykernWarning, match="forged"):
        assert kc.lookup("k") is None
    kc.check(repair=True, min_age=0)
    assert victim.read_bytes() == MAGIC + b"not yours"
