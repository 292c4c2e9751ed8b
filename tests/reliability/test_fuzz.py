"""Hypothesis fuzzers: arbitrary damage to a cache directory or a bundle, then every entry point, in a fresh process.

Each case copies a warmed directory (or a good bundle), applies a few drawn mutations, and runs
``_fuzz_child.py`` under a time and address-space limit. It must finish, raise nothing beyond the
documented errors, never serve bytes other than a fresh compile's, never unpickle anything, and stay
within the memory limit. ``LAZYKERN_FUZZ_EXAMPLES`` sets the cases per target (default 3, each a
fresh process); ``LAZYKERN_FUZZ_REPORT=path`` appends one JSON line per case (for a summary).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazykern import CacheError, KernelCache
from lazykern.scale.bundle import export_bundle
from lazykern.store._store import read_blob

from . import _forge
from ._families import synthetic_family

EXAMPLES = int(os.environ.get("LAZYKERN_FUZZ_EXAMPLES", "3"))
MEM_MB = 3072  # address space of a child: a lazykern + NVRTC process maps about 1.3 GiB before any work
TIME_LIMIT = 120
CHILD = os.path.join(os.path.dirname(__file__), "_fuzz_child.py")
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


class _Pwned:
    """Unpickling this creates the marker file: proof that someone ran a stored pickle."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A warmed store (2 kernels, a large entry in its own file, counters, memo, locks) and a good bundle."""
    root = tmp_path_factory.mktemp("fuzz")
    directory = str(root / "c")
    kc = KernelCache(directory)
    fam = synthetic_family(kc, n=2)
    expected = {n: hashlib.sha256(fam.get(n, "sm_90").code).hexdigest() for n in fam.names()}
    kc.store("f" * 64, os.urandom(50_000), {"kernel": "big", "family": "other"})
    export_bundle(kc, root / "good.tar")
    kc.close()
    return {"directory": directory, "expected": expected, "bundle": (root / "good.tar").read_bytes(), "root": root}


def _run_case(target: str, directory: str, expected: dict, bundle: str | None, marker: str) -> dict:
    args = {"mode": target, "directory": directory, "bundle": bundle, "expected": expected, "mem_mb": MEM_MB}
    env = dict(os.environ, LAZYKERN_ARCH="sm_90", LAZYKERN_LOCK_TIMEOUT="2", PYTHONPATH=os.getcwd())
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, CHILD, json.dumps(args)], capture_output=True, text=True, timeout=TIME_LIMIT, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{target} fuzz case hung (> {TIME_LIMIT} s) on {directory}")
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, f"child died (rc {proc.returncode}): {proc.stderr[-3000:]}"
    result = json.loads(lines[-1])
    result.update(target=target, seconds=round(time.monotonic() - start, 2), pwned=os.path.exists(marker))
    report = os.environ.get("LAZYKERN_FUZZ_REPORT")
    if report:
        with open(report, "a") as fh:
            fh.write(json.dumps(result) + "\n")
    assert not result["crashes"], result["crashes"]
    assert result["wrong"] == 0, f"{result['wrong']} kernels served with bytes other than a fresh compile"
    assert not result["pwned"], "a stored pickle was unpickled"
    assert result["backend"] == "disk", "the damage sent the store to memory for good"
    assert result["maxrss_kb"] < MEM_MB << 10
    # An import holds one capped member at a time: 200 MB plus the largest legitimate cubin (a few MB here).
    assert result.get("import_growth_kb", 0) < 210 << 10, result
    return result


# -- what can be written: values, rows, settings, files -------------------------------------------------------------
def _json_values():
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=20))
    return st.recursive(
        leaves,
        lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)),
        max_leaves=12,
    )


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _sqlite_values(marker: str):
    return st.one_of(
        st.binary(max_size=80),
        st.integers(-(2**63), 2**63 - 1),
        st.sampled_from([2**62, 2**63 - 1, -1, 0, 1 << 40]),
        st.floats(allow_nan=False),
        st.text(max_size=40),
        st.none(),
        st.just(pickle.dumps(_Pwned(marker))),
        _json_values().map(lambda v: json.dumps(v, allow_nan=True)),
        st.integers(10, 3000).map(_deep),
    )


