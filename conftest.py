"""Repository-wide pytest hooks."""

import importlib.util

pytest_plugins = ["pytester"]  # tests/test_pytest_plugin.py drives inner pytest runs

# Doctest collection imports every module; the optional ones need their library.
collect_ignore = [
    path
    for path, needs in (
        ("lazykern/tropical/torch.py", "torch"),
        ("lazykern/scale/dask.py", "dask"),
        ("tests/_import_contracts.py", "importlinter"),  # a contract type for import-linter (test extra)
    )
    if importlib.util.find_spec(needs) is None
]


def pytest_sessionfinish(session, exitstatus):
    # Exit code 5 means no test ran: that must fail, never pass silently.
    if exitstatus == 5:
        session.exitstatus = 1


def pytest_configure(config):
    # Not pyproject's filterwarnings: pytest imports a filter's category at start-up, and importing numba then
    # reads NUMBA_ENABLE_CUDASIM before the lazykern plugin sets it (a user's exported =1 would turn the
    # simulator on for a suite that runs it only where it asks for it, in child processes).
    config.addinivalue_line("filterwarnings", "ignore::numba.core.errors.NumbaPerformanceWarning")
