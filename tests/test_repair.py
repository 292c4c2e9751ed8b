"""`lazykern cache info --repair` fixes what it reports, or says what it could not and the command that will
(issue 25, item 9). Each case damages a store the way a user or another program could, then runs the CLI."""

from __future__ import annotations

import os
import sqlite3
import warnings

import pytest
from typer.testing import CliRunner

from lazykern import KernelCache
from lazykern.store.cache import set_default_cache
from lazykern.tools.cli import app

DB = "cache.db"


def _sql(directory, statement: str) -> None:
    con = sqlite3.connect(os.path.join(directory, DB))
    try:
        con.execute(statement)
        con.commit()
    finally:
        con.close()


def _replace(directory, name: str, make) -> None:
    path = os.path.join(directory, name)
    if os.path.lexists(path):
        os.remove(path)
    make(path)


DAMAGE = {
    "wal is a directory": lambda d: _replace(d, DB + "-wal", os.mkdir),
    "shm is a directory": lambda d: _replace(d, DB + "-shm", os.mkdir),
    "wal is a FIFO": lambda d: _replace(d, DB + "-wal", os.mkfifo),
    "shm is a FIFO": lambda d: _replace(d, DB + "-shm", os.mkfifo),
    "database is a directory": lambda d: _replace(d, DB, os.mkdir),
    "database is a FIFO": lambda d: _replace(d, DB, os.mkfifo),
    "journal is a directory": lambda d: _replace(d, DB + "-journal", os.mkdir),
    "locks is a file": lambda d: (
        __import__("shutil").rmtree(os.path.join(d, "locks"), ignore_errors=True),
        open(os.path.join(d, "locks"), "w").close(),
    ),
    "wal is a symlink": lambda d: _replace(d, DB + "-wal", lambda p: os.symlink("/dev/null", p)),
    "foreign table": lambda d: _sql(d, "CREATE TABLE Evil(x)"),
    "foreign view": lambda d: _sql(d, "CREATE VIEW Peek AS SELECT key FROM Cache"),
    "foreign trigger": lambda d: _sql(d, "CREATE TRIGGER wipe AFTER INSERT ON Cache BEGIN DELETE FROM Cache; END"),
    "Cache table of another shape": lambda d: (
        os.remove(os.path.join(d, DB)),
        _sql(d, "CREATE TABLE Cache(x)"),
    ),
}


@pytest.fixture
def store(tmp_path, monkeypatch):
    directory = tmp_path / "store"
    kc = KernelCache(directory)
    kc["k"] = b"\x7fELF old"
    kc.close()
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(directory))
    set_default_cache(None)
    yield directory
    set_default_cache(None)


def _info(*args: str):
    set_default_cache(None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CliRunner().invoke(app, ["cache", "info", *args], catch_exceptions=False)


def _works(directory) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kc = KernelCache(directory)
        kc["new"] = b"\x7fELF new"
        ok = kc.backend == "disk" and kc.lookup("new") is not None
        kc.close()
        return ok


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_repair_fixes_what_info_reports(store, damage):
    DAMAGE[damage](store)
    report = _info("--json")
    assert report.exit_code == 0
    healed_by_sqlite = damage == "wal is a FIFO"  # a store closed cleanly: SQLite recreates its WAL on open
    if not healed_by_sqlite:
        assert '"ok"' not in report.output.split('"health"')[1][:20], report.output  # damage is reported
    repaired = _info("--repair")
    assert repaired.exit_code == 0, repaired.output
    assert healed_by_sqlite or "ok (repaired" in repaired.output, repaired.output
    assert _works(store), "after --repair the store is on disk and writable again"
    assert "health" in _info().output and "ok" in _info("--json").output.split('"health"')[1][:20]


def test_what_cannot_be_fixed_is_named_with_its_command(store, monkeypatch):
    DAMAGE["wal is a directory"](store)

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    result = _info("--repair")
    assert result.exit_code == 1
    text = "".join(result.output.split())  # as printed, wrapped at 80 columns
    assert "notrepaired:cache.db-walisadirectory" in text
    assert f"run:mv{store}/cache.db-wal" in text


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_directory_of_another_user_is_not_repaired_but_explained(store):
    os.chown(store, 12345, 12345)
    result = _info("--repair")
    assert result.exit_code == 1
    assert "owned by uid 12345" in result.output and "LAZYKERN_SHARED_CACHE=1" in result.output
    assert os.stat(store).st_uid == 12345
