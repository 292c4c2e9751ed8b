"""Every ``lazykern`` command turns Ctrl-C and SIGTERM into one line and exit 130 / 143."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from typer.testing import CliRunner

from lazykern import KernelCache
from lazykern.tools.cli import _cache, _common, _signals, app


@pytest.mark.parametrize(
    ("raised", "status", "name"),
    [(KeyboardInterrupt(), 130, "SIGINT (Ctrl-C)"), (_signals.Terminated(), 143, "SIGTERM")],
)
def test_an_interrupted_command_exits_with_the_signal_status(monkeypatch, tmp_path, raised, status, name):
    def interrupted():
        raise raised

    KernelCache(tmp_path).close()  # a store to look at: `cache info` on a path without one exits 1 first
    monkeypatch.setenv("LAZYKERN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_cache, "open_cache", interrupted)
    monkeypatch.setattr(_common, "open_cache", interrupted)
    result = CliRunner().invoke(app, ["cache", "info"])
    assert result.exit_code == status, result.output
    assert result.output.strip() == f"error: interrupted by {name}"


def test_sigterm_raises_terminated_while_a_command_runs_and_not_after():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(_signals.Terminated), _signals.stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(5)  # interrupted by the handler, not waited out
    assert signal.getsignal(signal.SIGTERM) == before
    assert _signals.exit_status(_signals.Terminated()) == 143 and _signals.exit_status(KeyboardInterrupt()) == 130
