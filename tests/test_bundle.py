"""Cache export/import: round trip, and refusal of hostile bundles."""

from __future__ import annotations

import io
import json
import pickle
import tarfile

import pytest

from lazykern import KernelCache
from lazykern.compile.compiler import toolchain_fingerprint
from lazykern.scale.bundle import BundleError, export_bundle, import_bundle, scan_bundle
from lazykern.store import _entry
from lazykern.store.cache import SCHEMA_VERSION


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """One family with 3 compiled entries, shared by the module (compiling costs seconds)."""
    fam = _tiny_family(KernelCache(tmp_path_factory.mktemp("warmed")))
    fam.warm(["scale_f32"], arch=["sm_80", "sm_90"])
    fam.warm(["scale_i32"], arch="sm_90")
    return fam


def _tiny_family(cache):
    from lazykern import KernelFamily
    from tests.conftest import FRAGMENTS, PREAMBLE

    fam = KernelFamily("tiny", PREAMBLE, cache=cache)
    for name, code in FRAGMENTS.items():
        fam.add(name, code, signature=["ptr", "int32"])
    return fam


@pytest.mark.parametrize("suffix", [".tar.gz", ".tar.zst", ".tar"])
def test_round_trip_into_an_empty_cache(warmed, tmp_path, suffix):
    path = tmp_path / f"bundle{suffix}"
    out = export_bundle(warmed.cache, path)
    assert len(out.keys) == 3 and path.is_file()
    target = KernelCache(tmp_path / "other")
    report = import_bundle(target, path, families={warmed.name: warmed})
    assert sorted(report.imported) == sorted(out.keys) and not report.skipped
    for key in out.keys:
        assert target.lookup(key).code == warmed.cache.lookup(key).code
    # A second import finds everything present and changes nothing.
    again = import_bundle(target, path, families={warmed.name: warmed})
    assert sorted(again.present) == sorted(out.keys) and not again.imported


def test_export_filters_by_family_and_arch(warmed, tmp_path):
    out = export_bundle(warmed.cache, tmp_path / "b.tar.gz", arch="sm_80")
    assert len(out.keys) == 1
    assert len(export_bundle(warmed.cache, tmp_path / "d.tar", family="tiny").keys) == 3
    assert export_bundle(warmed.cache, tmp_path / "c.tar.gz", family="other").keys == []


def test_imported_kernel_is_a_cache_hit_for_the_family(warmed, tmp_path):
    path = tmp_path / "b.tar.gz"
    export_bundle(warmed.cache, path)
    target = KernelCache(tmp_path / "other")
    import_bundle(target, path)
    fresh = _tiny_family(target)
    kernel = fresh.get("scale_f32", "sm_90")
    assert kernel.meta["compiled_now"] is False and fresh.compile_calls == 0


def _tar(path, members, compress=""):
    mode = "w:gz" if compress == "gz" else "w"
    with tarfile.open(path, mode) as tar:
        for item in members:
            if isinstance(item, tarfile.TarInfo):
                tar.addfile(item)
                continue
            name, data = item
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _manifest(entries, **over):
    m = {
        "format": "lazykern-bundle",
        "bundle_schema": 1,
        "entry_schema": SCHEMA_VERSION,
        "nvrtc": "x",
        "toolchain": toolchain_fingerprint(),
        "entries": entries,
    }
    m.update(over)
    return ("manifest.json", json.dumps(m).encode())


KEY = "ab" * 32


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../evil", "entries/../../x.lzk", "entries/" + KEY + ".lzk/../../x", "./manifest.json"]
)
def test_refuses_path_traversal(tmp_path, cache, name):
    path = _tar(tmp_path / "evil.tar", [_manifest([]), (name, b"data")])
    with pytest.raises(BundleError, match="unsafe path|not manifest.json"):
        import_bundle(cache, path)
    assert cache.stats()["entries"] == 0


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.DIRTYPE, tarfile.FIFOTYPE])
def test_refuses_links_devices_and_directories(tmp_path, cache, kind):
    info = tarfile.TarInfo(f"entries/{KEY}.lzk")
    info.type = kind
    info.linkname = "/etc/passwd"
    path = _tar(tmp_path / "evil.tar", [_manifest([]), info])
    with pytest.raises(BundleError, match="link|device|non-file"):
        scan_bundle(path)


