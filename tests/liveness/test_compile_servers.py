"""The compile servers have an owner (issue 43): a bounded pool, a bounded request, nothing left
running after the process that started them; and a store survives what a program does next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from ._proc import Scenario, env, still_running

USER = "tests/liveness/_servers_user.py"
SOURCE = '#include "v.h"\n'


def _said(run: Scenario) -> list[dict]:
    return [json.loads(line) for line in run.lines if line.startswith("{")]


def test_thirty_kernels_in_a_loop_start_no_more_servers_than_the_pool(tmp_path):
    run = Scenario([USER, "loop", str(tmp_path)], env(str(tmp_path / "c")), hard_timeout=240)
    code, _ = run.finish()
    assert code == 0, run.output
    [out] = _said(run)
    assert out["most"] <= max(2, os.cpu_count() or 1) == out["pool"], out
    assert out["stored"] == 30, out  # the pool serves every request: each kernel is stored
    assert still_running(out["servers"]) == [], "a server outlived the process"


def test_a_fifo_header_in_the_observed_compile_is_bounded_and_holds_up_nothing(tmp_path):
    """The observed compile blocks opening a FIFO: its kernel is served at once and stays in memory
    after the bound; an unrelated kernel is compiled, stored and served meanwhile; at exit the
    stuck server is ended (no orphan) and the exit waits at most 2 s beyond the bound."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "v.h").write_text("#define VAL 3\n")
    time.sleep(0.02)
    bound = 4.0
    environ = env(str(tmp_path / "c"), LAZYKERN_LOG="warning")
    run = Scenario([USER, "fifo", str(tmp_path), str(bound)], environ, hard_timeout=120)
    code, _ = run.finish()
    ended = time.time()
    assert code == 0, run.output
    first, other, last = _said(run)
    assert first["served"] < bound, first
    assert other["other"] < bound and other["other_compiles"] == 0 and other["header_is_fifo"], other
    assert ended - last["exiting"] < bound + 2.0 + 1.0, (ended - last["exiting"], run.output)
    assert still_running(first["servers"] + last["servers"]) == [], "a compile server was left running"
    said = [line for line in run.lines if "did not answer" in line]
    assert len(said) == 1, run.output  # one log line says why the kernel stayed in memory


def _run(tmp_path, cwd, *args: str) -> dict:
    user = os.path.join(os.path.dirname(__file__), "_servers_user.py")
    proc = subprocess.run(
        [sys.executable, user, args[0], str(tmp_path), *args[1:]],
        cwd=cwd, env=env(str(tmp_path / "c")), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_chdir_right_after_the_first_call_still_stores_the_entry(tmp_path):
    """Relative names are the compile's: recorded from where it ran, whatever the directory is now."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "v.h").write_text("#define VAL 3\n")
    (elsewhere / "v.h").write_text("#define VAL 4\n")
    time.sleep(0.02)
    assert _run(tmp_path, work, "chdir", str(elsewhere))["compiled"] == 1
    out = _run(tmp_path, work, "lookup", SOURCE, "cd")
    assert out["compiled"] == 0 and out["warnings"] == [], out  # stored, and never called unreadable
    assert _run(tmp_path, elsewhere, "lookup", SOURCE, "cd")["compiled"] == 1  # another v.h there


def test_a_memory_only_marker_is_no_error_and_stays(tmp_path):
    """A macro supplies a probe's operand: the kernel is kept in memory. Its marker is never
    reported as damage (no warning) nor deleted by a later process."""
    source = "#define H <nothing.h>\n#if __has_include(H)\n#endif\n#define VAL 1\n"
    first = _run(tmp_path, tmp_path, "lookup", source, "mem")
    assert first["compiled"] == 1 and first["warnings"] == [], first
    assert [r["bytes"] for r in first["rows"]] == [0] and "macro" in first["rows"][0]["memory_only"], first
    second = _run(tmp_path, tmp_path, "lookup", source, "mem")
    assert second["compiled"] == 1 and second["warnings"] == [], second
    assert [r["bytes"] for r in second["rows"]] == [0], second  # still there, not dropped
