"""Nothing lazykern starts (threads, worker processes) outlives its work or holds up the exit."""

from __future__ import annotations

import json

from ._proc import Scenario, env, still_running


def test_finished_work_leaves_nothing_running_and_the_process_exits_at_once(tmp_path):
    run = Scenario(["tests/liveness/_exit_user.py"], env(str(tmp_path), LIVENESS_KERNELS="6"), hard_timeout=90)
    run.wait_for(lambda line: line.strip() == "done")
    code, after_done = run.finish()
    assert code == 0, run.output
    assert after_done < 5, f"the interpreter took {after_done:.1f} s to exit after the work was done"
    left = json.loads(next(line for line in run.lines if line.startswith("{")))
    assert left == {"ok": True, "threads": [], "children": []}, left
    assert still_running([run.proc.pid]) == []
