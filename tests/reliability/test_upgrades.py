"""After an upgrade (NVRTC, numba-cuda, lazykern's schema) no old entry is ever returned."""

from __future__ import annotations

import numba_cuda
import pytest

from lazykern import KernelCache, LazykernWarning, make_key
from lazykern.compile import compiler
from lazykern.store import _keys as cache_mod  # where the schema version is (store/_keys.py)
from lazykern.store import _toolchain_memo

from ._families import synthetic_family

SRC = 'extern "C" __global__ void k(int *a) { *a = 1; }'


@pytest.fixture
def fresh_fingerprint():
    compiler.toolchain_fingerprint.cache_clear()
    _toolchain_memo.forget()
    yield
    compiler.toolchain_fingerprint.cache_clear()
    _toolchain_memo.forget()


@pytest.mark.parametrize(
    "upgrade",
    ["nvrtc", "numba-cuda", "schema"],
)
def test_upgrade_misses_the_old_entry(tmp_path, monkeypatch, fresh_fingerprint, upgrade):
    kc = KernelCache(tmp_path / "c")
    old = synthetic_family(kc, n=1)
    old.get("add_0", "sm_90")
    old_key = old.key("add_0", "sm_90")
    if upgrade == "nvrtc":
        # An NVRTC upgrade replaces libnvrtc and nvrtc.h, which is what the per-machine memo's stamp sees.
        monkeypatch.setattr(compiler, "nvrtc_version", lambda: (99, 1))
        monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/new-cuda/lib64")
    elif upgrade == "numba-cuda":
        monkeypatch.setattr(numba_cuda, "__version__", "99.0.0")
    else:
        monkeypatch.setattr(cache_mod, "SCHEMA_VERSION", cache_mod.SCHEMA_VERSION + 1)
    compiler.toolchain_fingerprint.cache_clear()
    _toolchain_memo.forget()
    new = synthetic_family(kc, n=1)
    assert new.key("add_0", "sm_90") != old_key
    new.get("add_0", "sm_90")
    assert new.compile_calls == 1  # compiled anew, the old entry was not returned
    assert len(kc) == 2


def test_numba_cuda_missing_still_gives_a_key(monkeypatch, fresh_fingerprint):
    base = make_key(SRC, arch="sm_90")
    compiler.toolchain_fingerprint.cache_clear()
    monkeypatch.setattr(compiler, "numba_cuda_version", lambda: "absent")
    assert make_key(SRC, arch="sm_90") != base


def test_entry_written_by_another_schema_is_dropped(cache, monkeypatch):
    monkeypatch.setattr(cache_mod, "SCHEMA_VERSION", 0)
    cache.store("k", b"\x7fELF old layout")
    monkeypatch.undo()
    with pytest.warns(LazykernWarning, match="stale entry"):
        entry, fresh = cache.get_or_compile("k", lambda: (b"\x7fELF new", {}))
    assert fresh and entry.code == b"\x7fELF new"
