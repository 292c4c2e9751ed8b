"""A write-locked cache.db never hangs a process: every store operation waits a bounded time.

The lock is held for real by another process (an ``sqlite3`` connection in a ``BEGIN IMMEDIATE``
transaction, or a writer stopped with SIGSTOP in the middle of its transaction); the process
under test opens the store and looks kernels up. Past ``LAZYKERN_STORE_TIMEOUT`` it compiles
and serves from memory, with one warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from lazykern import config
from lazykern.store.cache import KernelCache

from ._proc import ROOT, Scenario, env

WAIT = 1.0  # LAZYKERN_STORE_TIMEOUT in these scenarios


def _seed(directory: str) -> None:
    cache = KernelCache(directory)
    cache.store("a", b"\x7fELF-a", {"kernel": "a"})
    cache.close()


def _steps(run: Scenario) -> dict[str, dict]:
    return {d["step"]: d for d in (json.loads(line) for line in run.lines if line.startswith("{"))}


def _user(directory: str, *args: str) -> Scenario:
    return Scenario(["tests/liveness/_store_user.py", *args], env(directory, LAZYKERN_STORE_TIMEOUT=str(WAIT)), 60)


@contextlib.contextmanager
def _held(directory: str) -> Iterator[None]:
    """SQLite's write lock on the store, held by another connection for the block."""
    con = sqlite3.connect(os.path.join(directory, "cache.db"), isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        con.rollback()
        con.close()


def _assert_served_from_memory(steps: dict[str, dict]) -> None:
    assert steps["compile"]["fresh"] and steps["compile"]["code"] == "\x7fELF-b"
    assert not steps["again"]["fresh"] and steps["again"]["compiles"] == 1  # served from memory
    assert steps["compile"]["seconds"] < WAIT + 1 and steps["again"]["seconds"] < 0.5  # one wait, not one per op
    assert steps["lookup2"]["seconds"] < 0.5
    assert len(steps["done"]["warnings"]) == 1, steps["done"]["warnings"]
    assert "another process" in steps["done"]["warnings"][0]
    assert "LAZYKERN_STORE_TIMEOUT" in steps["done"]["warnings"][0]


def test_a_lock_taken_after_open_costs_one_bounded_wait(tmp_path):
    directory = str(tmp_path)
    _seed(directory)
    go = tmp_path / "go"
    run = _user(directory, str(go))
    run.wait_for(lambda line: '"open"' in line)
    with _held(directory):
        go.touch()
        code, _ = run.finish()
    assert code == 0, run.output
    steps = _steps(run)
    assert steps["open"]["backend"] == "disk"
    assert steps["lookup"]["seconds"] < WAIT + 2, steps  # bounded (a lookup is one SELECT: WAL readers never wait)
    assert steps["lookup"]["found"]  # what is stored is still served: reading needs no write lock
    assert steps["lookup2"]["found"] and steps["lookup2"]["seconds"] < 0.5  # no second wait
    _assert_served_from_memory(steps)


def test_opening_a_locked_store_does_not_stall(tmp_path):
    directory = str(tmp_path)
    _seed(directory)
    with _held(directory):
        run = _user(directory)
        code, _ = run.finish()
    assert code == 0, run.output
    steps = _steps(run)
    assert steps["open"]["seconds"] < WAIT + 3, steps  # diskcache alone retries its settings writes for 60 s
    assert steps["open"]["backend"] == "disk"  # its settings writes would change nothing: skipped
    assert steps["lookup"]["found"] and steps["lookup2"]["found"]
    _assert_served_from_memory(steps)


def test_a_command_that_must_write_a_held_store_fails_in_one_line(tmp_path):
    directory = str(tmp_path)
    _seed(directory)
    with _held(directory):
        run = Scenario(
            ["-m", "lazykern", "cache", "clear", "--yes"], env(directory, LAZYKERN_STORE_TIMEOUT=str(WAIT)), 60
        )
        code, _ = run.finish()
    assert code == 1, run.output
    assert run.output.count("error:") == 1 and "held by another process" in run.output, run.output
    assert "Traceback" not in run.output and "unexpected" not in run.output
    assert KernelCache(directory).lookup("a") is not None  # nothing was removed


HOLDER = textwrap.dedent(
    """
    import os, signal, sqlite3, sys
    con = sqlite3.connect(os.path.join(sys.argv[1], "cache.db"), isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    con.execute("UPDATE Settings SET value = value WHERE key = 'count'")
    print("holding", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # a writer stopped mid-write (Ctrl-Z, a debugger)
    """
)


def test_a_writer_stopped_mid_write_does_not_hang_lookups(tmp_path):
    directory = str(tmp_path)
    _seed(directory)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, directory], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        deadline = time.monotonic() + 10
        while open(f"/proc/{holder.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline, "the holder did not stop"
            time.sleep(0.01)
        go = tmp_path / "go"
        go.touch()
        run = _user(directory, str(go))
        code, _ = run.finish()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert code == 0, run.output
    steps = _steps(run)
    assert steps["open"]["seconds"] < WAIT + 3 and steps["lookup"]["seconds"] < WAIT + 3, steps
    assert steps["lookup"]["found"]
    _assert_served_from_memory(steps)
    # Once the holder is gone (its transaction rolled back by SQLite), the store works again.
    cache = KernelCache(directory)
    assert cache.backend == "disk" and cache.lookup("a") is not None


def test_the_wait_is_a_validated_setting(monkeypatch):
    monkeypatch.delenv("LAZYKERN_STORE_TIMEOUT", raising=False)
    assert config.store_timeout() == config.DEFAULT_STORE_TIMEOUT == 5.0
    monkeypatch.setenv("LAZYKERN_STORE_TIMEOUT", "0.5")
    assert config.store_timeout() == 0.5
    config._warned.discard("LAZYKERN_STORE_TIMEOUT")
    monkeypatch.setenv("LAZYKERN_STORE_TIMEOUT", "forever")
    with pytest.warns(Warning, match="LAZYKERN_STORE_TIMEOUT='forever'.*from 0.01 to 600"):
        assert config.store_timeout() == 5.0
