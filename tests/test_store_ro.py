"""A pre-warmed store that cannot be written (a team's cache mounted read-only) is read and served."""

from __future__ import annotations

import os
import sqlite3
import textwrap

import pytest

from lazykern import KernelCache
from lazykern.errors import CacheError
from lazykern.store._store_ro import ReadOnlyBackend, holds_store
from tests._cli_run import env_for, lazykern, run

FAMILY = textwrap.dedent(
    """\
    from lazykern import KernelFamily
    fam = KernelFamily("team")
    for i in range(3):
        fam.add(f"k{i}", 'extern "C" __global__ void k%d(float *a) { a[0] = %d; }' % (i, i), signature=["ptr"])
    """
)


def _snapshot(path):
    return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in [path, *path.rglob("*")])


def _make_read_only(path, on: bool) -> None:
    for p in [path, *path.rglob("*")]:
        os.chmod(p, (0o555 if p.is_dir() else 0o444) if on else (0o700 if p.is_dir() else 0o600))


@pytest.fixture
def team_store(tmp_path):
    """A store warmed with three kernels for sm_80, then made read-only (directories and files)."""
    store = tmp_path / "team"
    done = run(["-c", FAMILY + "for n in fam.names(): fam.get(n, 'sm_80')\n"], env_for(store))
    assert done.returncode == 0, done.stderr
    _make_read_only(store, True)
    yield store
    _make_read_only(store, False)


def test_a_read_only_store_serves_its_kernels_and_writes_nothing(team_store):
    before = _snapshot(team_store)
    script = FAMILY + textwrap.dedent(
        """\
        from lazykern import default_cache
        for n in fam.names():
            fam.get(n, "sm_80")
        print("compiles", fam.compile_calls, default_cache().stats()["hits"], default_cache().backend)
        """
    )
    done = run(["-c", script], env_for(team_store), user=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["compiles", "0", "3", "read-only"]  # three hits, nothing compiled
    assert done.stderr.count("LazykernWarning") == 1 and "cannot be written" in done.stderr
    assert _snapshot(team_store) == before


def test_cache_info_and_ls_show_a_read_only_stores_entries(team_store):
    before = _snapshot(team_store)
    info = lazykern("cache", "info", "--json", env=env_for(team_store), user=True)
    assert info.returncode == 0, info.stderr
    assert '"entries": 3' in info.stdout and '"backend": "read-only"' in info.stdout
    listing = lazykern("cache", "ls", env=env_for(team_store), user=True)
    assert listing.returncode == 0 and "3 cached kernels" in listing.stdout, listing.stderr
    assert all(f"k{i}" in listing.stdout for i in range(3))
    assert _snapshot(team_store) == before


@pytest.fixture
def bundle(tmp_path):
    """A bundle of one entry from another store."""
    other = tmp_path / "other"
    done = run(["-c", FAMILY + "fam.get('k0', 'sm_80')\n"], env_for(other))
    assert done.returncode == 0, done.stderr
    done = lazykern("cache", "export", str(tmp_path / "b.tar.gz"), env=env_for(other))
    assert done.returncode == 0, done.stderr
    return tmp_path / "b.tar.gz"


def test_importing_into_a_read_only_store_fails_in_one_line(team_store, bundle):
    before = _snapshot(team_store)
    done = lazykern("cache", "import", str(bundle), env=env_for(team_store), user=True)
    assert done.returncode == 1 and "error: the kernel cache is read-only" in done.stderr, done.stderr
    assert _snapshot(team_store) == before


@pytest.mark.parametrize(
    "command", [["cache", "clear", "--yes"], ["cache", "prune", "--max-size", "0"], ["cache", "info", "--repair"]]
)
def test_changing_a_read_only_store_fails_in_one_line(team_store, command):
    before = _snapshot(team_store)
    done = lazykern(*command, env=env_for(team_store), user=True)
    says = done.stdout + done.stderr
    assert "read-only" in says and "Traceback" not in says
    if command[1] != "info":
        assert done.returncode == 1 and "error: the lazykern cache at" in done.stderr, says
    assert _snapshot(team_store) == before


def test_kernels_compiled_next_to_a_read_only_store_live_in_memory(tmp_path):
    store = tmp_path / "s"
    kc = KernelCache(store)
    kc.store("aa" * 32, b"\x7fELF-on-disk", {"family": "f", "kernel": "old"})
    kc.close()
    backend = ReadOnlyBackend(str(store), 1 << 20)
    backend.set("bb" * 32, b"new")
    assert backend.get("bb" * 32) == b"new" and backend.get("cc" * 32) is None
    assert {r[0] for r in backend.rows()} >= {"aa" * 32, "bb" * 32}
    assert backend.delete("bb" * 32) and backend.get("bb" * 32) is None
    with pytest.raises(CacheError, match="read-only"):
        backend.delete("aa" * 32)
    assert backend.incr("lazykern:stat:hits", 1)
    assert backend.check(False, 0)["integrity"] == "ok"
    backend.close()


def test_a_read_only_store_keeps_the_disk_stores_checks(tmp_path):
    """Pickled or forged rows are not served from a read-only store either."""
    store = tmp_path / "s"
    KernelCache(store).close()
    con = sqlite3.connect(store / "cache.db")
    con.execute(
        "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, mode, filename,"
        " value) VALUES ('pickled', 1, 0, NULL, 0, 0, NULL, 0, 4, NULL, x'80049500')"
    )
    con.execute(
        "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, mode, filename,"
        " value) VALUES ('forged', 1, 0, NULL, 0, 0, NULL, 0, 2, '../../etc/passwd', NULL)"
    )
    con.commit()
    con.close()
    backend = ReadOnlyBackend(str(store), 1 << 20)
    for key in ("pickled", "forged"):
        with pytest.raises(CacheError):
            backend.get(key)
    backend.close()


def test_holds_store(tmp_path):
    assert holds_store(str(tmp_path / "nothing")) is False
    assert holds_store(str(tmp_path)) is False
    KernelCache(tmp_path / "s").close()
    assert holds_store(str(tmp_path / "s")) is True


LAZY = textwrap.dedent(
    """\
    from numba import cuda, float32
    from lazykern import lazy_kernel

    @lazy_kernel
    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    print("compiled", [r["compiled"] for r in saxpy.warm([(float32, float32[::1], float32[::1], float32[::1])])])
    """
)


def test_a_read_only_store_serves_lazy_kernels_too(tmp_path):
    store = tmp_path / "team"
    env = env_for(store, LAZYKERN_ARCH="sm_80")
    assert run(["-c", LAZY], env).stdout.strip() == "compiled [True]"
    _make_read_only(store, True)
    try:
        before = _snapshot(store)
        done = run(["-c", LAZY], env, user=True)
        assert done.returncode == 0 and done.stdout.strip() == "compiled [False]", done.stderr
        assert _snapshot(store) == before
    finally:
        _make_read_only(store, False)