COLUMNS = [
    "key",
    "raw",
    "store_time",
    "expire_time",
    "access_time",
    "access_count",
    "tag",
    "size",
    "mode",
    "filename",
    "value",
]
SETTING_KEYS = [
    "statistics", "tag_index", "eviction_policy", "size_limit", "cull_limit", "sqlite_auto_vacuum", "sqlite_cache_size",
    "sqlite_journal_mode", "sqlite_mmap_size", "sqlite_synchronous", "disk_min_file_size", "disk_pickle_protocol",
    "disk_compress_level", "count", "size", "hits", "misses", "sqlite_foreign_keys", "_disk", "close", "get",
]  # fmt: skip
HEADER_FIELDS = ["key", "schema", "family", "kernel", "symbol", "arch", "options", "route", "target", "toolchain",
                 "compile_seconds", "created", "nvrtc", "extra"]  # fmt: skip


def _deep_header(depth: int) -> bytes:
    return ('{"x":' + _deep(depth) + "}").encode()


def _store_mutations(marker: str):
    value = _sqlite_values(marker)
    field_value = st.one_of(_json_values(), st.just(None))
    raw_header = st.one_of(st.binary(max_size=100), st.integers(10, 5000).map(_deep_header))
    files = st.sampled_from(["bytes", "truncate", "fifo", "devzero", "dir", "append", "symlink"])
    counters = st.sampled_from(["hits", "misses", "compiles", "compile_ms", "saved_ms", "corrupt"])
    return st.one_of(
        st.tuples(st.just("row"), st.integers(0, 50), st.sampled_from(COLUMNS), value),
        st.tuples(st.just("insert"), value, st.sampled_from([0, 1]), st.integers(0, 5), value),
        st.tuples(st.just("setting"), st.one_of(st.sampled_from(SETTING_KEYS), st.text(max_size=12)), value),
        st.tuples(st.just("header"), st.integers(0, 50), st.sampled_from(HEADER_FIELDS), field_value),
        st.tuples(st.just("rawheader"), st.integers(0, 50), raw_header),
        st.tuples(st.just("file"), files, st.binary(max_size=200)),
        st.tuples(st.just("counter"), counters, value, st.integers(0, 5)),
        st.tuples(st.just("memo"), value),
        st.tuples(st.just("locks"), st.sampled_from(["file", "lockdir", "garbage"])),
        st.tuples(st.just("cotenant"), st.sampled_from(["json", "pickle", "intkey"])),
    )


def _rowids(con) -> list[int]:
    return [r[0] for r in con.execute("SELECT rowid FROM Cache ORDER BY rowid")]


def _apply_store(directory: str, mutation: tuple, marker: str) -> None:
    import diskcache

    kind = mutation[0]
    con = _forge.db(directory)
    try:
        rowids = _rowids(con)
        pick = rowids[mutation[1] % len(rowids)] if rowids and kind in ("row", "header", "rawheader") else None
        if kind == "row" and pick is not None:
            con.execute(f"UPDATE OR IGNORE Cache SET {mutation[2]} = ? WHERE rowid = ?", (mutation[3], pick))
        elif kind == "insert":
            columns = "key, raw, store_time, access_time, mode, value, size"
            con.execute(
                f"INSERT OR IGNORE INTO Cache ({columns}) VALUES (?, ?, 0, 0, ?, ?, 9)",
                (mutation[1], mutation[2], mutation[3], mutation[4]),
            )
        elif kind == "setting":
            con.execute("INSERT OR REPLACE INTO Settings VALUES (?, ?)", (mutation[1], mutation[2]))
        elif kind in ("header", "rawheader") and pick is not None:
            ((value, filename),) = con.execute("SELECT value, filename FROM Cache WHERE rowid = ?", (pick,)).fetchall()
            try:  # an earlier mutation may have left no entry (or a FIFO) here: then there is nothing to rewrite
                blob = value if filename is None else bytes(read_blob(os.path.join(directory, str(filename))))
                header, code = _forge.decode_unchecked(blob)
            except (ValueError, TypeError, RecursionError, struct.error, OSError, CacheError):
                return
            if kind == "header":
                header[mutation[2]] = mutation[3]
                raw = json.dumps(header, sort_keys=True, allow_nan=True).encode()
            else:
                raw = mutation[2]
            con.execute("UPDATE Cache SET value = ?, mode = 1, filename = NULL WHERE rowid = ?",
                        (_forge.entry_with_raw_header(code, raw), pick))  # fmt: skip
        elif kind == "counter":
            con.execute(
                "UPDATE Cache SET value = ?, mode = ? WHERE key = ?",
                (mutation[2], mutation[3], "lazykern:stat:" + mutation[1]),
            )
        elif kind == "memo":
            con.execute("UPDATE Cache SET value = ? WHERE key LIKE 'lazykern:toolchain:%'", (mutation[1],))
    finally:
        con.close()
    if kind == "file":
        _damage_file(directory, mutation[1], mutation[2])
    elif kind == "locks":
        locks = os.path.join(directory, "locks")
        if os.path.isdir(locks) and not os.path.islink(locks):
            shutil.rmtree(locks, ignore_errors=True)
        elif os.path.lexists(locks):  # an earlier mutation of this draw left a file there
            os.remove(locks)
        if mutation[1] == "file":
            open(locks, "w").close()
        else:
            os.makedirs(locks)
            with _forge.db(directory) as con:
                keys = [k for (k,) in con.execute("SELECT key FROM Cache") if isinstance(k, str)]
            for key in keys:  # the lock of every stored key: a directory, or a file of garbage
                target = os.path.join(locks, hashlib.sha256(key.encode()).hexdigest()[:40] + ".lock")
                os.mkdir(target) if mutation[1] == "lockdir" else open(target, "wb").write(b"\xff" * 10)
    elif kind == "cotenant":
        disk = diskcache.JSONDisk if mutation[1] == "json" else diskcache.Disk
        try:
            with diskcache.Cache(directory, disk=disk) as other:
                if mutation[1] == "intkey":
                    other.set(42, b"int keyed")
                elif mutation[1] == "pickle":
                    other.set("pickled", _Pwned(marker))
                else:
                    other.set("json", {"a": [1, 2]})
        except Exception:  # earlier damage may break the co-tenant's own diskcache: its problem, not ours
            pass


