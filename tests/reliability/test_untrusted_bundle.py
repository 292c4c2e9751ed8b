"""Bundles are hostile input: refused with one line, streamed under a memory budget, never trusted half-way.

Issue 13, items 1 (import side), 9 and 10.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import textwrap

import pytest
from typer.testing import CliRunner

from lazykern import KernelCache
from lazykern.compile.compiler import toolchain_fingerprint
from lazykern.scale.bundle import BundleError, export_bundle, import_bundle
from lazykern.store._store import DiskBackend
from lazykern.tools.cli import app

from . import _forge
from ._families import synthetic_family

ARCH = "sm_90"


@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    kc = KernelCache(tmp_path_factory.mktemp("warmed") / "c")
    fam = synthetic_family(kc, n=2)
    codes = {n: fam.get(n, ARCH).code for n in fam.names()}
    blobs = {fam.key(n, ARCH): _forge.row_value(kc.directory, fam.key(n, ARCH)) for n in fam.names()}
    return fam, codes, blobs


def _write(tmp_path, data: bytes, name: str = "b.tar") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _served(directory: str, codes: dict[str, bytes]) -> int:
    """Compiles a fresh family needs; asserts it is never served other bytes than a fresh compile."""
    fam = synthetic_family(KernelCache(directory), n=2)
    for name, code in codes.items():
        assert fam.get(name, ARCH).code == code
    return fam.compile_calls


# -- 1: import refuses every entry it cannot verify --------------------------------------------------------------
@pytest.mark.parametrize(
    "field", ["family", "kernel", "symbol", "arch", "options", "route", "target", "toolchain", "key"]
)
@pytest.mark.parametrize("known", [True, False], ids=["family known", "family unknown"])
def test_stripped_or_renamed_headers_are_refused(warmed, tmp_path, field, known):
    fam, codes, blobs = warmed
    key0, key1 = list(blobs)
    header, _ = _forge.decode_unchecked(blobs[key0])
    _, other_code = _forge.decode_unchecked(blobs[key1])  # add_1's code, claimed to be add_0
    stripped = {k: v for k, v in header.items() if k != field}
    forged = {key0: _forge.entry_with_header(other_code, stripped)}
    path = _write(tmp_path, _forge.bundle(forged, toolchain_fingerprint()))
    target = KernelCache(tmp_path / "t")
    report = import_bundle(target, path, families={fam.name: fam} if known else {})
    assert list(report.skipped) == [key0] and not report.imported, report
    assert _served(target.directory, codes) == 2


def test_complete_header_of_another_kernel_is_refused(warmed, tmp_path):
    fam, codes, blobs = warmed
    key0, key1 = list(blobs)
    header, code1 = _forge.decode_unchecked(blobs[key1])
    header["key"] = key0  # add_1, complete and consistent, filed under add_0's key
    path = _write(tmp_path, _forge.bundle({key0: _forge.entry_with_header(code1, header)}, toolchain_fingerprint()))
    target = KernelCache(tmp_path / "t")
    assert key0 in import_bundle(target, path, families={fam.name: fam}).skipped
    import_bundle(target, path, families={})  # unknown family: imported, but never served for add_0
    assert _served(target.directory, codes) == 2


# -- 9: streaming, budgets, caps, one-line refusals ---------------------------------------------------------------
def _raw_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.type = kind
    return info.tobuf(tarfile.USTAR_FORMAT)


def _zst(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


def _open_ended(tar: bytes) -> bytes:
    """``tar`` without its end-of-archive blocks, so that more members can follow."""
    data = tar.rstrip(b"\0")
    return data + b"\0" * (-len(data) % 512)


FRAMINGS = {
    "member declared 1 GiB": lambda m: (
        _open_ended(m) + _raw_header("entries/" + "a" * 64 + ".lzk", 1 << 30) + b"\0" * 1024
    ),
    "PAX header declared 1 GiB": lambda m: _raw_header("pax", 1 << 30, tarfile.XHDTYPE) + b"\0" * 4096,
    "GNU long name 1 GiB": lambda m: _raw_header("././@LongLink", 1 << 30, tarfile.GNUTYPE_LONGNAME) + b"\0" * 4096,
    "sparse member": lambda m: _raw_header("entries/" + "a" * 64 + ".lzk", 10, tarfile.GNUTYPE_SPARSE) + b"\0" * 2048,
    "truncated tar": lambda m: m[:2000],
    "bad tar checksum": lambda m: m[:148] + b"9999999\0" + m[156:],
    "empty file": lambda m: b"",
    "gzip bad crc": lambda m: (lambda g: g[:-8] + b"\0\0\0\0" + g[-4:])(gzip.compress(m)),
    "gzip garbage": lambda m: b"\x1f\x8b\x08\x00" + os.urandom(200),
    "gzip truncated": lambda m: gzip.compress(m)[:-30],
    "zstd garbage": lambda m: b"\x28\xb5\x2f\xfd" + os.urandom(200),
    "zstd truncated": lambda m: _zst(m)[:-20],
    "manifest not first": lambda m: _forge.tar_bytes(
        [("entries/" + "a" * 64 + ".lzk", b"x"), ("manifest.json", b"{}")]
    ),
    "deep manifest": lambda m: _forge.tar_bytes([("manifest.json", b"[" * 100_000 + b"]" * 100_000)]),
    "wide manifest": lambda m: _forge.tar_bytes(
        [("manifest.json", b"{" + b",".join(b'"%d":0' % i for i in range(300_000)) + b"}")]
    ),
    "manifest of many lists": lambda m: _forge.tar_bytes([("manifest.json", b"[" + b"[]," * 2_000_000 + b"[]]")]),
    "manifest NaN": lambda m: _forge.tar_bytes([("manifest.json", b'{"format": NaN')]),
}


@pytest.mark.parametrize("kind", list(FRAMINGS))
def test_broken_framing_is_one_bundle_error(warmed, tmp_path, kind):
    _, _, blobs = warmed
    good = _forge.bundle(blobs, toolchain_fingerprint())
    path = _write(tmp_path, FRAMINGS[kind](good))
    target = KernelCache(tmp_path / "t")
    with pytest.raises(BundleError) as caught:
        import_bundle(target, path)
    assert "\n" not in str(caught.value) and target.stats()["entries"] == 0
    result = CliRunner().invoke(app, ["--cache-dir", str(tmp_path / "t"), "cache", "import", path])
    assert result.exit_code == 1 and "Traceback" not in result.output and result.output.startswith("error:")


def test_total_budget_refuses_a_bundle_that_expands_too_far(warmed, tmp_path):
    _, _, blobs = warmed
    path = _write(tmp_path, _forge.bundle(blobs, toolchain_fingerprint()))
    with pytest.raises(BundleError, match="expands to more than"):
        import_bundle(KernelCache(tmp_path / "t"), path, max_total=8192)


BOMB = textwrap.dedent(
    """
    import json, sys, zstandard
    from lazykern import KernelCache
    from lazykern.scale.bundle import BundleError, import_bundle
    from lazykern.compile.compiler import toolchain_fingerprint
    path, directory = sys.argv[1], sys.argv[2]
    import hashlib
    zeros_sha = hashlib.sha256(bytes(48 << 20)).hexdigest()
    listed = [{"key": "%064x" % i, "sha256": zeros_sha} for i in range(24)]  # listed: each is read and verified
    manifest = {"format": "lazykern-bundle", "bundle_schema": 1, "entries": listed}
    manifest["toolchain"] = toolchain_fingerprint()
    manifest = json.dumps(manifest).encode()
    import tarfile, io
    def header(name, size):
        info = tarfile.TarInfo(name); info.size = size
        return info.tobuf(tarfile.PAX_FORMAT)
    with open(path, "wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as out:
        out.write(header("manifest.json", len(manifest)) + manifest + b"\\0" * (-len(manifest) % 512))
        zeros = b"\\0" * (1 << 20)
        for i in range(24):  # 24 members of 48 MiB of zeros: 1.1 GiB expanded, each under the member cap
            out.write(header("entries/%064x.lzk" % i, 48 << 20))
            for _ in range(48):
                out.write(zeros)
    cache = KernelCache(directory)
    import os
    def kb(field):
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field + ":"))
    open("/proc/self/clear_refs", "w").write("5")  # VmHWM from here on: the import alone
    before = kb("VmRSS")
    try:
        report = import_bundle(cache, path)
        outcome = "skipped %d" % len(report.skipped)
    except BundleError as exc:
        outcome = "refused: %s" % exc
    grew = (kb("VmHWM") - before) / 1024
    print(json.dumps({"outcome": outcome, "grew_mb": grew, "size": os.path.getsize(path)}))
    """
)


def test_decompression_bomb_stays_within_the_memory_budget(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", BOMB, str(tmp_path / "bomb.tar.zst"), str(tmp_path / "c")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(result)
    assert result["size"] < 1 << 20  # a small file ...
    assert result["grew_mb"] < 200, result  # ... that expands to 1.1 GiB, read one capped member at a time


# -- 10: `cache import` says when entries did not persist -----------------------------------------------------------
def test_import_into_memory_only_cache_fails_loudly(warmed, tmp_path, monkeypatch):
    _, _, blobs = warmed
    path = _write(tmp_path, _forge.bundle(blobs, toolchain_fingerprint()))
    monkeypatch.setenv("LAZYKERN_CACHE", "off")
    result = CliRunner().invoke(app, ["--cache-dir", str(tmp_path / "t"), "cache", "import", path])
    assert result.exit_code == 1 and "memory only" in result.output


def test_import_into_a_full_disk_fails_loudly(warmed, tmp_path, monkeypatch):
    _, _, blobs = warmed
    path = _write(tmp_path, _forge.bundle(blobs, toolchain_fingerprint()))

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(DiskBackend, "set", full)
    result = CliRunner().invoke(app, ["--cache-dir", str(tmp_path / "t"), "cache", "import", path])
    assert result.exit_code == 1 and "did not persist" in result.output, result.output
    assert KernelCache(tmp_path / "t").stats()["entries"] == 0


def test_import_with_tampered_entries_exits_non_zero(warmed, tmp_path):
    fam, codes, blobs = warmed
    export_bundle(fam.cache, tmp_path / "good.tar")
    with tarfile.open(tmp_path / "good.tar") as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar]
    tampered = [
        (n, d[:-1] + bytes([d[-1] ^ 1]) if n.endswith(".lzk") and i == 1 else d) for i, (n, d) in enumerate(members)
    ]
    path = _write(tmp_path, _forge.tar_bytes(tampered))
    result = CliRunner().invoke(app, ["--cache-dir", str(tmp_path / "t"), "cache", "import", path])
    assert result.exit_code == 1 and "1 failed verification" in result.output, result.output
    assert "imported 1" in result.output
    assert _served(str(tmp_path / "t"), codes) == 1


def test_round_trip_exits_zero_and_serves_without_compiling(warmed, tmp_path):
    fam, codes, _ = warmed
    export_bundle(fam.cache, tmp_path / "b.tar.zst")
    result = CliRunner().invoke(
        app, ["--cache-dir", str(tmp_path / "t"), "cache", "import", str(tmp_path / "b.tar.zst")]
    )
    assert result.exit_code == 0 and "imported 2" in result.output, result.output
    assert _served(str(tmp_path / "t"), codes) == 0


def test_gzip_member_stream_is_not_read_whole(warmed, tmp_path):
    """A .tar.gz is streamed too: its members are the only large reads."""
    _, _, blobs = warmed
    data = gzip.compress(_forge.bundle(blobs, toolchain_fingerprint()))
    report = import_bundle(KernelCache(tmp_path / "t"), _write(tmp_path, data, "b.tar.gz"))
    assert len(report.imported) == 2 and report.ok