def test_refuses_oversized_member(tmp_path, cache):
    path = _tar(tmp_path / "big.tar", [_manifest([]), (f"entries/{KEY}.lzk", b"x" * 2048)])
    with pytest.raises(BundleError, match="over the 1024-byte limit"):
        import_bundle(cache, path, max_member=1024)


def test_pickled_payload_is_skipped_never_unpickled(tmp_path, cache):
    class Boom:
        def __reduce__(self):
            return (pytest.fail, ("unpickled!",))

    payload = pickle.dumps(Boom())
    import hashlib

    entries = [{"key": KEY, "sha256": hashlib.sha256(payload).hexdigest()}]
    path = _tar(tmp_path / "pickle.tar.gz", [_manifest(entries), (f"entries/{KEY}.lzk", payload)], "gz")
    report = import_bundle(cache, path)
    assert KEY in report.skipped and "not a lazykern entry" in report.skipped[KEY]
    assert cache.lookup(KEY) is None


def test_wrong_bundle_schema_is_refused(tmp_path, cache):
    path = _tar(tmp_path / "s.tar", [_manifest([], bundle_schema=99)])
    with pytest.raises(BundleError, match="bundle schema 99"):
        import_bundle(cache, path)


def test_wrong_entry_schema_digest_and_unlisted_are_skipped(tmp_path, cache):
    import hashlib

    old = _entry.encode(b"\x7fELF", {"schema": SCHEMA_VERSION + 1})
    good = _entry.encode(b"\x7fELF", {"schema": SCHEMA_VERSION})
    k1, k2, k3 = "1" * 64, "2" * 64, "3" * 64
    entries = [
        {"key": k1, "sha256": hashlib.sha256(old).hexdigest()},
        {"key": k2, "sha256": "0" * 64},
    ]
    members = [_manifest(entries), (f"entries/{k1}.lzk", old), (f"entries/{k2}.lzk", good), (f"entries/{k3}.lzk", good)]
    report = import_bundle(cache, _tar(tmp_path / "m.tar", members))
    assert "entry schema" in report.skipped[k1]
    assert "digest" in report.skipped[k2]
    assert "not listed" in report.skipped[k3]
    assert report.imported == []


def test_other_toolchain_skips_everything_with_a_warning(tmp_path, cache):
    import hashlib

    good = _entry.encode(b"\x7fELF", {})
    path = _tar(
        tmp_path / "t.tar",
        [
            _manifest([{"key": KEY, "sha256": hashlib.sha256(good).hexdigest()}], toolchain="0" * 64),
            (f"entries/{KEY}.lzk", good),
        ],
    )
    report = import_bundle(cache, path)
    assert report.imported == [] and KEY in report.skipped and "toolchain" in report.warnings[0]


def test_key_that_does_not_match_the_family_source_is_skipped(warmed, tmp_path):
    key = warmed.key("scale_f32", "sm_90")
    entry = warmed.cache.lookup(key)
    forged = "f" * 64
    import hashlib

    blob = _entry.encode(entry.code, {**entry.meta, "key": forged})  # a consistent forgery: header renamed too
    path = _tar(
        tmp_path / "k.tar",
        [_manifest([{"key": forged, "sha256": hashlib.sha256(blob).hexdigest()}]), (f"entries/{forged}.lzk", blob)],
    )
    target = KernelCache(tmp_path / "other")
    report = import_bundle(target, path, families={warmed.name: warmed})
    assert "does not match" in report.skipped[forged]


def test_garbage_file_is_refused(tmp_path, cache):
    path = tmp_path / "junk.tar.gz"
    path.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(BundleError, match="not a readable"):
        import_bundle(cache, path)


def test_missing_manifest_is_refused(tmp_path, cache):
    with pytest.raises(BundleError, match="no manifest.json"):
        import_bundle(cache, _tar(tmp_path / "n.tar", [(f"entries/{KEY}.lzk", b"x")]))


def test_unknown_extension_is_refused(warmed, tmp_path):
    with pytest.raises(BundleError, match="must end in"):
        export_bundle(warmed.cache, tmp_path / "bundle.zip")