def _damage_file(directory: str, how: str, data: bytes) -> None:
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(directory) for f in fs if f.endswith(".val"))
    if not files:
        return
    path = files[0]
    if how == "append":
        with open(path, "ab") as fh:
            fh.write(data or b"\0")
        return
    if how == "truncate":
        os.truncate(path, len(data) % max(1, os.path.getsize(path)))
        return
    os.unlink(path)
    if how == "bytes":
        open(path, "wb").write(data)
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "devzero":
        os.symlink("/dev/zero", path)
    elif how == "dir":
        os.mkdir(path)
    else:
        os.symlink("/etc/hostname", path)


@FUZZ
@given(data=st.data())
def test_fuzz_store(template, data):
    case = tempfile.mkdtemp(prefix="lzk-store-", dir=template["root"])
    directory = os.path.join(case, "c")
    shutil.copytree(template["directory"], directory)
    marker = os.path.join(case, "pwned")
    for mutation in data.draw(st.lists(_store_mutations(marker), min_size=1, max_size=4), label="mutations"):
        _apply_store(directory, mutation, marker)
    _run_case("store", directory, template["expected"], None, marker)
    shutil.rmtree(case, ignore_errors=True)


# -- bundles: members, headers, manifest, framing --------------------------------------------------------------------
def _members(bundle: bytes) -> list[list]:
    import io

    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        return [[m.name, tar.extractfile(m).read()] for m in tar]


def _bundle_mutations():
    field_value = st.one_of(_json_values(), st.just("__drop__"))
    manifests = st.one_of(
        _json_values().map(lambda v: json.dumps(v, allow_nan=True).encode()),
        st.integers(10, 200_000).map(lambda d: _deep(d).encode()),
    )
    fields = st.sampled_from(["format", "bundle_schema", "toolchain", "entries"])
    names = st.one_of(st.text(max_size=30), st.sampled_from(["../x", "/etc/x", "entries/" + "0" * 64 + ".lzk"]))
    return st.one_of(
        st.tuples(st.just("data"), st.integers(0, 10), st.binary(max_size=300), st.booleans()),
        st.tuples(st.just("header"), st.integers(0, 10), st.sampled_from(HEADER_FIELDS), field_value),
        st.tuples(st.just("manifest"), manifests),
        st.tuples(st.just("manifest_field"), fields, _json_values()),
        st.tuples(st.just("rename"), st.integers(0, 10), names),
        st.tuples(st.just("duplicate"), st.integers(0, 10)),
        st.tuples(st.just("pax"), st.integers(1, 1 << 34)),
        st.tuples(st.just("bomb"), st.integers(1, 64)),
    )


