"""Every documented module path under ``python -m``: it runs what its real path runs, or refuses in one line."""

from __future__ import annotations

import subprocess
import sys

from lazykern import _aliases


def _run_m(module: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120)


def test_every_alias_runs_or_refuses_in_one_line_under_python_m():
    """runpy asks the alias loader for code (``get_code``); an AttributeError traceback was the answer before."""
    procs = {alias: subprocess.Popen([sys.executable, "-m", alias, "--version"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)  # fmt: skip
             for alias in _aliases.PUBLIC_PATHS}  # fmt: skip
    commands = []
    for alias, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert "Traceback" not in err, (alias, err)
        if proc.returncode == 0:
            commands.append(alias)
            assert out.startswith("lazykern "), (alias, out)
        else:
            assert proc.returncode == 1, (alias, proc.returncode, err)
            assert err.count("\n") == 1 and "python -m lazykern" in err and alias in err, (alias, err)
    assert commands == ["lazykern.cli"]


def test_python_m_lazykern_cli_is_python_m_lazykern():
    alias, real = _run_m("lazykern.cli"), _run_m("lazykern")
    assert (alias.returncode, alias.stdout) == (real.returncode, real.stdout) == (0, real.stdout)
