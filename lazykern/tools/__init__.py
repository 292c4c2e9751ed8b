"""Tools built on the public API: the ``lazykern`` command, Jupyter magics, pytest, demo, benchmarks.

``cli/`` (the command line), ``ipython`` (``%lazykern``), ``pytest_plugin`` and ``testing`` (helpers
for users' tests), ``demo`` (``lazykern demo``), ``bench/`` (``lazykern bench``). The library never
imports this package.
"""