def _rebuild_manifest(members: list[list]) -> None:
    for m in members:
        if m[0] == "manifest.json":
            try:
                manifest = json.loads(m[1])
                manifest["entries"] = [
                    {"key": n[8:-4], "sha256": hashlib.sha256(d).hexdigest()} for n, d in members if n.endswith(".lzk")
                ]
                m[1] = json.dumps(manifest).encode()
            except (ValueError, TypeError, AttributeError, RecursionError):
                pass


def _apply_bundle(members: list[list], mutation: tuple) -> list[tuple[str, bytes, bytes]]:
    """Mutate the member list in place; returns raw tar blocks to append (pax headers, bombs)."""
    kind, extra = mutation[0], []
    entries = [m for m in members if m[0].endswith(".lzk")]
    if kind == "data" and entries:
        m = entries[mutation[1] % len(entries)]
        m[1] = mutation[2]
        if mutation[3]:
            _rebuild_manifest(members)
    elif kind == "header" and entries:
        m = entries[mutation[1] % len(entries)]
        try:
            header, code = _forge.decode_unchecked(m[1])
        except (ValueError, struct.error):  # an earlier mutation left no entry to rewrite
            return extra
        if mutation[3] == "__drop__":
            header.pop(mutation[2], None)
        else:
            header[mutation[2]] = mutation[3]
        m[1] = _forge.entry_with_raw_header(code, json.dumps(header, allow_nan=True).encode())
        _rebuild_manifest(members)
    elif kind == "manifest":
        members[0][1] = mutation[1]
    elif kind == "manifest_field":
        try:
            manifest = json.loads(members[0][1])
            manifest[mutation[1]] = mutation[2]
        except (ValueError, TypeError, RecursionError):  # an earlier mutation replaced the manifest
            return extra
        members[0][1] = json.dumps(manifest, allow_nan=True).encode()
    elif kind == "rename":
        members[mutation[1] % len(members)][0] = mutation[2] or "x"
    elif kind == "duplicate":
        members.append(list(members[mutation[1] % len(members)]))
    elif kind == "pax":
        info = tarfile.TarInfo("pax")
        info.type, info.size = tarfile.XHDTYPE, min(mutation[1], 8**11 - 1)
        extra.append(info.tobuf(tarfile.USTAR_FORMAT) + b"\0" * 4096)
    elif kind == "bomb":
        info = tarfile.TarInfo("entries/" + "b" * 64 + ".lzk")
        info.size = mutation[1] << 20
        extra.append(info.tobuf(tarfile.USTAR_FORMAT) + b"\0" * info.size)
    return extra


def _tar_with(members: list[list], extra: list[bytes]) -> bytes:
    body = _forge.tar_bytes([(name, data) for name, data in members]).rstrip(b"\0")
    body += b"\0" * (-len(body) % 512)
    return body + b"".join(extra) + b"\0" * 1024


def _frame(data: bytes, compression: str, cut: int | None, flip: int | None) -> bytes:
    if compression == "gz":
        data = gzip.compress(data, mtime=0)
    elif compression == "zst":
        import zstandard

        data = zstandard.ZstdCompressor().compress(data)
    if flip is not None and data:
        at = flip % len(data)
        data = data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :]
    if cut is not None and data:
        data = data[: cut % len(data)]
    return data


@FUZZ
@given(data=st.data())
def test_fuzz_bundle(template, data):
    case = tempfile.mkdtemp(prefix="lzk-bundle-", dir=template["root"])
    members = _members(template["bundle"])
    extra: list[bytes] = []
    for mutation in data.draw(st.lists(_bundle_mutations(), min_size=0, max_size=3), label="mutations"):
        extra += _apply_bundle(members, mutation)
    compression = data.draw(st.sampled_from(["", "gz", "zst"]), label="compression")
    cut = data.draw(st.one_of(st.none(), st.integers(0, 1 << 20)), label="cut")
    flip = data.draw(st.one_of(st.none(), st.integers(0, 1 << 20)), label="flip")
    path = os.path.join(case, "b.tar" + (f".{compression}" if compression else ""))
    with open(path, "wb") as fh:
        fh.write(_frame(_tar_with(members, extra), compression, cut, flip))
    _run_case("bundle", os.path.join(case, "c"), template["expected"], path, os.path.join(case, "pwned"))
    shutil.rmtree(case, ignore_errors=True)
