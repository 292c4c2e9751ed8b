"""Entry points for ``python -m benchmarks.<suite>``; the suites live in :mod:`lazykern.tools.bench`."""
