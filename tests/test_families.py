"""The family registry: built-ins plus families other packages declare as entry points."""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging

import pytest

from lazykern import KernelCache, families, tropical
from lazykern.errors import FamilyError
from lazykern.families.warm import warm
from lazykern.scale import dask
from lazykern.scale.bundle import import_bundle
from lazykern.store import _entry
from lazykern.store.cache import set_default_cache
from tests import _tropical_like
from tests.test_bundle import _manifest, _tar

GROUP = families.ENTRY_POINT_GROUP


@pytest.fixture
def declared(monkeypatch):
    """Two installed entry points, as a third-party package would declare them; one of them broken."""
    real = importlib.metadata.entry_points
    fake = [
        importlib.metadata.EntryPoint("tropical_like", "tests._tropical_like:family", GROUP),
        # A factory: every resolve builds a fresh family, so warming one leaves no kernel in a shared object.
        importlib.metadata.EntryPoint("tropical_like_fresh", "tests._tropical_like:make_family", GROUP),
        importlib.metadata.EntryPoint("gone", "no_such_package.kernels:family", GROUP),
    ]

    def entry_points(**params):
        return [ep for ep in fake if ep.group == params["group"]] if params.get("group") == GROUP else real(**params)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    return fake


def test_tropical_is_built_in_and_resolves_by_name():
    assert families.declared()["tropical"] == "lazykern.tropical:family"
    assert families.resolve("tropical") is tropical.family
    assert families.resolve("lazykern.tropical:family") is tropical.family


def test_an_entry_point_family_is_found_by_name(declared):
    assert families.declared()["tropical_like"] == "tests._tropical_like:family"
    assert families.resolve("tropical_like") is _tropical_like.family


def test_loaded_leaves_out_a_family_that_does_not_import_and_says_why(declared, caplog):
    with caplog.at_level(logging.WARNING, logger="lazykern"):
        loaded = families.loaded()
    assert loaded["tropical_like"] is _tropical_like.family and loaded["tropical"] is tropical.family
    assert "gone" not in loaded and "no_such_package" in caplog.text
    assert "'tropical_like_fresh' (tests._tropical_like:make_family) left out: a family of that name" in caplog.text


def test_resolve_errors_name_what_failed(declared):
    with pytest.raises(FamilyError, match="unknown family 'nope'.*tropical, tropical_like, tropical_like_fresh"):
        families.resolve("nope")
    with pytest.raises(FamilyError, match="cannot import module 'no_such_package.kernels'"):
        families.resolve("gone")
    with pytest.raises(FamilyError, match="has no attribute 'missing'"):
        families.resolve("tests._tropical_like:missing")
    with pytest.raises(FamilyError, match="is a list, not a lazykern KernelFamily"):
        families.resolve("tests._tropical_like:SIG")
    # A zero-argument factory, given or named.
    assert families.resolve(_tropical_like.make_family).name == "tropical_like"
    assert families.resolve("tests._tropical_like:make_family").name == "tropical_like"


def test_warm_engine_and_dask_find_an_entry_point_family(declared, tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(tmp_path / "cache"))
    set_default_cache(None)
    try:
        summary = warm("tropical_like_fresh", patterns=["m*_f32"], archs=["sm_90"], jobs=2)
        assert summary.ok and summary.family == "tropical_like" and summary.count("compiled") == 2
        report = dask._warm_from_family("tropical_like_fresh", ["maxplus_f32", "minplus_f32"], "sm_90")
        assert report["kernels"] == 2 and report["compiled"] == 0  # the warm above stored both
        assert report["cache"] == str(tmp_path / "cache")
    finally:
        set_default_cache(None)


def test_bundle_import_recomputes_keys_of_an_entry_point_family(declared, tmp_path):
    # An entry of the entry-point family filed under a key it does not have: only a registry that
    # found the family can recompute the key and refuse it.
    source = _tropical_like.make_family()
    source._cache = KernelCache(tmp_path / "source")
    (kernel,) = source.warm(["maxplus_f32"], arch="sm_90")
    entry = source.cache.lookup(source.key("maxplus_f32", "sm_90"))
    forged = "f" * 64
    blob = _entry.encode(entry.code, {**entry.meta, "key": forged})  # self-consistent: only the recomputed key differs
    members = [
        _manifest([{"key": forged, "sha256": hashlib.sha256(blob).hexdigest()}]),
        (f"entries/{forged}.lzk", blob),
    ]
    path = _tar(tmp_path / "k.tar", members)
    report = import_bundle(KernelCache(tmp_path / "target"), path)
    assert "does not match tropical_like/maxplus_f32" in report.skipped[forged]


def test_pyproject_declares_tropical_in_the_entry_point_group():
    from pathlib import Path

    import tomllib

    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"][GROUP] == {"tropical": "lazykern.tropical:family"}


def test_prefetch_builds_each_kernel_once_in_threads_and_get_waits_for_it(tmp_path):
    """prefetch returns at once and builds in threads; a get meanwhile waits for that build (one NVRTC
    call per kernel), and a name already built or asked twice starts nothing more."""
    import threading

    from lazykern.families.family import KernelFamily
    from lazykern.store.cache import KernelCache

    fam = KernelFamily("prefetch_demo", "#define ONE 1\n", cache=KernelCache(str(tmp_path)))
    for n in ("one", "two"):
        fam.add(n, f'extern "C" __global__ void {n}(int *a) {{ *a = ONE; }}', signature=["ptr"])
    builders = []  # the thread of each build, observed (a time bound would judge the machine's load)
    real = fam._build
    fam._build = lambda frag, arch: builders.append(threading.get_ident()) or real(frag, arch)  # type: ignore[method-assign]
    threads = fam.prefetch(["one", "two", "one"], arch="sm_90")
    assert len(threads) == 2 and threading.get_ident() not in builders  # prefetch built nothing on the caller's thread
    assert {k.name for k in (fam.get("one", "sm_90"), fam.get("two", "sm_90"))} == {"one", "two"}
    for thread in threads:  # the caller's to join: each ends with its build
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert fam.prefetch(["one"], arch="sm_90") == []
    assert fam.compile_calls == 2


def test_prefetch_of_a_kernel_that_fails_leaves_the_error_to_get(tmp_path):
    from lazykern.errors import CompileError
    from lazykern.families.family import KernelFamily
    from lazykern.store.cache import KernelCache

    fam = KernelFamily("prefetch_bad", "", cache=KernelCache(str(tmp_path)))
    fam.add("bad", 'extern "C" __global__ void bad(int *a) { *a = NOPE; }', signature=["ptr"])
    for thread in fam.prefetch(["bad"], arch="sm_90"):
        thread.join(timeout=60)
    with pytest.raises(CompileError):
        fam.get("bad", "sm_90")
