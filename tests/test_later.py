"""A cold compile serves its kernel before the traced pass answers; the entry is stored after it
(lazykern.store._later): looked up meanwhile, waited for at exit (bounded), never stored without
the record of what the compile read."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from lazykern import KernelCache, KernelFamily
from lazykern.compile import _tracer, compiler
from lazykern.store import _later
from lazykern.store._once import Later

from . import _servers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'


def _slow_server(tmp_path, seconds: float) -> str:
    """A compile server that answers ``seconds`` late."""
    return _servers.boot(tmp_path, f"time.sleep({seconds})", name="slow_server.py")


def _gated_server(tmp_path, gate) -> str:
    """A compile server that answers only once ``gate`` exists: the test decides when the traced pass
    ends (a fixed delay would make its order of events the machine's load to decide)."""
    return _servers.boot(tmp_path, f"while not os.path.exists({str(gate)!r}): time.sleep(0.005)", name="gated.py")


@pytest.fixture
def slow(tmp_path, monkeypatch):
    """The traced pass held until the test creates the gate file it yields."""
    gate = tmp_path / "gate"
    _tracer.shutdown()
    monkeypatch.setattr(_tracer, "_BOOT", _gated_server(tmp_path, gate))
    yield gate
    gate.touch()  # whatever the test did: the pass may end
    _later.wait_all()
    _tracer.shutdown()


def _family(store) -> KernelFamily:
    fam = KernelFamily("later", "#define VAL 3\n", cache=KernelCache(store))
    fam.add("k", KERNEL)
    return fam


def test_the_kernel_is_served_before_the_traced_pass_and_stored_after_it(tmp_path, slow):
    fam = _family(tmp_path / "store")
    kernel = fam.get("k", "sm_80")  # served while the traced pass is held: it did not wait for it
    assert kernel.code[:4] == b"\x7fELF" and kernel.meta["compiled_now"] and kernel.meta["stored_after_trace"]
    assert _later.pending() == [fam.key("k", "sm_80")]
    slow.touch()  # the traced pass answers now
    # A lookup of the key in this process waits for the store, then serves what it wrote.
    again = _family(tmp_path / "store")
    assert again.get("k", "sm_80").code == kernel.code and again.compile_calls == 0
    assert _later.pending() == []
    [row] = list(KernelCache(tmp_path / "store").entries())
    assert row["headers"] is not None and not row.get("memory_only") and "stored_after_trace" not in row
    # The served kernel's meta gets the same record once it is written (warm stores it elsewhere with it).
    assert kernel.meta["headers"] == row["headers"] and "stored_after_trace" not in kernel.meta


def test_compile_deferred_returns_the_binary_and_a_trace_to_wait_for(tmp_path, slow):
    result, trace = compiler.compile_deferred("#define VAL 1\n" + KERNEL, name="k", arch="sm_80")
    assert result.code[:4] == b"\x7fELF"  # returned while the traced pass is held
    assert trace is not None and result.headers is None
    slow.touch()
    code, headers, memory_only = trace.result(result)
    assert headers is not None and memory_only == ""
    assert code == result.code  # the observed compile's own binary: the same bytes, the same cubin
    assert trace.result(result) == (code, headers, memory_only)  # answered once


_EXITS = r"""
import sys, time
from lazykern import KernelCache, KernelFamily
from lazykern.compile import _tracer
from lazykern.store import _later

boot, store, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])
_tracer._BOOT = boot
_later.EXIT_WAIT_S = wait
fam = KernelFamily("later", "#define VAL 3\n", cache=KernelCache(store))
fam.add("k", 'extern "C" __global__ void k(int *a) { *a = VAL; }\n')
fam.get("k", "sm_80")
print(fam.compile_calls, len(_later.pending()), flush=True)
"""


def _run(boot: str, store, wait: float) -> tuple[str, str, float]:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "LAZYKERN_LOG": "info"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _EXITS, boot, str(store), str(wait)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip(), proc.stderr, time.monotonic() - start


@pytest.mark.slow
def test_exit_waits_for_a_pending_store_and_the_next_process_is_served(tmp_path):
    boot = _slow_server(tmp_path, 1.0)
    assert _run(boot, tmp_path / "store", 30.0)[0] == "1 1"  # returned with its store pending
    assert _run(boot, tmp_path / "store", 30.0)[0] == "0 0"  # stored at the first one's exit


@pytest.mark.slow
def test_exit_waits_a_bounded_time_then_drops_the_store_and_says_so(tmp_path):
    boot = _slow_server(tmp_path, 30.0)
    out, err, took = _run(boot, tmp_path / "store", 0.5)
    assert out == "1 1" and took < 20.0, (out, took)
    assert "dropped 1 kernel store" in err, err[-2000:]
    assert list(KernelCache(tmp_path / "store").entries()) == []  # nothing half-recorded was stored


def test_a_compile_lock_is_released_by_the_thread_that_stores(tmp_path):
    """get_or_compile takes the key's file lock; a deferred store releases it from its own thread. A
    thread-local file lock would stay held until the process exits (others waiting out the timeout)."""
    import threading

    from lazykern.store._locks import ProcessLock

    failed: list[str] = []
    lock = ProcessLock(str(tmp_path), "k", 0.5, failed.append).__enter__()
    kept = lock._lock  # alive after the release, as a cached lock object would be (no close on collection)
    releaser = threading.Thread(target=lock.__exit__, args=(None, None, None))
    releaser.start()
    releaser.join()
    fd = os.open(tmp_path / "locks" / "k.lock", os.O_RDWR)  # another holder: its own open file
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while the first holder keeps it
    finally:
        os.close(fd)
    assert failed == [] and kept is not None


def _gated_later(gate: threading.Event, memory_only: str) -> Callable[[], Later]:
    """A compile whose binary serves now and whose observed compile answers once ``gate`` is set, with a
    memory-only reason (what a compile server torn down at exit answers) or a binary to store."""

    def finish() -> tuple[bytes, dict]:
        gate.wait(10)
        return (b"", {"memory_only": memory_only}) if memory_only else (b"\x7fELF stored", {"headers": []})

    return lambda: Later(b"\x7fELF served", {"name": "k"}, finish)


@pytest.mark.parametrize("memory_only", ["the compile server was torn down at exit", ""])
def test_a_store_given_up_at_exit_writes_nothing_when_its_answer_comes_later(tmp_path, monkeypatch, memory_only):
    """The exit wait ends with a store still pending: it is dropped (said in one line), and when its
    observed compile answers afterwards (the interpreter still ending) nothing is written, neither a
    binary nor a memory-only marker (one was, on a loaded machine: CI, session 81). A store that answered
    before the exit wait ended is written."""
    monkeypatch.setattr(_later, "EXIT_WAIT_S", 0.05)
    monkeypatch.setattr(_later, "_dropped", set())
    cache = KernelCache(tmp_path / "store")
    late, early = threading.Event(), threading.Event()
    dropped, kept = (hashlib.sha256(x).hexdigest() for x in (b"dropped", b"kept"))
    assert cache.get_or_compile(dropped, _gated_later(late, memory_only))[1]
    assert cache.get_or_compile(kept, _gated_later(early, memory_only))[1]
    early.set()
    assert _later.wait_for(kept, 10)
    _later._at_exit()
    assert _later.dropped(dropped) and not _later.dropped(kept)
    late.set()  # the dropped store's answer comes now
    assert _later.wait_for(dropped, 10)
    assert [row["key"] for row in cache.entries()] == [kept]
