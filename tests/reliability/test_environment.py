"""Hostile environments: each gives a working program and exactly one clear warning.

Tests run as root in CI, where chmod stops nothing: permission errors are
simulated by monkeypatching, and the one real-permission test skips under root.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import warnings

import diskcache
import pytest

from lazykern import KernelCache, LazykernWarning
from lazykern.store import cache as cache_mod
from lazykern.store._store import DiskBackend

from ._families import synthetic_family

ARCH = "sm_90"


def _warm_and_count_warnings(kc: KernelCache, n: int = 3) -> list[str]:
    """Warm n kernels twice (through two families) and return the LazykernWarnings raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            fam = synthetic_family(kc, n=n)
            for kernel in fam.warm(arch=ARCH):
                assert kernel.code[:4] == b"\x7fELF"
    return [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _sqlite_full(*args, **kwargs):
    raise sqlite3.OperationalError("database or disk is full")


@pytest.mark.parametrize("where", ["blob file", "database"])
def test_full_disk_warns_once_and_keeps_working(tmp_path, monkeypatch, where):
    kc = KernelCache(tmp_path / "c")
    if where == "blob file":
        monkeypatch.setattr(diskcache.Disk, "store", _enospc)
    else:
        monkeypatch.setattr(diskcache.Cache, "set", _sqlite_full)
    messages = _warm_and_count_warnings(kc)
    assert len(messages) == 1, messages
    assert "could not write" in messages[0] and ("No space left" in messages[0] or "full" in messages[0])


@pytest.mark.parametrize("limit", [1000, 20_000])
def test_size_limit_too_small_to_hold_a_kernel(tmp_path, limit):
    kc = KernelCache(tmp_path / "c", size_limit=limit)  # 20 KB: a kernel fits, the database does not
    messages = _warm_and_count_warnings(kc)
    assert len(messages) == 1 and "size limit" in messages[0] and "LAZYKERN_CACHE_SIZE" in messages[0], messages
    assert kc.stats()["entries"] == 0


def test_small_size_limit_keeps_the_store_bounded(tmp_path):
    kc = KernelCache(tmp_path / "c", size_limit=60_000)
    assert _warm_and_count_warnings(kc, n=16) == []
    s = kc.stats()
    # Culled one entry per write; "bytes" counts SQLite pages (4 KiB), and in a full xdist run the volume was seen
    # at 73,728 (18 pages, 10 entries) where a lone run ends at 57,344: allow one entry plus two pages over the limit.
    assert 0 < s["entries"] < 16 and s["bytes"] <= 60_000 + 8_000 + 2 * 4096


@pytest.mark.parametrize("name", ["with space", "ünïcødé-缓存", "tab\tand 'quote'"])
def test_odd_directory_names_work_silently(tmp_path, name):
    directory = tmp_path / name / "cache"
    kc = KernelCache(directory)
    assert _warm_and_count_warnings(kc) == []
    assert kc.backend == "disk" and kc.stats()["entries"] == 3
    again = synthetic_family(KernelCache(directory), n=3)
    again.warm(arch=ARCH)
    assert again.compile_calls == 0


def test_cache_dir_env_pointing_at_a_file(tmp_path, monkeypatch):
    target = tmp_path / "not-a-dir"
    target.write_text("x")
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(target))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kc = KernelCache()
    messages = [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]
    assert len(messages) == 1 and "LAZYKERN_CACHE_DIR" in messages[0] and str(target) in messages[0]
    assert kc.backend == "memory" and _warm_and_count_warnings(kc) == []


@pytest.mark.parametrize("step", ["mkdir", "open database", "write"])
def test_permission_denied_warns_once(tmp_path, monkeypatch, step):
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    if step == "mkdir":
        monkeypatch.setattr(cache_mod.os, "makedirs", denied)
    elif step == "open database":
        monkeypatch.setattr(diskcache.Cache, "__init__", denied)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kc = KernelCache(tmp_path / "c")
        if step == "write":
            monkeypatch.setattr(DiskBackend, "set", denied)
    messages = [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]
    messages += _warm_and_count_warnings(kc)
    assert len(messages) == 1 and "Permission denied" in messages[0], messages
    assert kc.backend == ("disk" if step == "write" else "memory")


def test_real_read_only_directory(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("running as root: permissions do not apply")
    directory = tmp_path / "ro"
    KernelCache(directory).close()
    os.chmod(directory, 0o500)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kc = KernelCache(directory)
        messages = [str(w.message) for w in caught if issubclass(w.category, LazykernWarning)]
        messages += _warm_and_count_warnings(kc)
        assert len(messages) == 1, messages
    finally:
        os.chmod(directory, 0o700)


def test_new_directory_is_private_even_under_a_lax_umask(tmp_path):
    old = os.umask(0)
    try:
        KernelCache(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "a" / "b").st_mode & 0o777 == 0o700


def test_world_writable_directory_warns_once_per_process(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            KernelCache(shared).close()
        KernelCache(str(shared) + "/").close()  # same directory, spelled differently
    messages = [str(w.message) for w in caught if "other users can write to it" in str(w.message)]
    assert len(messages) == 1
    other = tmp_path / "other"
    other.mkdir()
    os.chmod(other, 0o775)
    with pytest.warns(LazykernWarning, match="other users can write to it"):
        KernelCache(other)
